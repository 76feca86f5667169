/* One thread calls glibc's closefrom(3) again and again while the main
 * thread starts and joins 200 short computing threads, one after the
 * other: a profiler that opens its descriptors for a new thread at a low
 * number and moves them up afterwards must not let closefrom close them
 * in between. Prints "ok". */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <unistd.h>

static volatile int stop;

static void *closer(void *arg) {
    while (!stop)
        closefrom(3);
    return arg;
}

static void *work(void *arg) {
    volatile double x = 0;
    for (long i = 0; i < 3000000; i++)
        x += i;
    return arg;
}

int main(void) {
    pthread_t c;
    if (pthread_create(&c, NULL, closer, NULL) != 0)
        return 1;
    for (int i = 0; i < 200; i++) {
        pthread_t t;
        if (pthread_create(&t, NULL, work, NULL) != 0 || pthread_join(t, NULL) != 0)
            return 1;
    }
    stop = 1;
    pthread_join(c, NULL);
    printf("ok\n");
    return 0;
}
