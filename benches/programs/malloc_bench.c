/* malloc/free pairs at one size: ./malloc_bench SIZE COUNT [DEPTH]
 * Prints the mean time per pair in ns. DEPTH nests the allocation in that
 * many calls, so that unwinding has a realistic call path to walk. */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

void *volatile sink;

__attribute__((noipa)) static void pairs(size_t size, long count, int depth) {
    if (depth > 0) {
        pairs(size, count, depth - 1);
        return;
    }
    for (long i = 0; i < count; i++) {
        char *p = malloc(size);
        p[0] = (char)i;
        sink = p;
        free(p);
    }
}

int main(int argc, char **argv) {
    size_t size = argc > 1 ? strtoul(argv[1], 0, 10) : 64;
    long count = argc > 2 ? atol(argv[2]) : 1000000;
    int depth = argc > 3 ? atoi(argv[3]) : 10;
    struct timespec a, b;
    clock_gettime(CLOCK_MONOTONIC, &a);
    pairs(size, count, depth);
    clock_gettime(CLOCK_MONOTONIC, &b);
    double ns = (b.tv_sec - a.tv_sec) * 1e9 + (b.tv_nsec - a.tv_nsec);
    printf("%.1f\n", ns / count);
    return 0;
}
