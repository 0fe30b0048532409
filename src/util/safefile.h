/* safefile.h - opening the files a root daemon is told to use (its log, its
 * token, its push credentials) when another local user may have put
 * something of their own at that path: a symbolic link to a file of root's,
 * a FIFO that would hang the open or the read, a file they own and so can
 * read or change. */
#ifndef TAIPAN_SAFEFILE_H
#define TAIPAN_SAFEFILE_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

/* What the file is for; it decides what is checked. */
enum safefile_use {
	/* Appended to, created with mode when missing (the log). */
	SAFEFILE_LOG,
	/* Read; a secret: no group or other access (a token, credentials). */
	SAFEFILE_SECRET,
};

/* Opens path (flags: O_RDONLY, or O_WRONLY | O_APPEND | O_CREAT with mode)
 * without following a symbolic link there and without blocking on a FIFO,
 * close-on-exec, and refuses it unless it is a regular file owned by root
 * or by the effective user, with one link (SAFEFILE_LOG) or no group or
 * other access (SAFEFILE_SECRET). Returns the descriptor, or a negative
 * errno with err filled: "PATH is a symbolic link: ..." naming the file and
 * what to do about it (chown, chmod). */
int safefile_open(const char *path, int flags, mode_t mode, enum safefile_use use, char *err,
		  size_t errlen);

/* Reads the secret at path (safefile_open, SAFEFILE_SECRET) into buf, at
 * most cap bytes; *len gets how many (cap: there may be more). Returns 0 or
 * a negative errno with err filled. */
int safefile_read_secret(const char *path, char *buf, size_t cap, size_t *len, char *err,
			 size_t errlen);

#endif /* TAIPAN_SAFEFILE_H */
