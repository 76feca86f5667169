/* Mapped memory with known names: three 8 MiB regions, each filled and
 * then summed for the same number of passes:
 *
 * - "input": a file (DIR/input.bin, DIR = argv[1]) written with write()
 *   and mapped read-only, MAP_PRIVATE: an object named DIR/input.bin;
 * - "posix": a POSIX shared-memory object (shm_open
 *   "/hpcrun-mappings-PID"), mapped MAP_SHARED, unlinked at the end: an
 *   object named /dev/shm/hpcrun-mappings-PID;
 * - "sysv": a private System V segment (shmget IPC_PRIVATE, shmat): an
 *   object named "SysV shm id N".
 *
 * Prints the three sums (exact in doubles): the same output with and
 * without the profiler.
 *
 * Build: gcc -O2 -g mappings.c
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/shm.h>
#include <unistd.h>

#define MIB (1024 * 1024)
#define BYTES (8 * MIB)
#define N (BYTES / sizeof(double))
#define PASSES 120

static void fill(double *a)
{
    for (size_t i = 0; i < N; i++)
        a[i] = (double)(i % 1000);
}

__attribute__((noinline)) static double sum(const double *a)
{
    double s = 0;
    for (int p = 0; p < PASSES; p++)
        for (size_t i = 0; i < N; i++)
            s += a[i];
    return s;
}

static void die(const char *what)
{
    perror(what);
    exit(1);
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: mappings DIR\n");
        return 2;
    }

    /* A file, written, then mapped read-only. */
    char path[4096];
    snprintf(path, sizeof path, "%s/input.bin", argv[1]);
    int fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0600);
    if (fd < 0)
        die("open");
    double *buf = malloc(BYTES);
    fill(buf);
    if (write(fd, buf, BYTES) != (ssize_t)BYTES)
        die("write");
    free(buf);
    double *input = mmap(NULL, BYTES, PROT_READ, MAP_PRIVATE, fd, 0);
    if (input == MAP_FAILED)
        die("mmap file");
    close(fd);

    /* POSIX shared memory. */
    char name[64];
    snprintf(name, sizeof name, "/hpcrun-mappings-%d", (int)getpid());
    int sfd = shm_open(name, O_RDWR | O_CREAT | O_EXCL, 0600);
    if (sfd < 0)
        die("shm_open");
    if (ftruncate(sfd, BYTES) != 0)
        die("ftruncate");
    double *posix = mmap(NULL, BYTES, PROT_READ | PROT_WRITE, MAP_SHARED, sfd, 0);
    if (posix == MAP_FAILED)
        die("mmap shm");
    close(sfd);
    fill(posix);

    /* System V shared memory. */
    int id = shmget(IPC_PRIVATE, BYTES, IPC_CREAT | 0600);
    if (id < 0)
        die("shmget");
    double *sysv = shmat(id, NULL, 0);
    if (sysv == (void *)-1)
        die("shmat");
    shmctl(id, IPC_RMID, NULL);
    fill(sysv);

    double a = sum(input), b = sum(posix), c = sum(sysv);
    printf("input %.0f posix %.0f sysv %.0f\n", a, b, c);

    shmdt(sysv);
    munmap(posix, BYTES);
    shm_unlink(name);
    munmap(input, BYTES);
    return 0;
}
