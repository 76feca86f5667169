/* Runs on a small main-thread stack (the test starts it under `ulimit -s
 * 48`): one thread computes while the main thread allocates 8 MiB,
 * fills it and sums it 20 times. Prints "ok". Each frame is small; the
 * program fits in a few KiB of stack. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

static void *work(void *arg) {
    volatile double x = 0;
    for (long i = 0; i < 30000000; i++)
        x += i;
    return arg;
}

int main(void) {
    pthread_t t;
    if (pthread_create(&t, NULL, work, NULL) != 0)
        return 1;
    double *p = malloc(8 << 20);
    if (!p)
        return 1;
    for (long i = 0; i < (1 << 20); i++)
        p[i] = i;
    volatile double x = 0;
    for (int r = 0; r < 20; r++)
        for (long i = 0; i < (1 << 20); i++)
            x += p[i];
    pthread_join(t, NULL);
    printf("ok\n");
    return 0;
}
