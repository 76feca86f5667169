// cpp_vectors: a C++ class whose arrays are std::vector<double> members,
// sized in the constructor; a hot loop reads one of them with a large
// stride; the others are read once.
//
// The allocations happen inside std::vector (operator new called from
// inlined libstdc++ frames in /usr/include/c++/...); hpcprof-rs steps out
// of those frames to the constructor's member initialiser, and to the
// line that declares the Grid.
//
// Expected finding (data-centric view): `grid.pressure` holds most of the
// samples, named through the inlined std::vector allocation path.
//
// Build: g++ -O2 -g -o cpp_vectors cpp_vectors.cpp   Run: ./cpp_vectors [REPEAT]
#include <cstdio>
#include <cstdlib>
#include <vector>

struct Grid {
    std::vector<double> pressure;
    std::vector<double> velocity;
    std::vector<double> density;

    explicit Grid(std::size_t n)
        : pressure(n, 1.0),
          velocity(n) {
        density.resize(n);
        for (std::size_t i = 0; i < n; i++) {
            velocity[i] = double(i % 13);
            density[i] = double(i % 5);
        }
    }
};

constexpr std::size_t N = std::size_t(4) << 20; // doubles per vector: 32 MiB
constexpr std::size_t STRIDE = 4099;            // doubles: a new page at every access

// Strided sum over one member: one cache and TLB miss per access.
__attribute__((noipa)) static double strided(const std::vector<double> &v, std::size_t stride) {
    double s = 0.0;
    const double *p = v.data();
    std::size_t n = v.size();
    for (std::size_t start = 0; start < stride; start++)
        for (std::size_t i = start; i < n; i += stride)
            s += p[i];
    return s;
}

// Unit-stride sum: streamed, prefetched.
__attribute__((noipa)) static double streamed(const std::vector<double> &v) {
    double s = 0.0;
    for (double x : v)
        s += x;
    return s;
}

int main(int argc, char **argv) {
    int repeat = argc > 1 ? std::atoi(argv[1]) : 2;
    Grid grid(N);
    double sum = 0.0;
    for (int r = 0; r < repeat; r++)
        sum += strided(grid.pressure, STRIDE);
    sum += streamed(grid.velocity) + streamed(grid.density);
    std::printf("cpp_vectors repeat=%d checksum=%.1f\n", repeat, sum);
    return 0;
}
