/* fuzz_debugoffsets.c - libFuzzer target: py_debug_offsets_parse() on bytes
 * as a target's _PyRuntime would hold them.
 *
 * The input is copied to a buffer of exactly its size. When the parse
 * succeeds, the layout must be what the BPF side and the symbolizer can use
 * safely: every field -1 or an offset below 1 MiB.
 *
 * With TAIPAN_FUZZ_SEEDS=DIR it writes, as seeds, the _Py_DebugOffsets of
 * each ELF file named on the command line (the first 1024 bytes of its
 * _PyRuntime), then exits.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cpython/debugoffsets.h"
#include "fuzz_target.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct py_layout l;
	uint64_t hex;
	char err[256];
	uint8_t *b = malloc(size ? size : 1);

	if (!b)
		return 0;
	memcpy(b, data, size);
	int ret = py_debug_offsets_parse(b, size, &l, &hex, NULL, err, sizeof(err));
	if (strnlen(err, sizeof(err)) == sizeof(err))
		abort();
	if (ret == 0) {
		const int32_t *f = (const int32_t *)&l;
		for (size_t i = 0; i < sizeof(l) / sizeof(*f); i++)
			if (f[i] < -1 || f[i] >= (1 << 20))
				abort();
		if (hex >> 24 != 3)
			abort();
	}
	/* Short buffers and no room for the reason. */
	py_debug_offsets_parse(b, size / 2, &l, &hex, NULL, NULL, 0);
	py_debug_offsets_parse(b, size, &l, &hex, NULL, err, 1);
	free(b);
	return 0;
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	const char *dir = getenv("TAIPAN_FUZZ_SEEDS");

	if (!dir)
		return 0;
	for (int i = 1; i < *argc; i++) {
		const char *path = (*argv)[i], *base = strrchr(path, '/');
		uint8_t buf[1024];
		char out[4096];

		if (path[0] == '-' || fuzz_read_runtime(path, buf, sizeof(buf)) != sizeof(buf) ||
		    memcmp(buf, PY_DEBUG_OFFSETS_COOKIE, PY_DEBUG_OFFSETS_COOKIE_LEN))
			continue;
		snprintf(out, sizeof(out), "%s/%s-%d", dir, base ? base + 1 : path, i);
		FILE *f = fopen(out, "we");
		if (!f || fwrite(buf, 1, sizeof(buf), f) != sizeof(buf) || fclose(f)) {
			fprintf(stderr, "cannot write %s\n", out);
			exit(1);
		}
	}
	exit(0);
}
