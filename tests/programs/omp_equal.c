/* Two OpenMP parallel regions of the same work in two functions: `left`
 * and `right` each scale an array of their own with the same loop
 * (`#pragma omp parallel for schedule(static)`), called in turn from
 * `main`, so that machine load and cache state fall on both alike. The
 * pool's worker threads are created by the first region (`left`'s) and
 * then run both: a profile must charge each worker's time to the region
 * that is running it, so `left` and `right` get equal inclusive time
 * (up to sampling noise).
 *
 * Arguments: repetitions (40) and elements per array (4 Mi). Prints a
 * checksum (the same with and without the profiler).
 *
 * Build: clang -O2 -g -fopenmp omp_equal.c (or gcc)
 */
#include <stdio.h>
#include <stdlib.h>

#define N (4 * 1024 * 1024)

__attribute__((noinline)) void left(double *a, long n)
{
#pragma omp parallel for schedule(static)
    for (long i = 0; i < n; i++)
        a[i] = a[i] * 0.5 + 1.0;
}

__attribute__((noinline)) void right(double *b, long n)
{
#pragma omp parallel for schedule(static)
    for (long i = 0; i < n; i++)
        b[i] = b[i] * 0.5 + 2.0;
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
    for (int r = 0; r < reps; r++) {
        left(a, n);
        right(b, n);
    }
    printf("checksum %.1f %.1f\n", a[12345], b[54321]);
    free(a);
    free(b);
    return 0;
}
