/* safeopen.h - opening files that other users control, for reading.
 *
 * taipan runs as root and reads files its targets choose: the files they map,
 * the debug files and interpreters inside their roots. Two rules hold for
 * every such open:
 *   - nothing is opened for reading before it is known to be a regular file
 *     (an open of a device can arm a watchdog, of a FIFO can block): the
 *     path is opened O_PATH first, which runs no driver code, checked with
 *     fstat, then reopened through /proc/self/fd;
 *   - a path inside a target's root resolves inside that root: symlinks,
 *     absolute ones too, and ".." never leave it, and /proc's magic links
 *     are refused (openat2 with RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS);
 *   - and what it leads to is read only if the target's own user could read
 *     it: a process whose root is the host's (unshare -Urm, a tmpfs over
 *     its /usr/lib/debug) can still point a symlink at a host file, which
 *     must not reach its profile unless its user may read that file.
 * The descriptors returned are O_RDONLY | O_CLOEXEC | O_NONBLOCK; read them
 * with pread or read, never through a mapping (the owner may truncate the
 * file under a mapping, which raises SIGBUS).
 */
#ifndef TAIPAN_SAFEOPEN_H
#define TAIPAN_SAFEOPEN_H

#include <sys/types.h>

/* Who a file is read for: a process's filesystem uid and gid. uid 0 may read
 * anything. */
struct safe_reader {
	uid_t uid;
	gid_t gid;
};

/* The reader that process pid is (the Uid and Gid lines of its status: the
 * filesystem ids). Returns 0, or a negative errno (-ESRCH: gone). */
int safe_reader_of(pid_t pid, struct safe_reader *out);

/* Opens path for reading as the kernel resolves it (the magic links of
 * /proc/PID/map_files and /proc/self/fd are followed: they lead to the very
 * file), if it is a regular file. Returns the descriptor, or a negative
 * errno: -ENOEXEC when it is not a regular file, else open(2)'s. */
int safe_open(const char *path);

/* Opens path (absolute or not) as a process whose root directory is root
 * sees it, if it is a regular file that as (NULL: anyone) may read by its
 * mode bits: root is a directory ("/proc/PID/root", or any directory), and
 * resolution never leaves it. Returns the descriptor or a negative errno
 * (-ENOEXEC: not a regular file; -EACCES: as may not read it; -EXDEV:
 * resolution tried to leave root through a magic link). */
int safe_open_in(const char *root, const char *path, const struct safe_reader *as);

/* safe_open_in() of "/proc/PID/root", for pid's own user. */
int safe_open_in_proc_root(pid_t pid, const char *path);

#endif /* TAIPAN_SAFEOPEN_H */
