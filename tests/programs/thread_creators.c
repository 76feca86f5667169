/* Worker threads started from a named function (`spawn_workers`, called
 * by main), and one thread started by a worker (`spawn_helper`): every
 * thread sums the same 64 MiB array, so each thread's samples sit in
 * `sum_array`, which hpcprof-rs should place below the code that created
 * the thread (main -> spawn_workers -> ... -> worker -> sum_array, and
 * ... worker -> spawn_helper -> ... -> helper -> sum_array). */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#define N (8 << 20) /* doubles: 64 MiB */
#define WORKERS 2

static double *data;
static double results[WORKERS + 2];
/* Written after each pthread_create call so that no call is a tail call
 * (a tail call leaves the calling function off the creation path). */
static volatile int spawned;

static __attribute__((noipa)) double sum_array(int sweeps) {
    double s = 0;
    for (int r = 0; r < sweeps; r++)
        for (long i = 0; i < N; i += 8)
            s += data[i];
    return s;
}

static __attribute__((noipa)) void *helper(void *arg) {
    results[WORKERS + 1] = sum_array(30);
    return arg;
}

static __attribute__((noipa)) void spawn_helper(pthread_t *t) {
    pthread_create(t, NULL, helper, NULL);
    spawned++;
}

static __attribute__((noipa)) void *worker(void *arg) {
    long id = (long)arg;
    pthread_t t;
    if (id == 0)
        spawn_helper(&t);
    results[id] = sum_array(30);
    if (id == 0)
        pthread_join(t, NULL);
    return NULL;
}

static __attribute__((noipa)) void spawn_workers(pthread_t *t) {
    for (long i = 0; i < WORKERS; i++) {
        pthread_create(&t[i], NULL, worker, (void *)i);
        spawned++;
    }
}

int main(void) {
    data = malloc(N * sizeof(double));
    if (!data)
        return 1;
    for (long i = 0; i < N; i++)
        data[i] = (double)(i & 15);
    pthread_t t[WORKERS];
    spawn_workers(t);
    for (int i = 0; i < WORKERS; i++)
        pthread_join(t[i], NULL);
    printf("%.0f\n", results[0] + results[1] + results[WORKERS + 1]);
    free(data);
    return 0;
}
