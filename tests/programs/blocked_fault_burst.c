/* A burst of page faults while every signal is blocked by the raw system
 * call (past any interposed sigprocmask), as a runtime's critical section
 * may: `burst`, 32 MiB, is first touched page by page (8,192 faults)
 * with signals blocked; then signals are unblocked and `after`, 16 MiB,
 * is first touched page by page (4,096 faults). Transparent huge pages
 * are off for the process, so each page is a fault. Prints the sum of
 * the bytes read back.
 *
 * A sampler of every fault whose signal waited meanwhile finds thousands
 * of samples and signals at once when the mask is lifted: it must drain
 * them, count what its ring could not hold, and go on sampling `after`. */
#define _GNU_SOURCE
#include <signal.h>
#include <stdio.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

static char burst[32 << 20] __attribute__((aligned(4096)));
static char after[16 << 20] __attribute__((aligned(4096)));

static __attribute__((noipa)) void touch(char *p, long bytes) {
    for (long i = 0; i < bytes; i += 4096)
        p[i] = 1;
}

int main(void) {
    if (prctl(PR_SET_THP_DISABLE, 1, 0, 0, 0) != 0) {
        perror("prctl(PR_SET_THP_DISABLE)");
        return 1;
    }
    sigset_t all, old;
    sigfillset(&all);
    syscall(SYS_rt_sigprocmask, SIG_BLOCK, &all, &old, 8);
    touch(burst, sizeof burst);
    syscall(SYS_rt_sigprocmask, SIG_SETMASK, &old, NULL, 8);
    touch(after, sizeof after);
    long sum = 0;
    for (long i = 0; i < (long)sizeof burst; i += 4096)
        sum += burst[i];
    for (long i = 0; i < (long)sizeof after; i += 4096)
        sum += after[i];
    printf("%ld\n", sum);
    return 0;
}
