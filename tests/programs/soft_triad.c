/* soft_triad: STREAM's triad a = b + s*c over three 64 MiB arrays.
 * Known answer: all three arrays move through memory (b and c are read,
 * a is written: a store stream), so all three are sampled and the store
 * target gets store samples.
 *
 * Run: ./soft_triad [ROUNDS, default 12]
 */
#include <stdio.h>
#include <stdlib.h>

#define LEN (8L << 20)

__attribute__((noipa)) static void triad(double *a, const double *b, const double *c, double s,
                                         long n) {
    for (long i = 0; i < n; i++)
        a[i] = b[i] + s * c[i];
}

int main(int argc, char **argv) {
    int rounds = argc > 1 ? atoi(argv[1]) : 12;
    double *a = malloc(LEN * sizeof(double));
    double *b = malloc(LEN * sizeof(double));
    double *c = malloc(LEN * sizeof(double));
    if (!a || !b || !c)
        return 1;
    for (long i = 0; i < LEN; i++) {
        a[i] = 0.0;
        b[i] = (double)(i % 11);
        c[i] = (double)(i % 13);
    }
    for (int r = 0; r < rounds; r++)
        triad(a, b, c, 3.0, LEN);
    printf("soft_triad a[7]=%.1f\n", a[7]);
    free(c);
    free(b);
    free(a);
    return 0;
}
