/* procmaps.h - /proc/PID/maps parsing. */
#ifndef TAIPAN_PROCMAPS_H
#define TAIPAN_PROCMAPS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

struct map_entry {
	uint64_t start, end; /* [start, end) */
	uint64_t offset;     /* file offset of start */
	uint64_t inode;
	uint32_t dev_major, dev_minor;
	char perms[5]; /* "r-xp" */
	bool deleted;  /* the path ended in " (deleted)"; path has that suffix removed */
	char *path;    /* owned; "" for anonymous mappings, "[heap]" etc. kept as is */
};

struct proc_maps {
	struct map_entry *v;
	size_t n;
};

/* Parses one line of /proc/PID/maps (without or with its trailing newline).
 * On success returns 0 and out->path is malloc'd (free with free()).
 * Returns -EINVAL for a malformed line, -ENOMEM; on error *out is untouched. */
int procmaps_parse_line(const char *line, struct map_entry *out);

/* Reads /proc/PID/maps. Returns 0, -ESRCH when the process is gone, or
 * another negative errno (-EACCES without ptrace rights, -ENOMEM). Malformed
 * lines are skipped. On success *out is filled (free with procmaps_free());
 * on error *out is untouched. */
int procmaps_read(pid_t pid, struct proc_maps *out);

/* Frees what procmaps_read() filled. Accepts a zeroed struct. */
void procmaps_free(struct proc_maps *m);

/* The first mapping of the file with this inode and device whose offset is 0,
 * or NULL (always NULL for anonymous mappings, inode 0). Points into m. */
const struct map_entry *procmaps_find_base(const struct proc_maps *m, const struct map_entry *of);

#endif /* TAIPAN_PROCMAPS_H */
