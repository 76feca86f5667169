// Node-based C++ containers: an unordered_map of NODES nodes (one block
// each) and a std::list of NODES / 4 nodes, then random lookups in the map
// and walks of the list. Usage: node_containers [NODES] [ROUNDS].
#include <cstdio>
#include <cstdlib>
#include <list>
#include <unordered_map>

int main(int argc, char **argv) {
    long n = argc > 1 ? std::atol(argv[1]) : 1000000;
    int rounds = argc > 2 ? std::atoi(argv[2]) : 4;
    std::unordered_map<long, double> table;
    table.reserve(n);
    for (long i = 0; i < n; i++)
        table.emplace((i * 7919) % n, 1.0 * i);
    std::list<double> chain;
    for (long i = 0; i < n / 4; i++)
        chain.push_back(0.5 * i);
    double sum = 0;
    unsigned long seed = 1;
    for (int r = 0; r < rounds; r++) {
        for (long i = 0; i < n; i++) {
            seed = seed * 6364136223846793005ul + 1442695040888963407ul;
            sum += table.find((long)((seed >> 33) % n))->second;
        }
        for (double v : chain)
            sum += v;
    }
    std::printf("checksum %.1f\n", sum);
    return 0;
}
