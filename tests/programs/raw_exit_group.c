/* Ends with a raw exit_group system call (status 3), past atexit and the
 * interposed _exit, so the profiler never writes its final profile:
 * 1.5 s of CPU time of work, an allocation (a single-threaded program's
 * checkpoint, due one second after the start, is written there), 0.5 s
 * more of work that only a final profile would hold, then exit_group.
 * With the argument "noalloc" it never allocates after the start (and
 * writes with write(2), not stdio): no checkpoint is ever written. */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

static double cpu_seconds(void) {
    struct timespec t;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

static __attribute__((noipa)) double work(const double *a, long n) {
    double s = 0;
    for (long i = 0; i < n; i++)
        s += a[i];
    return s;
}

/* Works until this thread has used `until` seconds of CPU time. */
static double work_until(const double *a, long n, double until) {
    double s = 0;
    while (cpu_seconds() < until)
        s += work(a, n);
    return s;
}

int main(int argc, char **argv) {
    long n = 1 << 16;
    double *a = calloc(n, sizeof *a);
    double s = work_until(a, n, 1.5);
    if (argc > 1 && strcmp(argv[1], "noalloc") == 0) {
        s += work_until(a, n, 2.0);
        const char line[] = "no allocation\n";
        if (write(1, line, sizeof line - 1) < 0 || s != 0)
            return 2;
        syscall(SYS_exit_group, 3);
    }
    free(malloc(1 << 20));
    s += work_until(a, n, 2.0);
    printf("sum %.0f\n", s);
    fflush(stdout);
    syscall(SYS_exit_group, 3);
    return 0;
}
