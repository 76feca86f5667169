/* Closes every descriptor from 3 up (close_range, the raw system call, as
 * daemons do; with the argument "libc", glibc's closefrom), then opens and reads its own executable
 * again and again while it works and touches fresh pages: the profiler's
 * descriptors are gone and their numbers reused by the program's files. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <pthread.h>
#include <unistd.h>

static __attribute__((noipa)) double work(double *a, long n) {
    double s = 0;
    for (int r = 0; r < 4; r++)
        for (long i = 0; i < n; i++)
            s += a[i] * (double)r;
    return s;
}

static long read_self(const char *path) {
    int fd = open(path, O_RDONLY);
    if (fd < 0) {
        perror("open");
        exit(2);
    }
    char buf[4096];
    long total = 0;
    for (;;) {
        ssize_t r = read(fd, buf, sizeof buf);
        if (r < 0) {
            perror("read");
            exit(3);
        }
        if (r == 0)
            break;
        total += r;
    }
    if (close(fd) != 0) {
        perror("close");
        exit(4);
    }
    return total;
}

#define N (1L << 20)
static double *a;
static pthread_barrier_t closed;

/* A thread that runs across the close: its descriptors are closed under
 * it, and it ends after the program reused their numbers. */
static void *worker(void *arg) {
    double *out = arg;
    *out = work(a, N);
    pthread_barrier_wait(&closed);
    double *b = malloc(N * sizeof *b);
    memset(b, 0, N * sizeof *b);
    *out += work(b, N);
    free(b);
    return NULL;
}

int main(int argc, char **argv) {
    long n = N;
    a = malloc(n * sizeof *a);
    for (long i = 0; i < n; i++)
        a[i] = 1.0;
    double s = work(a, n), w = 0;
    pthread_barrier_init(&closed, NULL, 2);
    pthread_t t;
    pthread_create(&t, NULL, worker, &w);
    if (argc > 1 && strcmp(argv[1], "libc") == 0) {
        closefrom(3); /* glibc's, as daemons call it */
    } else if (syscall(SYS_close_range, 3u, ~0u, 0u) != 0) {
        perror("close_range");
        return 5;
    }
    long first = read_self(argv[0]);
    /* Keep the program's own files open over the work, on the numbers the
     * profiler's descriptors had. */
    int keep[16];
    for (int i = 0; i < 16; i++)
        keep[i] = open(argv[0], O_RDONLY);
    pthread_barrier_wait(&closed);
    for (int round = 0; round < 20; round++) {
        /* Fresh pages: page faults after the close. */
        double *b = malloc(n * sizeof *b);
        memset(b, 0, n * sizeof *b);
        s += work(b, n) + work(a, n);
        free(b);
        if (read_self(argv[0]) != first) {
            fprintf(stderr, "short read\n");
            return 6;
        }
    }
    pthread_join(t, NULL);
    for (int i = 0; i < 16; i++) {
        char c;
        if (read(keep[i], &c, 1) != 1) {
            perror("read kept");
            return 7;
        }
        if (close(keep[i]) != 0) {
            perror("close kept");
            return 8;
        }
    }
    printf("read %ld bytes 21 times, sum %.0f, worker %.0f\n", first, s, w);
    return 0;
}
