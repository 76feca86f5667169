/* soft_page_faults: a loop whose time is page faults. Each iteration
 * reads a small, cached array (`weights`, 4 KiB) and the first byte of a
 * page of `fresh`, a mapping never touched before: every such read
 * faults the page in. The faulting read never retires, so a timer sample
 * during its fault can have the IP *at* it; others land one past it.
 *
 * Two orders, the reads back to back:
 *   weights-first: `add (weights),sum` then `movsbq (fresh),f`: at the
 *     faulting read, the instruction before is the cached read;
 *   fresh-first: `movsbq (fresh),f` then `add (weights),sum`: one past
 *     the faulting read, the IP is at the cached read.
 *
 * Known answer: the time is `fresh`'s (its page faults); `weights`, read
 * from L1, is almost none of it.
 *
 * Build: gcc -O2 -g -o soft_page_faults soft_page_faults.c
 * Run:   ./soft_page_faults [GIB] [weights-first|fresh-first]
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>

#define WEIGHTS 512

/* The two reads back to back, in inline assembly so that no compiler
 * puts anything between them: `add (weights),sum` and `movsbq (fresh),f`
 * in either order. */
__attribute__((noipa)) static long weights_first(const long *weights, const char *fresh, long len) {
    long sum = 0, f;
    for (long i = 0; i < len; i += 4096) {
        __asm__ volatile("add (%3),%1\n\tmovsbq (%2),%0"
                         : "=&r"(f), "+r"(sum)
                         : "r"(fresh + i), "r"(weights + (i >> 12) % WEIGHTS)
                         : "memory");
        sum += f;
    }
    return sum;
}

__attribute__((noipa)) static long fresh_first(const long *weights, const char *fresh, long len) {
    long sum = 0, f;
    for (long i = 0; i < len; i += 4096) {
        __asm__ volatile("movsbq (%2),%0\n\tadd (%3),%1"
                         : "=&r"(f), "+r"(sum)
                         : "r"(fresh + i), "r"(weights + (i >> 12) % WEIGHTS)
                         : "memory");
        sum += f;
    }
    return sum;
}

int main(int argc, char **argv) {
    /* Transparent huge pages off for this process: under THP "always" one
     * fault maps 2 MiB (512 pages), and the page counts here are of 4 KiB
     * pages. */
    prctl(PR_SET_THP_DISABLE, 1, 0, 0, 0);
    long len = (argc > 1 ? atol(argv[1]) : 2) << 30;
    long *weights = malloc(WEIGHTS * sizeof(long));
    for (long i = 0; i < WEIGHTS; i++)
        weights[i] = i % 5;
    char *fresh = mmap(0, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (!weights || fresh == MAP_FAILED) {
        fprintf(stderr, "soft_page_faults: out of memory\n");
        return 1;
    }
    int first = argc > 2 && strcmp(argv[2], "fresh-first") == 0;
    long sum = first ? fresh_first(weights, fresh, len) : weights_first(weights, fresh, len);
    printf("soft_page_faults %s sum=%ld\n", first ? "fresh-first" : "weights-first", sum);
    munmap(fresh, len);
    free(weights);
    return 0;
}
