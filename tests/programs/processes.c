/* fork without exec, posix_spawn, vfork + exec, address reuse after free,
 * and a main thread that ends with pthread_exit.
 * argv[1] = mode: "fork", "spawn", "vfork", "reuse" or "pthread_exit". */
#define _GNU_SOURCE
#include <pthread.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;
#define N (1 << 22)

static double sweep(double *a, int rounds) {
    double s = 0;
    for (int r = 0; r < rounds; r++)
        for (long i = 0; i < N; i += 8) s += a[(i * 4099) & (N - 1)];
    return s;
}

/* Not tail calls, so that each keeps its own frame in the allocation path. */
__attribute__((noipa)) static double *make_first(void) {
    double *p = malloc(N * sizeof(double));
    if (p) p[0] = 0;
    return p;
}
__attribute__((noipa)) static double *make_second(void) {
    double *p = malloc(N * sizeof(double));
    if (p) p[0] = 0;
    return p;
}

static void *worker(void *arg) {
    double *a = calloc(N, sizeof(double));
    printf("worker %.0f\n", sweep(a, 20));
    return arg;
}

int main(int argc, char **argv) {
    const char *mode = argc > 1 ? argv[1] : "fork";
    if (!strcmp(mode, "fork")) {
        double *a = calloc(N, sizeof(double));
        pid_t p = fork();
        double s = sweep(a, 20);
        if (p == 0) {
            printf("child %.0f\n", s);
            exit(5);
        }
        int st;
        waitpid(p, &st, 0);
        printf("parent %.0f child exit %d\n", s, WEXITSTATUS(st));
    } else if (!strcmp(mode, "vfork")) {
        pid_t p = vfork();
        if (p == 0) {
            execlp("sh", "sh", "-c", "echo from vfork child; exit 6", (char *)NULL);
            _exit(127);
        }
        int st;
        waitpid(p, &st, 0);
        double *a = calloc(N, sizeof(double));
        printf("vfork exit %d %.0f\n", WEXITSTATUS(st), sweep(a, 10));
    } else if (!strcmp(mode, "pthread_exit")) {
        /* The process ends when its last thread does: that must write
         * every profile too. */
        pthread_t t;
        pthread_create(&t, NULL, worker, NULL);
        printf("main thread leaves\n");
        fflush(stdout);
        pthread_exit(NULL);
    } else if (!strcmp(mode, "spawn")) {
        pid_t p;
        char *args[] = {"sh", "-c", "echo spawned; exit 4", NULL};
        if (posix_spawnp(&p, "sh", NULL, NULL, args, environ) != 0) return 1;
        int st;
        waitpid(p, &st, 0);
        printf("spawn exit %d\n", WEXITSTATUS(st));
    } else {
        /* The second block reuses the first one's address: samples after
         * the free must go to the second allocation site. */
        double *a = make_first();
        for (long i = 0; i < N; i++) a[i] = 1;
        free(a);
        double *b = make_second();
        for (long i = 0; i < N; i++) b[i] = 2;
        printf("reuse %s %.0f\n", a == b ? "same" : "different", sweep(b, 40));
        free(b);
    }
    return 0;
}
