/*
 * hpcrun.h: name your program's data for the hpcrun-rs memory profiler.
 *
 * Get it with `hpcrun-rs --print-header > hpcrun.h`. C and C++.
 *
 *   hpcrun_label(ptr, "name")
 *       The tracked heap block that contains ptr (at least --min-bytes,
 *       default 1024 bytes, allocated through malloc and friends or an
 *       anonymous mmap) is named "name" in the profile. A name given here
 *       wins over the names hpcprof-rs infers. Blocks from one call path
 *       with different names are different objects. A ptr in no tracked
 *       block (a smaller block, stack or static data) is only counted:
 *       use hpcrun_register for such memory.
 *
 *   hpcrun_register(ptr, bytes, "name")
 *       [ptr, ptr + bytes) becomes an object named "name", allocated at this
 *       call's call path, whatever its size. For memory the allocation hooks
 *       cannot see: pool sub-allocations, custom allocators, arenas. A
 *       registered range wins over the heap block that contains it, and a
 *       range registered inside another registered range wins over it.
 *       Registering again at the same ptr replaces the range.
 *
 *   hpcrun_unregister(ptr)
 *       Forgets the range registered at ptr. Call it before the memory is
 *       released or reused for something else.
 *
 * Names are copied (at most 63 bytes are kept); NULL or "" means no name.
 * The calls may come from any thread. They cost one call-path unwind
 * (hpcrun_register) or a lookup (hpcrun_label) under the profiler.
 *
 * Without the profiler: the functions are weak symbols, resolved only when
 * hpcrun-rs's preload library is loaded. Otherwise each macro sees a null
 * function and does nothing, so a program built with this header needs no
 * extra library to link and runs unchanged. The names without parentheses
 * (`&hpcrun_label`) are the weak symbols themselves: null without the
 * profiler.
 */
#ifndef HPCRUN_H
#define HPCRUN_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

void hpcrun_label(const void *ptr, const char *name) __attribute__((weak));
void hpcrun_register(const void *ptr, size_t bytes, const char *name) __attribute__((weak));
void hpcrun_unregister(const void *ptr) __attribute__((weak));

#ifdef __cplusplus
}
#endif

/*
 * Each call checks the weak symbol first: null when no profiler is loaded.
 * Arguments are evaluated once; the expressions have type void.
 */
#define hpcrun_label(ptr, name) (hpcrun_label ? hpcrun_label((ptr), (name)) : (void)0)
#define hpcrun_register(ptr, bytes, name) \
    (hpcrun_register ? hpcrun_register((ptr), (bytes), (name)) : (void)0)
#define hpcrun_unregister(ptr) (hpcrun_unregister ? hpcrun_unregister(ptr) : (void)0)

#endif /* HPCRUN_H */
