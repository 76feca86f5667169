/* stack_frames: hot arrays on the stack, in the frames of known functions.
 *
 *   single  main calls hot_locals(), whose local array (32 KiB of doubles)
 *           it reads at random: the stack samples are in hot_locals's frame.
 *   caller  main calls owns_array(), whose local array reads_array() (a
 *           callee) reads at random: the samples are in owns_array's frame,
 *           one frame above the sampled function.
 *   threads two threads, one in left_locals(), one in right_locals(), each
 *           reading its own local array: two functions' frames are hot.
 *   shared  main calls shares_array(), which reads its local array alone
 *           for 20 ms of CPU time, then starts a thread and, like the
 *           thread, reads the array through reads_array(): the thread
 *           reads another thread's stack (as OpenMP workers read the
 *           shared variables in the master's frame).
 *
 * Known answer: the stack rows name the function that owns the array.
 *
 * Run: ./stack_frames single|caller|threads|shared [ROUNDS, default 40000000]
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define N 4096

/* Random reads of `buf`: an LCG picks each index. */
__attribute__((noipa)) static double reads_array(const double *buf, long rounds) {
    double s = 0;
    unsigned x = 12345;
    for (long r = 0; r < rounds; r++) {
        x = x * 1103515245u + 12345u;
        s += buf[(x >> 8) % N];
    }
    return s;
}

__attribute__((noipa)) static double hot_locals(long rounds) {
    double buf[N];
    for (int i = 0; i < N; i++)
        buf[i] = i * 0.5;
    double s = 0;
    unsigned x = 777;
    for (long r = 0; r < rounds; r++) {
        x = x * 1103515245u + 12345u;
        s += buf[(x >> 8) % N];
    }
    return s;
}

__attribute__((noipa)) static double owns_array(long rounds) {
    double buf[N];
    for (int i = 0; i < N; i++)
        buf[i] = i * 0.25;
    return reads_array(buf, rounds);
}

__attribute__((noipa)) static double left_locals(long rounds) {
    double left[N];
    for (int i = 0; i < N; i++)
        left[i] = i * 1.5;
    double s = 0;
    unsigned x = 99;
    for (long r = 0; r < rounds; r++) {
        x = x * 1103515245u + 12345u;
        s += left[(x >> 8) % N];
    }
    return s;
}

__attribute__((noipa)) static double right_locals(long rounds) {
    double right[N];
    for (int i = 0; i < N; i++)
        right[i] = i * 2.5;
    double s = 0;
    unsigned x = 4242;
    for (long r = 0; r < rounds; r++) {
        x = x * 1664525u + 1013904223u;
        s -= right[(x >> 8) % N];
    }
    return s;
}

/* The array another thread reads, and what it found. */
struct share {
    const double *buf;
    long rounds;
    double s;
};

static void *reads_shared(void *arg) {
    struct share *sh = arg;
    sh->s = reads_array(sh->buf, sh->rounds);
    return NULL;
}

static double thread_cpu_ms(void) {
    struct timespec t;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

/* What the warm-up read (kept, so that it is not optimised away). */
static volatile double warm_up;

__attribute__((noipa)) static double shares_array(long rounds) {
    double shared[N];
    for (int i = 0; i < N; i++)
        shared[i] = i * 0.75;
    struct share sh = {shared, rounds, 0};
    /* Alone first, for 20 ms of this thread's CPU time (ten sampling
     * periods at the default), so that the profiler has seen this frame
     * on this thread before the other thread reads in it: on a loaded
     * machine the other thread could otherwise do all its reads before
     * this one is sampled once. */
    double start = thread_cpu_ms();
    while (thread_cpu_ms() - start < 20)
        warm_up += reads_array(shared, 100000);
    pthread_t t;
    if (pthread_create(&t, NULL, reads_shared, &sh))
        return -1;
    double mine = reads_array(shared, rounds);
    pthread_join(t, NULL);
    return mine + sh.s;
}

static long rounds;
static double results[2];

static void *left_thread(void *arg) {
    (void)arg;
    results[0] = left_locals(rounds);
    return NULL;
}

static void *right_thread(void *arg) {
    (void)arg;
    results[1] = right_locals(rounds);
    return NULL;
}

int main(int argc, char **argv) {
    const char *mode = argc > 1 ? argv[1] : "single";
    rounds = argc > 2 ? atol(argv[2]) : 40000000L;
    double s;
    if (strcmp(mode, "single") == 0) {
        s = hot_locals(rounds);
    } else if (strcmp(mode, "caller") == 0) {
        s = owns_array(rounds);
    } else if (strcmp(mode, "threads") == 0) {
        pthread_t a, b;
        if (pthread_create(&a, NULL, left_thread, NULL) || pthread_create(&b, NULL, right_thread, NULL))
            return 1;
        pthread_join(a, NULL);
        pthread_join(b, NULL);
        s = results[0] + results[1];
    } else if (strcmp(mode, "shared") == 0) {
        s = shares_array(rounds);
    } else {
        fprintf(stderr, "usage: stack_frames single|caller|threads|shared [ROUNDS]\n");
        return 2;
    }
    printf("stack_frames %s s=%g\n", mode, s);
    return 0;
}
