/* A program that fits under `ulimit -v`: argv[2] threads
 * in all (default 2: one more than main, each idle for 0.2 s), then
 * argv[1] blocks of 4 MiB (default 40), each written, then freed.
 * Prints "blocks N" with the number of blocks it got. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void *idle(void *arg) {
    usleep(200000);
    return arg;
}

int main(int argc, char **argv) {
    int n = argc > 1 ? atoi(argv[1]) : 40;
    int threads = argc > 2 ? atoi(argv[2]) : 2;
    pthread_t t[256];
    int started = 0;
    for (int i = 1; i < threads && i < 256; i++)
        if (pthread_create(&t[started], NULL, idle, NULL) == 0) started++;
    char **blocks = calloc(n, sizeof *blocks);
    int got = 0;
    for (int i = 0; i < n; i++) {
        blocks[i] = malloc(4 << 20);
        if (!blocks[i]) break;
        memset(blocks[i], i, 4 << 20);
        got++;
    }
    for (int i = 0; i < started; i++) pthread_join(t[i], NULL);
    for (int i = 0; i < got; i++) free(blocks[i]);
    printf("blocks %d\n", got);
    return got == n ? 0 : 1;
}
