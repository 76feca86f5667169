/* soft_l1_chain: a dependent floating-point chain over L1-resident data:
 * `s = s * 0.999 + hot[i]` over 16 KiB, many times. The time is the
 * multiply-add chain's latency, not memory. Known answer: `hot` holds the
 * samples but is not memory bound (its working set fits in the caches),
 * and the RIP-relative constant 0.999 is not a data object.
 *
 * Run: ./soft_l1_chain [SWEEPS, default 60000]
 */
#include <stdio.h>
#include <stdlib.h>

#define HOT_LEN 2048L

__attribute__((noipa)) static double chain(const double *hot, long n, int sweeps) {
    double s = 0.0;
    for (int r = 0; r < sweeps; r++)
        for (long i = 0; i < n; i++)
            s = s * 0.999 + hot[i];
    return s;
}

int main(int argc, char **argv) {
    int sweeps = argc > 1 ? atoi(argv[1]) : 60000;
    double *hot = malloc(HOT_LEN * sizeof(double));
    if (!hot)
        return 1;
    for (long i = 0; i < HOT_LEN; i++)
        hot[i] = (double)(i % 3);
    printf("soft_l1_chain s=%.3f\n", chain(hot, HOT_LEN, sweeps));
    free(hot);
    return 0;
}
