/* No thread but the program's: it counts its threads, enters a new user
 * namespace (which needs a single-threaded process), then starts and
 * joins a thread of its own. */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int threads(void) {
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    int n = -1;
    while (f && fgets(line, sizeof line, f))
        if (sscanf(line, "Threads: %d", &n) == 1)
            break;
    if (f)
        fclose(f);
    return n;
}

static __attribute__((noipa)) double work(long n) {
    double s = 0;
    for (long i = 1; i < n; i++)
        s += 1.0 / (double)i;
    return s;
}

static void *worker(void *arg) {
    *(double *)arg = work(10000000);
    return NULL;
}

int main(int argc, char **argv) {
    double s = work(30000000);
    /* With an argument: allocate as it works, for a while (a
     * single-threaded program's checkpoints are written by its
     * allocations). */
    for (int r = 0; argc > 1 && r < 100; r++) {
        double *b = malloc(1 << 20);
        b[r] = work(2000000);
        s += b[r];
        free(b);
    }
    printf("threads %d\n", threads());
    int rc = unshare(CLONE_NEWUSER);
    printf("unshare %d %s\n", rc, rc == 0 ? "ok" : strerror(errno));
    printf("threads %d\n", threads());
    double w = 0;
    pthread_t t;
    pthread_create(&t, NULL, worker, &w);
    pthread_join(t, NULL);
    printf("work %.3f %.3f\n", s, w);
    return 0;
}
