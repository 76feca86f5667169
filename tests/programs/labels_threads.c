/* hpcrun.h calls from several threads at once, while samples arrive:
 * each of 4 threads, ITER times: malloc a 16 KiB block, name it "t<i>"
 * with hpcrun_label, register a 1 KiB sub-range as "sub", read both,
 * unregister, free. Prints the total (the same with and without the
 * profiler). Known answers for the allocation log: ITER blocks per thread
 * label, 4 * ITER registered "sub" ranges, all unregistered.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#include "hpcrun.h"

#define THREADS 4
#define BLOCK 16384
#define ITER 2000

static double totals[THREADS];

static void *work(void *arg)
{
    int t = (int)(long)arg;
    char name[8] = {'t', (char)('0' + t), 0};
    double total = 0;
    for (int it = 0; it < ITER; it++) {
        double *p = malloc(BLOCK);
        if (!p)
            abort();
        hpcrun_label(p, name);
        double *sub = p + 8;
        hpcrun_register(sub, 1024, "sub");
        for (int i = 0; i < BLOCK / 8; i++)
            p[i] = i;
        for (int r = 0; r < 4; r++)
            for (int i = 0; i < BLOCK / 8; i++)
                total += p[i] + sub[i % 128];
        hpcrun_unregister(sub);
        free(p);
    }
    totals[t] = total;
    return NULL;
}

int main(void)
{
    pthread_t th[THREADS];
    for (long t = 0; t < THREADS; t++)
        if (pthread_create(&th[t], NULL, work, (void *)t) != 0)
            return 1;
    double sum = 0;
    for (int t = 0; t < THREADS; t++) {
        pthread_join(th[t], NULL);
        sum += totals[t];
    }
    printf("ok %.0f\n", sum);
    return 0;
}
