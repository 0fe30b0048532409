/* fuzz_ksyms.c - libFuzzer target: ksyms_load() on the input as a kallsyms
 * file, then lookups at and around every kind of address. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "profile/ksyms.h"

static char path[64];
static int fd = -1;
static volatile size_t sink;

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	/* A memfd, opened by path as ksyms_load() wants, without a temp file
	 * on disk to clean up. */
	fd = memfd_create("fuzz_ksyms", MFD_CLOEXEC);
	if (fd < 0) {
		perror("memfd_create");
		exit(1);
	}
	snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct ksyms *ks;
	uint64_t off, addrs[] = {0, 1, 0xffffffff81000000ULL, UINT64_MAX, 0x1000};

	if (ftruncate(fd, 0) || pwrite(fd, data, size, 0) != (ssize_t)size)
		abort();
	ks = ksyms_load(path);
	if (!ks)
		return 0;
	/* Addresses taken from the input too, so they hit real entries. */
	for (size_t i = 0; i + 8 <= size && i < 64; i += 8) {
		uint64_t a;
		memcpy(&a, data + i, 8);
		const char *n = ksyms_lookup(ks, a, &off);
		if (n)
			sink += strlen(n);
	}
	for (size_t i = 0; i < sizeof(addrs) / sizeof(addrs[0]); i++) {
		off = 0;
		const char *n = ksyms_lookup(ks, addrs[i], i & 1 ? NULL : &off);
		if (n && off > addrs[i]) /* the symbol starts at addr - off */
			abort();
		if (n)
			sink += strlen(n);
	}
	ksyms_free(ks);
	return 0;
}
