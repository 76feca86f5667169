/* One allocation site reached by two call paths: main calls worker()
 * itself and a second thread runs it too, so `data` (allocated at the
 * same line of worker) has two allocation call paths (main -> worker and
 * start_thread -> worker): two objects in the database, one object to the
 * reader. Each thread sums its own 32 MiB array, so both have samples.
 *
 * Prints the two sums (exact in doubles): the same output with and
 * without the profiler.
 *
 * Build: gcc -O2 -g -pthread dup_site.c
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#define N (4 * 1024 * 1024)

static int reps = 40;

__attribute__((noinline)) static double sum(const double *a, size_t n)
{
    double s = 0;
    for (size_t i = 0; i < n; i++)
        s += a[i];
    return s;
}

__attribute__((noinline)) static void *worker(void *out)
{
    double *data = malloc(N * sizeof(double));
    if (!data)
        abort();
    for (size_t i = 0; i < N; i++)
        data[i] = (double)(i % 7);
    double s = 0;
    for (int r = 0; r < reps; r++) {
        s += sum(data, N);
        data[r] += 1.0; /* a new sum each time: no call is left out */
    }
    *(double *)out = s;
    free(data);
    return NULL;
}

int main(int argc, char **argv)
{
    if (argc > 1)
        reps = atoi(argv[1]);
    double mine = 0, theirs = 0;
    pthread_t t;
    if (pthread_create(&t, NULL, worker, &theirs) != 0)
        return 1;
    worker(&mine);
    pthread_join(t, NULL);
    printf("sums %.0f %.0f\n", mine, theirs);
    return 0;
}
