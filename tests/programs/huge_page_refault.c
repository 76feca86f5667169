/* A 2 MiB heap block aligned to 2 MiB and advised to be a transparent
 * huge page (MADV_HUGEPAGE) is written, one byte per 4 KiB page; then
 * its second half is dropped (MADV_DONTNEED: where it was a huge page,
 * the kernel splits it) and written again, page by page. The block's
 * 512 pages are first touched once; the second pass faults 256 pages
 * in again, one 4 KiB page each. Prints the sum of the bytes read back.
 *
 * The second half is advised MADV_NOHUGEPAGE before it is dropped.
 * Otherwise the kernel's khugepaged, which may collapse a range with up
 * to 511 of its 512 pages missing (max_ptes_none), could make the half
 * one huge page again while the program runs (a run with a 3 s pause
 * there and khugepaged's scan every 100 ms: one fault in all instead of
 * 257), and the second pass would fault fewer pages, or none.
 * gcc -O1 */
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>

#define BYTES (2 << 20)
#define PAGE 4096

static __attribute__((noipa)) void touch(volatile char *p, long from, long to) {
    for (long i = from; i < to; i += PAGE)
        p[i] = (char)(i / PAGE);
}

int main(void) {
    char *region = aligned_alloc(BYTES, BYTES);
    if (!region)
        return 1;
    madvise(region, BYTES, MADV_HUGEPAGE);
    touch(region, 0, BYTES);
    madvise(region + BYTES / 2, BYTES / 2, MADV_NOHUGEPAGE);
    madvise(region + BYTES / 2, BYTES / 2, MADV_DONTNEED);
    touch(region, BYTES / 2, BYTES);
    long sum = 0;
    for (long i = 0; i < BYTES; i += PAGE)
        sum += region[i];
    printf("%ld\n", sum);
    free(region);
    return 0;
}
