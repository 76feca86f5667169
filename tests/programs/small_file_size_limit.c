/* Computes in two threads (each allocates, fills and sums 2 MiB blocks
 * for a while), joins the second, then writes 6 bytes to a file of its
 * own (argv[1]) and prints "done, N SIGXFSZ" (N: the SIGXFSZ signals
 * its handler saw). Under a small file-size limit: the shell's
 * (`ulimit -f`), or its own when given argv[2] (the soft limit in
 * bytes). With argv[3] ("handler"), it counts SIGXFSZ in a handler
 * instead of leaving the signal's default action (end the program).
 * Natively no write of its own reaches the limit: "done, 0 SIGXFSZ". */
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

static volatile sig_atomic_t xfsz;
static volatile double sink;

static void on_xfsz(int sig) {
    (void)sig;
    xfsz++;
}

static void *work(void *arg) {
    double s = 0;
    for (int r = 0; r < 200; r++) {
        char *volatile p = malloc(2 << 20);
        memset(p, r, 2 << 20);
        for (int i = 0; i < (2 << 20); i += 64)
            s += p[i];
        free(p);
    }
    sink = s;
    return arg;
}

int main(int argc, char **argv) {
    if (argc < 2)
        return 2;
    if (argc > 2) {
        struct rlimit rl;
        getrlimit(RLIMIT_FSIZE, &rl);
        rl.rlim_cur = strtoul(argv[2], NULL, 10);
        if (setrlimit(RLIMIT_FSIZE, &rl) != 0) {
            perror("setrlimit");
            return 2;
        }
    }
    if (argc > 3)
        signal(SIGXFSZ, on_xfsz);
    pthread_t t;
    if (pthread_create(&t, NULL, work, NULL) != 0)
        return 2;
    work(NULL);
    pthread_join(t, NULL);
    FILE *f = fopen(argv[1], "w");
    if (!f || fputs("small\n", f) < 0 || fclose(f) != 0) {
        perror(argv[1]);
        return 2;
    }
    printf("done, %d SIGXFSZ\n", (int)xfsz);
    return 0;
}
