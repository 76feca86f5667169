/* naming: heap objects named after the variable they are assigned to.
 *
 * Three heap arrays, three naming cases of hpcprof-rs:
 *   - grid_w: `double *grid_w = make_grid(n);` where make_grid (inlined at
 *     -O2) assigns malloc to a local and returns it: step out to the caller;
 *   - SD.nuclide_grid: `SD.nuclide_grid = malloc(...);` (a struct member);
 *   - energy: `double *energy = alloc_buf(n);` where alloc_buf (not
 *     inlined) assigns malloc to a local and returns it.
 * grid_w is read with a large stride and holds most of the samples.
 *
 * Build: gcc -O2 -g -o naming naming.c   Run: ./naming [REPEAT]
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define N (4L << 20) /* doubles per array: 32 MB */
#define STRIDE 4099  /* doubles: a new page at every access */

struct SimulationData {
    double *nuclide_grid;
    long n;
};

static double *make_grid(long n) {
    double *g = malloc(n * sizeof(double));
    for (long i = 0; i < n; i++)
        g[i] = (double)(i % 13);
    return g;
}

__attribute__((noinline)) double *alloc_buf(long n) {
    double *buf = malloc(n * sizeof(double));
    memset(buf, 0, n * sizeof(double));
    return buf;
}

/* Strided sum: one cache and TLB miss per access. */
__attribute__((noipa)) static double strided(const double *a, long n, long stride) {
    double s = 0.0;
    for (long start = 0; start < stride; start++)
        for (long i = start; i < n; i += stride)
            s += a[i];
    return s;
}

/* Unit-stride sum. */
__attribute__((noipa)) static double streamed(const double *a, long n) {
    double s = 0.0;
    for (long i = 0; i < n; i++)
        s += a[i];
    return s;
}

int main(int argc, char **argv) {
    int repeat = argc > 1 ? atoi(argv[1]) : 2;
    double *grid_w = make_grid(N);
    struct SimulationData SD;
    SD.n = N;
    SD.nuclide_grid = malloc(SD.n * sizeof(double));
    for (long i = 0; i < SD.n; i++)
        SD.nuclide_grid[i] = (double)(i % 7);
    double *energy = alloc_buf(N);
    double sum = 0.0;
    for (int r = 0; r < repeat; r++) {
        sum += strided(grid_w, N, STRIDE);
        sum += streamed(SD.nuclide_grid, SD.n);
        sum += streamed(energy, N);
    }
    printf("naming repeat=%d checksum=%.1f\n", repeat, sum);
    free(grid_w);
    free(SD.nuclide_grid);
    free(energy);
    return 0;
}
