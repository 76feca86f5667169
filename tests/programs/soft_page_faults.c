/* soft_page_faults: a loop whose time is page faults. Each iteration
 * reads a small, cached array (`weights`, 4 KiB) and then the first byte
 * of a page of `fresh`, a 2 GiB mapping never touched before: every
 * such read faults the page in. The faulting read never retires, so a
 * timer sample during its fault can have the IP *at* it, and the
 * instruction before is the cached read of `weights` (gcc -O2 keeps the
 * order: `mov (%rcx),%rcx` then `movsbq (%rsi,%r8,1),%rcx`).
 *
 * Known answer: the time is `fresh`'s (its page faults); `weights`, read
 * from L1, is almost none of it.
 *
 * Build: gcc -O2 -g -o soft_page_faults soft_page_faults.c
 * Run:   ./soft_page_faults [GIB]
 */
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>

#define WEIGHTS 512

/* `weights` is volatile: its read stays before the read of `fresh`. */
__attribute__((noipa)) static long walk(volatile const long *weights, const char *fresh, long len) {
    long sum = 0;
    for (long i = 0; i < len; i += 4096) {
        sum += weights[(i >> 12) % WEIGHTS];
        sum += fresh[i];
    }
    return sum;
}

int main(int argc, char **argv) {
    long len = (argc > 1 ? atol(argv[1]) : 2) << 30;
    long *weights = malloc(WEIGHTS * sizeof(long));
    for (long i = 0; i < WEIGHTS; i++)
        weights[i] = i % 5;
    char *fresh = mmap(0, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (!weights || fresh == MAP_FAILED) {
        fprintf(stderr, "soft_page_faults: out of memory\n");
        return 1;
    }
    printf("soft_page_faults sum=%ld\n", walk(weights, fresh, len));
    munmap(fresh, len);
    free(weights);
    return 0;
}
