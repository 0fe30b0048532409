/* nsym.c - taipan-nsym: names link-time addresses of ELF files as taipan
 * names native frames (src/profile/nativesym.h), and times it.
 *
 *   taipan-nsym FILE ADDR...           one line per address: ADDR NAME+0xOFF [source build-id]
 *   taipan-nsym --bench FILE...        index every FILE, then look up addresses
 *                                      spread over their text; prints the times
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "profile/nativesym.h"
#include "util/clock.h"

static const char *const sources[] = {"none", "symtab", "dynsym", "debug", "minidebug"};

static int name_addrs(struct nativesym *ns, const char *path, char **addrs, int n)
{
	struct nativesym_file f = {.path = path};
	int status = 0;

	for (int i = 0; i < n; i++) {
		struct nativesym_sym s;
		char *end;
		uint64_t a = strtoull(addrs[i], &end, 0);
		char name[512];
		int err;

		if (*end || end == addrs[i]) {
			fprintf(stderr, "taipan-nsym: %s: not an address\n", addrs[i]);
			return 2;
		}
		err = nativesym_lookup(ns, &f, a, &s);
		if (err) {
			fprintf(stderr, "taipan-nsym: %s: %s\n", path, strerror(-err));
			return 1;
		}
		nativesym_format(&s, name, sizeof(name));
		if (s.name)
			printf("0x%" PRIx64 " %s+0x%" PRIx64 " [%s %s]\n", a, name, s.offset,
			       sources[s.source], s.build_id);
		else
			printf("0x%" PRIx64 " %s [unnamed %s]\n", a, name, s.build_id);
	}
	return status;
}

static int bench(char **files, int n)
{
	struct nativesym *ns = nativesym_new();
	const int lookups = 2000000;
	struct nativesym_file fs[64];
	uint64_t t0, t1, named = 0, sink = 0;
	size_t nfiles, bytes;
	int err;

	if (!ns)
		return 1;
	if (n > 64)
		n = 64;
	/* Device and inode as /proc/PID/maps gives them to the caller. */
	for (int i = 0; i < n; i++) {
		struct stat st;

		if (stat(files[i], &st) < 0) {
			fprintf(stderr, "taipan-nsym: %s: %s\n", files[i], strerror(errno));
			nativesym_free(ns);
			return 1;
		}
		fs[i] =
		    (struct nativesym_file){.path = files[i], .dev = st.st_dev, .ino = st.st_ino};
	}
	t0 = clock_ns(CLOCK_MONOTONIC);
	for (int i = 0; i < n; i++) {
		struct nativesym_sym s;

		err = nativesym_lookup(ns, &fs[i], 0, &s);
		if (err) {
			fprintf(stderr, "taipan-nsym: %s: %s\n", files[i], strerror(-err));
			nativesym_free(ns);
			return 1;
		}
	}
	t1 = clock_ns(CLOCK_MONOTONIC);
	nativesym_counts(ns, &nfiles, &bytes);
	printf("indexed %d files in %.1f ms: %zu indexes, %.1f MiB\n", n, (t1 - t0) / 1e6, nfiles,
	       bytes / 1048576.0);
	t0 = clock_ns(CLOCK_MONOTONIC);
	for (int i = 0; i < lookups; i++) {
		struct nativesym_sym s;
		/* An xorshift walk over the first 2 MiB, where text lives. */
		uint64_t a = ((uint64_t)i * 2654435761u) % (2u << 20);

		if (nativesym_lookup(ns, &fs[i % n], a, &s) == 0 && s.name) {
			named++;
			sink += s.name[0];
		}
	}
	t1 = clock_ns(CLOCK_MONOTONIC);
	printf("%d lookups in %.1f ms: %.2f M/s, %.1f%% named (sink %" PRIu64 ")\n", lookups,
	       (t1 - t0) / 1e6, lookups / ((t1 - t0) / 1e3), 100.0 * named / lookups, sink);
	nativesym_free(ns);
	return 0;
}

int main(int argc, char **argv)
{
	struct nativesym *ns;
	int rc;

	if (argc >= 3 && !strcmp(argv[1], "--bench"))
		return bench(argv + 2, argc - 2);
	if (argc < 3) {
		fprintf(stderr, "usage: taipan-nsym FILE ADDR... | taipan-nsym --bench FILE...\n");
		return 2;
	}
	ns = nativesym_new();
	if (!ns)
		return 1;
	rc = name_addrs(ns, argv[1], argv + 2, argc - 2);
	nativesym_free(ns);
	return rc;
}
