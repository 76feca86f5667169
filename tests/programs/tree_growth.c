/* A program that fits its address-space limit (`ulimit -v`) with a few
 * MiB to spare, then reaches ever new call paths and allocation sites:
 * natively it needs little more memory, measured the profiler's
 * per-thread trees (call paths, allocation sites, small blocks) grow
 * until the limit stops them.
 *
 * Build: gcc -O2 -g -pthread -o tree_growth tree_growth.c
 * Run:   sh -c 'ulimit -v 400000 && exec ./tree_growth 10 4 40'
 * Args:  HEADROOM_MIB (default 10) THREADS (default 4) PHASES (default 40)
 *
 * 1. mallopt(M_ARENA_MAX, 1): every thread allocates from the main
 *    arena (a thread arena would reserve 64 MiB of address space when
 *    the timing makes two threads meet in malloc).
 * 2. Starts THREADS workers (each with a 1 MiB buffer) and waits until
 *    every one runs; they wait in turn.
 * 3. Takes every byte of address space its limit leaves, less
 *    HEADROOM_MIB MiB (RLIMIT_AS less the VmSize of /proc/self/statm),
 *    in one block it writes (without a limit: 64 MiB).
 * 4. Each worker runs PHASES phases. A phase walks 256 call paths of
 *    DEPTH calls among 8 functions (a counter's octal digits choose
 *    them): each path's leaf allocates a small block (16 to 79 bytes)
 *    that it keeps, from a call path of its own (about 10,000 distinct
 *    allocation paths a thread, 4,096 distinct in the innermost frames),
 *    and sums part of the buffer. Then it walks further paths, never
 *    walked before, without allocating and outside the answer, until the
 *    phase used SPIN_NS of its thread's CPU time (CLOCK_THREAD_CPUTIME_ID):
 *    a profiler's samples land on new paths all along.
 * 5. Prints "blocks N sum S": the allocations that succeeded and a
 *    checksum of the allocating walks, the same in every run; exits 0
 *    if every allocation succeeded.
 */
#define _GNU_SOURCE
#include <malloc.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#define DEPTH 16
#define PATHS_PER_PHASE 256
#define BUF_WORDS (1 << 17) /* 1 MiB of uint64_t */
#define SPIN_NS 25000000L

struct worker {
    pthread_t thread;
    int index;
    int phases;
    uint64_t *buf;
    void **blocks;
    long got;
    uint64_t sum;
};

static pthread_barrier_t ready, start;

typedef uint64_t (*step_fn)(struct worker *, int, uint64_t, int);
static step_fn steps[8];

/* The leaf: allocate (when asked) and sum a slice of the buffer. */
__attribute__((noinline)) static uint64_t leaf(struct worker *w, uint64_t c, int alloc) {
    uint64_t s = 0;
    size_t words = alloc ? 512 : 4096;
    size_t from = (c * 4099) & (BUF_WORDS - 1) & ~(size_t)4095;
    for (size_t i = 0; i < words; i++) s += w->buf[from + i] ^ (s >> 7);
    if (alloc) {
        size_t bytes = 16 + (c >> (3 * (DEPTH - 4))) % 64; /* 16 + a % 64 */
        char *p = malloc(bytes);
        if (p) {
            memset(p, (int)(c & 0xff), bytes);
            w->blocks[w->got++] = p;
            s += (uint64_t)p[bytes - 1];
        }
    }
    return s;
}

/* One step of a walk: the digit of `c` at `level` picks the next
 * function; the addition after the call keeps it from being a tail
 * call (every frame stays on the stack). */
#define STEP(k)                                                                        \
    __attribute__((noinline)) static uint64_t step##k(struct worker *w, int level,     \
                                                      uint64_t c, int alloc) {          \
        uint64_t r;                                                                    \
        if (level == DEPTH)                                                            \
            r = leaf(w, c, alloc);                                                     \
        else                                                                           \
            r = steps[(c >> (3 * level)) & 7](w, level + 1, c, alloc);                 \
        __asm__ volatile("" : "+r"(r));                                                \
        return r * (k + 3) + (uint64_t)level;                                          \
    }
STEP(0)
STEP(1)
STEP(2)
STEP(3)
STEP(4)
STEP(5)
STEP(6)
STEP(7)

