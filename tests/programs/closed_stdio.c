/* Started with descriptors 0, 1 and 2 closed (`prog FILE <&- >&- 2>&-`):
 * writes into FILE which of them were open at start and the number its
 * first `open` got (the lowest free one: 0 natively), then computes a
 * little. Exits 0. */
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

int main(int argc, char **argv) {
    if (argc < 2)
        return 2;
    int open_at_start[3];
    for (int fd = 0; fd < 3; fd++)
        open_at_start[fd] = fcntl(fd, F_GETFD) != -1;
    int first = open("/dev/null", O_RDONLY);
    char line[128];
    int n = snprintf(line, sizeof line, "open at start: %d %d %d; first open: %d\n",
                     open_at_start[0], open_at_start[1], open_at_start[2], first);
    int out = open(argv[1], O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (out < 0 || write(out, line, n) != n)
        return 1;
    close(out);
    volatile double x = 0;
    for (long i = 0; i < 100000000; i++)
        x += i;
    return 0;
}
