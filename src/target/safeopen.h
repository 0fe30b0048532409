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
 *     are refused (openat2 with RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS).
 * The descriptors returned are O_RDONLY | O_CLOEXEC | O_NONBLOCK; read them
 * with pread or read, never through a mapping (the owner may truncate the
 * file under a mapping, which raises SIGBUS).
 */
#ifndef TAIPAN_SAFEOPEN_H
#define TAIPAN_SAFEOPEN_H

#include <sys/types.h>

/* Opens path for reading as the kernel resolves it (the magic links of
 * /proc/PID/map_files and /proc/self/fd are followed: they lead to the very
 * file), if it is a regular file. Returns the descriptor, or a negative
 * errno: -ENOEXEC when it is not a regular file, else open(2)'s. */
int safe_open(const char *path);

/* Opens path (absolute or not) as a process whose root directory is root
 * sees it, if it is a regular file: root is a directory ("/proc/PID/root",
 * or any directory), and resolution never leaves it. Returns the descriptor
 * or a negative errno (-ENOEXEC: not a regular file; -EXDEV: resolution
 * tried to leave root through a magic link). */
int safe_open_in(const char *root, const char *path);

/* safe_open_in() of "/proc/PID/root". */
int safe_open_in_proc_root(pid_t pid, const char *path);

#endif /* TAIPAN_SAFEOPEN_H */
