/* Memory the profiler tracks no object for, read in hot loops, one
 * phase after the other (each about 0.1-0.2 s of CPU time):
 *
 * - "vdso": the first 512 bytes of the vDSO (getauxval(AT_SYSINFO_EHDR):
 *   its ELF header and program headers, always readable);
 * - "metadata": glibc's chunk header (size word) just below a 64 KiB
 *   block malloc'd from the brk heap, before the program makes any
 *   small allocation;
 * - "anon": 8 MiB of anonymous memory mapped with a raw mmap system
 *   call (syscall(SYS_mmap), which the profiler's mmap hook does not
 *   see), at a fixed address far from other mappings (hint 0x200000000000);
 * - "file": DIR/raw.bin (DIR = argv[1], 8 MiB written with write())
 *   mapped read-only with the raw system call (hint 0x210000000000);
 * - "gone": 8 MiB mapped like "anon" (hint 0x220000000000), read, then
 *   unmapped with the raw system call before exit.
 *
 * Prints the sums (exact in integers): the same output with and without
 * the profiler.
 *
 * Build: gcc -O2 -g unknown_addresses.c
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/auxv.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#define MIB (1024 * 1024)
#define BYTES (8 * MIB)
#define WORDS (BYTES / sizeof(uint64_t))
#define PASSES 180

static void die(const char *what)
{
    perror(what);
    exit(1);
}

/* mmap by the system call itself: no libc wrapper, no hook. */
static uint64_t *raw_map(uintptr_t hint, int prot, int flags, int fd)
{
    long p = syscall(SYS_mmap, hint, BYTES, prot, flags, fd, 0);
    if (p < 0 && p > -4096)
        die("raw mmap");
    return (uint64_t *)p;
}

__attribute__((noinline)) static uint64_t sum_words(const volatile uint64_t *a, size_t n,
                                                    long passes)
{
    uint64_t s = 0;
    for (long p = 0; p < passes; p++)
        for (size_t i = 0; i < n; i++)
            s += a[i];
    return s;
}

__attribute__((noinline)) static uint64_t read_word(const volatile uint64_t *w, long times)
{
    uint64_t s = 0;
    for (long i = 0; i < times; i++)
        s += *w;
    return s;
}

static void fill(uint64_t *a)
{
    for (size_t i = 0; i < WORDS; i++)
        a[i] = i % 1000;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fputs("usage: unknown_addresses DIR\n", stderr);
        return 2;
    }

    /* The vDSO's ELF header and program headers. */
    const uint64_t *vdso = (const uint64_t *)getauxval(AT_SYSINFO_EHDR);
    if (!vdso)
        die("no vDSO");
    int vdso_elf = memcmp(vdso, "\177ELF", 4) == 0;
    sum_words(vdso, 64, 7500000);

    /* The size word of a 64 KiB block's chunk (brk heap, no small block
     * allocated yet). */
    uint64_t *block = malloc(64 * 1024);
    if (!block)
        die("malloc");
    memset(block, 1, 64 * 1024);
    /* Hidden from the compiler, which knows the word is not the block's. */
    uintptr_t header = (uintptr_t)block;
    __asm__("" : "+r"(header));
    header -= sizeof(uint64_t);
    uint64_t size_word = read_word((const uint64_t *)header, 450000000) / 450000000;

    /* Anonymous memory the hooks never saw. */
    uint64_t *anon = raw_map(0x200000000000, PROT_READ | PROT_WRITE,
                             MAP_PRIVATE | MAP_ANONYMOUS, -1);
    fill(anon);
    uint64_t anon_sum = sum_words(anon, WORDS, PASSES);

    /* A file mapped by the system call. */
    char path[4096];
    snprintf(path, sizeof path, "%s/raw.bin", argv[1]);
    int fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0600);
    if (fd < 0)
        die("open");
    for (size_t i = 0; i < WORDS; i += 1024) {
        uint64_t chunk[1024];
        for (size_t j = 0; j < 1024; j++)
            chunk[j] = (i + j) % 1000;
        if (write(fd, chunk, sizeof chunk) != (ssize_t)sizeof chunk)
            die("write");
    }
    uint64_t *file = raw_map(0x210000000000, PROT_READ, MAP_PRIVATE, fd);
    close(fd);
    uint64_t file_sum = sum_words(file, WORDS, PASSES);

    /* Memory that is gone when the profile is written. */
    uint64_t *gone = raw_map(0x220000000000, PROT_READ | PROT_WRITE,
                             MAP_PRIVATE | MAP_ANONYMOUS, -1);
    fill(gone);
    uint64_t gone_sum = sum_words(gone, WORDS, PASSES);
    if (syscall(SYS_munmap, gone, BYTES) != 0)
        die("munmap");

    printf("vdso %s\n", vdso_elf ? "elf" : "not elf");
    printf("size word %s\n", size_word >= 64 * 1024 ? "ok" : "small");
    printf("anon %llu\nfile %llu\ngone %llu\n", (unsigned long long)anon_sum,
           (unsigned long long)file_sum, (unsigned long long)gone_sum);
    free(block);
    return 0;
}
