/* Takes the address of `malloc` in code: built into a non-PIE executable
 * (`-no-pie`), the executable then holds malloc's canonical PLT entry, an
 * undefined `malloc` symbol with that entry's address, which
 * `dlsym(RTLD_DEFAULT, "malloc")` returns though calls still reach the
 * library that defines malloc (tests/allocators.rs). */
#include <stdlib.h>

void *(*volatile program_malloc)(size_t);

__attribute__((constructor)) static void take_malloc_address(void) { program_malloc = malloc; }
