/* procfs.c - reading /proc: process age, comm, pid namespace ids, cgroup and
 * container, the thread and process lists, and the names of a process's
 * files. No strtok and no static buffers: the agent calls this from several
 * threads. */
#include "proc/procfs.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* 0 when snprintf's result n fitted in len bytes, else -ENAMETOOLONG. */
static int fitted(int n, size_t len)
{
	return n < 0 || (size_t)n >= len ? -ENAMETOOLONG : 0;
}

/* /proc/PID/FILE, or /proc/PID/task/TID/FILE when tid is not 0. */
static int task_path(char *buf, size_t len, pid_t pid, pid_t tid, const char *file)
{
	if (tid)
		return fitted(snprintf(buf, len, "/proc/%d/task/%d/%s", pid, tid, file), len);
	return fitted(snprintf(buf, len, "/proc/%d/%s", pid, file), len);
}

/* A /proc file of a process that may have gone: its directory vanishes, so
 * ENOENT means the process (or thread) is gone. */
static int gone_or(int err)
{
	return err == -ENOENT ? -ESRCH : err;
}

int procfs_read_file(const char *path, size_t size_hint, char **text, size_t *len)
{
	size_t cap = size_hint > 64 ? size_hint : 64, n = 0;
	char *buf, *nb;
	int err = 0;
	*text = NULL;
	*len = 0;
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	buf = malloc(cap);
	if (!buf) {
		close(fd);
		return -ENOMEM;
	}
	for (;;) {
		/* Each read asks for all the room left; seq_file may give
		 * less (kallsyms comes a page at a time). */
		if (cap - n < cap / 8 + 1) {
			nb = realloc(buf, cap * 2);
			if (!nb) {
				err = -ENOMEM;
				break;
			}
			buf = nb;
			cap *= 2;
		}
		ssize_t r = read(fd, buf + n, cap - n - 1);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			err = -errno; /* ESRCH: the process exited while we read */
		if (r <= 0)
			break;
		n += (size_t)r;
	}
	close(fd);
	if (err) {
		free(buf);
		return err;
	}
	buf[n] = 0;
	/* Give back the slack: some callers keep the text. */
	nb = realloc(buf, n + 1);
	*text = nb ? nb : buf;
	*len = n;
	return 0;
}

int procfs_read(pid_t pid, pid_t tid, const char *file, size_t size_hint, char **text, size_t *len)
{
	char path[96];
	int ret = task_path(path, sizeof(path), pid, tid, file);
	if (ret) {
		*text = NULL;
		*len = 0;
		return ret;
	}
	return gone_or(procfs_read_file(path, size_hint, text, len));
}

/* /proc/PID/FILE or its thread's, whole, as a string. */
static int slurp(pid_t pid, pid_t tid, const char *file, char **text)
{
	size_t len;
	return procfs_read(pid, tid, file, 4096, text, &len);
}

int procfs_parse_starttime(const char *stat, uint64_t *ticks)
{
	const char *p = strrchr(stat, ')');
	if (!p)
		return -EINVAL;
	p++;
	/* The last ')' ends field 2; fields are single words from there. */
	for (int field = 3;; field++) {
		p += strspn(p, " ");
		if (!*p || *p == '\n')
			return -EINVAL; /* fewer than 22 fields */
		if (field == 22)
			break;
		p += strcspn(p, " \n");
	}
	if (*p < '0' || *p > '9')
		return -EINVAL;
	char *end;
	errno = 0;
	unsigned long long v = strtoull(p, &end, 10);
	if (errno || (*end && *end != ' ' && *end != '\n'))
		return -EINVAL;
	*ticks = v;
	return 0;
}

int procfs_age_ms(pid_t pid, uint64_t *ms)
{
	char *stat;
	uint64_t ticks;
	struct timespec now;
	int ret = slurp(pid, 0, "stat", &stat);
	if (ret)
		return ret;
	ret = procfs_parse_starttime(stat, &ticks);
	free(stat);
	if (ret)
		return ret;
	long hz = sysconf(_SC_CLK_TCK);
	if (hz <= 0 || clock_gettime(CLOCK_BOOTTIME, &now))
		return -EINVAL;
	uint64_t boot_ms = (uint64_t)now.tv_sec * 1000 + (uint64_t)now.tv_nsec / 1000000;
	uint64_t start_ms = ticks * 1000 / (uint64_t)hz;
	/* Ticks are coarser than the clock: a process started this tick may
	 * look a little younger than zero. */
	*ms = boot_ms > start_ms ? boot_ms - start_ms : 0;
	return 0;
}

