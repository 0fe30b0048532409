/* procfs.h - what taipan learns about processes and threads from /proc.
 *
 * Every read of /proc goes through here. Two parsers have their own modules
 * and read through procfs_read_file(): /proc/PID/maps (procmaps.h) and
 * /proc/kallsyms (ksyms.h).
 * The functions keep no state and use no static buffers, so the agent's
 * threads may call them at once. Each takes a pid (and a tid where a thread
 * is meant), fills the caller's buffers, and returns 0 or a negative errno:
 * -ESRCH when the process or thread is gone.
 */
#ifndef TAIPAN_PROCFS_H
#define TAIPAN_PROCFS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* The kernel's TASK_COMM_LEN: a comm and its NUL. */
#define PROCFS_COMM_LEN 16
#define PROCFS_CGROUP_LEN 256
/* docker, podman, containerd and CRI-O name a container by 64 hex digits. */
#define PROCFS_CONTAINER_ID_LEN 64

/* Reads all of path into *text, malloc'd and NUL-terminated (the caller
 * frees it), *len bytes without the NUL. /proc files report no size: the
 * buffer starts at size_hint bytes and doubles when it runs low, so a
 * good hint saves copies. Returns 0, or a negative
 * errno (-ENOENT, -EACCES, -ENOMEM...) with *text NULL and *len 0. For the
 * files of a process, procfs_read() tells a process that is gone. */
int procfs_read_file(const char *path, size_t size_hint, char **text, size_t *len);

/* procfs_read_file() of /proc/PID/FILE, or of /proc/PID/task/TID/FILE when
 * tid is not 0; -ESRCH when the process or thread is gone. */
int procfs_read(pid_t pid, pid_t tid, const char *file, size_t size_hint, char **text, size_t *len);

/* Milliseconds since pid started (field 22 of /proc/PID/stat against
 * CLOCK_BOOTTIME). Returns 0 with *ms, -ESRCH, or -EINVAL when the stat
 * line cannot be parsed. */
int procfs_age_ms(pid_t pid, uint64_t *ms);

/* The starttime field (22) of a /proc/PID/stat line, in clock ticks after
 * boot. comm (field 2) may hold spaces and ')': the fields are counted from
 * the last ')'. Returns 0 or -EINVAL. Exposed for the unit tests. */
int procfs_parse_starttime(const char *stat, uint64_t *ticks);

/* The comm of pid (tid 0) or of its thread tid, without the newline, into
 * buf of len bytes (PROCFS_COMM_LEN holds any; a shorter buf cuts it).
 * Returns 0, -ESRCH, or another negative errno; buf is "" on failure. */
int procfs_comm(pid_t pid, pid_t tid, char *buf, size_t len);

/* The id of pid (tid 0) or of its thread tid in its innermost pid
 * namespace: the last field of NSpid in its status file. That is pid (or
 * tid) itself when it lives in our namespace, and also on kernels before
 * 4.1, which have no NSpid line. Returns 0 with *out, -ESRCH, or another
 * negative errno with *out untouched. */
int procfs_ns_pid(pid_t pid, pid_t tid, pid_t *out);

/* The last field of the NSpid line in the text of a status file. Returns 0
 * with *out, -ENOENT when there is no NSpid line, -EINVAL when it holds no
 * number. Exposed for the unit tests. */
int procfs_parse_nspid(const char *status, pid_t *out);

/* What taipan reads from /proc/PID/status besides NSpid. */
struct procfs_status {
	pid_t tgid; /* Tgid: the process a thread id belongs to */
	pid_t ppid; /* PPid: its parent */
	char state; /* State: 'R', 'S', 'Z' (zombie: exited, not yet reaped), 'X', ... */
};

/* The status of pid, or of /proc/PID when pid is a thread id (the kernel
 * answers for threads too, though /proc does not list them). Returns 0 with
 * *out, -ESRCH, or another negative errno with *out zeroed. */
int procfs_status(pid_t pid, struct procfs_status *out);

/* Fills *out from the text of a status file. Returns 0, or -EINVAL when a
 * Tgid, PPid or State line is missing or unreadable. Exposed for the unit
 * tests. */
int procfs_parse_status(const char *status, struct procfs_status *out);

struct procfs_cgroup {
	/* The cgroup v2 path ("0::/path"), or on a host that uses only v1 the
	 * first v1 path that is not "/"; "" when there is none. A longer path
	 * is cut to the buffer. */
	char path[PROCFS_CGROUP_LEN];
	/* The first run of exactly PROCFS_CONTAINER_ID_LEN lowercase hex
	 * digits in any of the paths, or "". */
	char container[PROCFS_CONTAINER_ID_LEN + 1];
};

/* The cgroup and container of pid, from /proc/PID/cgroup. Returns 0 with
 * *out filled, or -ESRCH or another negative errno with *out zeroed. */
int procfs_cgroup(pid_t pid, struct procfs_cgroup *out);

/* Fills *out from text, the content of a /proc/PID/cgroup file: one or
 * more "ID:CONTROLLERS:PATH" lines. Lines without two ':' are skipped. */
void procfs_parse_cgroup(const char *text, struct procfs_cgroup *out);

/* Whether cgroup path cg (struct procfs_cgroup's path) is the cgroup dir or
 * one of its descendants, comparing whole path components: "/user.slice/
 * user-1" holds "/user.slice/user-1/x" but not "/user.slice/user-1001.slice".
 * Trailing slashes of dir do not count; "/" holds every path. */
bool procfs_cgroup_within(const char *cg, const char *dir);

/* The threads of pid, from /proc/PID/task, in no particular order. Returns
 * 0 with *tids malloc'd (the caller frees it; NULL when *n is 0), or -ESRCH,
 * -ENOMEM or another negative errno with *tids NULL and *n 0. */
int procfs_tasks(pid_t pid, pid_t **tids, size_t *n);

/* Every process in our pid namespace, from /proc, as procfs_tasks(). */
int procfs_pids(pid_t **pids, size_t *n);

/* The names under which another process's files are opened, written into
 * buf of len bytes. Each returns 0, or -ENAMETOOLONG when buf is too short.
 *
 * The file mapped at [start, end) in pid (works for deleted files and files
 * of other mount namespaces, given CAP_CHECKPOINT_RESTORE or CAP_SYS_ADMIN). */
int procfs_map_file_path(pid_t pid, uint64_t start, uint64_t end, char *buf, size_t len);
/* path as pid sees it: inside its root directory. path starts with '/'. */
int procfs_root_path(pid_t pid, const char *path, char *buf, size_t len);
/* pid's executable. */
int procfs_exe_path(pid_t pid, char *buf, size_t len);

#endif /* TAIPAN_PROCFS_H */
