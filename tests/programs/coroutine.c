/* A hot loop that runs on a coroutine stack (makecontext/swapcontext on a
 * heap-allocated stack): the sampler's unwinder reads only the thread's
 * own stack, so these call paths stop early and must show up below
 * <partial unwind>, not as complete paths. */
#include <stdio.h>
#include <stdlib.h>
#include <ucontext.h>

#define N (1 << 22)
static ucontext_t main_ctx, co_ctx;
static double *data;
static double result;

static __attribute__((noipa)) double sweep(const double *a) {
    double s = 0;
    for (int r = 0; r < 40; r++)
        for (long i = 0; i < N; i += 8)
            s += a[i] * (double)r;
    return s;
}

static void coroutine(void) {
    result = sweep(data);
    swapcontext(&co_ctx, &main_ctx);
}

int main(void) {
    data = malloc(N * sizeof(double));
    if (!data)
        return 1;
    for (long i = 0; i < N; i++)
        data[i] = 1.0;
    size_t size = 1 << 20;
    char *stack = malloc(size);
    getcontext(&co_ctx);
    co_ctx.uc_stack.ss_sp = stack;
    co_ctx.uc_stack.ss_size = size;
    co_ctx.uc_link = &main_ctx;
    makecontext(&co_ctx, coroutine, 0);
    swapcontext(&main_ctx, &co_ctx);
    printf("%.0f\n", result);
    return 0;
}
