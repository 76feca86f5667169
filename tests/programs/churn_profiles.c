/* Thread churn. Without arguments: ROUNDS rounds,
 * each creating THREADS threads, then joining them. Thread number n
 * (1, 2, ...) spins in spin_odd or spin_even by its parity for about
 * 20 ms of CPU time (so that each one is sampled), allocating a block on
 * the way. A profiler that hands an ended thread's tables to the next
 * thread must empty them: each thread's profile holds its own function
 * only. Prints the number of threads.
 * "vm N": creates and joins N short threads one at a time and prints by
 * how much the address space (VmSize, KiB) grew between the 20th thread
 * and the last (natively 0: glibc reuses the stacks).
 * gcc -O1 -pthread */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define ROUNDS 5
#define THREADS 8

static double cpu_ms(void) {
    struct timespec t;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

__attribute__((noinline)) static double spin_odd(void) {
    volatile double s = 0;
    double start = cpu_ms();
    while (cpu_ms() - start < 20)
        for (int i = 0; i < 10000; i++) s += i * 0.5;
    return s;
}

__attribute__((noinline)) static double spin_even(void) {
    volatile double s = 1;
    double start = cpu_ms();
    while (cpu_ms() - start < 20)
        for (int i = 0; i < 10000; i++) s += i * 0.25;
    return s;
}

static void *work(void *arg) {
    long n = (long)arg;
    char *block = malloc(1 << 16);
    block[n] = (char)n;
    double s = n % 2 ? spin_odd() : spin_even();
    free(block);
    return (void *)(long)(s > 0);
}

static long vm_kib(void) {
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    long kib = -1;
    while (f && fgets(line, sizeof line, f))
        if (!strncmp(line, "VmSize:", 7)) kib = atol(line + 7);
    if (f) fclose(f);
    return kib;
}

static void *short_work(void *arg) {
    volatile double s = 0;
    for (int i = 0; i < 20000; i++) s += i * 0.5;
    free(malloc(100));
    return arg;
}

int main(int argc, char **argv) {
    if (argc > 2 && !strcmp(argv[1], "vm")) {
        int total = atoi(argv[2]);
        long at20 = 0;
        for (int i = 1; i <= total; i++) {
            pthread_t t;
            pthread_create(&t, NULL, short_work, NULL);
            pthread_join(t, NULL);
            if (i == 20) at20 = vm_kib();
        }
        printf("grew %ld KiB\n", vm_kib() - at20);
        return 0;
    }
    long n = 0;
    for (int r = 0; r < ROUNDS; r++) {
        pthread_t t[THREADS];
        for (int i = 0; i < THREADS; i++) {
            n++;
            pthread_create(&t[i], NULL, work, (void *)n);
        }
        for (int i = 0; i < THREADS; i++) pthread_join(t[i], NULL);
    }
    printf("threads %ld\n", n);
    return 0;
}
