/* The cost of a short-lived thread under the profiler (docs/PERFORMANCE.md,
 * "Sessions 11-13"): N times create a thread that computes a
 * little and allocates once, and join it. Prints the mean per thread.
 * gcc -O2 -pthread -o thread_churn thread_churn.c && ./thread_churn 1000 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
static void *work(void *p) { volatile double s = 0; for (int i = 0; i < 20000; i++) s += i * 0.5; void *q = malloc(100); free(q); return NULL; }
int main(int argc, char **argv) {
    int n = argc > 1 ? atoi(argv[1]) : 1000;
    struct timespec a, b; clock_gettime(CLOCK_MONOTONIC, &a);
    for (int i = 0; i < n; i++) { pthread_t t; pthread_create(&t, NULL, work, NULL); pthread_join(t, NULL); }
    clock_gettime(CLOCK_MONOTONIC, &b);
    printf("%.1f us per thread create+run+join\n", ((b.tv_sec - a.tv_sec) * 1e9 + (b.tv_nsec - a.tv_nsec)) / n / 1e3);
}
