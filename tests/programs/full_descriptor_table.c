/* Lowers its soft open-file limit to 64 (the hard limit stays), starts
 * two threads that compute until told to stop, opens /dev/null until
 * the table is full (EMFILE), computes a little more, stops and joins
 * its threads and returns 0 holding every descriptor: a program that
 * ends on descriptor exhaustion. Prints "table full: EMFILE". */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

static volatile int stop;
static volatile double sink;
static pthread_barrier_t started;

static double compute(long n) {
    double s = 0;
    for (long i = 0; i < n; i++) {
        char *volatile p = malloc(64 + i % 256);
        p[0] = (char)i;
        s += p[0];
        free(p);
    }
    return s;
}

static void *work(void *arg) {
    pthread_barrier_wait(&started);
    double s = 0;
    while (!stop)
        s += compute(1000);
    sink = s;
    return arg;
}

int main(void) {
    struct rlimit rl;
    getrlimit(RLIMIT_NOFILE, &rl);
    if (rl.rlim_max != RLIM_INFINITY && rl.rlim_max < 64)
        return 2;
    rl.rlim_cur = 64;
    if (setrlimit(RLIMIT_NOFILE, &rl) != 0) {
        perror("setrlimit");
        return 2;
    }
    pthread_barrier_init(&started, NULL, 3);
    pthread_t t[2];
    for (int i = 0; i < 2; i++)
        if (pthread_create(&t[i], NULL, work, NULL) != 0)
            return 2;
    pthread_barrier_wait(&started);
    int opened = 0;
    while (open("/dev/null", O_RDONLY) >= 0)
        opened++;
    int err = errno;
    sink = compute(2000000);
    stop = 1;
    for (int i = 0; i < 2; i++)
        pthread_join(t[i], NULL);
    printf("table full: %s\n", err == EMFILE ? "EMFILE" : strerror(err));
    return opened > 0 ? 0 : 3;
}
