/* Small blocks whose counts are known exactly:
 * - BLOCKS blocks of 64 bytes from make_block(), read for a while by the
 *   main thread, then all freed by another thread;
 * - CHAINS realloc chains: each starts as a 16-byte malloc (start_chain)
 *   and grows by realloc to 32, 64, 128, 256, 512 bytes (grow), the last
 *   blocks kept live and read until the end.
 * Usage: small_churn [BLOCKS] [CHAINS] [ROUNDS]; prints a checksum.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

static long **blocks;
static long nblocks;

__attribute__((noinline)) static long *make_block(long i) {
    long *b = malloc(64);
    for (int k = 0; k < 8; k++)
        b[k] = i + k;
    return b;
}

__attribute__((noinline)) static long *start_chain(long i) {
    long *c = malloc(16);
    c[0] = i;
    c[1] = -i;
    return c;
}

__attribute__((noinline)) static long *grow(long *c, size_t bytes) {
    long *d = realloc(c, bytes);
    for (size_t k = 2; k < bytes / sizeof(long); k++)
        d[k] = (long)k;
    return d;
}

static void *free_all(void *arg) {
    (void)arg;
    for (long i = 0; i < nblocks; i++)
        free(blocks[i]);
    return NULL;
}

int main(int argc, char **argv) {
    nblocks = argc > 1 ? atol(argv[1]) : 50000;
    long chains = argc > 2 ? atol(argv[2]) : 1000;
    int rounds = argc > 3 ? atoi(argv[3]) : 2000;
    blocks = malloc(nblocks * sizeof(long *));
    for (long i = 0; i < nblocks; i++)
        blocks[i] = make_block(i);
    long sum = 0;
    for (int r = 0; r < rounds; r++)
        for (long i = 0; i < nblocks; i++)
            sum += blocks[i][r & 7];
    pthread_t t;
    pthread_create(&t, NULL, free_all, NULL);
    pthread_join(t, NULL);
    long **ends = malloc(chains * sizeof(long *));
    for (long i = 0; i < chains; i++) {
        long *c = start_chain(i);
        for (size_t bytes = 32; bytes <= 512; bytes *= 2)
            c = grow(c, bytes);
        ends[i] = c;
    }
    for (int r = 0; r < rounds * 50; r++)
        for (long i = 0; i < chains; i++)
            sum += ends[i][(r * 7) & 63];
    printf("checksum %ld\n", sum);
    for (long i = 0; i < chains; i++)
        free(ends[i]);
    free(ends);
    free(blocks);
    return 0;
}
