/* Puts its own file on every perf event descriptor number it finds in
 * /proc/self/fd (the profiler's: the program opens none), alternately
 * with dup2 and dup3(O_CLOEXEC), while a second thread runs across it;
 * then works (and touches fresh pages), writes a line through each
 * number, lets the thread end, and checks that every number is still its
 * file and the file holds exactly its lines. Natively there is nothing
 * to replace. How many numbers it took goes to stderr; stdout is the
 * same natively and measured. */
#define _GNU_SOURCE
#include <dirent.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static __attribute__((noipa)) double work(double *a, long n) {
    double s = 0;
    for (int r = 0; r < 4; r++)
        for (long i = 0; i < n; i++)
            s += a[i] * (double)r;
    return s;
}

#define N (1L << 20)
#define ROUNDS 20
static double *a;
static pthread_barrier_t started, taken;

/* Runs across the dup2s (its own descriptors among the replaced ones)
 * and ends after them: the profiler closes its events then. */
static void *worker(void *arg) {
    double *out = arg;
    pthread_barrier_wait(&started);
    pthread_barrier_wait(&taken);
    for (int round = 0; round < ROUNDS; round++) {
        double *b = malloc(N * sizeof *b);
        memset(b, 0, N * sizeof *b);
        *out += work(b, N) + work(a, N);
        free(b);
    }
    return NULL;
}

/* The perf event descriptors of this process. */
static int perf_fds(int *out, int max) {
    DIR *d = opendir("/proc/self/fd");
    if (!d) {
        perror("opendir");
        exit(2);
    }
    int n = 0, self = dirfd(d);
    struct dirent *e;
    while ((e = readdir(d)) && n < max) {
        int fd = atoi(e->d_name);
        if (e->d_name[0] == '.' || fd == self)
            continue;
        char path[64], link[256];
        snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
        ssize_t len = readlink(path, link, sizeof link - 1);
        if (len <= 0)
            continue;
        link[len] = 0;
        if (strstr(link, "perf_event"))
            out[n++] = fd;
    }
    closedir(d);
    return n;
}

int main(void) {
    a = malloc(N * sizeof *a);
    for (long i = 0; i < N; i++)
        a[i] = 1.0;
    double w = 0, s = 0;
    pthread_barrier_init(&started, NULL, 2);
    pthread_barrier_init(&taken, NULL, 2);
    pthread_t t;
    pthread_create(&t, NULL, worker, &w);
    /* Both threads' events are open once the worker runs its own code
     * (the profiler opens a thread's events before its start routine). */
    pthread_barrier_wait(&started);

    char path[] = "/tmp/hostile_dup.XXXXXX";
    int file = mkstemp(path);
    if (file < 0) {
        perror("mkstemp");
        return 2;
    }
    unlink(path);
    int fds[64];
    int n = perf_fds(fds, 64);
    for (int i = 0; i < n; i++) {
        int got = i % 2 ? dup3(file, fds[i], O_CLOEXEC) : dup2(file, fds[i]);
        if (got != fds[i]) {
            perror("dup2/dup3");
            return 3;
        }
    }
    fprintf(stderr, "hostile_dup: replaced %d perf event descriptors\n", n);
    pthread_barrier_wait(&taken);

    for (int round = 0; round < ROUNDS; round++) {
        double *b = malloc(N * sizeof *b);
        memset(b, 0, N * sizeof *b);
        s += work(b, N) + work(a, N);
        free(b);
    }
    char expect[64 * 16] = "";
    for (int i = 0; i < n; i++) {
        char line[16];
        snprintf(line, sizeof line, "line %d\n", i);
        strcat(expect, line);
        if (write(fds[i], line, strlen(line)) != (ssize_t)strlen(line)) {
            perror("write");
            return 4;
        }
    }
    pthread_join(t, NULL);

    struct stat want;
    fstat(file, &want);
    for (int i = 0; i < n; i++) {
        struct stat st;
        if (fstat(fds[i], &st) != 0 || st.st_ino != want.st_ino || st.st_dev != want.st_dev) {
            fprintf(stderr, "descriptor %d is no longer the program's file\n", fds[i]);
            return 5;
        }
        int flags = fcntl(fds[i], F_GETFD);
        if (flags != (i % 2 ? FD_CLOEXEC : 0)) {
            fprintf(stderr, "descriptor %d has flags %d\n", fds[i], flags);
            return 6;
        }
    }
    char got[64 * 16 + 1];
    ssize_t len = pread(file, got, sizeof got - 1, 0);
    if (len < 0 || (size_t)len != strlen(expect) || memcmp(got, expect, len) != 0) {
        fprintf(stderr, "the file holds %zd bytes, not the program's %zu\n", len, strlen(expect));
        return 7;
    }
    for (int i = 0; i < n; i++)
        if (close(fds[i]) != 0) {
            perror("close");
            return 8;
        }
    printf("ok: sum %.0f, worker %.0f\n", s, w);
    return 0;
}
