/* An anonymous mmap region swept, then a normal exit or a fatal signal
 * (argv[1] = ok, segv, abort, term). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <sys/mman.h>
int main(int argc, char **argv) {
    size_t n = 1 << 24;
    double *m = mmap(0, n * 8, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    for (size_t i = 0; i < n; i++) m[i] = i;
    double s = 0;
    for (int r = 0; r < 8; r++) for (size_t i = 0; i < n; i += 8) s += m[(i * 4099) % n];
    printf("sum %.0f\n", s);
    fflush(stdout);
    if (argc > 1 && !strcmp(argv[1], "segv")) *(volatile int *)0 = 1;
    if (argc > 1 && !strcmp(argv[1], "abort")) abort();
    if (argc > 1 && !strcmp(argv[1], "term")) raise(SIGTERM);
    munmap(m, n * 8);
    return 0;
}
