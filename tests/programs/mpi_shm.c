/* Two MPI ranks on one node with a known imbalance: rank 0 sums its 8 MiB
 * array `field` before every message, rank 1 only waits for the messages
 * (1 KiB, so they go through Open MPI's shared-memory transport, whose
 * receive queue rank 1 polls while it waits). So rank 1's time is the MPI
 * library's, polling its shared-memory segment, and `field` is the
 * program's only big object.
 *
 * Prints the sum (exact in doubles) and the messages received: the same
 * output with and without the profiler.
 *
 * Build: mpicc -O2 -g mpi_shm.c
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

#define N (1024 * 1024)
#define MSG 1024

__attribute__((noinline)) static double sum(const double *a, size_t n)
{
    double s = 0;
    for (size_t i = 0; i < n; i++)
        s += a[i];
    return s;
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    int reps = argc > 1 ? atoi(argv[1]) : 200;
    char msg[MSG] = {0};
    double total = 0;
    long received = 0;
    if (rank == 0) {
        double *field = malloc(N * sizeof(double));
        for (size_t i = 0; i < N; i++)
            field[i] = (double)(i % 1000);
        for (int r = 0; r < reps; r++) {
            total += sum(field, N);
            for (int to = 1; to < size; to++)
                MPI_Send(msg, MSG, MPI_CHAR, to, 0, MPI_COMM_WORLD);
        }
        free(field);
        printf("total %.0f\n", total);
    } else {
        for (int r = 0; r < reps; r++) {
            MPI_Recv(msg, MSG, MPI_CHAR, 0, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            received++;
        }
        printf("rank %d received %ld\n", rank, received);
    }
    MPI_Finalize();
    return 0;
}
