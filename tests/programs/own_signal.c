/* A program that uses the profiler's default sampling signal itself:
 * installs a handler for SIGRTMIN+OFF (argv[1], default 4) and raises it
 * 1,000 times, then computes for a while. It must print `hits 1000` under
 * hpcrun-rs, whatever --signal says. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>

static volatile long hits;
static void h(int s) { (void)s; hits++; }

int main(int argc, char **argv) {
    int off = argc > 1 ? atoi(argv[1]) : 4;
    long n = argc > 2 ? atol(argv[2]) : 300000000L;
    struct sigaction sa = {0};
    sa.sa_handler = h;
    sigaction(SIGRTMIN + off, &sa, 0);
    for (int i = 0; i < 1000; i++) raise(SIGRTMIN + off);
    volatile double x = 0;
    for (long i = 0; i < n; i++) x += i * 0.5;
    printf("hits %ld\n", hits);
    return 0;
}
