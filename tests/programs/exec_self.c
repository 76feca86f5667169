/* A process that replaces its image twice: each image sums a 32 MiB heap
 * array for WORK seconds of CPU time, then execs the next (image 0 with
 * execl of /proc/self/exe, image 1 with execv of argv[0]); image 2 first
 * tries an exec that fails (ENOENT), then works and exits 0.
 * argv[1] = image number (absent: 0). */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define N (1 << 22)
#define WORK 1.0

static double cpu_seconds(void) {
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

/* Sums `a` with a stride until WORK seconds of CPU time have passed. */
__attribute__((noipa)) static double work(double *a) {
    double s = 0, end = cpu_seconds() + WORK;
    while (cpu_seconds() < end)
        for (long i = 0; i < N; i += 8) s += a[(i * 4099) & (N - 1)];
    return s;
}

int main(int argc, char **argv) {
    int image = argc > 1 ? atoi(argv[1]) : 0;
    if (image == 2) {
        char *none[] = {"no-such-program", NULL};
        execv("/no/such/program", none);
        printf("image 2: exec failed (%s)\n", strerror(errno));
    }
    double *a = calloc(N, sizeof(double));
    for (long i = 0; i < N; i++) a[i] = 1 + (i & 7);
    double s = work(a);
    printf("image %d: %.0f\n", image, s > 0 ? 1.0 : 0.0);
    fflush(stdout);
    if (image == 0) {
        execl("/proc/self/exe", argv[0], "1", (char *)NULL);
        perror("execl");
        return 1;
    }
    if (image == 1) {
        char *next[] = {argv[0], "2", NULL};
        execv(argv[0], next);
        perror("execv");
        return 1;
    }
    return 0;
}
