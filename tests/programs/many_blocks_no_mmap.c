/* A program that runs out of new mappings with millions of live blocks:
 * it starts 4 threads (their stacks are mappings), then installs a
 * seccomp filter under which mmap and mremap fail with EPERM (as a sandbox or an
 * exhausted address space would make it fail), then the threads and the
 * main thread allocate 2 million small blocks (16 to 112 bytes, glibc
 * serves them from brk) from 64 allocation sites, all live at once,
 * and sum them. Prints the sum and the blocks it got; exits 0.
 *
 * Build: gcc -O2 -g -pthread many_blocks_no_mmap.c */
#define _GNU_SOURCE
#include <errno.h>
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
#define BLOCKS (2000000 / (THREADS + 1))

/* 64 allocation sites: each a function of its own. */
#define SITE(n)                                                              \
    static __attribute__((noinline)) long *site##n(long i) {                 \
        long *b = malloc(16 + 16 * ((n + i) % 7));                           \
        if (b)                                                               \
            b[0] = i + n;                                                    \
        return b;                                                            \
    }
#define SITES8(n) SITE(n##0) SITE(n##1) SITE(n##2) SITE(n##3) SITE(n##4) SITE(n##5) SITE(n##6) SITE(n##7)
SITES8(1) SITES8(2) SITES8(3) SITES8(4) SITES8(5) SITES8(6) SITES8(7) SITES8(8)
#define REF8(n) site##n##0, site##n##1, site##n##2, site##n##3, site##n##4, site##n##5, site##n##6, site##n##7
static long *(*const sites[64])(long) = {REF8(1), REF8(2), REF8(3), REF8(4),
                                         REF8(5), REF8(6), REF8(7), REF8(8)};

static pthread_barrier_t go;

struct work {
    long got;
    long sum;
};

static void allocate(struct work *w) {
    long **blocks = calloc(BLOCKS, sizeof *blocks);
    if (!blocks)
        return;
    for (long i = 0; i < BLOCKS; i++) {
        blocks[i] = sites[i % 64](i);
        if (blocks[i])
            w->got++;
    }
    for (long i = 0; i < BLOCKS; i++)
        if (blocks[i])
            w->sum += blocks[i][0];
    for (long i = 0; i < BLOCKS; i++)
        free(blocks[i]);
    free(blocks);
}

static void *worker(void *arg) {
    pthread_barrier_wait(&go);
    allocate(arg);
    return NULL;
}

int main(void) {
    pthread_t t[THREADS];
    struct work w[THREADS + 1] = {{0}};
    pthread_barrier_init(&go, NULL, THREADS + 1);
    for (int i = 0; i < THREADS; i++)
        pthread_create(&t[i], NULL, worker, &w[i]);
    deny_mmap(DENY_MREMAP);
    pthread_barrier_wait(&go);
    allocate(&w[THREADS]);
    for (int i = 0; i < THREADS; i++)
        pthread_join(t[i], NULL);
    long got = 0, sum = 0;
    for (int i = 0; i <= THREADS; i++) {
        got += w[i].got;
        sum += w[i].sum;
    }
    printf("blocks %ld sum %ld\n", got, sum);
    return 0;
}
