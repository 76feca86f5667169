/* A large symbol table, as a large application with its libraries has:
 * 100,000 global arrays (nested macros). Reading the symbols at the first
 * sample takes the profiler a few thousand pages of its own. Then a 16
 * MiB static array is first touched page by page (4,096 faults;
 * transparent huge pages off for the process). Prints what it read back. */
#include <stdio.h>
#include <sys/prctl.h>

#define S0(p)                                                          \
    int p##0[2], p##1[2], p##2[2], p##3[2], p##4[2], p##5[2], p##6[2], \
        p##7[2], p##8[2], p##9[2];
#define S1(p)                                                          \
    S0(p##0) S0(p##1) S0(p##2) S0(p##3) S0(p##4) S0(p##5) S0(p##6)     \
    S0(p##7) S0(p##8) S0(p##9)
#define S2(p)                                                          \
    S1(p##0) S1(p##1) S1(p##2) S1(p##3) S1(p##4) S1(p##5) S1(p##6)     \
    S1(p##7) S1(p##8) S1(p##9)
#define S3(p)                                                          \
    S2(p##0) S2(p##1) S2(p##2) S2(p##3) S2(p##4) S2(p##5) S2(p##6)     \
    S2(p##7) S2(p##8) S2(p##9)
#define S4(p)                                                          \
    S3(p##0) S3(p##1) S3(p##2) S3(p##3) S3(p##4) S3(p##5) S3(p##6)     \
    S3(p##7) S3(p##8) S3(p##9)

S4(v)

static char table[16 << 20];

int main(void) {
    if (prctl(PR_SET_THP_DISABLE, 1, 0, 0, 0) != 0) {
        perror("prctl(PR_SET_THP_DISABLE)");
        return 1;
    }
    for (size_t i = 0; i < sizeof table; i += 4096)
        table[i] = 1;
    long sum = 0;
    for (size_t i = 0; i < sizeof table; i += 4096)
        sum += table[i];
    printf("%ld %d\n", sum, v12345[1]);
    return 0;
}
