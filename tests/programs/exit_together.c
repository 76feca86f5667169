/* Ending the process from several threads at once, or by quick_exit.
 *
 *   exit_together exit   a thread and the main thread compute (each
 *                        about 0.15 s of CPU, allocating), meet at a
 *                        barrier, and both call exit(3) at once;
 *   exit_together quick  the main thread computes, then quick_exit(4)
 *                        (its at_quick_exit handler prints "bye").
 *
 * Prints "computed" before ending. Natively the status is 3 or 4. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static pthread_barrier_t barrier;
static volatile double sink;

static void compute(void) {
    double s = 0;
    for (int r = 0; r < 6000; r++) {
        char *volatile p = malloc(1 << 16);
        memset(p, r, 1 << 16);
        for (int i = 0; i < (1 << 16); i += 8)
            s += p[i] * 1.5;
        free(p);
    }
    sink = s;
}

static void *worker(void *arg) {
    compute();
    pthread_barrier_wait(&barrier);
    exit(3);
    return arg;
}

static void bye(void) { printf("bye\n"); fflush(stdout); }

int main(int argc, char **argv) {
    if (argc > 1 && strcmp(argv[1], "quick") == 0) {
        at_quick_exit(bye);
        compute();
        printf("computed\n");
        fflush(stdout);
        quick_exit(4);
    }
    pthread_barrier_init(&barrier, NULL, 2);
    pthread_t t[1];
    if (pthread_create(&t[0], NULL, worker, NULL) != 0)
        return 1;
    compute();
    printf("computed\n");
    fflush(stdout);
    pthread_barrier_wait(&barrier);
    exit(3);
}
