// inline: symbolisation of inlined functions and C++ templates.
//
// gather() calls gather_loop(), which g++ -O2 inlines: the code-centric
// tree must show gather_loop as its own (inlined) node below gather, with
// lines of gather_loop's body. sum_strided<double> is a function template
// instance: its name must come out demangled.
//
// Build: g++ -O2 -g -o inline inline.cpp   Run: ./inline [REPEAT]
#include <cstdio>
#include <cstdlib>
#include <vector>

static inline double gather_loop(const double *a, const long *idx, long n) {
    double s = 0.0;
    for (long i = 0; i < n; i++)
        s += a[idx[i]];
    return s;
} // end of gather_loop

__attribute__((noinline)) double gather(const double *a, const long *idx, long n) {
    return gather_loop(a, idx, n) * 0.5;
}

template <typename T>
__attribute__((noinline)) T sum_strided(const std::vector<T> &v, long stride) {
    T s = 0;
    for (long start = 0; start < stride; start++)
        for (std::size_t i = start; i < v.size(); i += stride)
            s += v[i];
    return s;
}

int main(int argc, char **argv) {
    int repeat = argc > 1 ? std::atoi(argv[1]) : 2;
    const long n = 4L << 20;
    std::vector<double> table(n);
    std::vector<long> idx(n);
    unsigned long x = 12345;
    for (long i = 0; i < n; i++) {
        table[i] = double(i % 11);
        x = x * 6364136223846793005UL + 1442695040888963407UL;
        idx[i] = long((x >> 17) % n);
    }
    double s = 0.0;
    for (int r = 0; r < repeat; r++) {
        s += gather(table.data(), idx.data(), n);
        s += sum_strided(table, 4099);
    }
    std::printf("inline repeat=%d checksum=%.1f\n", repeat, s);
    return 0;
}
