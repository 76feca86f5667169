// operator new/delete and std::vector reach the interposed malloc/free.
#include <cstdio>
#include <vector>

struct Grid {
    std::vector<double> cells;
    explicit Grid(size_t n) : cells(n, 1.0) {}
};

int main() {
    Grid *g = new Grid(1 << 22);
    double *raw = new double[1 << 20];
    double s = 0;
    for (int r = 0; r < 30; r++)
        for (size_t i = 0; i < g->cells.size(); i += 8) s += g->cells[(i * 4099) & ((1 << 22) - 1)];
    for (int i = 0; i < (1 << 20); i++) raw[i] = i;
    std::printf("cxx %.0f %.0f\n", s, raw[12345]);
    delete[] raw;
    delete g;
    return 0;
}
