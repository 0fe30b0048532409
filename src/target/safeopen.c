/* safeopen.c - opening files that other users control (safeopen.h). */
#include "target/safeopen.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <stdio.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#ifndef SYS_openat2
#define SYS_openat2 437
#endif

/* Reopens the O_PATH descriptor pfd for reading if it is a regular file;
 * closes pfd either way. */
static int reopen_regular(int pfd)
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
	return reopen_regular(pfd);
}

int safe_open_in(const char *root, const char *path)
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
	return reopen_regular(pfd);
}

int safe_open_in_proc_root(pid_t pid, const char *path)
{
	char root[32];

	snprintf(root, sizeof(root), "/proc/%d/root", (int)pid);
	return safe_open_in(root, path);
}
