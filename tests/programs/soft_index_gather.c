/* soft_index_gather: a random index load that overwrites its index.
 *
 *   for k: sum += grid[index[pos(k)]]
 *
 * `index` (16 Mi ints, 64 MiB) is read at pseudo-random positions: every
 * read misses the caches. `grid` (8 Ki doubles, 64 KiB) fits in L2. At -O2
 * gcc reads the index with `movslq (%rsi,%rax,4),%rax`, which overwrites
 * its own index register, so its address cannot be recomputed after it
 * ran. Known answer: the time is the index's misses; `index` must hold a
 * large share of the samples, and no sample may become a store on the
 * stack (the old fallback took the next access, a spill).
 *
 * Run: ./soft_index_gather [ROUNDS, default 6]
 */
#include <stdio.h>
#include <stdlib.h>

#define INDEX_LEN (16L << 20)
#define GRID_LEN (8L << 10)

__attribute__((noipa)) static double gather(const double *grid, const int *index, long n) {
    double sum = 0.0;
    unsigned long x = 12345;
    for (long k = 0; k < n; k++) {
        x = x * 6364136223846793005UL + 1442695040888963407UL;
        sum += grid[index[(x >> 20) & (INDEX_LEN - 1)]];
    }
    return sum;
}

int main(int argc, char **argv) {
    int rounds = argc > 1 ? atoi(argv[1]) : 6;
    int *index = malloc(INDEX_LEN * sizeof(int));
    double *grid = malloc(GRID_LEN * sizeof(double));
    if (!index || !grid)
        return 1;
    for (long k = 0; k < INDEX_LEN; k++)
        index[k] = (int)((k * 7919) & (GRID_LEN - 1));
    for (long g = 0; g < GRID_LEN; g++)
        grid[g] = (double)(g % 7);
    double total = 0.0;
    for (int r = 0; r < rounds; r++)
        total += gather(grid, index, 4L << 20);
    printf("soft_index_gather total=%.0f\n", total);
    free(grid);
    free(index);
    return 0;
}
