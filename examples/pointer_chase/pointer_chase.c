/* pointer_chase: walks a linked list whose 200,000 nodes (from malloc, one
 * allocation each, 64 bytes) are linked in a random order, so that every
 * step is a cache miss.
 *
 * Expected finding: the list nodes' allocation site (`node` in
 * make_list) dominates the data-centric view. Under mem:soft most samples
 * follow `mov (%rax),%rax`, whose address is lost; the data address comes
 * from the next access to the next node (`recovered_at_ip`).
 * Build: gcc -O2 -g -o pointer_chase pointer_chase.c
 * Run:   hpcrun-rs --min-bytes 32 ./pointer_chase [ROUNDS]
 */
#include <stdio.h>
#include <stdlib.h>

#define NODES 200000

struct node {
    struct node *next;
    long value;
    char pad[48];
};

__attribute__((noipa)) static struct node *make_list(void) {
    struct node **all = malloc(NODES * sizeof(*all));
    for (long i = 0; i < NODES; i++) {
        struct node *node = malloc(sizeof(struct node));
        node->value = i;
        all[i] = node;
    }
    /* Shuffle (deterministic), then link in that order. */
    unsigned long x = 88172645463325252UL;
    for (long i = NODES - 1; i > 0; i--) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        long j = (long)(x % (unsigned long)(i + 1));
        struct node *t = all[i];
        all[i] = all[j];
        all[j] = t;
    }
    for (long i = 0; i < NODES - 1; i++) all[i]->next = all[i + 1];
    all[NODES - 1]->next = NULL;
    struct node *head = all[0];
    free(all);
    return head;
}

__attribute__((noipa)) static long walk(const struct node *p) {
    long sum = 0;
    while (p) {
        sum += p->value;
        p = p->next;
    }
    return sum;
}

int main(int argc, char **argv) {
    int rounds = argc > 1 ? atoi(argv[1]) : 200;
    struct node *head = make_list();
    long total = 0;
    for (int r = 0; r < rounds; r++) total += walk(head);
    printf("pointer_chase nodes=%d rounds=%d sum=%ld\n", NODES, rounds, total);
    return 0;
}
