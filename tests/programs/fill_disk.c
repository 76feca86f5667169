/* Works for 1.5 s of wall time (allocating as it goes: a single-threaded
 * program's checkpoint is written at an allocation), then fills the file
 * system of DIR (its first argument) with a file of its own until the
 * disk is full, and exits 0 leaving it full. Prints "full". */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec / 1e9;
}

static __attribute__((noipa)) double work(double *a, long n) {
    double s = 0;
    for (long i = 0; i < n; i++)
        s += a[(i * 4099) & (n - 1)];
    return s;
}

int main(int argc, char **argv) {
    if (argc < 2)
        return 2;
    double t0 = now(), sink = 0;
    long n = 1 << 17;
    while (now() - t0 < 1.5) {
        double *a = malloc(n * sizeof *a);
        for (long i = 0; i < n; i++)
            a[i] = i;
        sink += work(a, n);
        free(a);
    }
    char path[4096];
    snprintf(path, sizeof path, "%s/filler", argv[1]);
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0) {
        perror(path);
        return 1;
    }
    static char chunk[4096];
    memset(chunk, 1, sizeof chunk);
    while (write(fd, chunk, sizeof chunk) > 0)
        ;
    int full = errno == ENOSPC;
    close(fd);
    printf("%s\n", full ? "full" : "not full");
    return sink < 0;
}
