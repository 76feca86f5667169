/* A program that profiles itself with setitimer(ITIMER_PROF) and SIGPROF,
 * and uses SIGALRM: it must keep working under hpcrun-rs. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <unistd.h>

static volatile sig_atomic_t prof_ticks, alarms;
static void on_prof(int s) { (void)s; prof_ticks++; }
static void on_alarm(int s) { (void)s; alarms++; }

int main(void) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_prof;
    sigaction(SIGPROF, &sa, NULL);
    sa.sa_handler = on_alarm;
    sigaction(SIGALRM, &sa, NULL);
    struct itimerval it = {{0, 1000}, {0, 1000}};
    setitimer(ITIMER_PROF, &it, NULL);
    alarm(1);
    size_t n = 1 << 22;
    double *a = malloc(n * sizeof(double));
    double s = 0;
    while (!alarms)
        for (size_t i = 0; i < n; i += 8) s += (a[(i * 4099) & (n - 1)] += 1.0);
    struct itimerval off = {{0, 0}, {0, 0}};
    setitimer(ITIMER_PROF, &off, NULL);
    printf("SIGPROF ticks seen: %s, SIGALRM seen: %s\n", prof_ticks > 10 ? "yes" : "no", alarms ? "yes" : "no");
    free(a);
    return s > 0 ? 0 : 3;
}
