// function_skid: std::function called in a hot loop. Each call lands on
// the first instruction of a `_M_invoke` whose bytes before are a CRT
// stub (`frame_dummy`) or the previous `_M_invoke`'s padding.
//
// Build: g++ -O2 -g -o function_skid function_skid.cpp   Run: ./function_skid [N]
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <vector>

int main(int argc, char **argv) {
    long n = argc > 1 ? atol(argv[1]) : 300000000L;
    std::vector<std::function<long(long)>> fs;
    fs.push_back([](long x) { return x * 3 + 1; });
    fs.push_back([](long x) { return x ^ (x >> 3); });
    long s = 0;
    for (long i = 0; i < n; i++)
        s += fs[i & 1](i);
    printf("function_skid n=%ld sum=%ld\n", n, s);
    return 0;
}
