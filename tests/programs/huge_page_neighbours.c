/* Two static arrays of 1 MiB side by side in one 2 MiB-aligned window of
 * .bss, advised to be a transparent huge page (MADV_HUGEPAGE). `left` is
 * first touched by the thread that main starts (thread 1), `right` by the
 * main thread (thread 0) after it. Where the kernel gives huge pages,
 * thread 1's first fault maps both arrays at once, on its node; otherwise
 * each thread's faults map its own array's 256 pages. Prints "adjacent"
 * when `right` follows `left` directly (declaration order kept by
 * -fno-toplevel-reorder), then the sum.
 * gcc -O1 -pthread -fno-toplevel-reorder */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/mman.h>

#define N (1 << 17) /* doubles: 1 MiB, 256 pages */

static double left[N] __attribute__((aligned(2 << 20)));
static double right[N] __attribute__((aligned(4096)));

static __attribute__((noipa)) void fill(double *a, double v) {
    for (long i = 0; i < N; i++)
        a[i] = v + (double)i;
}

static void *worker(void *arg) {
    (void)arg;
    fill(left, 2.0);
    return NULL;
}

int main(void) {
    madvise(left, 2 << 20, MADV_HUGEPAGE);
    pthread_t t;
    pthread_create(&t, NULL, worker, NULL);
    pthread_join(t, NULL);
    fill(right, 1.0);
    double s = 0;
    for (long i = 0; i < N; i++)
        s += left[i] + right[i];
    /* (Through volatile: a compiler may take two objects to be apart.) */
    uintptr_t volatile l = (uintptr_t)left, r = (uintptr_t)right;
    printf("%s\n%.0f\n", r == l + sizeof left ? "adjacent" : "apart", s);
    return 0;
}
