/* 8 threads that compute (a run killed with SIGKILL keeps its
 * checkpoints). Prints "running <pid>" once all threads have started;
 * with an argument S, stops after S seconds and exits normally, else runs
 * until it is killed. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

static double sink[8 * 8];
static volatile int stop;

static void *work(void *arg) {
    long id = (long)arg;
    size_t n = 1 << 20;
    double *a = malloc(n * sizeof(double));
    for (size_t i = 0; i < n; i++) a[i] = (double)i;
    while (!stop) {
        double s = 0;
        for (size_t i = 0; i < n; i += 8) s += a[(i * 4099) & (n - 1)];
        sink[id * 8] += s;
    }
    free(a);
    return 0;
}

int main(int argc, char **argv) {
    pthread_t t[8];
    for (long i = 0; i < 8; i++) pthread_create(&t[i], 0, work, (void *)i);
    printf("running %d\n", (int)getpid());
    fflush(stdout);
    if (argc > 1) {
        usleep((useconds_t)(atof(argv[1]) * 1e6));
        stop = 1;
    }
    for (int i = 0; i < 8; i++) pthread_join(t[i], 0);
    printf("done\n");
    return 0;
}
