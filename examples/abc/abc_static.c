/* abc_static: the abc loop nest over three static arrays.
 *
 *   for i, j, k:  A[i][j][k] += B[j][i][k] + C[k][j][i]
 *
 * The same compute() as abc.c (same inner loop), over arrays in .bss.
 *
 * Expected answer (data-centric view): static variable C dominates, then B,
 * then A. Build: gcc -O2 -g -o abc_static abc_static.c   Run: ./abc_static [REPEAT]
 */
#include <stdio.h>
#include <stdlib.h>

#define N 200
typedef double cube[N][N][N];

cube A;
cube B;
cube C;

__attribute__((noipa)) static void compute(cube *restrict a, const cube *restrict b,
                                           const cube *restrict c) {
    for (int i = 0; i < N; i++)
        for (int j = 0; j < N; j++)
            for (int k = 0; k < N; k++)
                (*a)[i][j][k] += (*b)[j][i][k] + (*c)[k][j][i];
}

int main(int argc, char **argv) {
    int repeat = argc > 1 ? atoi(argv[1]) : 3;
    for (int i = 0; i < N; i++)
        for (int j = 0; j < N; j++)
            for (int k = 0; k < N; k++) {
                B[i][j][k] = (double)((i + j + k) % 7);
                C[i][j][k] = (double)((i * j + k) % 5);
            }
    for (int r = 0; r < repeat; r++)
        compute(&A, &B, &C);
    double sum = 0.0;
    for (int i = 0; i < N; i += 3)
        sum += A[i][i][i];
    printf("abc_static n=%d repeat=%d checksum=%.1f\n", N, repeat, sum);
    return 0;
}
