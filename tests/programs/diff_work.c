/* Two cache-resident heap arrays of equal size summed in turn by the same
 * function: `xs` once per repetition, `ys` WORK times (argument 1,
 * default 1). With WORK 1 the two arrays get equal shares of the
 * samples, run after run; with WORK 2 `ys` gets twice the work of `xs`,
 * about 67% against 33%: the change `hpcprof-rs diff` must tell from
 * noise.
 *
 * Arguments: WORK (YS_WORK, 1 unless built with -DYS_WORK=N: a build
 * with a hotter `ys`) and repetitions (20000). Prints the sums' total
 * (the same with and without the profiler).
 *
 * Build: gcc -O2 -g diff_work.c
 */
#include <stdio.h>
#include <stdlib.h>

#define N (16 * 1024)

#ifndef YS_WORK
#define YS_WORK 1
#endif

__attribute__((noipa)) static double sum(const double *a, long n)
{
    double s = 0;
    for (long i = 0; i < n; i++)
        s += a[i];
    return s;
}

int main(int argc, char **argv)
{
    int work = argc > 1 ? atoi(argv[1]) : YS_WORK;
    int reps = argc > 2 ? atoi(argv[2]) : 20000;
    double *xs = malloc(N * sizeof(double));
    double *ys = malloc(N * sizeof(double));
    for (long i = 0; i < N; i++) {
        xs[i] = (double)(i % 3);
        ys[i] = (double)(i % 5);
    }
    double total = 0;
    for (int r = 0; r < reps; r++) {
        total += sum(xs, N);
        for (int w = 0; w < work; w++)
            total += sum(ys, N);
    }
    printf("total %.0f\n", total);
    free(xs);
    free(ys);
    return 0;
}
