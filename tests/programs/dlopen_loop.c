/* Loads and unloads libtable.so many times (argv[1] = path, argv[2] =
 * iterations); the last load does real work on the library's static table,
 * which the data-centric view must name `lib_table`. */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv) {
    int iterations = argc > 2 ? atoi(argv[2]) : 200;
    double total = 0;
    for (int i = 0; i < iterations; i++) {
        void *h = dlopen(argv[1], RTLD_NOW);
        if (!h) {
            fprintf(stderr, "dlopen: %s\n", dlerror());
            return 1;
        }
        double (*sweep)(int) = (double (*)(int))dlsym(h, "lib_sweep");
        total += sweep(i == iterations - 1 ? 40 : 0);
        if (i != iterations - 1) dlclose(h);
    }
    printf("dlopen_loop %d done %.0f\n", iterations, total);
    return 0;
}
