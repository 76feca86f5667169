/* switch_cost: what a per-thread task-clock perf event adds to every
 * context switch (docs/PERFORMANCE.md, "Timer and signal"). Two threads hand a token
 * back and forth through a pair of pipes, 200,000 round trips (each a
 * block and a wake-up on both sides: 4 context switches per round trip
 * when the threads share a CPU, 2 blocks/wakes each otherwise), and print
 * the wall time per round trip. Run it natively and under the floor
 * (benches/programs/null_sampler.c, which opens the same per-thread
 * task-clock event as hpcrun-rs) or hpcrun-rs; the difference is the
 * event's cost at each switch (the kernel stops and restarts its timer).
 *
 * Build: gcc -O2 -pthread -o switch_cost switch_cost.c
 * Run:   ./switch_cost; LD_PRELOAD=./libnull_sampler.so ./switch_cost
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

static int ping[2], pong[2];
static long rounds = 200000;

static void *echo(void *arg) {
    (void)arg;
    char c;
    for (long i = 0; i < rounds; i++) {
        if (read(ping[0], &c, 1) != 1 || write(pong[1], &c, 1) != 1)
            exit(1);
    }
    return NULL;
}

int main(int argc, char **argv) {
    if (argc > 1)
        rounds = atol(argv[1]);
    if (pipe(ping) || pipe(pong))
        return 1;
    pthread_t t;
    pthread_create(&t, NULL, echo, NULL);
    struct timespec a, b;
    clock_gettime(CLOCK_MONOTONIC, &a);
    char c = 'x';
    for (long i = 0; i < rounds; i++) {
        if (write(ping[1], &c, 1) != 1 || read(pong[0], &c, 1) != 1)
            return 1;
    }
    clock_gettime(CLOCK_MONOTONIC, &b);
    pthread_join(t, NULL);
    double us = ((b.tv_sec - a.tv_sec) * 1e9 + (b.tv_nsec - a.tv_nsec)) / 1e3 / rounds;
    printf("switch_cost: %ld round trips, %.2f us each\n", rounds, us);
    return 0;
}
