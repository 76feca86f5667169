/* Cost of the hpcrun.h calls under the profiler (docs/PERFORMANCE.md,
 * "Allocation hooks"): 20,000 hpcrun_register of 64-byte ranges at
 * rising addresses, their hpcrun_unregister oldest first (the worst case:
 * each one shifts every live range), 20,000 hpcrun_label alternating two
 * names on one block, 1,000 registers of 4 KiB ranges.
 *
 *   gcc -O2 -I hpcrun-rs/include -o labels_cost benches/programs/labels_cost.c
 *   hpcrun-rs -e mem:soft -o /tmp/m ./labels_cost
 */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include "hpcrun.h"
static double now(void){struct timespec t;clock_gettime(CLOCK_MONOTONIC,&t);return t.tv_sec+t.tv_nsec*1e-9;}
int main(void){
  enum{N=20000, R=1000};
  char *pool=malloc(1<<26);
  double t0=now();
  for(int i=0;i<N;i++) hpcrun_register(pool+i*64, 64, "x");
  double t1=now();
  for(int i=0;i<N;i++) hpcrun_unregister(pool+i*64);
  double t2=now();
  char *b=malloc(1<<20);
  for(int i=0;i<N;i++) hpcrun_label(b, (i&1)?"a":"b");
  double t3=now();
  for(int i=0;i<R;i++) hpcrun_register(pool+i*4096, 4096, "y");
  double t4=now();
  printf("register (up to %d live) %.2f us, unregister %.2f us, label %.2f us, register (%d live) %.2f us\n",N,(t1-t0)/N*1e6,(t2-t1)/N*1e6,(t3-t2)/N*1e6,R,(t4-t3)/R*1e6);
  return 0;}
