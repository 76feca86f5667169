/* entry_skid: a hot function entered at a high rate through a pointer,
 * whose first instruction follows another function's padding (64-byte
 * alignment). A sample that lands on its first instruction belongs to it
 * (a call landed there), not to the bytes before it.
 *
 * Build: gcc -O2 -g -o entry_skid entry_skid.c   Run: ./entry_skid [N]
 */
#include <stdio.h>
#include <stdlib.h>

__attribute__((noinline, aligned(64))) long before_entry(long x) { return x * 7; }

__attribute__((noinline, aligned(64))) long hot_entry(long x) { return (x >> 1) + 3; }

int main(int argc, char **argv) {
    long n = argc > 1 ? atol(argv[1]) : 400000000L;
    long (*volatile f)(long) = hot_entry;
    long s = before_entry(n);
    for (long i = 0; i < n; i++)
        s += f(i);
    printf("entry_skid n=%ld sum=%ld\n", n, s);
    return 0;
}
