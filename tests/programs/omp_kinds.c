/* One OpenMP region of each kind libgomp enters through its own entry
 * point, each in its own function: a dynamically scheduled loop
 * (`GOMP_parallel_loop_*dynamic`), a runtime-scheduled loop
 * (`GOMP_parallel_loop_*runtime`), sections (`GOMP_parallel_sections`),
 * a plain region (`GOMP_parallel`) and a region nested in another one.
 * Each thread's samples in a region must hang below the function that
 * entered it.
 *
 * Arguments: repetitions (60). Prints a sum (the same with and without
 * the profiler).
 *
 * Build: gcc -O2 -g -fopenmp -fno-optimize-sibling-calls omp_kinds.c
 * (without sibling calls, every function keeps its frame).
 */
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>

#define N (1 << 20)
static double a[N];

__attribute__((noinline)) void dynamic_loop(void)
{
#pragma omp parallel for schedule(dynamic, 1024)
    for (long i = 0; i < N; i++)
        a[i] = a[i] * 0.5 + 1;
}

__attribute__((noinline)) void runtime_loop(void)
{
#pragma omp parallel for schedule(runtime)
    for (long i = 0; i < N; i++)
        a[i] -= 1;
}

__attribute__((noinline)) void two_sections(void)
{
#pragma omp parallel sections
    {
#pragma omp section
        for (long i = 0; i < N / 2; i++)
            a[i] += 1;
#pragma omp section
        for (long i = N / 2; i < N; i++)
            a[i] += 2;
    }
}

__attribute__((noinline)) void plain(void)
{
#pragma omp parallel
    {
        int t = omp_get_thread_num(), n = omp_get_num_threads();
        for (long i = t; i < N; i += n)
            a[i] *= 0.999;
    }
}

__attribute__((noinline)) void inner(void)
{
#pragma omp parallel for num_threads(2)
    for (long i = 0; i < N; i++)
        a[i] += 0.5;
}

__attribute__((noinline)) void outer(void)
{
#pragma omp parallel num_threads(2)
    inner();
}

int main(int argc, char **argv)
{
    int reps = argc > 1 ? atoi(argv[1]) : 60;
    omp_set_max_active_levels(2);
    for (int r = 0; r < reps; r++) {
        dynamic_loop();
        runtime_loop();
        two_sections();
        plain();
        outer();
    }
    double s = 0;
    for (long i = 0; i < N; i++)
        s += a[i];
    printf("sum %.3f\n", s);
    return 0;
}
