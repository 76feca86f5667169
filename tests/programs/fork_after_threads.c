/* Short-lived threads, then a fork (tests/preload.rs): creates and joins
 * argv[1] threads (default 100) that return at once, so none lives to its
 * first sample, then forks; the child exits at once, the parent waits for
 * it. Prints "threads N". */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

static void *nothing(void *arg) { return arg; }

int main(int argc, char **argv) {
    int n = argc > 1 ? atoi(argv[1]) : 100;
    for (int i = 0; i < n; i++) {
        pthread_t t;
        if (pthread_create(&t, NULL, nothing, NULL) != 0) return 1;
        pthread_join(t, NULL);
    }
    fflush(stdout);
    pid_t child = fork();
    if (child < 0) return 1;
    if (child == 0) exit(0);
    int status;
    waitpid(child, &status, 0);
    printf("threads %d\n", n);
    return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : 1;
}
