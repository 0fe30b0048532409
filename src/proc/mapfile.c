/* mapfile.c - the file behind a process's mapping (mapfile.h). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "proc/mapfile.h"
#include "proc/memread.h"
#include "proc/safeopen.h"

bool mapfile_is_vdso(const struct map_entry *me)
{
	return !strcmp(me->path, "[vdso]");
}

int mapfile_open(pid_t pid, const struct map_entry *me)
{
	char p[4096 + 64];
	if (!strcmp(me->path, "[vdso]")) {
		size_t len = me->end - me->start;
		if (len > MAPFILE_VDSO_MAX)
			return -E2BIG;
		void *buf = malloc(len);
		if (!buf)
			return -ENOMEM;
		int fd = mem_read(pid, me->start, buf, len);
		if (!fd) {
			fd = memfd_create("vdso", MFD_CLOEXEC);
			if (fd < 0)
				fd = -errno;
		}
		if (fd >= 0 && write(fd, buf, len) != (ssize_t)len) {
			close(fd);
			fd = -EIO;
		}
		free(buf);
		return fd;
	}
	snprintf(p, sizeof(p), "/proc/%d/map_files/%llx-%llx", pid, (unsigned long long)me->start,
		 (unsigned long long)me->end);
	int fd = safe_open(p);
	if (fd >= 0 || fd == -ENOEXEC)
		return fd;
	/* Without map_files (CAP_CHECKPOINT_RESTORE): the path inside the
	 * process's root, resolved there and nowhere else, and only if it
	 * is still the file mapped. */
	fd = safe_open_in_proc_root(pid, me->path);
	if (fd < 0)
		return fd;
	struct stat st;
	if (fstat(fd, &st) || st.st_ino != me->inode || major(st.st_dev) != me->dev_major ||
	    minor(st.st_dev) != me->dev_minor) {
		close(fd);
		return -ESTALE;
	}
	return fd;
}
