/* A program that sets umask(0777) (no permission for anyone on the files
 * it creates), then computes in 2 threads. Prints the same line natively
 * and under hpcrun-rs; its profiles stay readable by their owner. */
#include <pthread.h>
#include <stdio.h>
#include <sys/stat.h>

static void *work(void *arg) {
    (void)arg;
    volatile double x = 0;
    for (long i = 0; i < 50000000L; i++) x += i * 0.5;
    return 0;
}

int main(void) {
    umask(0777);
    pthread_t t;
    pthread_create(&t, 0, work, 0);
    work(0);
    pthread_join(t, 0);
    printf("done\n");
    return 0;
}
