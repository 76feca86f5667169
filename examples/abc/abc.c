/* abc: the data-centric profiling example of Liu & Mellor-Crummey.
 *
 *   A[i][j][k] += B[j][i][k] + C[k][j][i]
 *
 * over three heap arrays of N^3 doubles. With k innermost, A and B are read
 * with unit stride, C with stride N*N doubles: almost every C access misses
 * the caches and the TLB.
 *
 * Expected answer (data-centric view): C dominates, then B, then A.
 * Build: gcc -O2 -g -o abc abc.c   Run: ./abc [N] [REPEAT]
 */
#include <stdio.h>
#include <stdlib.h>

#define IDX(a, b, c) (((size_t)(a) * n + (b)) * n + (c))

static void compute(double *A, const double *B, const double *C, int n) {
    for (int i = 0; i < n; i++)
        for (int j = 0; j < n; j++)
            for (int k = 0; k < n; k++)
                A[IDX(i, j, k)] += B[IDX(j, i, k)] + C[IDX(k, j, i)];
}

int main(int argc, char **argv) {
    int n = argc > 1 ? atoi(argv[1]) : 256;
    int repeat = argc > 2 ? atoi(argv[2]) : 2;
    size_t bytes = (size_t)n * n * n * sizeof(double);
    double *A = malloc(bytes);
    double *B = malloc(bytes);
    double *C = malloc(bytes);
    if (!A || !B || !C) {
        fprintf(stderr, "abc: out of memory for n=%d\n", n);
        return 1;
    }
    for (size_t x = 0; x < (size_t)n * n * n; x++) {
        A[x] = 0.0;
        B[x] = (double)(x % 7);
        C[x] = (double)(x % 5);
    }
    for (int r = 0; r < repeat; r++)
        compute(A, B, C, n);
    double sum = 0.0;
    for (size_t x = 0; x < (size_t)n * n * n; x += 97)
        sum += A[x];
    printf("abc n=%d repeat=%d checksum=%.1f\n", n, repeat, sum);
    free(A);
    free(B);
    free(C);
    return 0;
}
