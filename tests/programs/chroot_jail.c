/* A program that confines itself as daemons and build sandboxes do:
 * it changes its root to an empty directory (`chroot`, then `chdir("/")`),
 * closes every descriptor from 3 up (`closefrom`), then computes on a
 * heap array for about 0.3 s of CPU time and prints the sum. Without
 * privileges for `chroot` it first enters a user namespace of its own
 * (`unshare(CLONE_NEWUSER)`, which a single-threaded process may). Under
 * a profiler, every file the profiler writes after the `chroot` must
 * still reach the measurements directory outside the new root.
 *
 * Build: gcc -O1 -g -o chroot_jail chroot_jail.c
 * Run:   ./chroot_jail EMPTY_DIR
 * Prints "sum S" (the same in every run); exits 0, or 3 if the root
 * cannot be changed.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#define WORDS (1 << 20)

static __attribute__((noipa)) double sweep(const double *jail_array, long n) {
    double s = 0;
    for (long i = 0; i < n; i++)
        s += jail_array[i];
    return s;
}

static double cpu_seconds(void) {
    struct timespec t;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: chroot_jail EMPTY_DIR\n");
        return 2;
    }
    double *jail_array = malloc(WORDS * sizeof *jail_array);
    if (!jail_array)
        return 1;
    for (long i = 0; i < WORDS; i++)
        jail_array[i] = (double)(i % 7);
    if (chroot(argv[1]) != 0) {
        if (errno != EPERM || unshare(CLONE_NEWUSER) != 0 || chroot(argv[1]) != 0) {
            perror("chroot");
            return 3;
        }
    }
    if (chdir("/") != 0)
        return 3;
    closefrom(3);
    double sum = 0, start = cpu_seconds();
    long rounds = 0;
    while (cpu_seconds() - start < 0.3 || rounds < 10) {
        sum += sweep(jail_array, WORDS);
        rounds++;
    }
    /* The sum of one sweep, the same whatever the number of rounds. */
    printf("sum %.0f\n", sum / (double)rounds);
    free(jail_array);
    return 0;
}
