/* reuse: two heap arrays with opposite temporal locality, read in
 * alternating phases of similar length.
 *
 *   table:  512 doubles (4 KB) read at pseudo-random indices: every word
 *           is read again a few hundred reads (about a microsecond) later;
 *   stream: 8 M doubles (64 MB) read in order, pass after pass: a word
 *           is read again only one pass (tens of milliseconds) later.
 *
 * Expected finding (hpcrun-rs -e mem:soft -e reuse): `table`'s watched
 * words are reused at once (the "< 100 us" bucket), `stream`'s are not
 * reused before the next sample re-arms the watchpoint ("not reused").
 *
 * Build: gcc -O2 -g -o reuse reuse.c
 * Run:   ./reuse [PASSES]
 */
#include <stdio.h>
#include <stdlib.h>

#define TABLE 512
#define STREAM (8L * 1024 * 1024)

/* n reads of the table at pseudo-random indices (an LCG). */
__attribute__((noipa)) static double lookups(const double *table, long n, unsigned *seed) {
    double sum = 0.0;
    unsigned x = *seed;
    for (long i = 0; i < n; i++) {
        x = x * 1664525u + 1013904223u;
        sum += table[x >> 23];
    }
    *seed = x;
    return sum;
}

/* One pass over the stream, in order. */
__attribute__((noipa)) static double pass(const double *stream, long n) {
    double sum = 0.0;
    for (long i = 0; i < n; i++)
        sum += stream[i];
    return sum;
}

int main(int argc, char **argv) {
    long passes = argc > 1 ? atol(argv[1]) : 20;
    double *table = malloc(TABLE * sizeof *table);
    double *stream = malloc(STREAM * sizeof *stream);
    if (!table || !stream) {
        fprintf(stderr, "reuse: out of memory\n");
        return 1;
    }
    for (long i = 0; i < TABLE; i++)
        table[i] = 1.0 / (1 + i);
    for (long i = 0; i < STREAM; i++)
        stream[i] = (double)(i % 7);
    unsigned seed = 1;
    double sum = 0.0;
    for (long p = 0; p < passes; p++) {
        sum += pass(stream, STREAM);
        sum += lookups(table, STREAM / 2, &seed);
    }
    printf("reuse passes=%ld sum=%.6e\n", passes, sum);
    free(stream);
    free(table);
    return 0;
}
