/* skewed_lookup: random lookups into a 64 MiB heap table (8 Mi u64s),
 * skewed toward its start: 80% of the lookups fall in the first 10% of
 * the table, 20% anywhere. Every lookup also reads a small, uniformly
 * indexed array of 512 weights (4 KiB, always in cache).
 *
 * Expected finding (data-centric view): `table` holds almost all the
 * samples; `weights` few. (With per-object offset histograms, the samples
 * of `table` concentrate in its first 10%.)
 *
 * Build: gcc -O2 -g -o skewed_lookup skewed_lookup.c
 * Run:   ./skewed_lookup [MILLION_LOOKUPS]
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#define TABLE_LEN (8L << 20) /* u64s: 64 MiB */
#define HOT_LEN (TABLE_LEN / 10)
#define WEIGHTS 512

/* xorshift64 */
static inline uint64_t next(uint64_t *s) {
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}

/* noipa: the arrays escape, gcc cannot drop or fold the lookups. */
__attribute__((noipa)) static uint64_t lookups(const uint64_t *table, const uint64_t *weights,
                                               long n, uint64_t seed) {
    uint64_t sum = 0, s = seed;
    for (long i = 0; i < n; i++) {
        uint64_t r = next(&s);
        /* 8 of 10 lookups in the hot first 10%, 2 of 10 anywhere. */
        uint64_t idx = (r >> 32) % 10 < 8 ? (r & 0xffffffff) % HOT_LEN : (r & 0xffffffff) % TABLE_LEN;
        sum += table[idx] * weights[i % WEIGHTS];
    }
    return sum;
}

int main(int argc, char **argv) {
    long n = (argc > 1 ? atol(argv[1]) : 10) * 1000000L;
    uint64_t *table = malloc(TABLE_LEN * sizeof(uint64_t));
    uint64_t *weights = malloc(WEIGHTS * sizeof(uint64_t));
    if (!table || !weights) {
        fprintf(stderr, "skewed_lookup: out of memory\n");
        return 1;
    }
    for (long i = 0; i < TABLE_LEN; i++)
        table[i] = (uint64_t)i * 2654435761u;
    for (long i = 0; i < WEIGHTS; i++)
        weights[i] = (uint64_t)(i % 7 + 1);
    uint64_t sum = lookups(table, weights, n, 88172645463325252ull);
    printf("skewed_lookup lookups=%ld checksum=%llu\n", n, (unsigned long long)sum);
    free(table);
    free(weights);
    return 0;
}
