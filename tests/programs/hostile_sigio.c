/* SIGIO is the program's: its disposition as queried, its handler, and
 * its default action (terminate) when the program sends it to itself. */
#define _GNU_SOURCE
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static volatile sig_atomic_t got;
static void on_io(int s) { got += s == SIGIO; }

static __attribute__((noipa)) double work(long n) {
    double s = 0;
    for (long i = 1; i < n; i++)
        s += 1.0 / (double)i;
    return s;
}

int main(int argc, char **argv) {
    struct sigaction old;
    memset(&old, 0, sizeof old);
    sigaction(SIGIO, NULL, &old);
    printf("default %d\n", old.sa_handler == SIG_DFL);
    printf("work %.3f\n", work(20000000));
    if (argc > 1 && strcmp(argv[1], "handler") == 0) {
        void (*prev)(int) = signal(SIGIO, on_io);
        printf("signal returned default %d\n", prev == SIG_DFL);
        for (int i = 0; i < 3; i++) {
            kill(getpid(), SIGIO);
            printf("work %.3f\n", work(5000000));
        }
        sigaction(SIGIO, NULL, &old);
        printf("handler %d got %d\n", old.sa_handler == on_io, (int)got);
        signal(SIGIO, SIG_DFL);
    }
    fflush(stdout);
    kill(getpid(), SIGIO);
    /* Not reached natively: SIGIO's default action ends the process. */
    printf("still running\n");
    return 0;
}
