/* An OpenMP program with a known imbalance: in every parallel region only
 * thread 0 works (sums the 16 MiB array `work`); the other threads wait at
 * the region's closing barrier inside the OpenMP runtime (spinning with
 * OMP_WAIT_POLICY=active). So a good share of the CPU time is the
 * runtime's, and `work` is the program's only big object.
 *
 * Prints the sum (exact in doubles): the same output with and without the
 * profiler.
 *
 * Build: gcc -O2 -g -fopenmp omp_waiting.c
 */
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>

#define N (2 * 1024 * 1024)

__attribute__((noinline)) static double sum(const double *a, size_t n)
{
    double s = 0;
    for (size_t i = 0; i < n; i++)
        s += a[i];
    return s;
}

int main(int argc, char **argv)
{
    int reps = argc > 1 ? atoi(argv[1]) : 150;
    double *work = malloc(N * sizeof(double));
    for (size_t i = 0; i < N; i++)
        work[i] = (double)(i % 1000);
    double total = 0;
    for (int r = 0; r < reps; r++) {
#pragma omp parallel
        {
            if (omp_get_thread_num() == 0)
                total += sum(work, N);
        }
    }
    printf("total %.0f\n", total);
    free(work);
    return 0;
}
