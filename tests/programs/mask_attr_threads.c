/* Threads created with a signal-mask attribute that blocks every signal
 * (pthread_attr_setsigmask_np, glibc 2.32+), as programs do to leave
 * signals to one dedicated thread. Each thread reads its mask with
 * pthread_sigmask(SIG_BLOCK, NULL, &old), then computes ~0.1 s. After
 * joining them, the main thread prints, per thread, whether SIGRTMIN+4
 * is blocked and how many signals are, and its own view of SIGRTMIN+4.
 * Prints the same lines natively and under hpcrun-rs. */
#define _GNU_SOURCE
#include <pthread.h>
#include <signal.h>
#include <stdio.h>

#define THREADS 2

struct seen {
    int ours;
    int blocked;
};

static void *work(void *arg) {
    struct seen *seen = arg;
    sigset_t now;
    pthread_sigmask(SIG_BLOCK, NULL, &now);
    seen->ours = sigismember(&now, SIGRTMIN + 4);
    for (int s = 1; s < 65; s++) seen->blocked += sigismember(&now, s) == 1;
    volatile double x = 0;
    for (long i = 0; i < 150000000L; i++) x += i * 0.5;
    return 0;
}

int main(void) {
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    sigset_t all;
    sigfillset(&all);
    pthread_attr_setsigmask_np(&attr, &all);
    pthread_t t[THREADS];
    struct seen seen[THREADS] = {0};
    for (int i = 0; i < THREADS; i++) pthread_create(&t[i], &attr, work, &seen[i]);
    for (int i = 0; i < THREADS; i++) pthread_join(t[i], 0);
    for (int i = 0; i < THREADS; i++)
        printf("thread %d: SIGRTMIN+4 blocked %d, %d signals blocked\n", i, seen[i].ours,
               seen[i].blocked);
    sigset_t now;
    pthread_sigmask(SIG_BLOCK, NULL, &now);
    printf("main: SIGRTMIN+4 blocked %d\n", sigismember(&now, SIGRTMIN + 4));
    return 0;
}
