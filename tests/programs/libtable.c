/* A shared library with a static table, loaded with dlopen by dlopen_loop.c. */
double lib_table[1 << 20];

double lib_sweep(int rounds) {
    double s = 0;
    for (int r = 0; r < rounds; r++)
        for (long i = 0; i < (1 << 20); i += 8) {
            lib_table[(i * 4099) & ((1 << 20) - 1)] += 1.0;
            s += lib_table[i];
        }
    return s;
}
