/* 1,000 threads, 50 alive at a time, each allocating and touching a buffer. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

/* The buffer escapes, so gcc cannot optimise the allocation away. */
double *volatile sink;

static void *work(void *arg) {
    long n = 1 << 14;
    double *a = malloc(n * sizeof(double));
    sink = a;
    double s = 0;
    for (int r = 0; r < 20; r++)
        for (long i = 0; i < n; i++) s += (a[i] = i + r + (long)arg);
    free(a);
    return (void *)(long)(s > 0);
}

int main(void) {
    long ok = 0;
    for (int batch = 0; batch < 20; batch++) {
        pthread_t t[50];
        for (long i = 0; i < 50; i++) pthread_create(&t[i], NULL, work, (void *)i);
        for (int i = 0; i < 50; i++) {
            void *r;
            pthread_join(t[i], &r);
            ok += (long)r;
        }
    }
    printf("threads ok %ld\n", ok);
    return 0;
}