/* Copies the n bytes at s into buf of len bytes as a string, cut to fit. */
static void copy_cut(char *buf, size_t len, const char *s, size_t n)
{
	if (n > len - 1)
		n = len - 1;
	memcpy(buf, s, n);
	buf[n] = 0;
}

int procfs_comm(pid_t pid, pid_t tid, char *buf, size_t len)
{
	char *text;
	if (!len)
		return -EINVAL;
	buf[0] = 0;
	int ret = slurp(pid, tid, "comm", &text);
	if (ret)
		return ret;
	copy_cut(buf, len, text, strcspn(text, "\n"));
	free(text);
	return 0;
}

/* The text after "KEY:" and blanks on the line of status that starts with
 * KEY, or NULL. */
static const char *status_field(const char *status, const char *key)
{
	size_t klen = strlen(key);
	for (const char *l = status; *l;) {
		size_t len = strcspn(l, "\n");
		if (!strncmp(l, key, klen) && l[klen] == ':')
			return l + klen + 1 + strspn(l + klen + 1, " \t");
		l += l[len] ? len + 1 : len;
	}
	return NULL;
}

int procfs_parse_nspid(const char *status, pid_t *out)
{
	const char *p = status_field(status, "NSpid");
	if (!p)
		return -ENOENT;
	long last = 0;
	/* Outermost namespace first; only blanks between the ids, so the next
	 * line is never read as one. */
	for (;;) {
		p += strspn(p, " \t");
		if (*p < '0' || *p > '9')
			break;
		char *end;
		errno = 0;
		long v = strtol(p, &end, 10);
		if (errno || v <= 0 || v > INT_MAX)
			return -EINVAL;
		last = v;
		p = end;
	}
	if (!last)
		return -EINVAL;
	*out = (pid_t)last;
	return 0;
}

int procfs_ns_pid(pid_t pid, pid_t tid, pid_t *out)
{
	char *status;
	int ret = slurp(pid, tid, "status", &status);
	if (ret)
		return ret;
	ret = procfs_parse_nspid(status, out);
	free(status);
	if (ret == -ENOENT) {
		/* A kernel before 4.1: no NSpid, and no way to tell. */
		*out = tid ? tid : pid;
		ret = 0;
	}
	return ret;
}

static int status_id(const char *status, const char *key, pid_t *out)
{
	const char *v = status_field(status, key);
	char *end;
	if (!v || *v < '0' || *v > '9')
		return -EINVAL;
	errno = 0;
	long n = strtol(v, &end, 10);
	if (errno || n < 0 || n > INT_MAX || (*end && *end != '\n' && *end != ' ' && *end != '\t'))
		return -EINVAL;
	*out = (pid_t)n;
	return 0;
}

int procfs_parse_status(const char *status, struct procfs_status *out)
{
	memset(out, 0, sizeof(*out));
	const char *state = status_field(status, "State");
	if (!state || !*state || *state == '\n' || status_id(status, "Tgid", &out->tgid) ||
	    status_id(status, "PPid", &out->ppid)) {
		memset(out, 0, sizeof(*out));
		return -EINVAL;
	}
	out->state = *state;
	return 0;
}

int procfs_status(pid_t pid, struct procfs_status *out)
{
	char *text;
	memset(out, 0, sizeof(*out));
	int ret = slurp(pid, 0, "status", &text);
	if (ret)
		return ret;
	ret = procfs_parse_status(text, out);
	free(text);
	return ret;
}

/* The first run of exactly PROCFS_CONTAINER_ID_LEN lowercase hex digits in
 * the n bytes at s, copied to id; false when there is none. */
static bool container_id(const char *s, size_t n, char *id)
{
	static const char hex[] = "0123456789abcdef";
	for (size_t i = 0; i < n;) {
		size_t h = 0;
		while (i + h < n && s[i + h] && strchr(hex, s[i + h]))
			h++;
		if (h == PROCFS_CONTAINER_ID_LEN) {
			memcpy(id, s + i, h);
			id[h] = 0;
			return true;
		}
		i += h ? h : 1;
	}
	return false;
}

