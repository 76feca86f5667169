/* Loads and unloads libtable.so many times (argv[1] = path, argv[2] =
 * iterations); the last load does real work on the library's static table,
 * which the data-centric view must name `lib_table`. With argv[3] =
 * "threads", a second thread allocates, frees and sweeps its own array
 * during the whole loop, so that sample handlers and allocation hooks on
 * that thread use the unwinder and module snapshot while dlopen/dlclose
 * replace them. */
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static volatile int loop_done;

static void *churn(void *arg) {
    (void)arg;
    double sum = 0;
    long rounds = 0;
    while (!loop_done || rounds < 100) {
        size_t n = 1000 + (rounds % 7) * 4000;
        double *block = malloc(n * sizeof *block);
        for (size_t i = 0; i < n; i++) block[i] = (double)(i ^ rounds);
        for (size_t i = 0; i < n; i += 3) sum += block[i];
        free(block);
        rounds++;
    }
    return (void *)(long)(sum > 0);
}

int main(int argc, char **argv) {
    int iterations = argc > 2 ? atoi(argv[2]) : 200;
    int threads = argc > 3 && strcmp(argv[3], "threads") == 0;
    pthread_t worker;
    if (threads && pthread_create(&worker, NULL, churn, NULL) != 0) {
        fprintf(stderr, "pthread_create failed\n");
        return 1;
    }
    double total = 0;
    for (int i = 0; i < iterations; i++) {
        void *h = dlopen(argv[1], RTLD_NOW);
        if (!h) {
            fprintf(stderr, "dlopen: %s\n", dlerror());
            return 1;
        }
        double (*sweep)(int) = (double (*)(int))dlsym(h, "lib_sweep");
        total += sweep(i == iterations - 1 ? 40 : 0);
        if (i != iterations - 1) dlclose(h);
    }
    if (threads) {
        void *ok;
        loop_done = 1;
        pthread_join(worker, &ok);
        printf("worker %s\n", ok ? "ok" : "no sum");
    }
    printf("dlopen_loop %d done %.0f\n", iterations, total);
    return 0;
}
