/* Objects with known findings (tests/findings.rs), compiled with
 * -fno-tree-vectorize so only the intrinsics below are vectors:
 *
 * - gathered: doubles read through a shuffled index list, x[idx[i]]:
 *   data-dependent addresses, a finding;
 * - walked: doubles read and written by the loop counter with 16-byte
 *   vector loads that start 8 bytes into the block, so one load in four
 *   spans two cache lines, plus a byte-wise hash of one byte per line
 *   (as LAMMPS's RanPark::reset hashes a coordinate's bytes): naturally
 *   aligned elements read by wider accesses, no finding of any kind;
 * - shifted: doubles 4 bytes into their block, read one at a time: one
 *   access in eight spans two lines with scalar accesses, a real
 *   misalignment finding.
 *
 * usage: findings_kinds [sweeps]
 */
#include <emmintrin.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define N (1 << 20)

int main(int argc, char **argv) {
    int sweeps = argc > 1 ? atoi(argv[1]) : 20;
    double *gathered = malloc(N * sizeof(double));
    double *walked = malloc((N + 2) * sizeof(double));
    char *shifted = malloc(N * sizeof(double) + 8);
    int *idx = malloc(N * sizeof(int));
    for (int i = 0; i < N; i++) {
        gathered[i] = i;
        walked[i] = i;
        idx[i] = i;
        double v = i;
        memcpy(shifted + 4 + 8 * (size_t)i, &v, sizeof v);
    }
    walked[N] = walked[N + 1] = 0;
    unsigned long r = 12345;
    for (int i = N - 1; i > 0; i--) {
        r = r * 6364136223846793005UL + 1442695040888963407UL;
        int j = (int)((r >> 33) % (unsigned long)(i + 1));
        int t = idx[i];
        idx[i] = idx[j];
        idx[j] = t;
    }
    double sum = 0;
    unsigned hash = 0;
    const __m128d half = _mm_set1_pd(0.5);
    for (int s = 0; s < sweeps; s++) {
        for (int i = 0; i < N; i++)
            sum += gathered[idx[i]];
        for (int i = 1; i + 2 <= N + 1; i += 2) {
            __m128d v = _mm_loadu_pd(walked + i);
            _mm_storeu_pd(walked + i, _mm_add_pd(_mm_mul_pd(v, half), half));
        }
        const unsigned char *bytes = (const unsigned char *)walked;
        for (size_t b = 0; b < (size_t)N * 8; b += 64)
            hash = hash * 31 + bytes[b];
        double *d = (double *)(shifted + 4);
        for (int i = 0; i < N; i++)
            d[i] = d[i] * 0.5 + 1.0;
    }
    double w = 0;
    for (int i = 0; i < N; i += 4096)
        w += walked[i] + ((double *)(shifted + 4))[i];
    printf("sums %g %g %u\n", sum, w, hash);
    return 0;
}
