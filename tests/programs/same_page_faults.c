/* One page faulted in again and again: MADV_DONTNEED drops it, the next
 * write maps a fresh zero page (a minor fault on the same address), 3,000
 * times in a row. Prints the sum of what it read back. */
#include <stdio.h>
#include <sys/mman.h>

int main(void) {
    volatile char *page = mmap(NULL, 4096, PROT_READ | PROT_WRITE,
                               MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (page == MAP_FAILED)
        return 1;
    long sum = 0;
    for (int i = 0; i < 3000; i++) {
        madvise((void *)page, 4096, MADV_DONTNEED);
        page[0] = 1;
        sum += page[0];
    }
    printf("%ld\n", sum);
    return 0;
}
