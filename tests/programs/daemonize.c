/* A program that starts a daemon the classic way and exits at once:
 * fork; the child calls setsid and forks again, and exits; the original
 * exits with status 3 as soon as the child has exited. The grandchild
 * (the daemon: no terminal, its standard descriptors on /dev/null, its
 * working directory /) sums a table of its own for about 2 s of CPU
 * time, then writes the sum into the file named by the first argument
 * (written under a temporary name, then renamed: the file is whole once
 * it exists) and exits. A second argument gives other seconds of work.
 * gcc -O2 -g -o daemonize daemonize.c && ./daemonize /tmp/result */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define N (4 << 20)

static double cpu_seconds(void) {
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

/* The daemon's work: sweeps over its table for 2 s of CPU time. */
static __attribute__((noipa)) double daemon_work(double *daemon_table, double seconds) {
    double sum = 0;
    for (long i = 0; i < N; i++)
        daemon_table[i] = (double)(i % 1000);
    double start = cpu_seconds();
    while (cpu_seconds() - start < seconds)
        for (long i = 0; i < N; i += 8)
            sum += daemon_table[(i * 97) % N];
    return sum;
}

static int run_daemon(const char *result, double seconds) {
    int null = open("/dev/null", O_RDWR);
    dup2(null, 0);
    dup2(null, 1);
    dup2(null, 2);
    if (null > 2)
        close(null);
    if (chdir("/") != 0)
        return 1;
    double *daemon_table = malloc(N * sizeof *daemon_table);
    if (!daemon_table)
        return 1;
    double sum = daemon_work(daemon_table, seconds);
    char tmp[4096];
    snprintf(tmp, sizeof tmp, "%s.tmp", result);
    FILE *f = fopen(tmp, "w");
    if (!f)
        return 1;
    fprintf(f, "sum %.0f\n", sum > 0 ? 1.0 : 0.0);
    fclose(f);
    rename(tmp, result);
    free(daemon_table);
    return 0;
}

int main(int argc, char **argv) {
    if (argc < 2 || argv[1][0] != '/') {
        fprintf(stderr, "usage: daemonize /absolute/result/file\n");
        return 2;
    }
    printf("starting the daemon\n");
    fflush(stdout);
    pid_t child = fork();
    if (child < 0)
        return 1;
    if (child > 0) {
        int status;
        waitpid(child, &status, 0);
        printf("started\n");
        return 3;
    }
    setsid();
    pid_t daemon = fork();
    if (daemon != 0)
        exit(daemon < 0);
    exit(run_daemon(argv[1], argc > 2 ? atof(argv[2]) : 2.0));
}
