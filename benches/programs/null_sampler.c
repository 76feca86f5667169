/* null_sampler: the floor of mem:soft's overhead. An LD_PRELOAD library
 * that starts, on every thread (the main thread at load time, every thread
 * that pthread_create starts as it begins), the same sample source as
 * hpcrun-rs's preload library, with the same delivery (a real-time signal
 * to that thread), and a handler that only counts. What it costs is the
 * kernel's timer sampling and signal delivery, which no handler can avoid.
 *
 * The source follows hpcrun-rs's --timer (NULL_SAMPLER_TIMER: auto,
 * cpu-timer or task-clock; auto: cpu-timer at periods of 1 ms or more),
 * period NULL_SAMPLER_PERIOD_NS (default 500000):
 *  - cpu-timer: a POSIX timer on the thread's user CPU time
 *    (CPUCLOCK_VIRT), SIGEV_THREAD_ID (hpcrun-rs/preload/src/sys/timer.rs);
 *  - task-clock: a per-thread task-clock perf event, F_SETSIG +
 *    F_SETOWN_EX/F_OWNER_TID, running free, enabled once (hpcrun-rs limits
 *    it to one overflow at a time only after a handler slower than a
 *    quarter of the period, which an empty handler never is:
 *    hpcrun-rs/preload/src/sys/perf.rs open_task_clock, handler.rs
 *    keep_clock_running).
 *
 * Build: gcc -O2 -shared -fPIC -o libnull_sampler.so null_sampler.c -ldl
 * Run:   LD_PRELOAD=./libnull_sampler.so ./abc 30   (prints the count to stderr)
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/perf_event.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

static unsigned long samples;   /* atomic adds */
static unsigned long overruns;  /* periods beyond one per timer signal */
static int cpu_timer;           /* 1: POSIX CPU-time timer, 0: task-clock */
static unsigned long threads;   /* threads that sample */
static unsigned long period = 500000;
static int sig;
static pthread_key_t fd_key;

static void on_sample(int s, siginfo_t *info, void *ctx) {
    (void)s, (void)ctx;
    int saved = errno;
    __atomic_fetch_add(&samples, 1, __ATOMIC_RELAXED);
    if (info->si_code == SI_TIMER && info->si_overrun > 0)
        __atomic_fetch_add(&overruns, (unsigned long)info->si_overrun, __ATOMIC_RELAXED);
    errno = saved;
}

/* Starts the calling thread's POSIX timer on its user CPU time. */
static void start_cpu_timer(void) {
    pid_t tid = (pid_t)syscall(SYS_gettid);
    struct sigevent ev;
    memset(&ev, 0, sizeof ev);
    ev.sigev_notify = SIGEV_THREAD_ID;
    ev.sigev_signo = sig;
    ev._sigev_un._tid = tid;
    /* CPUCLOCK_VIRT | CPUCLOCK_PERTHREAD_MASK, tid inverted << 3 */
    clockid_t clock = (clockid_t)((~(int)tid) << 3) | 5;
    int id = -1;
    if (syscall(SYS_timer_create, clock, &ev, &id) != 0) {
        perror("null_sampler: timer_create");
        return;
    }
    struct itimerspec its;
    its.it_interval.tv_sec = (time_t)(period / 1000000000UL);
    its.it_interval.tv_nsec = (long)(period % 1000000000UL);
    its.it_value = its.it_interval;
    syscall(SYS_timer_settime, id, 0, &its, NULL);
    pthread_setspecific(fd_key, (void *)(long)(id + 1));
    __atomic_fetch_add(&threads, 1, __ATOMIC_RELAXED);
}

/* Opens and arms the calling thread's event. */
static void start_thread(void) {
    if (cpu_timer) {
        start_cpu_timer();
        return;
    }
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
    fcntl(fd, F_SETFL, O_ASYNC | O_NONBLOCK);
    fcntl(fd, F_SETSIG, sig);
    fcntl(fd, F_SETOWN_EX, &owner);
    ioctl(fd, PERF_EVENT_IOC_RESET, 0);
    pthread_setspecific(fd_key, (void *)(long)(fd + 1));
    __atomic_fetch_add(&threads, 1, __ATOMIC_RELAXED);
    ioctl(fd, PERF_EVENT_IOC_ENABLE, 0);
}

/* At thread exit (return or pthread_exit): stop and close its event. */
static void stop_thread(void *value) {
    int fd = (int)(long)value - 1;
    if (fd >= 0 && cpu_timer) {
        syscall(SYS_timer_delete, fd);
    } else if (fd >= 0) {
        ioctl(fd, PERF_EVENT_IOC_DISABLE, 0);
        close(fd);
    }
}

struct start {
    void *(*routine)(void *);
    void *arg;
};

static void *trampoline(void *p) {
    struct start s = *(struct start *)p;
    free(p);
    start_thread();
    return s.routine(s.arg);
}

int pthread_create(pthread_t *t, const pthread_attr_t *attr, void *(*routine)(void *), void *arg) {
    static int (*real)(pthread_t *, const pthread_attr_t *, void *(*)(void *), void *);
    if (!real)
        real = dlsym(RTLD_NEXT, "pthread_create");
    struct start *s = malloc(sizeof *s);
    if (!s)
        return real(t, attr, routine, arg);
    s->routine = routine;
    s->arg = arg;
    int r = real(t, attr, trampoline, s);
    if (r != 0)
        free(s);
    return r;
}

__attribute__((constructor)) static void start(void) {
    const char *p = getenv("NULL_SAMPLER_PERIOD_NS");
    if (p)
        period = strtoul(p, NULL, 10);
    const char *t = getenv("NULL_SAMPLER_TIMER");
    if (t && strcmp(t, "cpu-timer") == 0)
        cpu_timer = 1;
    else if (t && strcmp(t, "task-clock") == 0)
        cpu_timer = 0;
    else
        cpu_timer = period >= 1000000UL;
    sig = SIGRTMIN + 4;
    pthread_key_create(&fd_key, stop_thread);
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = on_sample;
    sa.sa_flags = SA_SIGINFO | SA_RESTART;
    sigemptyset(&sa.sa_mask);
    sigaction(sig, &sa, NULL);
    start_thread();
}

__attribute__((destructor)) static void stop(void) {
    fprintf(stderr, "null_sampler: %lu samples (%lu threads, %s, %lu overruns)\n",
            __atomic_load_n(&samples, __ATOMIC_RELAXED),
            __atomic_load_n(&threads, __ATOMIC_RELAXED),
            cpu_timer ? "cpu-timer" : "task-clock",
            __atomic_load_n(&overruns, __ATOMIC_RELAXED));
}
