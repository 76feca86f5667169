/* A program whose call-path trees keep growing after the kernel refuses
 * new mappings: it starts 3 threads, allocates one 2 MiB array per
 * thread (mapped, so tracked as heap objects), then installs a seccomp
 * filter on every thread (TSYNC) under which mmap and mremap fail with
 * EPERM (as a sandbox or an exhausted address space would make them
 * fail). Then every thread walks PATHS pseudo-random call paths 40 calls
 * deep (two functions that call each other or themselves from four call
 * sites, chosen by the bits of the path's number) and at the end of each
 * allocates a small block (from the thread's malloc arena, made before
 * the filter), sums a stretch of its array into it and frees it. Nearly
 * every sample lands on a call path no sample had before: the trees grow
 * by tens of thousands of nodes. Prints each thread's sum; exits 0.
 *
 * Build: gcc -O2 -g -pthread deep_paths_no_mmap.c */
#define _GNU_SOURCE
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <pthread.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "deny_mmap.h"

#define THREADS 4
#define PATHS 40000
#define DEPTH 40
#define ARRAY (256 * 1024)
#define STRETCH 16384

/* The end of a path: a small block from brk, a stretch of the array
 * summed into it. */
static __attribute__((noinline)) unsigned long leaf(unsigned long bits, const long *data) {
    unsigned long *block = malloc(16 + 8 * (bits % 8));
    if (!block)
        return 0;
    const long *from = data + bits % (ARRAY - STRETCH);
    block[0] = 0;
    for (int i = 0; i < STRETCH; i++)
        block[0] += (unsigned long)from[i] ^ bits >> (i & 31);
    unsigned long sum = block[0];
    free(block);
    return sum;
}

static unsigned long walk_a(int depth, unsigned long bits, const long *data);
static unsigned long walk_b(int depth, unsigned long bits, const long *data);

/* One step down the path: the low bit picks the callee; the addition
 * after the call keeps each call a frame of its own (no tail call). */
#define STEP                                                                 \
    if (depth == 0)                                                          \
        return leaf(bits, data);                                             \
    unsigned long next = bits >> 1 | bits << 63;                             \
    unsigned long r;                                                                \
    if (bits & 1)                                                            \
        r = walk_a(depth - 1, next, data);                                   \
    else                                                                     \
        r = walk_b(depth - 1, next, data);                                   \
    return r + depth;

static __attribute__((noinline)) unsigned long walk_a(int depth, unsigned long bits, const long *data) {
    STEP
}

static __attribute__((noinline)) unsigned long walk_b(int depth, unsigned long bits, const long *data) {
    STEP
}

static pthread_barrier_t ready, go;

struct work {
    long *data;
    unsigned long seed;
    unsigned long sum;
};

static void walk_all(struct work *w) {
    unsigned long x = w->seed;
    for (long i = 0; i < PATHS; i++) {
        /* A 64-bit linear congruential generator: the paths' bits. */
        x = x * 6364136223846793005UL + 1442695040888963407UL;
        w->sum += walk_a(DEPTH, x ^ x >> 29, w->data);
    }
}

static void *worker(void *arg) {
    struct work *w = arg;
    /* This thread's malloc arena, while mmap still works. */
    void *volatile first = malloc(64);
    free(first);
    pthread_barrier_wait(&ready);
    pthread_barrier_wait(&go);
    walk_all(w);
    return NULL;
}

int main(void) {
    pthread_t t[THREADS - 1];
    struct work w[THREADS];
    for (int i = 0; i < THREADS; i++) {
        w[i].data = malloc(ARRAY * sizeof(long));
        if (!w[i].data)
            return 3;
        for (long j = 0; j < ARRAY; j++)
            w[i].data[j] = j * (i + 1);
        w[i].seed = 12345 + i;
        w[i].sum = 0;
    }
    pthread_barrier_init(&ready, NULL, THREADS);
    pthread_barrier_init(&go, NULL, THREADS);
    for (int i = 0; i < THREADS - 1; i++)
        if (pthread_create(&t[i], NULL, worker, &w[i]) != 0)
            return 4;
    pthread_barrier_wait(&ready);
    deny_mmap(DENY_MREMAP | DENY_ALL_THREADS);
    pthread_barrier_wait(&go);
    walk_all(&w[THREADS - 1]);
    for (int i = 0; i < THREADS - 1; i++)
        pthread_join(t[i], NULL);
    for (int i = 0; i < THREADS; i++)
        printf("thread %d sum %lu\n", i, w[i].sum);
    return 0;
}
