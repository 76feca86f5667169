/* Small and foreign stacks: threads with 16 KiB and 32 KiB stacks (most
 * of the 32 KiB in use), and a ucontext coroutine on a 16 KiB stack with
 * a guard page below it (Argobots, Qthreads and Boost.Context style),
 * all busy (and allocating down there) while the profiler samples them.
 * Built with -Wl,-z,now (tests/hostile.rs): lazy binding would save the
 * whole xsave state (11 KiB with AMX) 24 KiB deep in a 32 KiB stack. */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <ucontext.h>
#include <unistd.h>

#define N (1L << 18)
static double *data;

static __attribute__((noipa)) double sweep(const double *a, int rounds) {
    double s = 0;
    for (int r = 0; r < rounds; r++)
        for (long i = 0; i < N; i++)
            s += a[i] * (double)(r + 1);
    return s;
}

/* Uses `depth` KiB of its stack, then sweeps from there. */
static __attribute__((noipa)) double deep(int depth, int rounds) {
    volatile char pad[1024];
    memset((char *)pad, depth, sizeof pad);
    if (depth > 1)
        return deep(depth - 1, rounds) + pad[7] * 0.0;
    /* A tracked allocation down there: the profiler unwinds its call
     * path. */
    double *block = malloc(1 << 20);
    block[0] = pad[3];
    double r = sweep(data, rounds) + block[0] * 0.0;
    free(block);
    return r;
}

struct job {
    int depth;
    double out;
};

static void *thread_main(void *arg) {
    struct job *j = arg;
    j->out = deep(j->depth, 300);
    return NULL;
}

static ucontext_t main_ctx, co_ctx;
static double co_out;

static void coroutine(void) {
    co_out = deep(8, 600);
    swapcontext(&co_ctx, &main_ctx);
}

int main(void) {
    data = malloc(N * sizeof *data);
    for (long i = 0; i < N; i++)
        data[i] = 1.0 / (double)(i % 7 + 1);
    /* 16 KiB stacks using 4 KiB, 32 KiB stacks using 24 KiB. */
    size_t sizes[4] = {16 << 10, 16 << 10, 32 << 10, 32 << 10};
    int depths[4] = {4, 4, 24, 24};
    pthread_t t[4];
    struct job jobs[4];
    for (int i = 0; i < 4; i++) {
        pthread_attr_t attr;
        pthread_attr_init(&attr);
        if (pthread_attr_setstacksize(&attr, sizes[i]) != 0) {
            fprintf(stderr, "stack size\n");
            return 2;
        }
        jobs[i].depth = depths[i];
        if (pthread_create(&t[i], &attr, thread_main, &jobs[i]) != 0) {
            fprintf(stderr, "pthread_create\n");
            return 3;
        }
        pthread_attr_destroy(&attr);
    }
    /* The coroutine: 16 KiB under a guard page. */
    long page = sysconf(_SC_PAGESIZE);
    size_t size = 16 << 10;
    char *region = mmap(NULL, page + size, PROT_READ | PROT_WRITE,
                        MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (region == MAP_FAILED || mprotect(region, page, PROT_NONE) != 0) {
        perror("mmap");
        return 4;
    }
    getcontext(&co_ctx);
    co_ctx.uc_stack.ss_sp = region + page;
    co_ctx.uc_stack.ss_size = size;
    co_ctx.uc_link = &main_ctx;
    makecontext(&co_ctx, coroutine, 0);
    swapcontext(&main_ctx, &co_ctx);
    double total = co_out;
    for (int i = 0; i < 4; i++) {
        pthread_join(t[i], NULL);
        total += jobs[i].out;
    }
    printf("total %.3f\n", total);
    return 0;
}
