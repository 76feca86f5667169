/* Two arrays, each first touched by a known thread: `by_worker` by the
 * thread that main starts (thread 1), `by_main` by the main thread
 * (thread 0). Then both threads read both.
 * "huge": the arrays are aligned to 2 MiB and advised to be transparent
 * huge pages (MADV_HUGEPAGE), so that where the kernel has them one
 * fault maps 512 of the arrays' 4 KiB pages; otherwise huge pages are off
 * for this process. */
#include <pthread.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define N (4 << 20) /* doubles: 32 MiB, 8192 pages */

static __attribute__((noipa)) void fill(double *a, double v) {
    for (long i = 0; i < N; i++)
        a[i] = v + (double)i;
}

static __attribute__((noipa)) double sum(const double *a) {
    double s = 0;
    for (long i = 0; i < N; i++)
        s += a[i];
    return s;
}

static void *worker(void *arg) {
    fill((double *)arg, 2.0);
    return NULL;
}

static double *array(int huge) {
    if (!huge)
        return malloc(N * sizeof(double));
    double *a = aligned_alloc(2 << 20, N * sizeof(double));
    if (a)
        madvise(a, N * sizeof(double), MADV_HUGEPAGE);
    return a;
}

int main(int argc, char **argv) {
    int huge = argc > 1 && !strcmp(argv[1], "huge");
    /* Otherwise transparent huge pages off for this process: the other
     * tests count faults, and under THP "always" one fault maps 2 MiB. */
    if (!huge)
        prctl(PR_SET_THP_DISABLE, 1, 0, 0, 0);
    double *by_worker = array(huge);
    double *by_main = array(huge);
    if (!by_worker || !by_main)
        return 1;
    pthread_t t;
    pthread_create(&t, NULL, worker, by_worker);
    pthread_join(t, NULL);
    fill(by_main, 1.0);
    printf("%.0f\n", sum(by_worker) + sum(by_main));
    free(by_worker);
    free(by_main);
    return 0;
}
