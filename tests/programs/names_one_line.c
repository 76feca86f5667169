/* names_one_line: heap objects named by their own left-hand side.
 *
 *   - two allocations on one line: `cold` (one element written) and `hot`
 *     (read in the loop): `hot`, the second call of its line, may be the
 *     line's only object with samples;
 *   - posix_memalign in a condition that returns a constant (`pm`), and
 *     with its status assigned (`pr`, not `rc`);
 *   - aligned_alloc as a plain assignment (`al`).
 *
 * Build: gcc -O2 -g -o names_one_line names_one_line.c
 * Run: ./names_one_line [REPEAT]
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MIB (1L << 20)

/* One double per cache line. */
__attribute__((noipa)) static double sum(const double *a, long n) {
    double s = 0;
    for (long i = 0; i < n; i += 8)
        s += a[i];
    return s;
}

int main(int argc, char **argv) {
    int repeat = argc > 1 ? atoi(argv[1]) : 30;
    double *cold = malloc(16 * MIB), *hot = malloc(32 * MIB);
    double *pm, *pr, *al;
    if (posix_memalign((void **)&pm, 64, 24 * MIB)) return 1;
    int rc = posix_memalign((void **)&pr, 64, 20 * MIB);
    if (rc) return 1;
    al = aligned_alloc(64, 12 * MIB);
    if (!cold || !hot || !al) return 1;
    cold[0] = 1.0;
    memset(hot, 0, 32 * MIB);
    memset(pm, 0, 24 * MIB);
    memset(pr, 0, 20 * MIB);
    memset(al, 0, 12 * MIB);
    double s = 0;
    for (int r = 0; r < repeat; r++) {
        for (int k = 0; k < 4; k++)
            s += sum(hot, 4 * MIB);
        s += sum(pm, 3 * MIB);
        s += sum(pr, 2 * MIB);
        s += sum(al, 3 * MIB / 2);
    }
    printf("names_one_line repeat=%d sum=%.1f\n", repeat, s);
    free(cold);
    free(hot);
    free(pm);
    free(pr);
    free(al);
    return 0;
}
