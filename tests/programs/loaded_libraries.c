/* Prints the file name (without its directory) of every shared library
 * loaded in the process, one per line, in load order: the main program
 * (no name) and the vDSO are left out. A measured run shows what the
 * profiler added to the program's address space.
 * gcc -O1 */
#define _GNU_SOURCE
#include <link.h>
#include <stdio.h>
#include <string.h>

static int show(struct dl_phdr_info *info, size_t size, void *data) {
    (void)size;
    (void)data;
    const char *name = info->dlpi_name;
    if (!name || !*name || strstr(name, "linux-vdso"))
        return 0;
    const char *slash = strrchr(name, '/');
    puts(slash ? slash + 1 : name);
    return 0;
}

int main(void) {
    dl_iterate_phdr(show, NULL);
    return 0;
}
