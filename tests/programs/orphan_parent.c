/* A child that learns its parent ended by waiting for getppid() to
 * change, then says whether it became 1 (init's child, natively, unless
 * a subreaper is around): the parent forks it, waits 100 ms and exits.
 * The child gives up after 10 s. Prints the parent's line, then the
 * child's. */
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

int main(void) {
    fflush(stdout);
    pid_t child = fork();
    if (child < 0)
        return 1;
    if (child == 0) {
        pid_t first = getppid();
        for (int i = 0; i < 1000; i++) {
            pid_t now = getppid();
            if (now != first) {
                printf("child: parent ended, ppid %s\n", now == 1 ? "1" : "another process");
                fflush(stdout);
                _exit(0);
            }
            usleep(10000);
        }
        printf("child: parent still there\n");
        fflush(stdout);
        _exit(1);
    }
    usleep(100000);
    printf("parent: exits\n");
    return 0;
}
