/* first_touch: the classic NUMA placement bug. A 256 MiB array (`field`,
 * 32 Mi doubles from malloc) is initialised either by thread 0 alone
 * (`serial`: every page is first touched, hence placed, on thread 0's
 * NUMA node) or by all threads with the same static schedule as the
 * compute loop (`parallel`: each thread first touches the pages it will
 * use), then all OpenMP threads sweep it.
 *
 * Expected finding: `field` holds most of the data-centric samples, and
 * every OpenMP thread has samples of it. (On a NUMA machine the `serial`
 * run is slower; the page-fault first-touch view, once hpcrun-rs has a
 * page-faults event, shows thread 0 touching every page in `serial`.)
 *
 * Build: gcc -O2 -g -fopenmp -o first_touch first_touch.c
 * Run:   OMP_NUM_THREADS=2 ./first_touch serial|parallel [SWEEPS]
 */
#include <omp.h>
#include <sys/prctl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define N (32L << 20) /* doubles: 256 MiB */

/* noipa: gcc cannot see the array's contents or drop the sweeps. */
__attribute__((noipa)) static void init_serial(double *a, long n) {
    for (long i = 0; i < n; i++)
        a[i] = (double)(i % 17);
}

__attribute__((noipa)) static void init_parallel(double *a, long n) {
#pragma omp parallel for schedule(static)
    for (long i = 0; i < n; i++)
        a[i] = (double)(i % 17);
}

/* a[i] = 0.5 * a[i] + 1: one read and one write per element, the same
 * static schedule as init_parallel. No reduction in this loop: a chain of
 * dependent additions would make it compute-bound on fast memory. */
__attribute__((noipa)) static void sweep(double *a, long n) {
#pragma omp parallel for schedule(static)
    for (long i = 0; i < n; i++)
        a[i] = 0.5 * a[i] + 1.0;
}

/* The checksum, with the same static schedule: each thread reads only the
 * part it sweeps (a serial pass would make thread 0 read all of it). */
__attribute__((noipa)) static double checksum(const double *a, long n) {
    double sum = 0.0;
#pragma omp parallel for schedule(static) reduction(+ : sum)
    for (long i = 0; i < n; i++)
        sum += a[i];
    return sum;
}

int main(int argc, char **argv) {
    /* Transparent huge pages off for this process: under THP "always" one
     * fault maps 2 MiB (512 pages), and the page counts here are of 4 KiB
     * pages. */
    prctl(PR_SET_THP_DISABLE, 1, 0, 0, 0);
    if (argc < 2 || (strcmp(argv[1], "serial") && strcmp(argv[1], "parallel"))) {
        fprintf(stderr, "usage: first_touch serial|parallel [SWEEPS]\n");
        return 2;
    }
    int sweeps = argc > 2 ? atoi(argv[2]) : 4;
    double *field = malloc(N * sizeof(double));
    if (!field) {
        fprintf(stderr, "first_touch: out of memory\n");
        return 1;
    }
    double t0 = omp_get_wtime();
    if (strcmp(argv[1], "serial") == 0)
        init_serial(field, N);
    else
        init_parallel(field, N);
    double t1 = omp_get_wtime();
    for (int s = 0; s < sweeps; s++)
        sweep(field, N);
    double sum = checksum(field, N);
    double t2 = omp_get_wtime();
    /* Times go to stderr so that stdout is the same in every run. */
    fprintf(stderr, "first_touch %s: init %.3f s, %d sweeps %.3f s\n", argv[1], t1 - t0, sweeps,
            t2 - t1);
    printf("first_touch %s threads=%d sweeps=%d checksum=%.6e\n", argv[1], omp_get_max_threads(),
           sweeps, sum);
    free(field);
    return 0;
}
