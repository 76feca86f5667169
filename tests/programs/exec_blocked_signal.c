/* The signal mask across exec and posix_spawn.
 *
 *   exec_blocked_signal        blocks SIGRTMIN+4 with sigprocmask; an exec
 *                              that fails (ENOENT) leaves the program as it
 *                              was: it computes ~0.1 s; then it forks and
 *                              execs itself as `child`, and starts itself
 *                              as `child` by posix_spawn with a mask that
 *                              blocks every signal; it prints how each
 *                              child ended.
 *   exec_blocked_signal child  reads its mask (SIGRTMIN+4 inherited
 *                              blocked), computes ~0.1 s, raises
 *                              SIGRTMIN+4 and sends it to its process:
 *                              blocked, the signals stay pending and the
 *                              child exits 0.
 *
 * Prints the same lines natively and under hpcrun-rs. */
#define _GNU_SOURCE
#include <errno.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

static void work(void) {
    volatile double x = 0;
    for (long i = 0; i < 150000000L; i++) x += i * 0.5;
}

static void ended(const char *how, int status) {
    if (WIFSIGNALED(status))
        printf("%s: child killed by signal %d\n", how, WTERMSIG(status));
    else
        printf("%s: child exit %d\n", how, WEXITSTATUS(status));
}

static int child(void) {
    int sig = SIGRTMIN + 4;
    sigset_t now;
    sigprocmask(SIG_BLOCK, NULL, &now);
    printf("child: SIGRTMIN+4 blocked at start %d\n", sigismember(&now, sig));
    fflush(stdout);
    work();
    raise(sig);
    kill(getpid(), sig);
    sigset_t pending;
    sigpending(&pending);
    printf("child: SIGRTMIN+4 pending %d\n", sigismember(&pending, sig));
    return 0;
}

int main(int argc, char **argv) {
    if (argc > 1 && strcmp(argv[1], "child") == 0) return child();
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGRTMIN + 4);
    sigprocmask(SIG_BLOCK, &set, NULL);
    char *none[] = {"/nonexistent/program", NULL};
    int rc = execv(none[0], none);
    printf("failed exec: %d %d\n", rc, errno == ENOENT);
    sigset_t now;
    sigprocmask(SIG_BLOCK, NULL, &now);
    printf("SIGRTMIN+4 blocked after it %d\n", sigismember(&now, SIGRTMIN + 4));
    work();
    char *again[] = {argv[0], "child", NULL};
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        execv(again[0], again);
        _exit(127);
    }
    int status;
    waitpid(pid, &status, 0);
    ended("fork+exec", status);
    posix_spawnattr_t attr;
    posix_spawnattr_init(&attr);
    sigset_t all;
    sigfillset(&all);
    posix_spawnattr_setsigmask(&attr, &all);
    posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGMASK);
    fflush(stdout);
    if (posix_spawn(&pid, again[0], NULL, &attr, again, environ) != 0) {
        printf("posix_spawn failed\n");
        return 1;
    }
    waitpid(pid, &status, 0);
    ended("posix_spawn", status);
    return 0;
}