void procfs_parse_cgroup(const char *text, struct procfs_cgroup *out)
{
	char v1[sizeof(out->path)] = "";
	memset(out, 0, sizeof(*out));
	for (const char *l = text; *l;) {
		size_t len = strcspn(l, "\n");
		const char *next = l[len] ? l + len + 1 : l + len;
		const char *c1 = memchr(l, ':', len);
		const char *c2 = c1 ? memchr(c1 + 1, ':', len - (size_t)(c1 + 1 - l)) : NULL;
		if (c2) {
			const char *cg = c2 + 1;
			size_t n = len - (size_t)(cg - l);
			if (len >= 3 && !strncmp(l, "0::", 3))
				copy_cut(out->path, sizeof(out->path), cg, n);
			else if (!v1[0] && n && !(n == 1 && cg[0] == '/'))
				copy_cut(v1, sizeof(v1), cg, n);
			if (!out->container[0])
				container_id(cg, n, out->container);
		}
		l = next;
	}
	/* v2 mounted but unused (every process in "/"), or not mounted. */
	if ((!out->path[0] || !strcmp(out->path, "/")) && v1[0])
		memcpy(out->path, v1, sizeof(v1));
}

bool procfs_cgroup_within(const char *cg, const char *dir)
{
	size_t n = strlen(dir);
	while (n > 0 && dir[n - 1] == '/')
		n--;
	if (n == 0) /* "/": the root holds every cgroup */
		return dir[0] == '/' && cg[0] == '/';
	return strncmp(cg, dir, n) == 0 && (cg[n] == '\0' || cg[n] == '/');
}

int procfs_cgroup(pid_t pid, struct procfs_cgroup *out)
{
	char *text;
	memset(out, 0, sizeof(*out));
	int ret = slurp(pid, 0, "cgroup", &text);
	if (ret)
		return ret;
	procfs_parse_cgroup(text, out);
	free(text);
	return 0;
}

/* The numeric names in directory path: pids or tids. */
static int list_ids(const char *path, pid_t **ids, size_t *count)
{
	pid_t *v = NULL;
	size_t n = 0, cap = 0;
	int err = 0;
	*ids = NULL;
	*count = 0;
	DIR *d = opendir(path);
	if (!d)
		return -errno;
	for (;;) {
		errno = 0;
		struct dirent *de = readdir(d);
		if (!de) {
			err = -errno;
			break;
		}
		char *end;
		long id = strtol(de->d_name, &end, 10);
		if (*end || id <= 0 || id > INT_MAX)
			continue;
		if (n == cap) {
			size_t ncap = cap ? 2 * cap : 64;
			pid_t *nv = realloc(v, ncap * sizeof(*nv));
			if (!nv) {
				err = -ENOMEM;
				break;
			}
			v = nv;
			cap = ncap;
		}
		v[n++] = (pid_t)id;
	}
	closedir(d);
	if (err) {
		free(v);
		return err;
	}
	*ids = v;
	*count = n;
	return 0;
}

int procfs_tasks(pid_t pid, pid_t **tids, size_t *n)
{
	char path[64];
	int ret = task_path(path, sizeof(path), pid, 0, "task");
	if (ret) {
		*tids = NULL;
		*n = 0;
		return ret;
	}
	ret = list_ids(path, tids, n);
	return ret == -ENOENT ? -ESRCH : ret;
}

int procfs_pids(pid_t **pids, size_t *n)
{
	return list_ids("/proc", pids, n);
}

int procfs_map_file_path(pid_t pid, uint64_t start, uint64_t end, char *buf, size_t len)
{
	return fitted(snprintf(buf, len, "/proc/%d/map_files/%llx-%llx", pid,
			       (unsigned long long)start, (unsigned long long)end),
		      len);
}

int procfs_root_path(pid_t pid, const char *path, char *buf, size_t len)
{
	return fitted(snprintf(buf, len, "/proc/%d/root%s", pid, path), len);
}

int procfs_exe_path(pid_t pid, char *buf, size_t len)
{
	return task_path(buf, len, pid, 0, "exe");
}
