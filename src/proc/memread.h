/* memread.h - reading another process's memory without stopping it. */
#ifndef TAIPAN_MEMREAD_H
#define TAIPAN_MEMREAD_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* Copies len bytes at addr in process pid into buf with process_vm_readv.
 * Returns 0 when every byte was read, -EFAULT for an unmapped range (or a
 * partial read), -ESRCH when the process is gone, -EPERM without privileges. */
int mem_read(pid_t pid, uint64_t addr, void *buf, size_t len);

/* Another source of a target's memory than the live process, with
 * mem_read()'s contract: a captured image (src/cpython/capture.h). */
typedef int (*mem_reader)(void *ctx, uint64_t addr, void *buf, size_t len);

/* Reads a NUL-terminated string of at most max-1 bytes into buf (always
 * terminated). Returns its length or a negative errno. */
int mem_read_cstr(pid_t pid, uint64_t addr, char *buf, size_t max);

/* A 64-bit word at addr through a reader: 0, or the reader's negative
 * errno. */
int mem_read_u64_with(mem_reader rd, void *ctx, uint64_t addr, uint64_t *v);

/* mem_read_cstr() through a reader. */
int mem_read_cstr_with(mem_reader rd, void *ctx, uint64_t addr, char *buf, size_t max);

#endif /* TAIPAN_MEMREAD_H */
