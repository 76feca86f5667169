/* The cost of short-lived children under the profiler (docs/PERFORMANCE.md,
 * "Start-up and threads"): runs the tiny program CHILD N times, by fork +
 * exec (MODE fork) or posix_spawn (MODE spawn), waiting for each.
 * gcc -O2 -o spawn_children spawn_children.c && gcc -O2 -o tiny_child tiny_child.c
 * ./spawn_children ./tiny_child 200 fork
 * hpcrun-rs -o m ./spawn_children ./tiny_child 200 fork */
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: spawn_children CHILD N [fork|spawn]\n");
        return 2;
    }
    const char *child = argv[1];
    int n = atoi(argv[2]);
    int spawn = argc > 3 && strcmp(argv[3], "spawn") == 0;
    int failed = 0;
    for (int i = 0; i < n; i++) {
        char *args[] = {(char *)child, NULL};
        pid_t pid;
        if (spawn) {
            if (posix_spawn(&pid, child, NULL, NULL, args, environ) != 0) {
                failed++;
                continue;
            }
        } else {
            pid = fork();
            if (pid == 0) {
                execv(child, args);
                _exit(127);
            }
        }
        int status;
        if (pid < 0 || waitpid(pid, &status, 0) < 0 || !WIFEXITED(status) || WEXITSTATUS(status) != 0)
            failed++;
    }
    printf("%d children, %d failed\n", n, failed);
    return failed != 0;
}
