/* truth_alloc_log: an LD_PRELOAD library for the ground-truth harness's
 * cache simulation (benches/src/bin/truth/trace.rs, docs/ACCURACY.md).
 * Under `valgrind --tool=lackey --trace-mem=yes --log-fd=N`, it writes
 * every heap allocation and free of the program to the same descriptor N,
 * so that they arrive in order with lackey's memory trace:
 *
 *   A <addr hex> <size> <frames>   frames: <module>+<offset hex>,...
 *   F <addr hex>
 *
 * (module offsets from dladdr: the return addresses of the call stack,
 * innermost first, starting with malloc's caller). It logs only when
 * TRUTH_ALLOC_FD is set and the running executable is TRUTH_ALLOC_EXE
 * (the valgrind launcher, which sees the same environment, is not).
 *
 * Build: gcc -O2 -shared -fPIC -o truth_alloc_log.so truth_alloc_log.c
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <execinfo.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

extern void *__libc_malloc(size_t);
extern void *__libc_calloc(size_t, size_t);
extern void *__libc_realloc(void *, size_t);
extern void *__libc_memalign(size_t, size_t);
extern void __libc_free(void *);

static int log_fd = -2; /* -2: not decided yet, -1: off */
static __thread int busy;

static int fd(void) {
    if (log_fd == -2) {
        const char *s = getenv("TRUTH_ALLOC_FD"), *want = getenv("TRUTH_ALLOC_EXE");
        char exe[4096];
        ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
        log_fd = -1;
        if (s && want && n > 0) {
            exe[n] = 0;
            if (strcmp(exe, want) == 0)
                log_fd = atoi(s);
        }
    }
    return log_fd;
}

static void put(const char *buf, size_t len) {
    while (len > 0) {
        ssize_t n = write(log_fd, buf, len);
        if (n <= 0)
            return;
        buf += n;
        len -= (size_t)n;
    }
}

__attribute__((noinline)) static void logged(void *p, size_t size) {
    if (!p || busy || fd() < 0)
        return;
    busy = 1;
    void *frames[24];
    int n = backtrace(frames, 24);
    char line[4096];
    int len = snprintf(line, sizeof line, "A %lx %zu ", (unsigned long)p, size);
    /* frames[0] is this function, frames[1] the hook, frames[2] the caller. */
    for (int i = 2; i < n && len < (int)sizeof line - 600; i++) {
        Dl_info info;
        if (dladdr(frames[i], &info) && info.dli_fname)
            len += snprintf(line + len, sizeof line - (size_t)len, "%s%s+%lx", i > 2 ? "," : "",
                            info.dli_fname,
                            (unsigned long)((char *)frames[i] - (char *)info.dli_fbase));
    }
    line[len++] = '\n';
    put(line, (size_t)len);
    busy = 0;
}

static void freed(void *p) {
    if (!p || busy || fd() < 0)
        return;
    char line[64];
    int len = snprintf(line, sizeof line, "F %lx\n", (unsigned long)p);
    put(line, (size_t)len);
}

void *malloc(size_t n) {
    void *p = __libc_malloc(n);
    logged(p, n);
    return p;
}

void *calloc(size_t k, size_t n) {
    void *p = __libc_calloc(k, n);
    logged(p, k * n);
    return p;
}

void *realloc(void *old, size_t n) {
    void *p = __libc_realloc(old, n);
    if (p) {
        freed(old);
        logged(p, n);
    }
    return p;
}

void free(void *p) {
    freed(p);
    __libc_free(p);
}

int posix_memalign(void **out, size_t align, size_t n) {
    void *p = __libc_memalign(align, n);
    if (!p)
        return 12; /* ENOMEM */
    logged(p, n);
    *out = p;
    return 0;
}

void *aligned_alloc(size_t align, size_t n) {
    void *p = __libc_memalign(align, n);
    logged(p, n);
    return p;
}

void *memalign(size_t align, size_t n) {
    void *p = __libc_memalign(align, n);
    logged(p, n);
    return p;
}
