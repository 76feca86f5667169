/* How deep a signal handler's stack goes on the program's alternate
 * stack: a 64 KiB stack filled with a pattern, a SIGALRM handler
 * installed with SA_ONSTACK that spins for 20 ms of its thread's CPU time
 * (a profiler's sample signals arrive meanwhile), raised 10 times; then
 * the lowest byte of the stack that changed. Natively and measured the
 * depth is the same only if no other signal frame was put on that stack
 * while the handler ran. Also prints whether a query of the action
 * reports the mask as the program set it (empty).
 * gcc -O1 -Wl,-z,now */
#define _GNU_SOURCE
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define ALT (64 * 1024)
#define PATTERN 0xA5

static volatile double sink;
static volatile int handled;

static double thread_cpu(void) {
    struct timespec t;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static void on_alarm(int signal, siginfo_t *info, void *context) {
    (void)signal, (void)info, (void)context;
    double start = thread_cpu(), s = 0;
    while (thread_cpu() - start < 0.02)
        for (int i = 1; i < 1000; i++)
            s += 1.0 / i;
    sink = s;
    handled++;
}

int main(void) {
    unsigned char *alt = malloc(ALT);
    if (!alt)
        return 1;
    memset(alt, PATTERN, ALT);
    stack_t ss = {.ss_sp = alt, .ss_size = ALT, .ss_flags = 0};
    if (sigaltstack(&ss, NULL) != 0) {
        perror("sigaltstack");
        return 1;
    }
    struct sigaction act;
    memset(&act, 0, sizeof act);
    act.sa_sigaction = on_alarm;
    act.sa_flags = SA_ONSTACK | SA_SIGINFO;
    sigemptyset(&act.sa_mask);
    if (sigaction(SIGALRM, &act, NULL) != 0) {
        perror("sigaction");
        return 1;
    }
    struct sigaction query;
    sigaction(SIGALRM, NULL, &query);
    int empty = 1;
    for (int s = 1; s < 65; s++)
        if (sigismember(&query.sa_mask, s) == 1)
            empty = 0;
    for (int i = 0; i < 10; i++)
        raise(SIGALRM);
    long lowest = ALT;
    for (long i = 0; i < ALT; i++)
        if (alt[i] != PATTERN) {
            lowest = i;
            break;
        }
    printf("handled %d, mask as set %d, depth %ld\n", handled, empty, ALT - lowest);
    return 0;
}
