/* Threads cancelled by the program (deferred cancellation) while they
 * allocate, load libraries and read files: 150 rounds of 4 workers,
 * each cancelled 2-4 ms after it started. A worker's cancellation
 * points are `open`, `read`, `close` and `pthread_testcancel`; a
 * profiler that reaches a cancellation point inside its own work (the
 * symbols it reads at `dlopen`, a profile or message it writes, a sample
 * handler reading a file) must hold the cancellation off, or the thread
 * is unwound out of the profiler with its locks held. Prints the rounds
 * and the workers that were not cancelled (0). */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static volatile long sink;

static void *worker(void *arg) {
    long id = (long)arg;
    for (long it = 0;; it++) {
        char *p = malloc(1000 + (it % 5000));
        memset(p, 1, 1000);
        sink += p[10];
        free(p);
        if (it % 64 == 0) {
            void *h = dlopen(id % 2 ? "libm.so.6" : "libresolv.so.2", RTLD_NOW);
            if (h)
                dlclose(h);
        }
        if (it % 16 == 0) {
            int fd = open("/proc/self/stat", O_RDONLY);
            char buf[256];
            if (fd >= 0) {
                if (read(fd, buf, sizeof buf) < 0)
                    sink++;
                close(fd);
            }
        }
        if (it % 1000 == 0)
            pthread_testcancel();
    }
    return NULL;
}

int main(void) {
    int rounds = 150, not_cancelled = 0;
    for (int r = 0; r < rounds; r++) {
        pthread_t t[4];
        for (long i = 0; i < 4; i++)
            if (pthread_create(&t[i], NULL, worker, (void *)i) != 0) {
                perror("pthread_create");
                return 1;
            }
        usleep(2000 + (r % 7) * 300);
        for (int i = 0; i < 4; i++)
            pthread_cancel(t[i]);
        for (int i = 0; i < 4; i++) {
            void *res;
            pthread_join(t[i], &res);
            not_cancelled += res != PTHREAD_CANCELED;
        }
    }
    printf("%d rounds, %d workers not cancelled\n", rounds, not_cancelled);
    return 0;
}
