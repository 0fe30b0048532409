/* safeopen.c - opening files that other users control (safeopen.h). */
#include "proc/safeopen.h"
#include "proc/procfs.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#ifndef SYS_openat2
#define SYS_openat2 437
#endif

/* Whether as may read a file of mode st by its permission bits (its
 * supplementary groups are not known: only its own gid counts). */
static bool may_read(const struct stat *st, const struct safe_reader *as)
{
	if (!as || !as->uid)
		return true;
	if (st->st_uid == as->uid)
		return st->st_mode & S_IRUSR;
	if (st->st_gid == as->gid)
		return st->st_mode & S_IRGRP;
	return st->st_mode & S_IROTH;
}

/* Reopens the O_PATH descriptor pfd for reading if it is a regular file
 * that as may read; closes pfd either way. */
static int reopen_regular(int pfd, const struct safe_reader *as)
{
	struct stat st, st2;
	char self[64];
	int fd, err;

	if (fstat(pfd, &st) < 0) {
		err = -errno;
		close(pfd);
		return err;
	}
	if (!S_ISREG(st.st_mode)) {
		close(pfd);
		return -ENOEXEC;
	}
	if (!may_read(&st, as)) {
		close(pfd);
		return -EACCES;
	}
	snprintf(self, sizeof(self), "/proc/self/fd/%d", pfd);
	fd = open(self, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
	err = fd < 0 ? -errno : 0;
	close(pfd);
	if (err)
		return err;
	/* The same file: /proc/self/fd leads to what pfd holds, whatever
	 * the path has become since. */
	if (fstat(fd, &st2) < 0 || st2.st_dev != st.st_dev || st2.st_ino != st.st_ino) {
		close(fd);
		return -ESTALE;
	}
	return fd;
}

int safe_open(const char *path)
{
	int pfd = open(path, O_PATH | O_CLOEXEC);

	if (pfd < 0)
		return -errno;
	return reopen_regular(pfd, NULL);
}

int safe_reader_of(pid_t pid, struct safe_reader *out)
{
	char *text = NULL, *at;
	size_t len;
	unsigned long v[4];
	int ret = procfs_read(pid, 0, "status", 2048, &text, &len);
	if (ret)
		return ret;
	ret = -EINVAL;
	/* "Uid:\treal\teffective\tsaved\tfilesystem": the last decides. */
	if ((at = strstr(text, "\nUid:")) &&
	    sscanf(at + 5, "%lu %lu %lu %lu", &v[0], &v[1], &v[2], &v[3]) == 4) {
		out->uid = (uid_t)v[3];
		if ((at = strstr(text, "\nGid:")) &&
		    sscanf(at + 5, "%lu %lu %lu %lu", &v[0], &v[1], &v[2], &v[3]) == 4) {
			out->gid = (gid_t)v[3];
			ret = 0;
		}
	}
	free(text);
	return ret;
}

int safe_open_in(const char *root, const char *path, const struct safe_reader *as)
{
	struct open_how how = {
	    .flags = O_PATH | O_CLOEXEC,
	    .resolve = RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS,
	};
	int rfd, pfd, err;

	rfd = open(root, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (rfd < 0)
		return -errno;
	/* A path the kernel resolves against rfd as its "/": absolute
	 * symlinks land inside it too. */
	while (*path == '/')
		path++;
	pfd = (int)syscall(SYS_openat2, rfd, *path ? path : ".", &how, sizeof(how));
	err = pfd < 0 ? -errno : 0;
	close(rfd);
	if (err)
		return err;
	return reopen_regular(pfd, as);
}

int safe_open_in_proc_root(pid_t pid, const char *path)
{
	struct safe_reader as;
	char root[32];
	int ret = safe_reader_of(pid, &as);

	if (ret)
		return ret;
	snprintf(root, sizeof(root), "/proc/%d/root", (int)pid);
	return safe_open_in(root, path, &as);
}
