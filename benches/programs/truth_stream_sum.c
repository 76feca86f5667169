/* truth_stream_sum: a vectorised streaming sum for the ground-truth
 * harness (benches/src/bin/truth, docs/ACCURACY.md): 8 Mi longs (64 MiB,
 * twice this machine's LLC) summed again and again.
 *
 * Built -O3 -march=x86-64-v2, gcc sums with `movdqu (%rax),%xmm2` +
 * `paddq %xmm2,%xmm0`; on Zen the timer's interrupted IP is often one past
 * the paddq (the load's consumer), not past the load (walked back to it).
 *
 * Truth: `data` is the only heap object read in the loop; it is memory
 * bound (every 64-byte line comes from DRAM).
 *
 * Build: gcc -O3 -march=x86-64-v2 -g -o truth_stream_sum truth_stream_sum.c
 * Run:   ./truth_stream_sum [SWEEPS, default 4]
 */
#include <stdio.h>
#include <stdlib.h>

#define LEN (8L << 20)

__attribute__((noipa)) static long sum(const long *data, long n) {
    long s = 0;
    for (long i = 0; i < n; i++)
        s += data[i];
    return s;
}

int main(int argc, char **argv) {
    int sweeps = argc > 1 ? atoi(argv[1]) : 4;
    long *data = malloc(LEN * sizeof(long));
    if (!data) {
        fprintf(stderr, "truth_stream_sum: out of memory\n");
        return 1;
    }
    for (long i = 0; i < LEN; i++)
        data[i] = i % 17;
    long total = 0;
    for (int s = 0; s < sweeps; s++)
        total += sum(data, LEN);
    printf("truth_stream_sum len=%ld sweeps=%d total=%ld\n", LEN, sweeps, total);
    free(data);
    return 0;
}
