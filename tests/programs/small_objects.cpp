// Small C++ objects read in a hot loop: 64 coefficient records of 64
// bytes (each under hpcrun-rs's --min-bytes, 1024), each made by `new`,
// as C++ codes keep their small parameter objects. `operator new` (the
// C++ library) calls malloc, so the caller of malloc is not the
// program's code; the call path beyond it is, and the records are one
// object of the program's site (64 allocations), not `<small heap
// objects>`.
//
// Prints a checksum (the same with and without the profiler).
//
// Build: g++ -O2 -g small_objects.cpp
#include <cstdio>
#include <cstdlib>

struct Coeff {
    double c[8];
};

enum { RECORDS = 64 };

__attribute__((noinline)) static Coeff **make_records() {
    Coeff **r = new Coeff *[RECORDS];
    for (int i = 0; i < RECORDS; i++) {
        r[i] = new Coeff;
        for (int j = 0; j < 8; j++) r[i]->c[j] = i + j;
    }
    return r;
}

int main(int argc, char **argv) {
    long reps = argc > 1 ? std::atol(argv[1]) : 200;
    Coeff **records = make_records();
    double sum = 0;
    unsigned x = 1;
    for (long k = 0; k < reps * 100000; k++) {
        x = x * 1103515245u + 12345u;
        sum += records[(x >> 16) % RECORDS]->c[k % 8];
    }
    std::printf("checksum %.0f\n", sum);
    return 0;
}
