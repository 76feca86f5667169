/* truth_gather: a gather whose index load overwrites its own index
 * register (self-clobbering), for the ground-truth harness (benches/src/bin/truth, docs/ACCURACY.md).
 *
 *   for k: sum += grid[index[k]]
 *
 * (written `index[k ^ flip]`, see gather) over `index` (8 Mi ints,
 * 32 MiB, read sequentially) and `grid` (4 Mi doubles, 32 MiB, read at
 * random). At -O2 gcc loads the index with
 * `movslq (%rX,%rY,4),%rY`, which overwrites its own index register: the
 * address of that load cannot be recomputed from the registers after it.
 *
 * Truth: both arrays are read once per sweep (index 4 bytes, grid 8 bytes
 * per step); almost every grid read misses the caches, index reads miss
 * once per 16.
 *
 * Build: gcc -O2 -g -o truth_gather truth_gather.c
 * Run:   ./truth_gather [SWEEPS, default 3]   (a second argument is
 *        XORed into every position k: leave it out, it exists so that gcc
 *        cannot know it is 0)
 */
#include <stdio.h>
#include <stdlib.h>

#define INDEX_LEN (8L << 20)
#define GRID_LEN (4L << 20)

/* `flip` is 0 at run time; gcc cannot turn `k ^ flip` into a pointer
 * increment, so the index is read as `movslq (%rsi,%rax,4),%rax`: the
 * computed position is in the index register the load overwrites. */
__attribute__((noipa)) static double gather(const double *grid, const int *index, long n,
                                            long flip) {
    double sum = 0.0;
    for (long k = 0; k < n; k++)
        sum += grid[index[k ^ flip]];
    return sum;
}

int main(int argc, char **argv) {
    int sweeps = argc > 1 ? atoi(argv[1]) : 3;
    int *index = malloc(INDEX_LEN * sizeof(int));
    double *grid = malloc(GRID_LEN * sizeof(double));
    if (!index || !grid) {
        fprintf(stderr, "truth_gather: out of memory\n");
        return 1;
    }
    unsigned long x = 88172645463325252UL;
    for (long k = 0; k < INDEX_LEN; k++) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        index[k] = (int)(x % GRID_LEN);
    }
    for (long i = 0; i < GRID_LEN; i++)
        grid[i] = (double)(i % 13);
    double sum = 0.0;
    for (int s = 0; s < sweeps; s++)
        sum += gather(grid, index, INDEX_LEN, argc > 2 ? atol(argv[2]) : 0);
    printf("truth_gather index=%ld grid=%ld sweeps=%d sum=%.1f\n", INDEX_LEN, GRID_LEN, sweeps,
           sum);
    free(grid);
    free(index);
    return 0;
}
