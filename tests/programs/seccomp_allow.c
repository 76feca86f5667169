/* A program that installs an allow-list seccomp filter (raw BPF) after
 * start: the calls glibc needs for malloc, a thread and exit are
 * allowed, anything else kills the process (SECCOMP_RET_KILL_PROCESS).
 * Then it allocates, runs a thread and writes its result with write(2).
 * Exits 0. */
#define _GNU_SOURCE
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <pthread.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#define ALLOW(nr)                                       \
    BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, (nr), 0, 1),    \
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW)

static void allow_list(void) {
    struct sock_filter code[] = {
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch)),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, AUDIT_ARCH_X86_64, 1, 0),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_KILL_PROCESS),
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
        ALLOW(__NR_read),
        ALLOW(__NR_write),
        ALLOW(__NR_exit),
        ALLOW(__NR_exit_group),
        ALLOW(__NR_futex),
        ALLOW(__NR_rt_sigreturn),
        ALLOW(__NR_brk),
        ALLOW(__NR_mmap),
        ALLOW(__NR_munmap),
        ALLOW(__NR_mprotect),
        ALLOW(__NR_madvise),
        ALLOW(__NR_clone),
        ALLOW(__NR_clone3),
        ALLOW(__NR_rseq),
        ALLOW(__NR_set_robust_list),
        ALLOW(__NR_rt_sigprocmask),
        ALLOW(__NR_rt_sigaction),
        ALLOW(__NR_getrandom),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_KILL_PROCESS),
    };
    struct sock_fprog prog = {sizeof code / sizeof code[0], code};
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 ||
        prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog) != 0) {
        perror("seccomp");
        exit(2);
    }
}

static __attribute__((noipa)) double work(double *a, long n, int reps) {
    double s = 0;
    for (int r = 0; r < reps; r++)
        for (long i = 0; i < n; i++)
            s += a[i];
    return s;
}

static void *worker(void *arg) {
    long n = 1 << 20;
    double *a = malloc(n * sizeof *a);
    for (long i = 0; i < n; i++)
        a[i] = 1.0;
    *(double *)arg = work(a, n, 50);
    free(a);
    return NULL;
}

static void say(const char *s) {
    ssize_t left = strlen(s);
    while (left > 0) {
        ssize_t n = write(1, s, left);
        if (n <= 0)
            return;
        s += n;
        left -= n;
    }
}

int main(void) {
    say("start\n");
    allow_list();
    long n = 4 << 20;
    double *a = malloc(n * sizeof *a);
    for (long i = 0; i < n; i++)
        a[i] = 0.5;
    double s = work(a, n, 20);
    double w = 0;
    pthread_t t;
    int rc = pthread_create(&t, NULL, worker, &w);
    if (rc == 0)
        pthread_join(t, NULL);
    free(a);
    char line[128];
    snprintf(line, sizeof line, "sum %.1f thread %s %.1f\n", s, rc == 0 ? "ran" : "failed", w);
    say(line);
    return 0;
}
