/* A sparse matrix stored one row per allocation, as per-row C and C++
 * codes do: every row has its own block of 27 values (216 bytes) and its
 * own block of 27 column indices (108 bytes). SpMV y = A x over ROWS rows
 * (default 500,000: 162 MB of rows, far beyond the caches), ITERS times.
 *
 * Usage: csr_rows [ROWS] [ITERS]; prints a checksum.
 */
#include <stdio.h>
#include <stdlib.h>

#define NNZ 27

int main(int argc, char **argv) {
    long rows = argc > 1 ? atol(argv[1]) : 500000;
    int iters = argc > 2 ? atoi(argv[2]) : 30;
    double **values = malloc(rows * sizeof(double *));
    int **indices = malloc(rows * sizeof(int *));
    double *x = malloc(rows * sizeof(double));
    double *y = malloc(rows * sizeof(double));
    unsigned seed = 12345;
    for (long i = 0; i < rows; i++) {
        values[i] = malloc(NNZ * sizeof(double));
        indices[i] = malloc(NNZ * sizeof(int));
        for (int k = 0; k < NNZ; k++) {
            seed = seed * 1103515245u + 12345u;
            long j = i + (long)(seed >> 16) % 201 - 100;
            if (j < 0) j += rows;
            if (j >= rows) j -= rows;
            indices[i][k] = (int)j;
            values[i][k] = 1.0 / (1 + k);
        }
        x[i] = 1.0;
    }
    for (int it = 0; it < iters; it++) {
        for (long i = 0; i < rows; i++) {
            const double *v = values[i];
            const int *c = indices[i];
            double sum = 0.0;
            for (int k = 0; k < NNZ; k++)
                sum += v[k] * x[c[k]];
            y[i] = sum;
        }
        for (long i = 0; i < rows; i++)
            x[i] = 0.5 * x[i] + 0.5 * y[i] / 3.8;
    }
    double check = 0.0;
    for (long i = 0; i < rows; i++)
        check += y[i];
    printf("checksum %.6f\n", check);
    for (long i = 0; i < rows; i++) {
        free(values[i]);
        free(indices[i]);
    }
    free(values);
    free(indices);
    free(x);
    free(y);
    return 0;
}
