/* Two OpenMP parallel regions of equal work in two functions: `sweep`
 * scales the array `a` and `checksum` sums the array `b`, each a
 * `#pragma omp parallel for` over the same number of elements, called in
 * turn from `main`. The pool's worker threads are created by the first
 * region (`sweep`'s) and then run both: a profile must charge each
 * worker's time to the region that is running it, so `sweep` and
 * `checksum` get about equal shares.
 *
 * Arguments: repetitions (40) and elements per array (4 Mi). Prints a
 * checksum (the same with and without the profiler).
 *
 * Build: gcc -O2 -g -fopenmp omp_regions.c
 */
#include <stdio.h>
#include <stdlib.h>

#define N (4 * 1024 * 1024)

__attribute__((noinline)) void sweep(double *a, long n)
{
#pragma omp parallel for schedule(static)
    for (long i = 0; i < n; i++)
        a[i] = a[i] * 0.5 + 1.0;
}

__attribute__((noinline)) double checksum(double *b, long n)
{
    double s = 0;
#pragma omp parallel for schedule(static) reduction(+ : s)
    for (long i = 0; i < n; i++)
        s += b[i] * 0.5 + 1.0;
    return s;
}

int main(int argc, char **argv)
{
    int reps = argc > 1 ? atoi(argv[1]) : 40;
    long n = argc > 2 ? atol(argv[2]) : N;
    double *a = malloc(n * sizeof(double));
    double *b = malloc(n * sizeof(double));
    for (long i = 0; i < n; i++) {
        a[i] = (double)(i % 7);
        b[i] = (double)(i % 5);
    }
    double total = 0;
    for (int r = 0; r < reps; r++) {
        sweep(a, n);
        total += checksum(b, n);
    }
    printf("checksum %.1f %.1f\n", total, a[12345]);
    free(a);
    free(b);
    return 0;
}
