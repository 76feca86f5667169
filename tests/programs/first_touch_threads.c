/* Two arrays, each first touched by a known thread: `by_worker` by the
 * thread that main starts (thread 1), `by_main` by the main thread
 * (thread 0). Then both threads read both. */
#include <pthread.h>
#include <sys/prctl.h>
#include <stdio.h>
#include <stdlib.h>

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

int main(void) {
    /* Transparent huge pages off for this process: under THP "always" one
     * fault maps 2 MiB (512 pages), and the page counts here are of 4 KiB
     * pages. */
    prctl(PR_SET_THP_DISABLE, 1, 0, 0, 0);
    double *by_worker = malloc(N * sizeof(double));
    double *by_main = malloc(N * sizeof(double));
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
