// Closes its standard error and opens its own data file, which gets
// descriptor 2; then lowers its open-file limit to the descriptors it
// holds and starts a thread, whose sampling event then finds no free
// number (the profiler has something to say), puts the limit back and
// writes its data through descriptor 2. With "raw", it first closes
// every descriptor from 3 up with the close_range system call (past the
// interposed libc calls), the profiler's too. Prints what the data file
// holds.
#define _GNU_SOURCE
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

static volatile double sink;

static void *work(void *arg) {
    (void)arg;
    double s = 0;
    for (long i = 0; i < 20000000; i++)
        s += (double)i * 0.5;
    sink = s;
    return NULL;
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: hostile_stderr DATA_FILE [raw]\n");
        return 2;
    }
    int raw = argc > 2 && strcmp(argv[2], "raw") == 0;
    close(2);
    int fd = open(argv[1], O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd != 2)
        return 3;
    if (raw)
        syscall(SYS_close_range, 3u, ~0u, 0u);
    struct rlimit old, low;
    getrlimit(RLIMIT_NOFILE, &old);
    low = old;
    low.rlim_cur = 3;
    if (setrlimit(RLIMIT_NOFILE, &low) != 0)
        return 4;
    pthread_t t;
    if (pthread_create(&t, NULL, work, NULL) != 0)
        return 5;
    pthread_join(t, NULL);
    if (setrlimit(RLIMIT_NOFILE, &old) != 0)
        return 6;
    static const char data[] = "data: 1 2 3\n";
    if (write(2, data, sizeof data - 1) != (ssize_t)(sizeof data - 1))
        return 7;
    close(2);
    char back[256] = {0};
    FILE *f = fopen(argv[1], "r");
    if (!f)
        return 8;
    size_t n = fread(back, 1, sizeof back - 1, f);
    fclose(f);
    printf("data file: %zu bytes: %s", n, back);
    return 0;
}
