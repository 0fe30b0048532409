/* native.h - what native unwinding needs of the profiled processes: each
 * executable mapping, the unwind table of each mapped file, and the BPF
 * entries that lead from one to the other.
 *
 * A file's table is built once (src/proc/unwtab.c) and shared by every
 * process that maps it: files are keyed by device and inode, so 200
 * processes of one interpreter cost one table. A process holds only its
 * mappings and their prefixes in the umaps trie. The registry keeps the
 * most recently opened files open (a bounded number), so that their frames
 * can still be named after every process that mapped them has gone.
 *
 * What a process can make taipan do is bounded: the executable mappings it
 * tracks and the tables it builds for one process, the files opened and
 * the time spent on one scan (the rest waits for the next), the memory of
 * the tables (the session's budget), and the descriptors held.
 */
#ifndef TAIPAN_NATIVE_H
#define TAIPAN_NATIVE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "core/sampler.h"
#include "util/budget.h"

struct native;
struct native_file;

/* What one process may make taipan track: executable mappings, and files
 * whose table taipan built for it (files other processes mapped first cost
 * nothing). Past the first, its code there is unknown code; past the
 * second, followed by frame pointer; both counted. Debian's torch maps 312
 * files. */
#define NATIVE_MAPS_PER_PROC 4096
#define NATIVE_BUILDS_PER_PROC 768

/* One executable mapping of a process. */
struct native_map {
	uint64_t start, end; /* [start, end) */
	uint64_t bias;	     /* runtime address - bias = the file's link-time address */
	uint64_t offset;     /* file offset of start */
	uint64_t inode;
	uint32_t dev_major, dev_minor;
	struct native_file *file; /* NULL for anonymous code */
	uint32_t nranges;	  /* its prefixes in the umaps trie */
	bool seen;		  /* scratch for native_scan */
};

/* A process's executable mappings, sorted by start. */
struct native_proc {
	struct native_map *v;
	size_t n;
	uint32_t nbuilt;  /* tables built for it */
	uint32_t ncapped; /* mappings past the cap, at the last scan */
	/* Executable mappings the last scan left for the next turn (start,
	 * end pairs): BPF has no table for them yet. */
	uint64_t *pending;
	size_t npending;
	/* When the scan that is not finished yet began (CLOCK_MONOTONIC ns),
	 * 0 when none is under way; and the tables it has built so far. */
	uint64_t scan_since;
	uint32_t scan_built;
	/* The names of its JIT code (proc/perfmap.h), read at the first
	 * frame in anonymous code that needs one. */
	struct perfmap *perfmap;
};

/* Whether addr lies in a mapping that np's last scan left for the next
 * turn. */
bool native_pending(const struct native_proc *np, uint64_t addr);

/* Totals, for --stats and the benchmarks. */
struct native_stats {
	uint64_t files; /* files with a table in BPF now */
	uint64_t
	    files_failed;     /* files whose table could not be built (followed by frame pointer) */
	uint64_t table_bytes; /* of the tables in BPF now */
	uint64_t rules;	      /* the rules they share (8 bytes each) */
	uint64_t build_ns;    /* spent building tables */
	uint64_t ranges;      /* umaps entries now */
	uint64_t scans;	      /* reads of a process's maps */
	uint64_t scans_partial;	    /* ... that left new mappings for the next turn */
	uint64_t range_errors;	    /* umaps entries BPF refused (full) */
	uint64_t files_over_budget; /* tables not built: the memory budget was spent */
	uint64_t maps_capped;	    /* mappings not tracked now: past a process's cap */
	uint64_t builds_capped;	    /* files left to frame pointers: past a process's tables */
	uint64_t fds;		    /* descriptors held now */
};

/* A registry that tells sm's BPF maps, its tables' memory taken from
 * budget (NULL: none). NULL when out of memory. */
struct native *native_new(const struct sampler *sm, struct budget *budget);
/* Frees it and every table it gave BPF. Accepts NULL. */
void native_free(struct native *n);

/* Reads pid's executable mappings and brings np and BPF up to date: new
 * mappings get their file's table (built when no process mapped the file
 * before) and their trie entries; mappings gone lose theirs. Returns 0;
 * -EAGAIN when one call's work (files opened, time) ran out with new
 * mappings left: call it again on the next turn; or a negative errno when
 * the maps cannot be read (-ESRCH: the process is gone). A file whose
 * table fails is followed by frame pointers, not refused. */
int native_scan(struct native *n, pid_t pid, struct native_proc *np);

/* child was forked by the process of parent: it has the same mappings, so
 * it gets them without a look at its maps, which a short child may leave
 * before taipan reads them. Returns 0 or -ENOMEM. */
int native_fork(struct native *n, pid_t child, const struct native_proc *parent,
		struct native_proc *np);

/* Forgets everything of pid: its trie entries and its hold on its files. */
void native_drop(struct native *n, pid_t pid, struct native_proc *np);

/* The mapping of np holding addr, or NULL. */
const struct native_map *native_find(const struct native_proc *np, uint64_t addr);

/* A path taipan can open the file at, whatever became of the processes that
 * mapped it ("/proc/self/fd/N"), or NULL when its descriptor was closed
 * (open it through a mapping's /proc/PID/map_files); and the path as the
 * first process that mapped it saw it ("[vdso]" for the vDSO). */
const char *native_file_open_path(const struct native_file *f);
/* A number no other file of this registry ever has, even after f is gone:
 * a key for what is known of f's addresses. */
uint64_t native_file_id(const struct native_file *f);
const char *native_file_path(const struct native_file *f);

void native_get_stats(const struct native *n, struct native_stats *out);

#endif /* TAIPAN_NATIVE_H */
