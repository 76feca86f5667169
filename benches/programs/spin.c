/* spin: a pure register loop (a 64-bit LCG dependency chain, no memory
 * traffic) for the overhead harness. Caches and memory bandwidth do not
 * matter to it, so what a profiler adds to its CPU time is the direct cost
 * of the samples (timer interrupt, signal delivery, handler), with little
 * of the noise other processes on a shared machine cause to memory-bound
 * programs. Run: ./spin [ITERATIONS in millions, default 1500]
 */
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv) {
    long millions = argc > 1 ? atol(argv[1]) : 1500;
    unsigned long x = 1;
    for (long i = 0; i < millions * 1000000L; i++)
        x = x * 6364136223846793005UL + 1442695040888963407UL;
    printf("spin %ld M x=%lu\n", millions, x);
    return 0;
}
