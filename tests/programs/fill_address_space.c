/* Fills its address-space limit (`ulimit -v`) while 3 more threads
 * compute: blocks of 1 MiB, each written, then blocks of 64 bytes, until
 * malloc fails; it keeps them all until its threads end. Prints
 * "filled" and exits 0. With the argument `crash`, it prints "filled"
 * once its address space is full and then dies of a SIGSEGV (a store
 * through a null pointer) while its threads still compute. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void *work(void *arg) {
    volatile double x = 0;
    for (long i = 0; i < 50000000; i++) x += (double)i;
    return arg;
}

int main(int argc, char **argv) {
    int crash = argc > 1 && strcmp(argv[1], "crash") == 0;
    pthread_t t[3];
    int started = 0;
    for (int i = 0; i < 3; i++)
        if (pthread_create(&t[started], NULL, work, NULL) == 0) started++;
    long big = 0, small = 0;
    for (;;) {
        char *p = malloc(1 << 20);
        if (!p) break;
        memset(p, 1, 1 << 20);
        big++;
    }
    while (malloc(64)) small++;
    if (crash) {
        printf("filled\n");
        fflush(stdout);
        *(volatile int *)0 = 1;
    }
    for (int i = 0; i < started; i++) pthread_join(t[i], NULL);
    printf("filled\n");
    return big > 0 && small > 0 && started == 3 ? 0 : 1;
}
