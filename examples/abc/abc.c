/* abc: the data-centric profiling example of Liu & Mellor-Crummey.
 *
 *   for i, j, k:  A[i][j][k] += B[j][i][k] + C[k][j][i]
 *
 * over three heap arrays of N^3 doubles (N = 200: 64 MB each). With k
 * innermost, A and B are read with unit stride, C with a stride of N*N
 * doubles: almost every C access misses the caches and the TLB.
 *
 * The same loop nest as abc_static.c, over arrays from malloc: both compile
 * to the same inner loop and differ only in where the data lives.
 *
 * Expected answer (data-centric view): C dominates, then B, then A.
 * Build: gcc -O2 -g -o abc abc.c   Run: ./abc [REPEAT]
 *
 * With -DC_CONTIGUOUS, C is read as C[i][j][k] (unit stride, like A and
 * B): the "after" run of `hpcprof-rs diff` (docs/GUIDE.md). Same file,
 * same allocation lines, so the objects match across the two builds.
 */
#include <stdio.h>
#include <stdlib.h>

#define N 200
typedef double cube[N][N][N];

__attribute__((noipa)) static void compute(cube *restrict a, const cube *restrict b,
                                           const cube *restrict c) {
    for (int i = 0; i < N; i++)
        for (int j = 0; j < N; j++)
            for (int k = 0; k < N; k++)
#ifdef C_CONTIGUOUS
                (*a)[i][j][k] += (*b)[j][i][k] + (*c)[i][j][k];
#else
                (*a)[i][j][k] += (*b)[j][i][k] + (*c)[k][j][i];
#endif
}

int main(int argc, char **argv) {
    int repeat = argc > 1 ? atoi(argv[1]) : 3;
    cube *A = malloc(sizeof(cube));
    cube *B = malloc(sizeof(cube));
    cube *C = malloc(sizeof(cube));
    if (!A || !B || !C) {
        fprintf(stderr, "abc: out of memory\n");
        return 1;
    }
    for (int i = 0; i < N; i++)
        for (int j = 0; j < N; j++)
            for (int k = 0; k < N; k++) {
                (*A)[i][j][k] = 0.0;
                (*B)[i][j][k] = (double)((i + j + k) % 7);
                (*C)[i][j][k] = (double)((i * j + k) % 5);
            }
    for (int r = 0; r < repeat; r++)
        compute(A, B, C);
    double sum = 0.0;
    for (int i = 0; i < N; i += 3)
        sum += (*A)[i][i][i];
    printf("abc n=%d repeat=%d checksum=%.1f\n", N, repeat, sum);
    free(A);
    free(B);
    free(C);
    return 0;
}
