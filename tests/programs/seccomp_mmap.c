/* A program that forbids itself new mappings: after start it installs a
 * seccomp filter (raw BPF) under which mmap fails with EPERM, then
 * allocates 64 MiB in 1 KiB blocks (glibc serves them from brk) and runs
 * a thread on a stack of its own. Prints its sums; exits 0. */
#define _GNU_SOURCE
#include <errno.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <pthread.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "deny_mmap.h"

static __attribute__((noipa)) long sweep(long **blocks, long n, long words) {
    long s = 0;
    for (long i = 0; i < n; i++)
        for (long j = 0; j < words; j++)
            s += blocks[i][j];
    return s;
}

static void *worker(void *arg) {
    /* Its blocks may be refused (glibc's new arena for a thread is a
     * mapping); the count is printed, whatever it is natively. */
    long *out = arg;
    long got = 0;
    for (int i = 0; i < 1000; i++) {
        long *b = malloc(256);
        if (!b)
            continue;
        for (int j = 0; j < 32; j++)
            b[j] = i + j;
        got += b[31] == i + 31;
        free(b);
    }
    *out = got;
    return NULL;
}

int main(void) {
    printf("start\n");
    fflush(stdout);
    deny_mmap(0);
    void *m = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    printf("mmap %s\n", m == MAP_FAILED && errno == EPERM ? "EPERM" : "allowed");
    enum { BLOCK = 1024, COUNT = 64 << 10 };
    long words = BLOCK / sizeof(long);
    long **blocks = malloc(COUNT * sizeof *blocks);
    long got = 0;
    for (long i = 0; blocks && i < COUNT; i++) {
        blocks[i] = malloc(BLOCK);
        if (!blocks[i])
            break;
        for (long j = 0; j < words; j++)
            blocks[i][j] = (i + j) & 7;
        got++;
    }
    long sum = 0;
    for (int r = 0; r < 20; r++)
        sum += sweep(blocks, got, words);
    printf("blocks %ld sum %ld\n", got, sum);
    /* A thread on a stack of the program's own (a new stack would need
     * mmap). */
    size_t stack_bytes = 1 << 20;
    void *stack = NULL;
    if (posix_memalign(&stack, 4096, stack_bytes) != 0) {
        printf("no stack\n");
        return 1;
    }
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setstack(&attr, stack, stack_bytes);
    pthread_t t;
    long out = 0;
    int rc = pthread_create(&t, &attr, worker, &out);
    if (rc == 0)
        pthread_join(t, NULL);
    printf("thread %s, %ld blocks\n", rc == 0 ? "ran" : "failed", out);
    for (long i = 0; i < got; i++)
        free(blocks[i]);
    free(blocks);
    return 0;
}
