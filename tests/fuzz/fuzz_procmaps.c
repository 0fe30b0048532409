/* fuzz_procmaps.c - libFuzzer target: one line of /proc/PID/maps
 * (procmaps_parse_line), with and without its newline. */
#include <stdlib.h>
#include <string.h>

#include "proc/procmaps.h"

static void check(const char *line)
{
	struct map_entry e;

	if (procmaps_parse_line(line, &e))
		return;
	/* The documented results of a line that parses. */
	if (e.start >= e.end || strlen(e.perms) != 4 || strlen(e.path) > strlen(line) ||
	    strchr(e.path, '\n'))
		abort();
	struct proc_maps m = {.v = &e, .n = 1};
	const struct map_entry *b = procmaps_find_base(&m, &e);
	if (b && b != &e)
		abort();
	free(e.path);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	/* The parser takes a C string: a copy of exactly size + 1 bytes, so
	 * AddressSanitizer sees any read past the terminator. */
	char *line = malloc(size + 2);

	if (!line)
		return 0;
	memcpy(line, data, size);
	line[size] = '\0';
	check(line);
	line[size] = '\n';
	line[size + 1] = '\0';
	check(line);
	free(line);
	return 0;
}
