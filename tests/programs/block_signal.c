/* A program that blocks SIGRTMIN+4 (the profiler's default sampling
 * signal) in all its threads, then computes in 4 threads.
 *
 *   block_signal libc   blocks it with pthread_sigmask (what programs do);
 *                       also raises it once while blocked and takes it
 *                       with sigwait, and reads the mask back.
 *   block_signal raw    blocks it with the rt_sigprocmask system call,
 *                       past any interposition.
 *
 * Prints the same lines natively and under hpcrun-rs. */
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

static volatile long hits;
static void h(int s) { (void)s; hits++; }

static void *work(void *arg) {
    (void)arg;
    volatile double x = 0;
    for (long i = 0; i < 150000000L; i++) x += i * 0.5;
    return 0;
}

int main(int argc, char **argv) {
    int raw = argc > 1 && strcmp(argv[1], "raw") == 0;
    int sig = SIGRTMIN + 4;
    struct sigaction sa = {0};
    sa.sa_handler = h;
    sigaction(sig, &sa, 0);
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, sig);
    if (raw) {
        syscall(SYS_rt_sigprocmask, SIG_BLOCK, &set, NULL, 8);
    } else {
        pthread_sigmask(SIG_BLOCK, &set, NULL);
        sigset_t now;
        pthread_sigmask(SIG_BLOCK, NULL, &now);
        printf("blocked %d\n", sigismember(&now, sig));
        raise(sig);
        int got = 0;
        sigwait(&set, &got);
        printf("waited %d\n", got == sig);
    }
    pthread_t t[4];
    for (int i = 0; i < 4; i++) pthread_create(&t[i], 0, work, 0);
    work(0);
    for (int i = 0; i < 4; i++) pthread_join(t[i], 0);
    printf("hits %ld\n", hits);
    return 0;
}