static uint64_t walk(struct worker *w, uint64_t c, int alloc) {
    return steps[c & 7](w, 1, c, alloc);
}

static long thread_cpu_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return ts.tv_sec * 1000000000L + ts.tv_nsec;
}

static void *work(void *arg) {
    struct worker *w = arg;
    pthread_barrier_wait(&ready);
    pthread_barrier_wait(&start);
    /* Paths that are walked only to spin: octal counters whose lowest
     * digits (the frames nearest the thread's root) change fastest. */
    uint64_t spin = 1;
    for (int phase = 0; phase < w->phases; phase++) {
        long t0 = thread_cpu_ns();
        for (int i = 0; i < PATHS_PER_PHASE; i++) {
            /* Allocating paths: their innermost frames (the top digits)
             * differ from one block to the next, so that each has a
             * site of its own. */
            uint64_t a = (uint64_t)phase * PATHS_PER_PHASE + i;
            uint64_t c = (a % 4096) << (3 * (DEPTH - 4)) | a / 4096 | (uint64_t)w->index << 9;
            w->sum = w->sum * 31 + walk(w, c, 1);
        }
        while (thread_cpu_ns() - t0 < SPIN_NS) {
            uint64_t r = walk(w, spin++ | 1ULL << 40, 0);
            __asm__ volatile("" : : "r"(r));
        }
    }
    return NULL;
}

/* VmSize in bytes (first field of /proc/self/statm, in pages). */
static long vm_bytes(void) {
    FILE *f = fopen("/proc/self/statm", "r");
    long pages = 0;
    if (f) {
        if (fscanf(f, "%ld", &pages) != 1) pages = 0;
        fclose(f);
    }
    return pages * 4096;
}

int main(int argc, char **argv) {
    long headroom = (argc > 1 ? atol(argv[1]) : 10) << 20;
    int threads = argc > 2 ? atoi(argv[2]) : 4;
    int phases = argc > 3 ? atoi(argv[3]) : 40;
    if (threads < 1 || threads > 64 || phases < 1) return 2;
    steps[0] = step0, steps[1] = step1, steps[2] = step2, steps[3] = step3;
    steps[4] = step4, steps[5] = step5, steps[6] = step6, steps[7] = step7;
    mallopt(M_ARENA_MAX, 1);
    pthread_barrier_init(&ready, NULL, threads + 1);
    pthread_barrier_init(&start, NULL, threads + 1);
    struct worker *w = calloc(threads, sizeof *w);
    int started = 0;
    for (int t = 0; t < threads; t++) {
        w[t].index = t;
        w[t].phases = phases;
        w[t].buf = malloc(BUF_WORDS * sizeof(uint64_t));
        w[t].blocks = calloc((size_t)phases * PATHS_PER_PHASE, sizeof(void *));
        if (!w[t].buf || !w[t].blocks) return 3;
        for (long i = 0; i < BUF_WORDS; i++) w[t].buf[i] = (uint64_t)i * 2654435761u + t;
        if (pthread_create(&w[t].thread, NULL, work, &w[t]) != 0) return 4;
        started++;
    }
    pthread_barrier_wait(&ready); /* every worker runs */
    struct rlimit rl;
    long take = 64L << 20;
    if (getrlimit(RLIMIT_AS, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY)
        take = (long)rl.rlim_cur - vm_bytes() - headroom;
    char *reserved = take > 0 ? malloc(take) : NULL;
    if (!reserved) {
        fprintf(stderr, "cannot take %ld bytes of address space\n", take);
        return 5;
    }
    memset(reserved, 1, take);
    /* (The block is used: the compiler must keep it.) */
    __asm__ volatile("" : : "r"(reserved) : "memory");
    pthread_barrier_wait(&start);
    long got = 0, want = (long)threads * phases * PATHS_PER_PHASE;
    uint64_t sum = 0;
    for (int t = 0; t < started; t++) {
        pthread_join(w[t].thread, NULL);
        got += w[t].got;
        sum = sum * 1000003 + w[t].sum;
        for (long i = 0; i < w[t].got; i++) free(w[t].blocks[i]);
    }
    free(reserved);
    printf("blocks %ld sum %016llx\n", got, (unsigned long long)sum);
    return got == want ? 0 : 1;
}
