/* perfmap.h - the names of a process's JIT code from its perf map: the
 * file /tmp/perf-PID.map (PID in the process's own pid namespace, /tmp in
 * its own root) that perf and bcc read, and that CPython 3.12+ (-X perf:
 * its trampolines, "py::qualname:file"), Node (--perf-basic-prof), the JVM
 * through perf-map-agent, LuaJIT and others write, one line per piece of
 * code: "START SIZE name", START and SIZE in hex.
 *
 * The file belongs to the target, so it is hostile input: it is opened
 * through safeopen.h (a regular file in the target's root that its user may
 * read), kept only if the target's user or root owns it (a perf map that
 * another user planted in /tmp names nothing), read with read(2) in bounded
 * pieces, at most PERFMAP_MAX_BYTES of it, PERFMAP_MAX_ENTRIES lines, names
 * cut at PERFMAP_NAME_MAX bytes, and its memory taken from the session's
 * budget. JITs append as they compile: a lookup that finds nothing reads
 * what was appended since, at most once every PERFMAP_RELOAD_NS.
 */
#ifndef TAIPAN_PERFMAP_H
#define TAIPAN_PERFMAP_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define PERFMAP_MAX_BYTES ((size_t)64 << 20)
#define PERFMAP_MAX_ENTRIES (1u << 20)
#define PERFMAP_NAME_MAX 255
#define PERFMAP_RELOAD_NS 1000000000ULL

struct budget;
struct perfmap;

/* What a perf map gave, for --stats. */
struct perfmap_stats {
	uint64_t entries; /* lines kept */
	uint64_t bad;	  /* lines that were not "START SIZE name", or past a bound */
	uint64_t reads;	  /* reads of the file (the first, and those of what was appended) */
};

/* The perf map of process pid, read lazily; memory from budget (NULL:
 * none). NULL when out of memory. */
struct perfmap *perfmap_new(pid_t pid, struct budget *budget);

/* The name of the code at addr, or NULL. now_ns: CLOCK_MONOTONIC, which
 * paces the reads of what the process appended. The string lives as long
 * as pm. */
const char *perfmap_find(struct perfmap *pm, uint64_t addr, uint64_t now_ns);

/* Parses the perf map text[0 .. len) into pm, after what it holds (the
 * lines a reload appended). A last line without its newline is left for
 * the next read: returns how many bytes were consumed. Exposed for the unit
 * tests and the fuzzer. */
size_t perfmap_parse(struct perfmap *pm, const char *text, size_t len);

void perfmap_get_stats(const struct perfmap *pm, struct perfmap_stats *out);

/* Accepts NULL. */
void perfmap_free(struct perfmap *pm);

#endif /* TAIPAN_PERFMAP_H */
