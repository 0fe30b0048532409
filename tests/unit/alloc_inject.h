/* alloc_inject.h - allocation failures on demand, for the unit tests that
 * check every failure path leaves a consistent state and no leak.
 *
 * malloc, calloc, realloc and free are replaced for the whole test binary
 * (jansson's and stdio's allocations included): with alloc_countdown set to
 * n, the n-th allocation from then on fails with ENOMEM (alloc_failed counts
 * the failures), and while alloc_counting is set, alloc_live counts the
 * allocations less the frees. Include it in one file of a test binary.
 * ASan and valgrind replace these functions themselves, so under ASan
 * INJECT_ALLOC_FAILURES stays undefined and the tests that use it skip. */
#ifndef TAIPAN_ALLOC_INJECT_H
#define TAIPAN_ALLOC_INJECT_H

#ifndef __SANITIZE_ADDRESS__
#include <errno.h>
#include <stdbool.h>
#include <stddef.h>

#define INJECT_ALLOC_FAILURES 1
extern void *__libc_malloc(size_t n);
extern void *__libc_calloc(size_t n, size_t size);
extern void *__libc_realloc(void *ptr, size_t n);
extern void __libc_free(void *ptr);

static long alloc_countdown = -1; /* the allocation to fail; < 0: none */
static long alloc_failed;
static bool alloc_counting;
static long alloc_live; /* allocations minus frees while counting */

static bool alloc_should_fail(void)
{
	if (alloc_countdown < 0 || alloc_countdown-- > 0)
		return false;
	alloc_failed++;
	errno = ENOMEM;
	return true;
}

static void *counted(void *ptr)
{
	if (ptr && alloc_counting)
		alloc_live++;
	return ptr;
}

void *malloc(size_t n)
{
	return alloc_should_fail() ? NULL : counted(__libc_malloc(n));
}

void *calloc(size_t n, size_t size)
{
	return alloc_should_fail() ? NULL : counted(__libc_calloc(n, size));
}

void *realloc(void *ptr, size_t n)
{
	if (alloc_should_fail())
		return NULL;
	return ptr ? __libc_realloc(ptr, n) : counted(__libc_realloc(ptr, n));
}

void free(void *ptr)
{
	if (ptr && alloc_counting)
		alloc_live--;
	__libc_free(ptr);
}
#endif

#endif
