/* Small tables read in a hot loop: 64 rows of 128 bytes (each under
 * hpcrun-rs's --min-bytes, 1024) allocated one by one by the program, as
 * LAMMPS allocates its pair coefficients. Blocks the program's own code
 * allocates are tracked by site even when small: the rows are one object
 * (`t[i]`, 64 allocations; without -g `heap@make_table+0x... (64 small
 * blocks)`), not `<small heap objects>`.
 *
 * Prints a checksum (the same with and without the profiler).
 *
 * Build: gcc -O2 -g small_tables.c
 */
#include <stdio.h>
#include <stdlib.h>

#define ROWS 64
#define COLS 16

__attribute__((noinline)) static double **make_table(void)
{
    double **t = malloc(ROWS * sizeof(double *));
    if (!t)
        exit(1);
    for (int i = 0; i < ROWS; i++) {
        t[i] = malloc(COLS * sizeof(double));
        if (!t[i])
            exit(1);
        for (int j = 0; j < COLS; j++)
            t[i][j] = i + j;
    }
    return t;
}

int main(int argc, char **argv)
{
    long reps = argc > 1 ? atol(argv[1]) : 200;
    double **coeff = make_table();
    double sum = 0;
    unsigned x = 1;
    for (long r = 0; r < reps * 100000; r++) {
        x = x * 1103515245u + 12345u;
        sum += coeff[(x >> 16) % ROWS][r % COLS];
    }
    printf("checksum %.0f\n", sum);
    return 0;
}
