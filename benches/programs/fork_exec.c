/* The cost of fork + exec + wait under the profiler (docs/PERFORMANCE.md,
 * "Start-up and threads"): 10,000 small heap blocks, then N times fork, exec /bin/true in
 * the child, wait. Prints the mean time of one round in microseconds.
 * gcc -O2 -o fork_exec fork_exec.c && ./fork_exec 200
 * hpcrun-rs -o m ./fork_exec 200 */
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
#include <sys/wait.h>
#include <time.h>
int main(int argc, char **argv) {
    int n = argc > 1 ? atoi(argv[1]) : 100;
    /* some heap, like a real code before it forks */
    void **p = malloc(10000 * sizeof *p);
    for (int i = 0; i < 10000; i++) p[i] = malloc(64 + i % 512);
    struct timespec a, b;
    clock_gettime(CLOCK_MONOTONIC, &a);
    for (int i = 0; i < n; i++) {
        pid_t c = fork();
        if (c == 0) { execl("/bin/true", "true", (char *)0); _exit(127); }
        int st; waitpid(c, &st, 0);
    }
    clock_gettime(CLOCK_MONOTONIC, &b);
    printf("%.1f us per fork+exec+wait\n", ((b.tv_sec - a.tv_sec) * 1e9 + (b.tv_nsec - a.tv_nsec)) / n / 1e3);
    return 0;
}
