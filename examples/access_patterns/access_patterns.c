/* access_patterns: three arrays with known access patterns, one phase each.
 *
 *   strided: N doubles read with a stride of STRIDE elements (a run-time
 *            value, default 100: 800 bytes), every element once per pass;
 *   packed:  an array of packed records { char tag; double value; } (9
 *            bytes each): the doubles sit at 1 + 9*i, and 7 in 64 of them
 *            span two 64-byte cache lines;
 *   aligned: the same records, naturally aligned (16 bytes each): no
 *            access ever spans two lines.
 *
 * Expected findings: `strided` has one regular stride of STRIDE*8 bytes
 * (STRIDE elements); `packed` has misaligned accesses (about 11% of its
 * sampled loads), `aligned` none at all.
 * Build: gcc -O2 -g -o access_patterns access_patterns.c
 * Run:   ./access_patterns [REPEAT [STRIDE]]
 */
#include <stdio.h>
#include <stdlib.h>

#define N (4 * 1024 * 1024)     /* doubles of the strided array: 32 MB */
#define RECORDS (2 * 1024 * 1024) /* records of the packed and aligned arrays */

struct __attribute__((packed)) packed_record {
    char tag;
    double value;
};

struct aligned_record {
    char tag;
    double value;
};

__attribute__((noipa)) static double walk_strided(const double *a, long n, long stride) {
    double sum = 0.0;
    for (long start = 0; start < stride; start++)
        for (long i = start; i < n; i += stride)
            sum += a[i];
    return sum;
}

__attribute__((noipa)) static double sum_packed(const struct packed_record *r, long n) {
    double sum = 0.0;
    for (long i = 0; i < n; i++)
        sum += r[i].value;
    return sum;
}

__attribute__((noipa)) static double sum_aligned(const struct aligned_record *r, long n) {
    double sum = 0.0;
    for (long i = 0; i < n; i++)
        sum += r[i].value;
    return sum;
}

int main(int argc, char **argv) {
    int repeat = argc > 1 ? atoi(argv[1]) : 4;
    long stride = argc > 2 ? atol(argv[2]) : 100;
    double *strided = malloc(N * sizeof(double));
    struct packed_record *packed = malloc(RECORDS * sizeof(struct packed_record));
    struct aligned_record *aligned = malloc(RECORDS * sizeof(struct aligned_record));
    if (!strided || !packed || !aligned || stride < 1) {
        fprintf(stderr, "access_patterns: out of memory or bad stride\n");
        return 1;
    }
    for (long i = 0; i < N; i++)
        strided[i] = (double)(i % 7);
    for (long i = 0; i < RECORDS; i++) {
        packed[i].tag = (char)i;
        packed[i].value = (double)(i % 5);
        aligned[i].tag = (char)i;
        aligned[i].value = (double)(i % 3);
    }
    double s = 0.0, p = 0.0, a = 0.0;
    for (int r = 0; r < repeat; r++) {
        s += walk_strided(strided, N, stride);
        for (int k = 0; k < 4; k++) {
            p += sum_packed(packed, RECORDS);
            a += sum_aligned(aligned, RECORDS);
        }
    }
    printf("access_patterns repeat=%d stride=%ld sums=%.1f %.1f %.1f\n", repeat, stride, s, p, a);
    free(strided);
    free(packed);
    free(aligned);
    return 0;
}
