/* A thread that ends right after a burst of page faults, with every
 * signal still blocked by the raw system call (past any interposed
 * sigprocmask): it first touches `burst`, 16 MiB, page by page (4,096
 * faults), then returns. Transparent huge pages are off for the process,
 * so each page is a fault. The main thread joins it and prints the sum
 * of the bytes read back.
 *
 * A sampler of every fault never runs its handler in that thread: the
 * samples its ring holds are never read, and those the full ring lost
 * are never told by a later record. Every one of the 4,096 must still be
 * counted, read or dropped. */
#define _GNU_SOURCE
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

static char burst[16 << 20] __attribute__((aligned(4096)));

static __attribute__((noipa)) void touch(char *p, long bytes) {
    for (long i = 0; i < bytes; i += 4096)
        p[i] = 1;
}

static void *burst_then_end(void *arg) {
    (void)arg;
    sigset_t all;
    sigfillset(&all);
    syscall(SYS_rt_sigprocmask, SIG_BLOCK, &all, NULL, 8);
    touch(burst, sizeof burst);
    return NULL;
}

int main(void) {
    if (prctl(PR_SET_THP_DISABLE, 1, 0, 0, 0) != 0) {
        perror("prctl(PR_SET_THP_DISABLE)");
        return 1;
    }
    pthread_t t;
    if (pthread_create(&t, NULL, burst_then_end, NULL) != 0 || pthread_join(t, NULL) != 0) {
        perror("pthread");
        return 1;
    }
    long sum = 0;
    for (long i = 0; i < (long)sizeof burst; i += 4096)
        sum += burst[i];
    printf("%ld\n", sum);
    return 0;
}
