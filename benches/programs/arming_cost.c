/* arming_cost: what re-arming a task-clock sampling event costs inside the
 * sample handler, per sample (docs/PERFORMANCE.md, "Timer and signal").
 *
 * One thread, the same event as hpcrun-rs (software task-clock, period
 * 2 ms of its CPU time, a real-time signal to the thread through F_SETSIG
 * + F_SETOWN_EX), a 1.5e9-iteration register loop, and a handler that
 * does one of:
 *   0  ioctl(PERF_EVENT_IOC_REFRESH, 1)  (arm for one more overflow, at
 *      every sample)
 *   1  nothing (the event runs free: what hpcrun-rs does while its
 *      handler is fast)
 *   2  ioctl(PERF_EVENT_IOC_ENABLE) on the running event
 *   3  a trivial system call (getpid), for scale
 * and prints the mean time spent in the handler's body per sample.
 *
 * Build: gcc -O1 -o arming_cost arming_cost.c
 * Run:   for m in 0 1 2 3; do ./arming_cost $m; done
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <linux/perf_event.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

static int fd, mode;
static long samples;
static double total_ns;

static double now_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e9 + t.tv_nsec;
}

static void on_sample(int s, siginfo_t *info, void *ctx) {
    (void)s, (void)info, (void)ctx;
    double start = now_ns();
    if (mode == 0)
        ioctl(fd, PERF_EVENT_IOC_REFRESH, 1);
    else if (mode == 2)
        ioctl(fd, PERF_EVENT_IOC_ENABLE, 0);
    else if (mode == 3)
        syscall(SYS_getpid);
    total_ns += now_ns() - start;
    samples++;
}

int main(int argc, char **argv) {
    mode = argc > 1 ? atoi(argv[1]) : 0;
    struct perf_event_attr attr;
    memset(&attr, 0, sizeof attr);
    attr.size = sizeof attr;
    attr.type = PERF_TYPE_SOFTWARE;
    attr.config = PERF_COUNT_SW_TASK_CLOCK;
    attr.sample_period = 2000000;
    attr.disabled = 1;
    attr.exclude_kernel = 1;
    fd = (int)syscall(SYS_perf_event_open, &attr, 0, -1, -1, PERF_FLAG_FD_CLOEXEC);
    if (fd < 0) {
        perror("arming_cost: perf_event_open");
        return 1;
    }
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = on_sample;
    sa.sa_flags = SA_SIGINFO | SA_RESTART;
    sigaction(SIGRTMIN + 4, &sa, 0);
    struct f_owner_ex owner = {F_OWNER_TID, (pid_t)syscall(SYS_gettid)};
    fcntl(fd, F_SETFL, O_ASYNC);
    fcntl(fd, F_SETSIG, SIGRTMIN + 4);
    fcntl(fd, F_SETOWN_EX, &owner);
    if (mode == 0)
        ioctl(fd, PERF_EVENT_IOC_REFRESH, 1);
    else
        ioctl(fd, PERF_EVENT_IOC_ENABLE, 0);
    volatile double sink = 0;
    for (long i = 0; i < 1500000000L; i++)
        sink += i * 0.5;
    const char *what[] = {"REFRESH 1", "nothing", "ENABLE", "getpid"};
    printf("%-10s samples %ld, mean %.2f us in the handler's body\n", what[mode & 3], samples,
           samples ? total_ns / samples / 1000 : 0.0);
    return 0;
}
