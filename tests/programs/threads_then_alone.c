/* A program that is multi-threaded for a while, then alone again: two
 * threads work and are joined; the program then counts its threads in
 * /proc/self/task (1) and enters a new user namespace, which needs a
 * single-threaded process. With an argument `step`, it then waits for a
 * line on stdin (its single-threaded phase), starts a thread that says
 * it runs and waits for a second line, and counts its threads again
 * after joining it.
 *
 * After pthread_join returns the kernel may still be reaping the joined
 * thread for a moment (the join ends when the thread's id is cleared,
 * before the thread leaves its thread group), so the count is read once
 * /proc/self/task shows a single entry, or after 2 s. */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

static int tasks(void) {
    DIR *d = opendir("/proc/self/task");
    int n = 0;
    struct dirent *e;
    while (d && (e = readdir(d)))
        if (e->d_name[0] != '.')
            n++;
    if (d)
        closedir(d);
    return n;
}

/* The task count once it is 1, or after 2 s. */
static int tasks_when_settled(void) {
    struct timespec ms = {0, 1000000};
    int n = tasks();
    for (int i = 0; i < 2000 && n != 1; i++) {
        nanosleep(&ms, NULL);
        n = tasks();
    }
    return n;
}

static __attribute__((noipa)) double work(long n) {
    double s = 0;
    for (long i = 1; i < n; i++)
        s += 1.0 / (double)i;
    return s;
}

static void *worker(void *arg) {
    *(double *)arg = work(20000000);
    return NULL;
}

static void *stepped(void *arg) {
    char line[64];
    printf("thread running\n");
    fflush(stdout);
    if (!fgets(line, sizeof line, stdin))
        return NULL;
    *(double *)arg = work(10000000);
    return NULL;
}

int main(int argc, char **argv) {
    double w[2] = {0, 0};
    pthread_t t[2];
    for (int i = 0; i < 2; i++)
        pthread_create(&t[i], NULL, worker, &w[i]);
    for (int i = 0; i < 2; i++)
        pthread_join(t[i], NULL);
    printf("tasks %d\n", tasks_when_settled());
    int rc = unshare(CLONE_NEWUSER);
    printf("unshare %d %s\n", rc, rc == 0 ? "ok" : strerror(errno));
    if (argc > 1 && strcmp(argv[1], "step") == 0) {
        char line[64];
        printf("alone\n");
        fflush(stdout);
        if (!fgets(line, sizeof line, stdin))
            return 1;
        double v = 0;
        pthread_t s;
        pthread_create(&s, NULL, stepped, &v);
        pthread_join(s, NULL);
        printf("tasks %d\n", tasks_when_settled());
        printf("stepped %.3f\n", v);
    }
    printf("work %.3f %.3f\n", w[0], w[1]);
    return 0;
}
