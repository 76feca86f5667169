/* Memory mapped and unmapped behind the profiler's back, gone long before
 * the profile is written (as UCX attaches and detaches its System V
 * segments itself, at MPI_Init and MPI_Finalize):
 *
 * - "anon": 2 MiB of anonymous memory mapped with a raw mmap system call
 *   (syscall(SYS_mmap): the profiler's mmap hook does not see it) at a
 *   fixed, 2 MiB-aligned address far from other mappings
 *   (0x230000000000), read, then unmapped;
 * - "sysv": a 2 MiB System V segment (shmget IPC_PRIVATE) attached with
 *   the raw shmat system call at 0x240000000000, read, then detached
 *   (removed at once after the attach).
 *
 * Each is read for about 0.3 s of CPU time. Then the program computes in
 * registers for about 0.1 s and exits.
 *
 * MODE (argv[1]): "alloc": single-threaded, a small malloc and free after
 * each pass over the memory (a program that allocates now and then);
 * "thread": a second thread that waits until the end (the program is
 * multi-threaded), no allocation while the memory is read; "unmap":
 * single-threaded, no allocation, the memory unmapped with libc's munmap
 * and shmdt instead of the system calls.
 *
 * Prints the sums (exact in integers): the same output with and without
 * the profiler.
 *
 * Build: gcc -O2 -g unmapped_early.c -lpthread
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ipc.h>
#include <sys/mman.h>
#include <sys/shm.h>
#include <sys/syscall.h>
#include <unistd.h>

#define BYTES (2 * 1024 * 1024)
#define WORDS (BYTES / sizeof(uint64_t))
#define PASSES 1500

static int allocating;

static void die(const char *what)
{
    perror(what);
    exit(1);
}

__attribute__((noinline)) static uint64_t sum_words(const volatile uint64_t *a, size_t n,
                                                    long passes)
{
    uint64_t s = 0;
    for (long p = 0; p < passes; p++) {
        for (size_t i = 0; i < n; i++)
            s += a[i];
        if (allocating) {
            char *volatile b = malloc(32);
            if (!b)
                die("malloc");
            b[0] = (char)p;
            s += (uint64_t)b[0] & 0;
            free(b);
        }
    }
    return s;
}

static void fill(uint64_t *a)
{
    for (size_t i = 0; i < WORDS; i++)
        a[i] = i % 1000;
}

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t done_cond = PTHREAD_COND_INITIALIZER;
static int done;

static void *waiter(void *arg)
{
    (void)arg;
    pthread_mutex_lock(&lock);
    while (!done)
        pthread_cond_wait(&done_cond, &lock);
    pthread_mutex_unlock(&lock);
    return NULL;
}

int main(int argc, char **argv)
{
    if (argc < 2 || (strcmp(argv[1], "alloc") != 0 && strcmp(argv[1], "thread") != 0 &&
                     strcmp(argv[1], "unmap") != 0)) {
        fputs("usage: unmapped_early alloc|thread|unmap\n", stderr);
        return 2;
    }
    allocating = strcmp(argv[1], "alloc") == 0;
    int threaded = strcmp(argv[1], "thread") == 0;
    int libc_unmap = strcmp(argv[1], "unmap") == 0;
    pthread_t t;
    if (threaded && pthread_create(&t, NULL, waiter, NULL) != 0)
        die("pthread_create");

    /* Anonymous memory the hooks never see, gone before exit. */
    long p = syscall(SYS_mmap, 0x230000000000UL, BYTES, 3 /* PROT_READ|PROT_WRITE */,
                     0x22 /* MAP_PRIVATE|MAP_ANONYMOUS */, -1, 0);
    if (p < 0 && p > -4096)
        die("raw mmap");
    uint64_t *anon = (uint64_t *)p;
    fill(anon);
    uint64_t anon_sum = sum_words(anon, WORDS, PASSES);
    if ((libc_unmap ? munmap(anon, BYTES) : syscall(SYS_munmap, anon, BYTES)) != 0)
        die("munmap");

    /* A System V segment attached and detached by the system calls. */
    int id = shmget(IPC_PRIVATE, BYTES, IPC_CREAT | 0600);
    if (id < 0)
        die("shmget");
    long q = syscall(SYS_shmat, id, 0x240000000000UL, 0);
    if (q < 0 && q > -4096) {
        shmctl(id, IPC_RMID, NULL);
        die("raw shmat");
    }
    uint64_t *sysv = (uint64_t *)q;
    shmctl(id, IPC_RMID, NULL);
    fill(sysv);
    uint64_t sysv_sum = sum_words(sysv, WORDS, PASSES);
    if ((libc_unmap ? shmdt(sysv) : syscall(SYS_shmdt, sysv)) != 0)
        die("shmdt");

    /* A little more work, in registers. */
    uint64_t x = 1;
    for (long i = 0; i < 100000000; i++)
        x = x * 6364136223846793005ULL + 1442695040888963407ULL;
    __asm__ volatile("" : "+r"(x));

    if (threaded) {
        pthread_mutex_lock(&lock);
        done = 1;
        pthread_cond_signal(&done_cond);
        pthread_mutex_unlock(&lock);
        pthread_join(t, NULL);
    }
    printf("anon %llu\nsysv %llu\n", (unsigned long long)anon_sum,
           (unsigned long long)sysv_sum);
    return 0;
}
