/* The cost of short-lived threads under the profiler
 * (docs/PERFORMANCE.md, "Start-up and threads"). Two modes:
 *   thread_churn N        N times: create a thread that computes a little
 *                         and allocates once, join it; prints the mean
 *                         microseconds per thread.
 *   thread_churn rounds S for S seconds of wall time: create 200 such
 *                         threads, then join them (a round); prints the
 *                         rounds done.
 * gcc -O2 -pthread -o thread_churn thread_churn.c && ./thread_churn 1000 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static void *work(void *p) {
    volatile double s = 0;
    for (int i = 0; i < 20000; i++) s += i * 0.5;
    void *q = malloc(100);
    free(q);
    return p;
}

static double now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec / 1e9;
}

int main(int argc, char **argv) {
    if (argc > 2 && !strcmp(argv[1], "rounds")) {
        double end = now_s() + atof(argv[2]);
        long rounds = 0;
        while (now_s() < end) {
            pthread_t t[200];
            for (int i = 0; i < 200; i++) pthread_create(&t[i], NULL, work, NULL);
            for (int i = 0; i < 200; i++) pthread_join(t[i], NULL);
            rounds++;
        }
        printf("%ld rounds of 200 threads\n", rounds);
        return 0;
    }
    int n = argc > 1 ? atoi(argv[1]) : 1000;
    double a = now_s();
    for (int i = 0; i < n; i++) {
        pthread_t t;
        pthread_create(&t, NULL, work, NULL);
        pthread_join(t, NULL);
    }
    printf("%.1f us per thread create+run+join\n", (now_s() - a) * 1e6 / n);
    return 0;
}
