/* fuzz_perfmap.c - libFuzzer target: the text of a perf map
 * (perfmap_parse), parsed whole and in two pieces as reads of a growing file
 * deliver it, then looked up at addresses from the input. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "proc/perfmap.h"
#include "util/budget.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct budget b = {.limit = 1 << 20};
	struct perfmap *pm = perfmap_new(getpid(), &b);
	if (!pm)
		return 0;
	/* Exactly size bytes, no terminator: AddressSanitizer sees any read
	 * past them. */
	char *text = malloc(size ? size : 1);
	if (!text) {
		perfmap_free(pm);
		return 0;
	}
	memcpy(text, data, size);
	size_t cut = size / 2;
	size_t used = perfmap_parse(pm, text, cut);
	if (used > cut)
		abort();
	used += perfmap_parse(pm, text + used, size - used);
	if (used > size || (used < size && memchr(text + used, '\n', size - used)))
		abort();
	for (size_t i = 0; i + 8 <= size; i += 8) {
		uint64_t addr;
		memcpy(&addr, data + i, 8);
		/* now 1: the reads of the (absent) file are paced away after
		 * the first. */
		const char *name = perfmap_find(pm, addr, 1);
		if (name && strlen(name) > PERFMAP_NAME_MAX)
			abort();
	}
	perfmap_free(pm);
	if (b.used)
		abort();
	free(text);
	return 0;
}
