/* mpi_stencil: MPI + OpenMP. Each rank owns a slab of a 2-D grid
 * (`grid`, allocated with malloc) and a small halo buffer; OpenMP threads
 * sweep the slab with a strided (column-major) access, then neighbours
 * exchange halos.
 *
 * Expected finding: in every rank the heap object `grid` holds most of the
 * data-centric samples, and every rank and thread has a profile.
 * Build: mpicc -O2 -g -fopenmp -o mpi_stencil mpi_stencil.c
 * Run:   mpirun -np 4 ./mpi_stencil [ITERATIONS]   (OMP_NUM_THREADS=2)
 */
#include <mpi.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>

#define NX 1024
#define NY 2048

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    int iterations = argc > 1 ? atoi(argv[1]) : 20;

    double *grid = malloc(sizeof(double) * NX * NY);
    double *halo = malloc(sizeof(double) * NY);
    for (long i = 0; i < (long)NX * NY; i++) grid[i] = rank + (double)(i % 13);
    for (int j = 0; j < NY; j++) halo[j] = 0;

    double local = 0;
    for (int it = 0; it < iterations; it++) {
        /* Column-major sweep over a row-major array: a stride of NY. */
#pragma omp parallel for reduction(+ : local)
        for (int j = 0; j < NY; j++)
            for (int i = 1; i < NX - 1; i++) {
                double v = 0.25 * (grid[(long)(i - 1) * NY + j] + grid[(long)(i + 1) * NY + j]) + 0.5 * grid[(long)i * NY + j];
                grid[(long)i * NY + j] = v;
                local += v;
            }
        int up = (rank + 1) % size, down = (rank + size - 1) % size;
        MPI_Sendrecv(grid + (long)(NX - 2) * NY, NY, MPI_DOUBLE, up, 0, halo, NY, MPI_DOUBLE, down, 0,
                     MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        for (int j = 0; j < NY; j++) grid[j] = halo[j];
    }
    double total = 0;
    MPI_Reduce(&local, &total, 1, MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_WORLD);
    if (rank == 0) printf("mpi_stencil ranks=%d threads=%d checksum=%.6e\n", size, omp_get_max_threads(), total);
    free(grid);
    free(halo);
    MPI_Finalize();
    return 0;
}
