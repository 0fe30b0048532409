/* safefile.c - opening the files a root daemon is told to use, checked
 * after the open (fstat of what was opened, not a stat of the path before:
 * the path can change in between). */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util/safefile.h"

static const char *kind_of(mode_t m)
{
	if (S_ISDIR(m))
		return "a directory";
	if (S_ISFIFO(m))
		return "a FIFO";
	if (S_ISSOCK(m))
		return "a socket";
	if (S_ISCHR(m) || S_ISBLK(m))
		return "a device";
	return "not a regular file";
}

int safefile_open(const char *path, int flags, mode_t mode, enum safefile_use use, char *err,
		  size_t errlen)
{
	struct stat st;
	/* O_NONBLOCK: a FIFO opens at once (or fails, to write, with no
	 * reader) instead of waiting for its other end; it is refused below.
	 * On a regular file it changes nothing. */
	int fd = open(path, flags | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC | O_NOCTTY, mode);
	if (fd < 0) {
		int e = errno;
		if (e == ELOOP)
			snprintf(err, errlen,
				 "%s is a symbolic link: give the path of the file itself (a link "
				 "could point the agent at any file)",
				 path);
		else if (e == ENXIO)
			snprintf(err, errlen, "%s is a FIFO or a socket, not a regular file", path);
		else
			snprintf(err, errlen, "cannot open %s: %s", path, strerror(e));
		return -e;
	}
	int ret = 0;
	if (fstat(fd, &st)) {
		ret = -errno;
		snprintf(err, errlen, "cannot open %s: %s", path, strerror(-ret));
	} else if (!S_ISREG(st.st_mode)) {
		ret = -EINVAL;
		snprintf(err, errlen, "%s is %s: give a regular file", path, kind_of(st.st_mode));
	} else if (st.st_uid != 0 && st.st_uid != geteuid()) {
		ret = -EPERM;
		snprintf(err, errlen,
			 "%s is owned by uid %u, not by root: that user could %s; chown root %s",
			 path, (unsigned int)st.st_uid,
			 use == SAFEFILE_SECRET ? "read or change it" : "read and rewrite the log",
			 path);
	} else if (use == SAFEFILE_SECRET && (st.st_mode & 077)) {
		ret = -EPERM;
		snprintf(err, errlen,
			 "%s may be read or written by its group or by others (mode %04o): "
			 "chmod 600 %s",
			 path, (unsigned int)(st.st_mode & 07777), path);
	} else if (use == SAFEFILE_LOG && st.st_nlink != 1) {
		ret = -EPERM;
		snprintf(err, errlen,
			 "%s has %lu hard links: another name of the same file could be one "
			 "of root's; give a file of its own",
			 path, (unsigned long)st.st_nlink);
	}
	if (!ret && (flags & O_ACCMODE) != O_RDONLY) {
		/* Writes wait when they must, as a log's should. */
		int fl = fcntl(fd, F_GETFL);
		if (fl < 0 || fcntl(fd, F_SETFL, fl & ~O_NONBLOCK)) {
			ret = -errno;
			snprintf(err, errlen, "cannot open %s: %s", path, strerror(-ret));
		}
	}
	if (ret) {
		close(fd);
		return ret;
	}
	return fd;
}

int safefile_read_secret(const char *path, char *buf, size_t cap, size_t *len, char *err,
			 size_t errlen)
{
	size_t n = 0;
	int fd = safefile_open(path, O_RDONLY, 0, SAFEFILE_SECRET, err, errlen);
	if (fd < 0)
		return fd;
	while (n < cap) {
		ssize_t r = read(fd, buf + n, cap - n);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0) {
			int e = errno;
			snprintf(err, errlen, "cannot read %s: %s", path, strerror(e));
			close(fd);
			return -e;
		}
		if (!r)
			break;
		n += (size_t)r;
	}
	close(fd);
	*len = n;
	return 0;
}
