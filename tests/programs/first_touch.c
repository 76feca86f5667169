/* Touches every page of a 4 MiB heap block and a 1 MiB static array once:
 * one page fault each (used to drive the hardware sample path with a
 * software page-fault event). Transparent huge pages are off for the
 * process: under THP "always" (Debian's kernels) the first touch of a
 * 2 MiB-aligned half of the block mapped it whole, one fault for 512
 * pages. */
#include <stdio.h>
#include <stdlib.h>
#include <sys/prctl.h>

static char table[1 << 20];

int main(void) {
    if (prctl(PR_SET_THP_DISABLE, 1, 0, 0, 0) != 0) {
        perror("prctl(PR_SET_THP_DISABLE)");
        return 1;
    }
    size_t n = 4 << 20;
    char *block = malloc(n);
    if (!block)
        return 1;
    for (size_t i = 0; i < n; i += 4096)
        block[i] = 1;
    for (size_t i = 0; i < sizeof table; i += 4096)
        table[i] = 2;
    printf("%d\n", block[4096] + table[4096]);
    free(block);
    return 0;
}
