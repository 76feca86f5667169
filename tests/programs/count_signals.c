/* Counts the SIGUSR1 and SIGTERM it gets, and how each came.
 *
 *   count_signals siginfo   SA_SIGINFO handlers (SIGTERM's with
 *                           SA_RESETHAND); checks that sigaction queries
 *                           return its own handler, flags and mask
 *   count_signals signal    handlers installed with signal()
 *   count_signals wait      both signals blocked, taken with sigwaitinfo
 *
 * Prints "ready PID" once its handlers are in place, then runs until the
 * first SIGTERM; after it, it goes on taking signals for 800 ms (a second
 * copy would be counted), then prints one line per signal it got:
 * "usr1 code C pid P" / "term code C pid P" (code and pid -1 for
 * signal()), and the totals "usr1 N term M", and exits 0. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define MAX 64
static volatile sig_atomic_t n;
static int sigs[MAX], codes[MAX], pids[MAX];
static volatile sig_atomic_t terms;

static void record(int sig, int code, int pid) {
    if (n < MAX) {
        sigs[n] = sig;
        codes[n] = code;
        pids[n] = pid;
        n++;
    }
    if (sig == SIGTERM) terms++;
}

static void with_info(int sig, siginfo_t *info, void *ctx) {
    (void)ctx;
    record(sig, info->si_code, info->si_pid);
}

static void plain(int sig) { record(sig, -1, -1); }

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

static void nap(void) {
    struct timespec t = {0, 10 * 1000 * 1000};
    nanosleep(&t, 0);
}

int main(int argc, char **argv) {
    const char *mode = argc > 1 ? argv[1] : "siginfo";
    int wait = strcmp(mode, "wait") == 0;
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGUSR1);
    sigaddset(&set, SIGTERM);
    if (strcmp(mode, "siginfo") == 0) {
        struct sigaction sa;
        memset(&sa, 0, sizeof sa);
        sa.sa_sigaction = with_info;
        sa.sa_flags = SA_SIGINFO | SA_RESTART;
        sigemptyset(&sa.sa_mask);
        sigaddset(&sa.sa_mask, SIGUSR2);
        sigaction(SIGUSR1, &sa, 0);
        sa.sa_flags = SA_SIGINFO | SA_RESETHAND;
        sigaction(SIGTERM, &sa, 0);
        struct sigaction q;
        sigaction(SIGUSR1, 0, &q);
        if (q.sa_sigaction != with_info || !(q.sa_flags & SA_SIGINFO) ||
            !(q.sa_flags & SA_RESTART) || !sigismember(&q.sa_mask, SIGUSR2) ||
            sigismember(&q.sa_mask, SIGHUP)) {
            printf("query of SIGUSR1 differs: flags %#x\n", q.sa_flags);
            return 2;
        }
    } else if (strcmp(mode, "signal") == 0) {
        signal(SIGUSR1, plain);
        signal(SIGTERM, plain);
        if (signal(SIGUSR1, plain) != plain) {
            printf("signal() did not return the handler\n");
            return 2;
        }
    } else if (wait) {
        sigprocmask(SIG_BLOCK, &set, 0);
    } else {
        fprintf(stderr, "usage: count_signals siginfo|signal|wait\n");
        return 2;
    }
    printf("ready %d\n", (int)getpid());
    fflush(stdout);
    double until = 0;
    for (;;) {
        if (terms && until == 0) until = now() + 0.8;
        if (until != 0 && now() > until) break;
        if (wait) {
            siginfo_t info;
            struct timespec t = {0, 10 * 1000 * 1000};
            int sig = sigtimedwait(&set, &info, &t);
            if (sig > 0) record(sig, info.si_code, info.si_pid);
        } else {
            nap();
        }
    }
    int usr1 = 0, term = 0;
    for (int i = 0; i < n; i++) {
        const char *name = sigs[i] == SIGUSR1 ? "usr1" : "term";
        printf("%s code %d pid %d\n", name, codes[i], pids[i]);
        if (sigs[i] == SIGUSR1) usr1++; else term++;
    }
    if (strcmp(mode, "siginfo") == 0) {
        /* SIGTERM's SA_RESETHAND: the default action once it ran. */
        struct sigaction q;
        sigaction(SIGTERM, 0, &q);
        printf("term now %s\n", q.sa_handler == SIG_DFL ? "default" : "handled");
    }
    printf("usr1 %d term %d\n", usr1, term);
    return 0;
}
