/* Five arrays allocated through a two-level allocation wrapper
 * (my_alloc -> xcalloc -> calloc), as HPC codes do (hypre_CTAlloc ->
 * hypre_CAlloc -> calloc, LAMMPS memory->create -> smalloc -> malloc).
 *
 * Known answer: each array's allocation site is where the program asked
 * for it (main, init_grid, and main's call of make_buffer), never inside
 * my_alloc, xcalloc or calloc; with -g the objects are named pressure,
 * velocity, g.density, g.energy (through init_grid(&g)) and halo. See README.md.
 *
 * Usage: wrappers [ROUNDS]   (default 20)
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define N (1 << 20) /* doubles per array: 8 MiB */

__attribute__((noinline)) void *xcalloc(size_t n, size_t size)
{
    void *p = calloc(n, size);
    if (!p) {
        perror("calloc");
        exit(1);
    }
    return p;
}

__attribute__((noinline)) double *my_alloc(size_t n)
{
    return xcalloc(n, sizeof(double));
}

struct grid {
    double *density;
    double *energy;
};

__attribute__((noinline)) void init_grid(struct grid *g)
{
    g->density = my_alloc(N);
    g->energy = my_alloc(N);
}

__attribute__((noinline)) double *make_buffer(void)
{
    double *buf = my_alloc(N);
    memset(buf, 0, N * sizeof(double));
    return buf;
}

/* Reads `a` with a stride of 8 doubles (one cache line per read), `rounds`
 * times over. */
__attribute__((noinline)) double sweep(const double *a, int rounds)
{
    double s = 0;
    for (int r = 0; r < rounds; r++)
        for (long i = 0; i < N; i += 8)
            s += a[(i * 7919) & (N - 1)];
    return s;
}

int main(int argc, char **argv)
{
    int rounds = argc > 1 ? atoi(argv[1]) : 20;
    double *pressure = my_alloc(N);
    double *velocity = my_alloc(N);
    struct grid g;
    init_grid(&g);
    double *halo = make_buffer();
    double *arrays[] = {pressure, velocity, g.density, g.energy, halo};
    double total = 0;
    for (int k = 0; k < 5; k++) {
        for (long i = 0; i < N; i++)
            arrays[k][i] = k + i % 7;
        total += sweep(arrays[k], rounds);
    }
    printf("total %.1f\n", total);
    for (int k = 0; k < 5; k++)
        free(arrays[k]);
    return 0;
}
