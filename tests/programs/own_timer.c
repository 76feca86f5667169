/* A program with its own POSIX timer on the profiler's default sampling
 * signal (SIGRTMIN+4): a CLOCK_MONOTONIC timer every 1 ms, SIGEV_SIGNAL
 * with the value 7, disarmed by the handler at its 100th signal, then a
 * register-only loop of N iterations (argv[1]). Under hpcrun-rs's
 * CPU-time timers (signal SI_TIMER too, but another value) it must
 * print `hits 100 value 7`: the program's timer signals reach its
 * handler, the profiler's never do. */
#define _GNU_SOURCE
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static timer_t timer;
static volatile long hits;
static volatile int bad_value;

static void on_timer(int s, siginfo_t *info, void *ctx) {
    (void)s, (void)ctx;
    if (info->si_code != SI_TIMER || info->si_value.sival_int != 7)
        bad_value = 1;
    if (++hits == 100) {
        struct itimerspec off;
        memset(&off, 0, sizeof off);
        timer_settime(timer, 0, &off, NULL);
    }
}

int main(int argc, char **argv) {
    long n = argc > 1 ? atol(argv[1]) : 300000000L;
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = on_timer;
    sa.sa_flags = SA_SIGINFO | SA_RESTART;
    sigaction(SIGRTMIN + 4, &sa, NULL);
    struct sigevent ev;
    memset(&ev, 0, sizeof ev);
    ev.sigev_notify = SIGEV_SIGNAL;
    ev.sigev_signo = SIGRTMIN + 4;
    ev.sigev_value.sival_int = 7;
    if (timer_create(CLOCK_MONOTONIC, &ev, &timer) != 0) {
        perror("timer_create");
        return 1;
    }
    struct itimerspec every = {{0, 1000000}, {0, 1000000}};
    timer_settime(timer, 0, &every, NULL);
    while (hits < 100)
        usleep(1000);
    volatile double x = 0;
    for (long i = 0; i < n; i++)
        x += i * 0.5;
    printf("hits %ld value %d\n", hits, bad_value ? -1 : 7);
    return 0;
}
