/* false_sharing: two threads each increment their own counter, 40 million
 * times. The counters live in one static object, `counters`:
 *
 *   ./false_sharing shared   counters[0] and counters[1]: the same
 *                            64-byte cache line, which the two cores then
 *                            steal from each other at every increment;
 *   ./false_sharing padded   counters[0] and counters[8]: two lines;
 *   ./false_sharing atomic   both threads add to counters[0] atomically:
 *                            true sharing (the same bytes), and nothing
 *                            else of its line is touched.
 *
 * Expected finding: `counters` holds almost all the data-centric samples
 * in every run, both threads have samples, and `shared` runs slower than
 * `padded` when the two threads really run at the same time on two cores.
 * With `hpcrun-rs -e mem:soft -e sharing`: false sharing on `counters`
 * between the two workers in `shared`, none in `padded` or `atomic`; true
 * sharing in `atomic`.
 *
 * Build: gcc -O2 -g -pthread -o false_sharing false_sharing.c
 * Run:   ./false_sharing shared|padded|atomic [MILLION_INCREMENTS]
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* 128 bytes on a cache-line boundary: two lines of 8 counters. */
_Alignas(64) volatile long counters[16];

/* Both workers start counting together (the comparison needs them to
 * overlap). */
static pthread_barrier_t start;

struct work {
    volatile long *counter;
    int atomic;
    long n;
    double cpu_seconds; /* the thread's CPU time */
};

static double seconds(clockid_t clock) {
    struct timespec t;
    clock_gettime(clock, &t);
    return t.tv_sec + 1e-9 * t.tv_nsec;
}

/* One load and one store per increment (volatile): the load waits for the
 * line whenever the other core wrote it last. */
__attribute__((noipa)) static void *increment(void *arg) {
    struct work *w = arg;
    volatile long *c = w->counter;
    long n = w->n;
    pthread_barrier_wait(&start);
    double t0 = seconds(CLOCK_THREAD_CPUTIME_ID);
    if (w->atomic)
        for (long i = 0; i < n; i++)
            __atomic_fetch_add(c, 1, __ATOMIC_RELAXED);
    else
        for (long i = 0; i < n; i++)
            (*c)++;
    w->cpu_seconds = seconds(CLOCK_THREAD_CPUTIME_ID) - t0;
    return NULL;
}

int main(int argc, char **argv) {
    if (argc < 2 ||
        (strcmp(argv[1], "shared") && strcmp(argv[1], "padded") && strcmp(argv[1], "atomic"))) {
        fprintf(stderr, "usage: false_sharing shared|padded|atomic [MILLION_INCREMENTS]\n");
        return 2;
    }
    int padded = strcmp(argv[1], "padded") == 0;
    int atomic = strcmp(argv[1], "atomic") == 0;
    long n = (argc > 2 ? atol(argv[2]) : 40) * 1000000L;
    /* 8 longs = 64 bytes apart in the padded run, adjacent otherwise. */
    /* atomic: both on counters[0]. */
    struct work w[2] = {{&counters[0], atomic, n, 0},
                        {&counters[padded ? 8 : atomic ? 0 : 1], atomic, n, 0}};

    pthread_barrier_init(&start, NULL, 2);
    double t0 = seconds(CLOCK_MONOTONIC);
    pthread_t th[2];
    for (int t = 0; t < 2; t++)
        if (pthread_create(&th[t], NULL, increment, &w[t])) {
            fprintf(stderr, "false_sharing: pthread_create failed\n");
            return 1;
        }
    for (int t = 0; t < 2; t++)
        pthread_join(th[t], NULL);
    double wall = seconds(CLOCK_MONOTONIC) - t0;
    /* Times go to stderr so that stdout is the same in every run. */
    fprintf(stderr, "false_sharing %s: wall %.3f s, thread CPU %.3f s + %.3f s\n", argv[1],
            wall, w[0].cpu_seconds, w[1].cpu_seconds);
    long sum = atomic ? counters[0] : counters[0] + counters[padded ? 8 : 1];
    printf("false_sharing %s n=%ld sum=%ld\n", argv[1], n, sum);
    return 0;
}
