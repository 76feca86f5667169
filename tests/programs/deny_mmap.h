/* The test programs' sandbox: deny_mmap(flags) installs a seccomp filter
 * (raw BPF, no libseccomp) under which mmap fails with EPERM, as a
 * sandbox or an exhausted address space would make it fail; with
 * DENY_MREMAP mremap fails too. With DENY_ALL_THREADS every thread of the
 * process gets the filter (TSYNC: the profiler's threads too), else the
 * calling thread and the threads it creates afterwards. Exits 2 if the
 * kernel refuses the filter. */
#include <errno.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#define DENY_MREMAP 1
#define DENY_ALL_THREADS 2

static void deny_mmap(int flags) {
    /* A system call number no call has, when mremap is allowed. */
    unsigned mremap_nr = (flags & DENY_MREMAP) ? __NR_mremap : 0xffffffffu;
    struct sock_filter code[] = {
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch)),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, AUDIT_ARCH_X86_64, 1, 0),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_mmap, 1, 0),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, mremap_nr, 0, 1),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | EPERM),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
    };
    struct sock_fprog prog = {sizeof code / sizeof code[0], code};
    int installed =
        prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) == 0 &&
        ((flags & DENY_ALL_THREADS)
             ? syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, SECCOMP_FILTER_FLAG_TSYNC, &prog) == 0
             : prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog) == 0);
    if (!installed) {
        perror("seccomp");
        exit(2);
    }
}
