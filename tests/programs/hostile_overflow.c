/* A stack overflow caught the way Rust's runtime and many C programs do:
 * a SIGSEGV handler on a small alternate stack (8 KiB) that reports and
 * calls abort(). The process must end by SIGABRT as natively, with its
 * message. */
#define _GNU_SOURCE
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void on_segv(int s) {
    (void)s;
    static const char msg[] = "stack overflow, aborting\n";
    write(2, msg, sizeof msg - 1);
    abort();
}

static __attribute__((noipa)) long deep(long n) {
    volatile char pad[512];
    memset((char *)pad, (int)n, sizeof pad);
    return deep(n + 1) + pad[n % 512];
}

static __attribute__((noipa)) double work(long n) {
    double s = 0;
    for (long i = 1; i < n; i++)
        s += 1.0 / (double)i;
    return s;
}

int main(void) {
    stack_t ss = {.ss_sp = malloc(8192), .ss_size = 8192, .ss_flags = 0};
    if (sigaltstack(&ss, NULL) != 0) {
        perror("sigaltstack");
        return 2;
    }
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_segv;
    sa.sa_flags = SA_ONSTACK;
    sigaction(SIGSEGV, &sa, NULL);
    printf("work %.3f\n", work(20000000));
    fflush(stdout);
    return (int)deep(0);
}
