/* soft_stream_sum: a vectorised streaming sum over 256 MiB (built -O3
 * -march=x86-64-v2: `movdqu (%rax),%xmm2; paddq %xmm2,%xmm0`). On Zen the
 * timer's IP often lands one past the paddq, the load's consumer.
 * Known answer: `data` is memory bound (every line comes from DRAM) and
 * holds the samples.
 *
 * Run: ./soft_stream_sum [SWEEPS, default 8]
 */
#include <stdio.h>
#include <stdlib.h>

#define LEN (32L << 20)

__attribute__((noipa)) static long sum(const long *data, long n) {
    long s = 0;
    for (long i = 0; i < n; i++)
        s += data[i];
    return s;
}

int main(int argc, char **argv) {
    int sweeps = argc > 1 ? atoi(argv[1]) : 8;
    long *data = malloc(LEN * sizeof(long));
    if (!data)
        return 1;
    for (long i = 0; i < LEN; i++)
        data[i] = i & 15;
    long total = 0;
    for (int s = 0; s < sweeps; s++)
        total += sum(data, LEN);
    printf("soft_stream_sum total=%ld\n", total);
    free(data);
    return 0;
}
