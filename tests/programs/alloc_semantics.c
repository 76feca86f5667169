/* Checks that every interposed allocation entry point keeps glibc's exact
 * semantics under the profiler. Prints one line per check and "ok N" at the
 * end; exits 1 on the first failure. Run natively and under hpcrun-rs: the
 * output must be identical. */
#define _GNU_SOURCE
#include <errno.h>
#include <malloc.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int checks;
#define CHECK(cond)                                                        \
    do {                                                                   \
        checks++;                                                          \
        if (!(cond)) {                                                     \
            printf("FAILED line %d: %s\n", __LINE__, #cond);               \
            exit(1);                                                       \
        }                                                                  \
    } while (0)

int main(void) {
    long page = sysconf(_SC_PAGESIZE);
    volatile size_t huge = SIZE_MAX / 2; /* hidden from gcc's size warnings */

    /* malloc, small and tracked sizes; malloc_usable_size passes through. */
    char *a = malloc(16), *b = malloc(1 << 20);
    CHECK(a && b && malloc_usable_size(b) >= (1 << 20));
    memset(b, 1, 1 << 20);
    free(a);
    free(b);
    free(NULL);

    /* calloc zeroes, and overflow gives NULL with ENOMEM. */
    int *z = calloc(4096, sizeof(int));
    CHECK(z);
    for (int i = 0; i < 4096; i++) CHECK(z[i] == 0);
    free(z);
    errno = 0;
    CHECK(calloc(huge, 4) == NULL && errno == ENOMEM);

    /* realloc keeps contents; realloc(NULL, n) allocates; realloc(p, 0) frees. */
    char *r = realloc(NULL, 2000);
    CHECK(r);
    memset(r, 7, 2000);
    r = realloc(r, 200000);
    CHECK(r && r[1999] == 7);
    r = realloc(r, 100);
    CHECK(r && r[99] == 7);
    CHECK(realloc(r, 0) == NULL);

    /* reallocarray checks its multiplication. */
    errno = 0;
    CHECK(reallocarray(NULL, huge, 4) == NULL && errno == ENOMEM);
    char *ra = reallocarray(NULL, 100, 40);
    CHECK(ra);
    free(ra);

    /* Alignment is honoured by every aligned entry point. */
    void *p = NULL;
    CHECK(posix_memalign(&p, 4096, 10000) == 0 && ((uintptr_t)p % 4096) == 0);
    free(p);
    p = (void *)1;
    CHECK(posix_memalign(&p, 3, 100) == EINVAL && p == (void *)1);
    CHECK(posix_memalign(&p, 2, 100) == EINVAL);
    void *al = aligned_alloc(256, 4096);
    CHECK(al && ((uintptr_t)al % 256) == 0);
    free(al);
    void *m = memalign(64, 3000);
    CHECK(m && ((uintptr_t)m % 64) == 0);
    free(m);
    void *v = valloc(5000);
    CHECK(v && ((uintptr_t)v % page) == 0);
    free(v);
    void *pv = pvalloc(5000);
    CHECK(pv && ((uintptr_t)pv % page) == 0 && malloc_usable_size(pv) >= (size_t)(2 * page));
    free(pv);

    /* errno survives a successful allocation. */
    errno = 1234;
    void *e = malloc(50000);
    CHECK(e && errno == 1234);
    free(e);
    errno = 4321;
    free(NULL);
    CHECK(errno == 4321);

    printf("ok %d\n", checks);
    return 0;
}
