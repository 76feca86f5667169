/* Alternate signal stacks of the program's own, one per thread: 3 KiB
 * (smaller than a signal frame with AVX-512 state, so the program never
 * takes a signal on it), exactly sysconf(_SC_MINSIGSTKSZ), that and
 * 1 KiB, and sysconf(_SC_SIGSTKSZ). Each lies between two canary regions;
 * each thread computes for a while, and the threads whose stack holds a
 * frame send themselves SIGUSR1 with an SA_ONSTACK handler. At the end
 * every thread checks that its alternate stack is still reported as
 * installed and that no canary byte changed. */
#define _GNU_SOURCE
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define CANARY 8192
#define ROUNDS 100
#define N (1L << 17)

static double data[N];
static __thread volatile long handled;

static void on_usr1(int s) {
    (void)s;
    handled++;
}

static __attribute__((noipa)) double sweep(int round) {
    double s = 0;
    for (int r = 0; r < 8; r++)
        for (long i = 0; i < N; i++)
            s += data[i] * (double)(round + r + 1);
    return s;
}

struct job {
    const char *name;
    size_t size;
    int own_signals;
    double out;
    int reported, damaged;
    long handled;
};

static void *thread_main(void *arg) {
    struct job *j = arg;
    size_t total = CANARY + j->size + CANARY;
    unsigned char *mem = malloc(total);
    if (!mem)
        return NULL;
    memset(mem, 0x5a, total);
    stack_t ss = {.ss_sp = mem + CANARY, .ss_size = j->size, .ss_flags = 0};
    if (sigaltstack(&ss, NULL) != 0) {
        perror("sigaltstack");
        exit(2);
    }
    double s = 0;
    for (int r = 0; r < ROUNDS; r++) {
        s += sweep(r);
        if (j->own_signals)
            raise(SIGUSR1);
    }
    j->out = s;
    stack_t now;
    j->reported = sigaltstack(NULL, &now) == 0 && now.ss_sp == ss.ss_sp &&
                  now.ss_size == ss.ss_size && !(now.ss_flags & SS_DISABLE);
    stack_t off = {.ss_sp = NULL, .ss_size = 0, .ss_flags = SS_DISABLE};
    if (sigaltstack(&off, NULL) != 0) {
        perror("sigaltstack off");
        exit(3);
    }
    int damaged = 0;
    for (size_t i = 0; i < CANARY; i++)
        damaged += mem[i] != 0x5a;
    for (size_t i = CANARY + j->size; i < total; i++)
        damaged += mem[i] != 0x5a;
    j->damaged = damaged;
    j->handled = handled;
    free(mem);
    return NULL;
}

int main(void) {
    for (long i = 0; i < N; i++)
        data[i] = 1.0 / (double)(i % 11 + 1);
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_usr1;
    sa.sa_flags = SA_ONSTACK | SA_RESTART;
    sigaction(SIGUSR1, &sa, NULL);
    long min = sysconf(_SC_MINSIGSTKSZ), big = sysconf(_SC_SIGSTKSZ);
    if (min < 2048)
        min = 2048;
    if (big < min)
        big = min;
    struct job jobs[4] = {
        {"3 KiB", 3 << 10, 0},
        {"MINSIGSTKSZ", (size_t)min, 1},
        {"MINSIGSTKSZ + 1 KiB", (size_t)min + 1024, 1},
        {"SIGSTKSZ", (size_t)big, 1},
    };
    pthread_t t[4];
    for (int i = 0; i < 4; i++)
        if (pthread_create(&t[i], NULL, thread_main, &jobs[i]) != 0) {
            fprintf(stderr, "pthread_create\n");
            return 4;
        }
    int bad = 0;
    for (int i = 0; i < 4; i++) {
        pthread_join(t[i], NULL);
        printf("%s: reported %s, %d canary bytes changed, %ld own signals, "
               "sum %.3f\n",
               jobs[i].name, jobs[i].reported ? "as installed" : "WRONG",
               jobs[i].damaged, jobs[i].handled, jobs[i].out);
        bad |= !jobs[i].reported || jobs[i].damaged != 0;
    }
    return bad ? 1 : 0;
}
