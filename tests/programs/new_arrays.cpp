// Two arrays from `new double[N]`, `hot` read 64 times for each read of
// `cold`, plus blocks from the other forms of operator new (nothrow,
// aligned) and their deletes (sized, aligned). argv[1] names the
// allocator that should serve (glibc, tcmalloc, mimalloc): the program
// asks it, by its own query functions, whether the arrays are its own.
// argv[2]: passes over `hot` (default 128). With argv[1] "throw": a
// `new` of a size no allocator can serve throws std::bad_alloc, which is
// caught, and the program goes on allocating and exits 3.
#include <dlfcn.h>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <new>

#define N (1L << 20) /* doubles: 8 MiB an array */

// Looks a query function up wherever it is defined; exits if missing.
static void *query(const char *name) {
    void *f = dlsym(RTLD_DEFAULT, name);
    if (!f) {
        std::printf("no %s: the allocator is not loaded\n", name);
        std::exit(4);
    }
    return f;
}

// 1 if `alloc` owns the block `p`.
static int owns(const char *alloc, void *p) {
    if (!std::strcmp(alloc, "tcmalloc")) {
        auto own = (int (*)(const void *))query("MallocExtension_GetOwnership");
        return own(p) == 1; // MallocExtension_kOwned
    }
    if (!std::strcmp(alloc, "mimalloc")) {
        auto in = (bool (*)(const void *))query("mi_is_in_heap_region");
        return in(p);
    }
    return 1;
}

static int throws(void) {
    volatile size_t huge = (size_t)1 << 62;
    int caught = 0;
    for (int i = 0; i < 3; i++) {
        try {
            double *p = new double[huge / sizeof(double)];
            p[0] = 1;
            std::printf("huge block served\n");
            delete[] p;
        } catch (const std::bad_alloc &) {
            caught++;
        }
    }
    // Allocation goes on as before after the exceptions.
    double *after = new double[N];
    for (long i = 0; i < N; i++)
        after[i] = (double)i;
    double s = 0;
    for (int r = 0; r < 64; r++)
        for (long i = 0; i < N; i++)
            s += after[i];
    std::printf("caught %d bad_alloc; sum %.0f\n", caught, s);
    delete[] after;
    return 3;
}

int main(int argc, char **argv) {
    const char *alloc = argc > 1 ? argv[1] : "glibc";
    if (!std::strcmp(alloc, "throw"))
        return throws();
    long passes = argc > 2 ? std::atol(argv[2]) : 128;

    double *hot = new double[N];
    double *cold = new double[N];
    double *quiet = new (std::nothrow) double[N / 8];
    double *lined = new (std::align_val_t(64)) double[N / 8];
    double *one = new double(1.0);
    if (!quiet)
        return 1;
    std::printf("served by %s: hot=%s cold=%s quiet=%s lined=%s\n", alloc,
                owns(alloc, hot) ? "yes" : "NO", owns(alloc, cold) ? "yes" : "NO",
                owns(alloc, quiet) ? "yes" : "NO", owns(alloc, lined) ? "yes" : "NO");

    for (long i = 0; i < N; i++) {
        hot[i] = (double)(i & 255);
        cold[i] = (double)(i % 7);
    }
    for (long i = 0; i < N / 8; i++) {
        quiet[i] = 1;
        lined[i] = 2;
    }
    double s = 0;
    for (long p = 0; p < passes; p++) {
        for (long i = 0; i < N; i++)
            s += hot[i];
        if (p % 64 == 0)
            for (long i = 0; i < N; i++)
                s += cold[i];
    }
    std::printf("sum %.0f %.0f\n", s, *one);
    ::operator delete[](lined, std::align_val_t(64));
    delete[] quiet;
    delete one;
    delete[] cold;
    delete[] hot;
    return 0;
}
