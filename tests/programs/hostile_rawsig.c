/* Takes SIGRTMIN+4 (the profiler's sample signal) with a raw rt_sigaction
 * system call, past libc, then works with a second thread and allocates.
 * Prints on stderr how many of them it received (natively none). */
#define _GNU_SOURCE
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

static volatile long got;
static void on_rt(int s) { (void)s; got++; }

struct kernel_sigaction {
    void (*handler)(int);
    unsigned long flags;
    void (*restorer)(void);
    unsigned long mask;
};
extern void restore_rt(void) __asm__("__restore_rt");
__asm__(".text\n__restore_rt:\n mov $15, %rax\n syscall\n");

static __attribute__((noipa)) double work(long n) {
    double s = 0;
    for (long i = 1; i < n; i++) {
        if (i % 100000 == 0) {
            char *p = malloc(4096);
            p[0] = (char)i;
            s += p[0] * 0.0;
            free(p);
        }
        s += 1.0 / (double)i;
    }
    return s;
}

static void *worker(void *arg) {
    *(double *)arg = work(60000000);
    return NULL;
}

int main(void) {
    struct kernel_sigaction ka;
    memset(&ka, 0, sizeof ka);
    ka.handler = on_rt;
    ka.flags = 0x04000000 /* SA_RESTORER */ | SA_RESTART;
    ka.restorer = restore_rt;
    if (syscall(SYS_rt_sigaction, SIGRTMIN + 4, &ka, NULL, 8) != 0) {
        perror("rt_sigaction");
        return 2;
    }
    double w = 0;
    pthread_t t;
    pthread_create(&t, NULL, worker, &w);
    double s = work(60000000);
    pthread_join(t, NULL);
    printf("work %.3f %.3f\n", s, w);
    fprintf(stderr, "received %ld\n", got);
    return 0;
}
