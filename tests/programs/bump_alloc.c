/* A malloc family of the program's own: a bump allocator on one private
 * mapping (blocks are never reused), with a 16-byte header holding each
 * block's size. bump_owns(p) says whether a block is its own and
 * bump_allocated_bytes() how many bytes it handed out (live or freed).
 * calloc and realloc call malloc and free by name, as many allocators
 * do (in a shared library, that call goes through symbol lookup). */
#define _GNU_SOURCE
#include <errno.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>

#define ARENA (4UL << 30)
#define HEADER 16

static char *arena;
static _Atomic size_t used;
static _Atomic size_t served;

static char *arena_start(void) {
    if (!arena) {
        void *p = mmap(NULL, ARENA, PROT_READ | PROT_WRITE,
                       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
        if (p == MAP_FAILED)
            return NULL;
        char *expected = NULL;
        if (!atomic_compare_exchange_strong((_Atomic(char *) *)&arena, &expected, p))
            munmap(p, ARENA);
    }
    return arena;
}

static void *bump(size_t align, size_t size) {
    char *base = arena_start();
    if (!base || size > ARENA)
        return NULL;
    if (align < HEADER)
        align = HEADER;
    for (;;) {
        size_t at = atomic_load(&used);
        size_t start = (at + HEADER + align - 1) & ~(align - 1);
        size_t end = start + size;
        if (end > ARENA) {
            errno = ENOMEM;
            return NULL;
        }
        if (atomic_compare_exchange_weak(&used, &at, end)) {
            atomic_fetch_add(&served, size);
            *(size_t *)(base + start - HEADER) = size;
            return base + start;
        }
    }
}

int bump_owns(const void *p) {
    return arena && (const char *)p >= arena && (const char *)p < arena + ARENA;
}

size_t bump_allocated_bytes(void) { return atomic_load(&served); }

void *malloc(size_t size) { return bump(HEADER, size); }

void free(void *p) { (void)p; }

void *calloc(size_t n, size_t size) {
    if (size && n > SIZE_MAX / size) {
        errno = ENOMEM;
        return NULL;
    }
    return malloc(n * size); /* fresh mapping: zero already */
}

size_t malloc_usable_size(void *p) { return p ? *(size_t *)((char *)p - HEADER) : 0; }

void *realloc(void *p, size_t size) {
    void *q = malloc(size);
    if (q && p) {
        size_t old = malloc_usable_size(p);
        memcpy(q, p, old < size ? old : size);
        free(p);
    }
    return q;
}

int posix_memalign(void **out, size_t align, size_t size) {
    if (align < sizeof(void *) || (align & (align - 1)))
        return EINVAL;
    void *p = bump(align, size);
    if (!p)
        return ENOMEM;
    *out = p;
    return 0;
}

void *aligned_alloc(size_t align, size_t size) { return bump(align, size); }

void *memalign(size_t align, size_t size) { return bump(align, size); }

void *valloc(size_t size) { return bump(4096, size); }

void *pvalloc(size_t size) { return bump(4096, (size + 4095) & ~4095UL); }
