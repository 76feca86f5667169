/* A static array in a stripped executable (gcc -s: no .symtab, and a
 * static has no dynamic symbol): 8 MiB in .bss, summed 100 times. With
 * no symbol to name it, its samples go to the section's object,
 * `<.bss of stripped_static>`, not to `<unknown address>`.
 *
 * Prints the sum (exact in doubles).
 *
 * Build: gcc -O2 -s stripped_static.c
 */
#include <stdio.h>

#define N (1024 * 1024)

static double table[N];

__attribute__((noinline)) static double sum(const double *a)
{
    double s = 0;
    for (int p = 0; p < 100; p++)
        for (size_t i = 0; i < N; i++)
            s += a[i];
    return s;
}

int main(void)
{
    for (size_t i = 0; i < N; i++)
        table[i] = (double)(i % 1000);
    printf("sum %.0f\n", sum(table));
    return 0;
}
