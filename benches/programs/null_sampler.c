/* null_sampler: the floor of mem:soft's overhead. An LD_PRELOAD library
 * that opens the same per-thread task-clock perf event as hpcrun-rs's
 * preload library (period NULL_SAMPLER_PERIOD_NS, default 500000), with the
 * same delivery (a real-time signal to the thread via F_SETSIG +
 * F_SETOWN_EX/F_OWNER_TID), and a handler that only counts. What it costs
 * is the kernel's timer sampling and signal delivery, which no handler can
 * avoid. Main thread only (the overhead harness's workloads that matter
 * here are single-threaded).
 *
 * Build: gcc -O2 -shared -fPIC -o libnull_sampler.so null_sampler.c
 * Run:   LD_PRELOAD=./libnull_sampler.so ./abc 30   (prints the count to stderr)
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
#include <unistd.h>

static volatile unsigned long samples;

static void on_sample(int sig, siginfo_t *info, void *ctx) {
    (void)sig, (void)info, (void)ctx;
    samples++;
}

__attribute__((constructor)) static void start(void) {
    const char *p = getenv("NULL_SAMPLER_PERIOD_NS");
    unsigned long period = p ? strtoul(p, NULL, 10) : 500000;
    int sig = SIGRTMIN + 4;
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = on_sample;
    sa.sa_flags = SA_SIGINFO | SA_RESTART;
    sigemptyset(&sa.sa_mask);
    sigaction(sig, &sa, NULL);
    struct perf_event_attr attr;
    memset(&attr, 0, sizeof attr);
    attr.size = sizeof attr;
    attr.type = PERF_TYPE_SOFTWARE;
    attr.config = PERF_COUNT_SW_TASK_CLOCK;
    attr.sample_period = period;
    attr.exclude_kernel = 1;
    attr.exclude_hv = 1;
    attr.disabled = 1;
    int fd = (int)syscall(SYS_perf_event_open, &attr, 0, -1, -1, PERF_FLAG_FD_CLOEXEC);
    if (fd < 0) {
        perror("null_sampler: perf_event_open");
        return;
    }
    struct f_owner_ex owner = {F_OWNER_TID, (pid_t)syscall(SYS_gettid)};
    /* As hpcrun-rs/preload/src/ffi.rs open_task_clock. */
    fcntl(fd, F_SETFL, O_ASYNC | O_NONBLOCK);
    fcntl(fd, F_SETSIG, sig);
    fcntl(fd, F_SETOWN_EX, &owner);
    ioctl(fd, PERF_EVENT_IOC_RESET, 0);
    ioctl(fd, PERF_EVENT_IOC_ENABLE, 0);
}

__attribute__((destructor)) static void stop(void) {
    fprintf(stderr, "null_sampler: %lu samples\n", samples);
}
