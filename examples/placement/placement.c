/* placement: which data belongs in a small fast memory? Two 512 MiB heap
 * tables of u64, read at random the same number of times:
 *
 *   skewed:  7 of 8 lookups fall in its first eighth (64 MiB, twice a large L3 cache), 1 of 8
 *            anywhere;
 *   uniform: every lookup anywhere.
 *
 * Expected finding (`hpcprof-rs advise DB --fast-mem 512MiB`): with room
 * for one table, the best placement is the skewed table's head plus most
 * of the uniform table (about 7/8 of it), which covers clearly more of
 * the memory time than any whole table (largest first, hottest whole) or
 * the end of the hottest table. (Peña and Balaji found the same shape on
 * XSBench's nuclide grid.)
 *
 * Build: gcc -O2 -g -o placement placement.c
 * Run:   ./placement [MILLION_LOOKUPS]   (default 4, per table)
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#define LEN (64L << 20) /* u64s: 512 MiB (a power of two) */
#define HEAD (LEN / 8)

/* xorshift64 */
static inline uint64_t next(uint64_t *s) {
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}

/* n random lookups in `t`: 7 of 8 in its first eighth when `skewed`.
 * Each lookup's index depends on the value the previous one loaded (its
 * top bit, always 0): one miss at a time, so every lookup costs its full
 * latency and the samples follow the misses (independent lookups would
 * overlap, and a sparse miss would cost more time than a dense one).
 * One table per loop, so that each sampled stall has one load to blame.
 * noipa: the tables escape, gcc cannot drop or fold the lookups. */
__attribute__((noipa)) static uint64_t lookups(const uint64_t *t, long n, int skewed) {
    uint64_t sum = 0, v = 0, s = 88172645463325252ull;
    for (long i = 0; i < n; i++) {
        uint64_t r = next(&s) ^ (v >> 63);
        /* Masks, not %: the same few instructions in both loops. */
        uint64_t mask = skewed && (r >> 40) % 8 < 7 ? HEAD - 1 : LEN - 1;
        uint64_t idx = r & mask;
        v = t[idx];
        sum += v ^ idx; /* idx stays live: the load cannot overwrite it */
    }
    return sum;
}

__attribute__((noipa)) static void fill(uint64_t *t, uint64_t seed) {
    for (long i = 0; i < LEN; i++)
        t[i] = i * seed;
}

int main(int argc, char **argv) {
    long n = (argc > 1 ? atol(argv[1]) : 4) * 1000000L;
    uint64_t *skewed = malloc(LEN * sizeof(uint64_t));
    uint64_t *uniform = malloc(LEN * sizeof(uint64_t));
    if (!skewed || !uniform) {
        fprintf(stderr, "placement: out of memory (needs 1 GiB)\n");
        return 1;
    }
    fill(skewed, 3);
    fill(uniform, 5);
    uint64_t sum = lookups(skewed, n, 1) + lookups(uniform, n, 0);
    printf("placement lookups=%ld sum=%llu\n", n, (unsigned long long)sum);
    free(uniform);
    free(skewed);
    return 0;
}
