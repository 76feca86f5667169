/* Two arrays of the same size, `hot` read 64 times for each read of
 * `cold`, plus blocks from every other entry of the malloc family, all
 * from whichever allocator serves `malloc`. argv[1] names the allocator
 * that should serve (glibc, jemalloc, tcmalloc, mimalloc, bump): the
 * program asks that allocator, by its own query functions, whether the
 * blocks are its own, and prints the answers and a checksum of the work.
 * argv[2]: passes over `hot` (default 128); argv[3] `count`: print the
 * bytes the allocator counts at the end (the bump allocator: all it
 * ever served).
 *
 * Built plain (the allocator preloaded), linked with the allocator, or
 * together with bump_alloc.c (a malloc family of the program's own). */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <malloc.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define N (1L << 20) /* longs: 8 MiB an array */

/* Looks a query function up wherever it is defined; exits if missing. */
static void *query(const char *name) {
    void *f = dlsym(RTLD_DEFAULT, name);
    if (!f) {
        printf("no %s: the allocator is not loaded\n", name);
        exit(3);
    }
    return f;
}

/* 1 if `alloc` owns the block `p`. */
static int owns(const char *alloc, void *p) {
    if (!strcmp(alloc, "tcmalloc")) {
        int (*own)(const void *) = (int (*)(const void *))query("MallocExtension_GetOwnership");
        return own(p) == 1; /* MallocExtension_kOwned */
    }
    if (!strcmp(alloc, "mimalloc")) {
        _Bool (*in)(const void *) = (_Bool (*)(const void *))query("mi_is_in_heap_region");
        return in(p);
    }
    if (!strcmp(alloc, "bump")) {
        int (*in)(const void *) = (int (*)(const void *))query("bump_owns");
        return in(p);
    }
    return 1; /* glibc, jemalloc: by their statistics below */
}

/* Bytes the allocator says are allocated now (0: it does not say). */
static size_t allocated_bytes(const char *alloc) {
    if (!strcmp(alloc, "jemalloc")) {
        int (*mallctl)(const char *, void *, size_t *, void *, size_t) =
            (int (*)(const char *, void *, size_t *, void *, size_t))query("mallctl");
        uint64_t epoch = 1;
        size_t len = sizeof epoch;
        mallctl("epoch", &epoch, &len, &epoch, len);
        size_t bytes = 0;
        len = sizeof bytes;
        if (mallctl("stats.allocated", &bytes, &len, NULL, 0) != 0)
            return 0;
        return bytes;
    }
    if (!strcmp(alloc, "tcmalloc")) {
        int (*get)(const char *, size_t *) =
            (int (*)(const char *, size_t *))query("MallocExtension_GetNumericProperty");
        size_t bytes = 0;
        return get("generic.current_allocated_bytes", &bytes) ? bytes : 0;
    }
    if (!strcmp(alloc, "bump")) {
        size_t (*served)(void) = (size_t (*)(void))query("bump_allocated_bytes");
        return served();
    }
    if (!strcmp(alloc, "glibc")) {
        struct mallinfo2 m = mallinfo2();
        return m.uordblks + m.hblkhd;
    }
    return 0;
}

int main(int argc, char **argv) {
    const char *alloc = argc > 1 ? argv[1] : "glibc";
    long passes = argc > 2 ? atol(argv[2]) : 128;
    size_t before = allocated_bytes(alloc);

    long *hot = malloc(N * sizeof(long));
    long *cold = calloc(N, sizeof(long));
    long *table = NULL;
    if (posix_memalign((void **)&table, 64, 1 << 20) != 0)
        return 1;
    long *grown = malloc(1024);
    grown = realloc(grown, 2 << 20);
    long *aligned = aligned_alloc(4096, 1 << 20);
    long *old_style = memalign(256, 1 << 20);
    long *paged = valloc(1 << 20);
    if (!hot || !cold || !grown || !aligned || !old_style || !paged)
        return 1;

    void *blocks[] = {hot, cold, table, grown, aligned, old_style, paged};
    const char *names[] = {"hot", "cold", "table", "grown", "aligned", "old_style", "paged"};
    printf("served by %s:", alloc);
    for (int i = 0; i < 7; i++)
        printf(" %s=%s", names[i], owns(alloc, blocks[i]) ? "yes" : "NO");
    printf("\n");
    size_t after = allocated_bytes(alloc);
    if (strcmp(alloc, "mimalloc"))
        printf("%s counts the arrays: %s\n", alloc,
               after >= before + 2 * N * sizeof(long) ? "yes" : "NO");

    int zero = 1;
    for (long i = 0; i < N; i++) {
        zero &= cold[i] == 0;
        hot[i] = i & 255;
        cold[i] = i % 7;
    }
    for (long i = 0; i < (1 << 17); i++) {
        table[i] = i;
        aligned[i] = i;
        old_style[i] = i;
        paged[i] = i;
    }
    for (long i = 0; i < (1 << 18); i++)
        grown[i] = i;

    long sum = 0;
    for (long pass = 0; pass < passes; pass++) {
        for (long i = 0; i < N; i++)
            sum += hot[i];
        if (pass % 64 == 0)
            for (long i = 0; i < N; i++)
                sum += cold[i];
    }
    printf("calloc zeroed: %s\nsum %ld\n", zero ? "yes" : "NO", sum + table[5] + grown[7]);
    for (int i = 0; i < 7; i++)
        free(blocks[i]);
    /* Exact: the same natively and under a profiler that takes no
     * memory from the program's allocator (mimalloc does not say). */
    if (argc > 3 && !strcmp(argv[3], "count"))
        printf("%s: %zu bytes allocated at the end\n", alloc, allocated_bytes(alloc));
    return 0;
}
