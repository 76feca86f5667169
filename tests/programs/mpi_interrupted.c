/* Two MPI ranks that work until they are interrupted: each allocates its
 * 16 MiB array `field` (one allocation site), touches it once,
 * writes the marker file DIR/started.<rank>, then sums the array in a
 * loop until DIR/stop exists or 60 s have passed (a run nobody
 * interrupts still ends). Ctrl-C (SIGINT to the whole foreground
 * process group) is what ends it in the tests.
 *
 * Prints "done <rank>" when it ends by itself.
 *
 * Build: mpicc -O2 -g mpi_interrupted.c
 * Run:   mpirun -np 2 ./mpi_interrupted DIR
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#define N (2 * 1024 * 1024)

__attribute__((noinline)) static double sum(const double *a, size_t n)
{
    double s = 0;
    for (size_t i = 0; i < n; i += 8)
        s += a[i];
    return s;
}

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    const char *dir = argc > 1 ? argv[1] : ".";
    double *field = malloc(N * sizeof(double));
    if (!field)
        return 1;
    for (size_t i = 0; i < N; i++)
        field[i] = (double)(i % 7);
    char path[4096];
    snprintf(path, sizeof path, "%s/started.%d", dir, rank);
    FILE *f = fopen(path, "w");
    if (f)
        fclose(f);
    snprintf(path, sizeof path, "%s/stop", dir);
    double start = now(), total = 0;
    while (now() - start < 60) {
        total += sum(field, N);
        if (access(path, F_OK) == 0)
            break;
    }
    printf("done %d %s\n", rank, total > 0 ? "" : "(empty)");
    free(field);
    MPI_Finalize();
    return 0;
}
