/* stream_triad: the STREAM triad a[i] = b[i] + s * c[i] over three heap
 * arrays of 4 Mi doubles (32 MiB each, far larger than the caches).
 *
 * Expected finding (data-centric view): the load samples split roughly
 * evenly between b and c (both are streamed once per sweep); a, only
 * written, gets store samples (`store_samples`), not load samples.
 *
 * Build: gcc -O2 -g -o stream_triad stream_triad.c   Run: ./stream_triad [REPEAT]
 */
#include <stdio.h>
#include <stdlib.h>

#define N (4L << 20) /* doubles per array */

/* noipa: gcc sees neither the arrays nor n, so it keeps one plain loop. */
__attribute__((noipa)) static void triad(double *restrict a, const double *restrict b,
                                         const double *restrict c, double s, long n) {
    for (long i = 0; i < n; i++)
        a[i] = b[i] + s * c[i];
}

int main(int argc, char **argv) {
    int repeat = argc > 1 ? atoi(argv[1]) : 20;
    double *a = malloc(N * sizeof(double));
    double *b = malloc(N * sizeof(double));
    double *c = malloc(N * sizeof(double));
    if (!a || !b || !c) {
        fprintf(stderr, "stream_triad: out of memory\n");
        return 1;
    }
    for (long i = 0; i < N; i++) {
        a[i] = 0.0;
        b[i] = (double)(i % 11);
        c[i] = (double)(i % 7);
    }
    for (int r = 0; r < repeat; r++)
        triad(a, b, c, 3.0, N);
    double sum = 0.0;
    for (long i = 0; i < N; i += 4096)
        sum += a[i];
    printf("stream_triad n=%ld repeat=%d checksum=%.1f\n", N, repeat, sum);
    free(a);
    free(b);
    free(c);
    return 0;
}
