/* truth_l1_chain: compute over L1-resident data next to a streamed
 * array, for the ground-truth harness (benches/src/bin/truth,
 * docs/ACCURACY.md).
 *
 * `hot` (2 Ki doubles, 16 KiB, fits L1) is summed many times with one
 * loop-carried `addsd (%rax),%xmm0` chain: its time is the adds' latency,
 * not memory. `cold` (4 Mi longs, 32 MiB) is streamed once per round with
 * integer adds: that time is memory.
 *
 * Truth: `hot` has most of the accesses (DHAT) and almost no cache misses;
 * `cold` has almost all the misses. A profiler that charges a stalled
 * FP chain's time to its memory operand ranks `hot` first.
 *
 * Build: gcc -O2 -g -o truth_l1_chain truth_l1_chain.c
 * Run:   ./truth_l1_chain [ROUNDS, default 4]
 */
#include <stdio.h>
#include <stdlib.h>

#define HOT_LEN 2048L
#define COLD_LEN (4L << 20)
#define HOT_SWEEPS 2048

__attribute__((noipa)) static double chain(const double *hot, long n, int sweeps) {
    double s = 0.0;
    for (int r = 0; r < sweeps; r++)
        for (long i = 0; i < n; i++)
            s += hot[i];
    return s;
}

__attribute__((noipa)) static long stream(const long *cold, long n) {
    long s = 0;
    for (long i = 0; i < n; i++)
        s += cold[i];
    return s;
}

int main(int argc, char **argv) {
    int rounds = argc > 1 ? atoi(argv[1]) : 4;
    double *hot = malloc(HOT_LEN * sizeof(double));
    long *cold = malloc(COLD_LEN * sizeof(long));
    if (!hot || !cold) {
        fprintf(stderr, "truth_l1_chain: out of memory\n");
        return 1;
    }
    for (long i = 0; i < HOT_LEN; i++)
        hot[i] = (double)(i % 3);
    for (long i = 0; i < COLD_LEN; i++)
        cold[i] = i % 5;
    double s = 0.0;
    long t = 0;
    for (int r = 0; r < rounds; r++) {
        s += chain(hot, HOT_LEN, HOT_SWEEPS);
        t += stream(cold, COLD_LEN);
    }
    printf("truth_l1_chain rounds=%d s=%.1f t=%ld\n", rounds, s, t);
    free(hot);
    free(cold);
    return 0;
}
