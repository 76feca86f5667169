/* soft_computed_base: a load whose base an `lea` computed and that
 * replaces its own base (Open MPI's opal_progress, `lea
 * (%rax,%rbx,8),%rax; add $1,%rbx; mov (%rax),%rax`, was LAMMPS's top
 * `<address not recovered>` row).
 *
 *   for k: sum += table[pos(k)]   with, in the loop body,
 *          lea (%table,%idx,8),%rax; add $1,%idx; mov (%rax),%rax
 *
 * `table` (8 Mi longs, 64 MiB) is read at pseudo-random positions: every
 * read misses the caches. The pattern is pinned with inline assembly so
 * that no compiler choice changes it: after the load, %rax holds the
 * value read, the index was advanced by a constant, the table pointer is
 * intact. Known answer: the time is the table's misses, and the address
 * can be computed again (table + (idx - 1) * 8): `table` must hold most of
 * the memory samples, and almost none may be `<address not recovered>`.
 *
 * Run: ./soft_computed_base [ROUNDS, default 6]
 */
#include <stdio.h>
#include <stdlib.h>

#define TABLE_LEN (8L << 20)

__attribute__((noipa)) static long walk(const long *table, long n) {
    long sum = 0;
    unsigned long x = 12345;
    for (long k = 0; k < n; k++) {
        x = x * 6364136223846793005UL + 1442695040888963407UL;
        long idx = (long)((x >> 20) & (TABLE_LEN - 1));
        long v;
        __asm__ volatile("lea (%[t],%[i],8),%%rax\n\t"
                         "add $1,%[i]\n\t"
                         "mov (%%rax),%%rax\n\t"
                         "mov %%rax,%[v]\n\t"
                         : [v] "=r"(v), [i] "+r"(idx)
                         : [t] "r"(table)
                         : "rax", "memory");
        sum += v + idx;
    }
    return sum;
}

int main(int argc, char **argv) {
    int rounds = argc > 1 ? atoi(argv[1]) : 6;
    long *table = malloc(TABLE_LEN * sizeof(long));
    if (!table)
        return 1;
    for (long k = 0; k < TABLE_LEN; k++)
        table[k] = k & 7;
    long total = 0;
    for (int r = 0; r < rounds; r++)
        total += walk(table, 4L << 20);
    printf("soft_computed_base total=%ld\n", total);
    free(table);
    return 0;
}
