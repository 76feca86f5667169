/* glibc's qsort sorts through a temporary buffer it mallocs (as large as
 * the array, for arrays over 1 KiB): the buffer is qsort's, not the
 * program's array. `table`, 4 MiB of records sorted 20 times by one qsort
 * call line, is the program's object; the 20 buffers are one object named
 * `qsort buffer (qsort_buffer.c:LINE)`.
 *
 * Prints a checksum (the same with and without the profiler).
 *
 * Build: gcc -O2 -g qsort_buffer.c
 */
#include <stdio.h>
#include <stdlib.h>

struct rec {
    double key;
    double value[5];
};

#define N (4 * 1024 * 1024 / sizeof(struct rec))

static int by_key(const void *a, const void *b)
{
    double x = ((const struct rec *)a)->key, y = ((const struct rec *)b)->key;
    return (x > y) - (x < y);
}

int main(int argc, char **argv)
{
    int rounds = argc > 1 ? atoi(argv[1]) : 20;
    struct rec *table = malloc(N * sizeof(struct rec));
    if (!table)
        return 1;
    unsigned long long seed = 42;
    double sum = 0;
    for (int r = 0; r < rounds; r++) {
        for (size_t i = 0; i < N; i++) {
            seed = seed * 6364136223846793005ULL + 1442695040888963407ULL;
            table[i].key = (double)(seed >> 11);
            table[i].value[0] = (double)i;
        }
        qsort(table, N, sizeof(struct rec), by_key);
        sum += table[N / 2].value[0];
    }
    printf("checksum %.0f\n", sum);
    free(table);
    return 0;
}
