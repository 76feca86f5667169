/* Labels from the program (hpcrun.h), with known answers:
 *
 * - one 32 MiB pool (one malloc); carve() hands out two sub-ranges from ONE
 *   call path in a loop and registers them as "particles" (8 MiB, at the
 *   pool's start) and "cells" (4 MiB, right after);
 * - "scratch" (2 MiB, after cells) is registered and unregistered at once:
 *   its later reads belong to the pool;
 * - the rest of the pool is read unregistered: the pool's own object;
 * - "grid" (16 MiB) is a normal malloc named with hpcrun_label;
 * - a small block the C library allocated (strdup, below --min-bytes:
 *   tracked in the small-block map at the C library's instruction, with
 *   no allocation-log record) named with hpcrun_label: its site takes the
 *   label.
 *
 * Each region is summed for the same number of passes over 2 MiB, so every
 * one gets a share of the samples. Prints the sums (exact in doubles):
 * the same output with and without the profiler.
 *
 * Build: gcc -O2 -g -I hpcrun-rs/include labels.c (no extra library).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hpcrun.h"

#define MIB (1024 * 1024)
#define POOL_BYTES (32 * MIB)
#define PASS_BYTES (2 * MIB)

static size_t pool_used;

/* A bump allocator over the pool: the registered ranges all have this call
 * path (carve <- main), told apart only by their names. */
__attribute__((noinline)) static double *carve(char *pool, size_t bytes, const char *name)
{
    double *p = (double *)(pool + pool_used);
    pool_used += bytes;
    hpcrun_register(p, bytes, name);
    return p;
}

static void fill(double *a, size_t n)
{
    for (size_t i = 0; i < n; i++)
        a[i] = (double)(i % 1000);
}

/* passes over PASS_BYTES of a (wrapping inside n elements). */
__attribute__((noinline)) static double sum(const double *a, size_t n, int passes)
{
    double s = 0;
    size_t per = PASS_BYTES / sizeof(double);
    size_t at = 0;
    for (int p = 0; p < passes; p++) {
        for (size_t i = 0; i < per; i++)
            s += a[(at + i) % n];
        at = (at + per) % n;
    }
    return s;
}

int main(int argc, char **argv)
{
    int passes = argc > 1 ? atoi(argv[1]) : 40;
    char *pool = malloc(POOL_BYTES);
    if (!pool)
        return 1;
    memset(pool, 0, POOL_BYTES);

    static const char *const names[2] = {"particles", "cells"};
    static const size_t sizes[2] = {8 * MIB, 4 * MIB};
    double *arrays[2];
    for (int k = 0; k < 2; k++)
        arrays[k] = carve(pool, sizes[k], names[k]);

    double *scratch = carve(pool, 2 * MIB, "scratch");
    hpcrun_unregister(scratch);

    /* The unregistered rest of the pool. */
    double *rest = (double *)(pool + pool_used);
    size_t rest_n = (POOL_BYTES - pool_used) / sizeof(double);

    size_t grid_n = 16 * MIB / sizeof(double);
    double *grid = malloc(grid_n * sizeof(double));
    if (!grid)
        return 1;
    hpcrun_label(grid, "grid");

    char *tiny = strdup("a block below --min-bytes, allocated by the C library");
    hpcrun_label(tiny, "tiny");
    /* NULL pointers and names are ignored. */
    hpcrun_label(NULL, "nothing");
    hpcrun_label(grid, NULL);
    hpcrun_label(grid, "grid");
    hpcrun_register(NULL, 10, "nothing");
    hpcrun_unregister(NULL);

    fill(arrays[0], sizes[0] / sizeof(double));
    fill(arrays[1], sizes[1] / sizeof(double));
    fill(scratch, 2 * MIB / sizeof(double));
    fill(rest, rest_n);
    fill(grid, grid_n);

    double s0 = sum(arrays[0], sizes[0] / sizeof(double), passes);
    double s1 = sum(arrays[1], sizes[1] / sizeof(double), passes);
    double s2 = sum(scratch, 2 * MIB / sizeof(double), passes);
    double s3 = sum(rest, rest_n, passes);
    double s4 = sum(grid, grid_n, passes);
    printf("particles %.0f\ncells %.0f\nscratch %.0f\nrest %.0f\ngrid %.0f\n", s0, s1, s2, s3, s4);

    hpcrun_unregister(arrays[0]);
    hpcrun_unregister(arrays[1]);
    free(tiny);
    free(grid);
    free(pool);
    return 0;
}
