/* Many short-lived threads: argv[1] threads (default
 * 2000), two alive at a time, each computing for about argv[2]
 * microseconds (default 2000) of CPU time: a fixed number of iterations,
 * calibrated by the main thread at start (the thread CPU clock is read
 * only before and after, so that the threads run in user mode). Prints
 * the threads' summed work in microseconds of their own CPU time
 * ("work_us N"). */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static long iterations;
static volatile double sink;

static double thread_cpu_us(void) {
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
}

static void compute(long n) {
    double s = 0;
    for (long i = 0; i < n; i++) s += (double)i * 0.5;
    sink = s;
}

static void *work(void *arg) {
    double begin = thread_cpu_us();
    compute(iterations);
    *(double *)arg = thread_cpu_us() - begin;
    return NULL;
}

int main(int argc, char **argv) {
    long n = argc > 1 ? atol(argv[1]) : 2000;
    long work_us = argc > 2 ? atol(argv[2]) : 2000;
    /* Iterations per microsecond, from 50 ms of computing. */
    long probe = 1 << 20;
    double t0 = thread_cpu_us(), t1;
    do {
        probe *= 2;
        t0 = thread_cpu_us();
        compute(probe);
        t1 = thread_cpu_us();
    } while (t1 - t0 < 50000);
    iterations = (long)(probe / (t1 - t0) * work_us);
    double total = 0, spent[2];
    for (long i = 0; i < n; i += 2) {
        pthread_t t[2];
        for (int k = 0; k < 2; k++) pthread_create(&t[k], NULL, work, &spent[k]);
        for (int k = 0; k < 2; k++) {
            pthread_join(t[k], NULL);
            total += spent[k];
        }
    }
    printf("work_us %.0f\n", total);
    return 0;
}
