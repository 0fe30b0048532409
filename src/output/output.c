/* output.c - choosing an output format, and writing a profile file safely.
 *
 * The profile is written into a fresh temporary file in the destination's
 * directory and renamed over the destination, so a reader (a flame-graph
 * viewer, a pprof scraper) sees either the old file or the whole new one.
 * taipan usually runs as root and the destination is named by a user, so it
 * refuses to replace anything but a regular file of its own: not a symlink,
 * a device node, a FIFO or somebody else's file. Nor does it reach the
 * directory through a symbolic link that another user could have made or
 * changed (open_dir): such a link would send root's file into a directory
 * that user could not write. All of that is checked, and the temporary file
 * created, before recording starts (output_file_open), so that a bad -o
 * costs nothing; a profile that cannot be put in place at the end is rescued
 * into $TMPDIR (output_write_rescue). Profiles are mode 0600: with -a they
 * name what every user runs.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "output/output.h"

/* The formats. Extensions are matched whole and without case, the longest
 * first, so a ".gz" of some later format would not take ".pb.gz". */
const struct output_format_desc output_formats[] = {
    {.name = "html",
     .extensions = {".html", ".htm"},
     .suggested = 1,
     .help = "flame graph",
     .write = output_write_html},
    /* .json alone is speedscope: the only JSON profile format taipan writes */
    {.name = "speedscope",
     .extensions = {".json"},
     .suggested = 1,
     .help = "speedscope",
     .write = output_write_speedscope},
    {.name = "pprof",
     .extensions = {".pb.gz", ".pprof"},
     .suggested = 2,
     .help = "pprof",
     .binary = "gzip",
     .write = output_write_pprof},
    /* OpenTelemetry profiles: an ExportProfilesServiceRequest, unzipped */
    {.name = "otlp",
     .extensions = {".otlp"},
     .suggested = 1,
     .help = "OpenTelemetry profiles",
     .binary = "protobuf",
     .timed = true,
     .write = output_write_otlp},
    {.name = "folded",
     .extensions = {".folded", ".txt"},
     .suggested = 2,
     .help = "folded stacks",
     .time_unit = "microseconds",
     .write = output_write_folded},
    {0},
};

const struct output_format_desc *output_format_from_path(const char *path)
{
	const struct output_format_desc *best = NULL;
	size_t best_len = 0;
	if (!path)
		return NULL;
	size_t len = strlen(path);
	for (const struct output_format_desc *f = output_formats; f->name; f++)
		for (const char *const *e = f->extensions; *e; e++) {
			size_t elen = strlen(*e);
			/* A bare ".txt" is a hidden file with no extension, not a
			 * format. */
			if (len > elen && elen > best_len &&
			    strcasecmp(path + len - elen, *e) == 0 && path[len - elen - 1] != '/') {
				best = f;
				best_len = elen;
			}
		}
	return best;
}

const struct output_format_desc *output_format_from_name(const char *name)
{
	if (!name)
		return NULL;
	for (const struct output_format_desc *f = output_formats; f->name; f++)
		if (strcmp(name, f->name) == 0)
			return f;
	return NULL;
}

/* Appends item to the list in buf: "a, b or c" once the last is in. */
static void list_add(char *buf, size_t len, const char *item, bool last)
{
	size_t n = strlen(buf);
	if (n + 1 < len)
		snprintf(buf + n, len - n, "%s%s", !n ? "" : last ? " or " : ", ", item);
}

const char *output_format_names(char *buf, size_t len)
{
	buf[0] = '\0';
	for (const struct output_format_desc *f = output_formats; f->name; f++)
		list_add(buf, len, f->name, !f[1].name);
	return buf;
}

const char *output_format_extensions(char *buf, size_t len)
{
	buf[0] = '\0';
	for (const struct output_format_desc *f = output_formats; f->name; f++)
		for (unsigned int i = 0; i < f->suggested && f->extensions[i]; i++)
			list_add(buf, len, f->extensions[i], !f[1].name && i + 1 == f->suggested);
	return buf;
}

const char *output_format_summary(char *buf, size_t len)
{
	buf[0] = '\0';
	for (const struct output_format_desc *f = output_formats; f->name; f++) {
		size_t n = strlen(buf);
		if (n < len && f != output_formats)
			n += (size_t)snprintf(buf + n, len - n, ", ");
		for (const char *const *e = f->extensions; *e && n < len; e++)
			n += (size_t)snprintf(buf + n, len - n, "%s%s",
					      e == f->extensions ? "" : "/", *e);
		if (n < len)
			snprintf(buf + n, len - n, " %s", f->help);
	}
	return buf;
}

/* What st is, for a message: "a symbolic link", "a FIFO", ... */
static const char *file_kind(const struct stat *st)
{
	if (S_ISLNK(st->st_mode))
		return "a symbolic link";
	if (S_ISDIR(st->st_mode))
		return "a directory";
	if (S_ISCHR(st->st_mode))
		return "a character device";
	if (S_ISBLK(st->st_mode))
		return "a block device";
	if (S_ISFIFO(st->st_mode))
		return "a FIFO";
	if (S_ISSOCK(st->st_mode))
		return "a socket";
	return "not a regular file";
}

/* 0 when the entry base in dfd may be replaced: absent, or a regular file
 * of ours. Otherwise a negative errno, and err says why: a symlink (the user
 * may have aimed it at a file they could not write themselves), a device
 * node or a FIFO (the rename would turn it into a file), a directory, or a
 * file someone else owns. path is the name to give in the message. */
static int check_replaceable(int dfd, const char *base, const char *path, char *err, size_t errlen)
{
	struct stat st;
	if (fstatat(dfd, base, &st, AT_SYMLINK_NOFOLLOW) < 0) {
		if (errno == ENOENT)
			return 0;
		int e = errno;
		snprintf(err, errlen, "cannot write %s: %s", path, strerror(e));
		return -e;
	}
	if (S_ISDIR(st.st_mode)) {
		snprintf(err, errlen, "cannot write %s: it is a directory; name a file in it",
			 path);
		return -EISDIR;
	}
	if (S_ISLNK(st.st_mode)) {
		snprintf(err, errlen,
			 "will not write %s: it is a symbolic link, and taipan does not write "
			 "through one; name the file it points to, or remove it",
			 path);
		return -EPERM;
	}
	if (!S_ISREG(st.st_mode)) {
		snprintf(err, errlen,
			 "will not write %s: it is %s, and taipan replaces only regular files "
			 "(-o - writes to standard output)",
			 path, file_kind(&st));
		return -EPERM;
	}
	if (st.st_uid != geteuid()) {
		snprintf(err, errlen,
			 "will not write %s: it is owned by uid %u, and taipan (uid %u) does "
			 "not replace another user's file; remove it or choose another name",
			 path, (unsigned int)st.st_uid, (unsigned int)geteuid());
		return -EPERM;
	}
	return 0;
}

/* The most symbolic links open_dir follows, as the kernel's MAXSYMLINKS. */
#define MAX_LINKS 40

/* Why the symbolic link st, in the directory dfd, is not one taipan follows,
 * or NULL when it is: it must belong to root or to taipan's own user, and so
 * must its directory, which no one else may write to (sticky or not: a
 * world-writable directory can hold a hard link to anyone's symlink). Then
 * no other user made the link, or can change or replace it. why (len
 * bytes) holds the reason. */
static const char *untrusted_link(int dfd, const struct stat *st, char *why, size_t len)
{
	uid_t me = geteuid();
	struct stat d;
	if (st->st_uid != 0 && st->st_uid != me) {
		snprintf(why, len, "owned by uid %u", (unsigned int)st->st_uid);
		return why;
	}
	if (fstat(dfd, &d) < 0) {
		snprintf(why, len, "in a directory taipan cannot check (%s)", strerror(errno));
		return why;
	}
	if (d.st_uid != 0 && d.st_uid != me) {
		snprintf(why, len, "in a directory owned by uid %u", (unsigned int)d.st_uid);
		return why;
	}
	if (d.st_mode & (S_IWGRP | S_IWOTH)) {
		snprintf(why, len, "in a directory that %s can write (mode %04o)",
			 d.st_mode & S_IWOTH ? "every user" : "its group",
			 (unsigned int)(d.st_mode & 07777));
		return why;
	}
	return NULL;
}

/* Opens dir, the directory of -o path, one component at a time (openat,
 * O_NOFOLLOW), following a symbolic link only where untrusted_link() finds
 * nothing against it. A relative dir starts at the current directory, which
 * is taken as it is. Returns an O_RDONLY directory fd, or a negative errno
 * with err set. */
static int open_dir(const char *dir, const char *path, char *err, size_t errlen)
{
	char rest[2 * PATH_MAX]; /* what is left to walk */
	char where[PATH_MAX];	 /* what was walked, for messages */
	size_t n = strlen(dir);
	int links = 0, cur, ret = 0;

	if (n >= sizeof(rest)) {
		snprintf(err, errlen, "cannot write %s: %s", path, strerror(ENAMETOOLONG));
		return -ENAMETOOLONG;
	}
	memcpy(rest, dir, n + 1);
	snprintf(where, sizeof(where), "%s", dir[0] == '/' ? "/" : "");
	cur = open(dir[0] == '/' ? "/" : ".", O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (cur < 0) {
		ret = -errno;
		snprintf(err, errlen, "cannot write %s: directory %s: %s", path, dir,
			 strerror(errno));
		return ret;
	}
	for (char *p = rest;;) {
		char name[NAME_MAX + 1];
		while (*p == '/')
			p++;
		if (!*p)
			break;
		size_t len = strcspn(p, "/");
		if (len > NAME_MAX) {
			ret = -ENAMETOOLONG;
			snprintf(err, errlen, "cannot write %s: %s", path, strerror(ENAMETOOLONG));
			goto out;
		}
		memcpy(name, p, len);
		name[len] = '\0';
		p += len;

		int fd = openat(cur, name, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (fd >= 0) {
			close(cur);
			cur = fd;
			size_t w = strlen(where);
			snprintf(where + w, sizeof(where) - w, "%s%s", name, *p ? "/" : "");
			continue;
		}
		int e = errno;
		struct stat st;
		if ((e != ENOTDIR && e != ELOOP) ||
		    fstatat(cur, name, &st, AT_SYMLINK_NOFOLLOW) < 0 || !S_ISLNK(st.st_mode)) {
			ret = -e;
			if (e == ENOENT)
				snprintf(err, errlen,
					 "cannot write %s: directory %s does not exist", path, dir);
			else if (e == ENOTDIR)
				snprintf(err, errlen, "cannot write %s: %s is not a directory",
					 path, dir);
			else
				snprintf(err, errlen, "cannot write %s: directory %s: %s", path,
					 dir, strerror(e));
			goto out;
		}
		char why[128];
		if (untrusted_link(cur, &st, why, sizeof(why))) {
			ret = -EPERM;
			snprintf(
			    err, errlen,
			    "will not write %s: %s%s is a symbolic link %s, and taipan follows "
			    "only links that root (or its own user) owns in a directory no one "
			    "else can write; name the directory it leads to",
			    path, where, name, why);
			goto out;
		}
		char target[PATH_MAX];
		ssize_t tl = readlinkat(cur, name, target, sizeof(target) - 1);
		size_t left = strlen(p);
		if (tl < 0)
			ret = -errno;
		else if (tl == 0)
			ret = -ENOENT; /* an empty target leads nowhere */
		else if (++links > MAX_LINKS)
			ret = -ELOOP;
		else if ((size_t)tl + 1 + left >= sizeof(rest))
			ret = -ENAMETOOLONG;
		if (ret) {
			snprintf(err, errlen, "cannot write %s: directory %s: %s", path, dir,
				 strerror(-ret));
			goto out;
		}
		/* The rest of the walk is the link's target, then what followed
		 * the link. */
		memmove(rest + tl + 1, p, left + 1);
		memcpy(rest, target, (size_t)tl);
		rest[tl] = '/';
		p = rest;
		if (target[0] == '/') {
			close(cur);
			cur = open("/", O_PATH | O_DIRECTORY | O_CLOEXEC);
			if (cur < 0) {
				ret = -errno;
				snprintf(err, errlen, "cannot write %s: /: %s", path,
					 strerror(errno));
				return ret;
			}
			snprintf(where, sizeof(where), "/");
		}
	}
	/* O_PATH was enough to walk; the directory itself is read (stale
	 * temporary files) and synced. */
	ret = openat(cur, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (ret < 0) {
		ret = -errno;
		snprintf(err, errlen, "cannot write %s: directory %s: %s", path, dir,
			 strerror(errno));
	}
out:
	close(cur);
	return ret;
}

#define TEMP_PREFIX ".taipan-"
#define TEMP_SUFFIX ".tmp"

/* The pid in name when it is exactly a temporary file's name as create_temp
 * makes them, ".taipan-PID-XXXXXXXXXXXXXXXX.tmp" (16 lowercase hex digits),
 * or 0. */
static pid_t temp_owner(const char *name)
{
	const char *p = name;
	long pid = 0;
	if (strncmp(p, TEMP_PREFIX, strlen(TEMP_PREFIX)) != 0)
		return 0;
	p += strlen(TEMP_PREFIX);
	if (*p < '1' || *p > '9')
		return 0;
	for (; *p >= '0' && *p <= '9'; p++) {
		pid = pid * 10 + (*p - '0');
		if (pid > INT_MAX)
			return 0;
	}
	if (*p++ != '-')
		return 0;
	for (int i = 0; i < 16; i++, p++)
		if (!((*p >= '0' && *p <= '9') || (*p >= 'a' && *p <= 'f')))
			return 0;
	return strcmp(p, TEMP_SUFFIX) == 0 ? (pid_t)pid : 0;
}

/* Removes the temporary files that taipan processes now dead left in dfd
 * (killed while writing, with SIGKILL or a crash): only names of exactly
 * create_temp's pattern, only regular files of ours, only when their pid
 * is gone. A pid in use again keeps its file: a leftover is harmless, a
 * file being written is not ours to remove. Best effort, silent. Returns
 * how many were removed. */
static int remove_stale_temps(int dfd)
{
	int fd = openat(dfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		return 0;
	DIR *d = fdopendir(fd);
	if (!d) {
		close(fd);
		return 0;
	}
	int removed = 0;
	struct dirent *de;
	while ((de = readdir(d))) {
		pid_t pid = temp_owner(de->d_name);
		struct stat st;
		if (!pid || pid == getpid() || kill(pid, 0) == 0 || errno != ESRCH)
			continue;
		if (fstatat(dfd, de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0 ||
		    !S_ISREG(st.st_mode) || st.st_uid != geteuid())
			continue;
		if (unlinkat(dfd, de->d_name, 0) == 0)
			removed++;
	}
	closedir(d);
	return removed;
}

/* Creates a new temporary file in dfd, with a name that does not depend on
 * the destination's so that a long destination name still fits NAME_MAX.
 * prefix and suffix frame the name: TEMP_PREFIX "PID-RANDOM" TEMP_SUFFIX
 * beside the destination. O_EXCL|O_NOFOLLOW: never open something another
 * user planted there. Returns the fd (name in tmp) or a negative errno. */
static int create_temp(int dfd, const char *prefix, const char *suffix, mode_t mode, char *tmp,
		       size_t tmpsz)
{
	for (int attempt = 0; attempt < 16; attempt++) {
		uint64_t r;
		if (getrandom(&r, sizeof(r), GRND_NONBLOCK) != (ssize_t)sizeof(r)) {
			/* No entropy yet (early boot): O_EXCL still makes a clash safe. */
			struct timespec ts;
			clock_gettime(CLOCK_MONOTONIC, &ts);
			r = (uint64_t)ts.tv_nsec ^ ((uint64_t)ts.tv_sec << 30) ^ (uint64_t)attempt;
		}
		snprintf(tmp, tmpsz, "%s%d-%016llx%s", prefix, (int)getpid(), (unsigned long long)r,
			 suffix);
		int fd =
		    openat(dfd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode);
		if (fd >= 0)
			return fd;
		if (errno != EEXIST)
			return -errno;
	}
	return -EEXIST;
}

int output_encode_memory(const struct profile *p, output_write_fn write,
			 const struct output_opts *o, char **out, size_t *len)
{
	char *buf = NULL;
	size_t n = 0;
	FILE *f = open_memstream(&buf, &n);
	if (!f)
		return -errno;
	int err = write(p, f, o);
	if (fclose(f) && !err)
		err = -ENOMEM;
	if (err) {
		free(buf);
		return err;
	}
	*out = buf;
	*len = n;
	return 0;
}

/* Encodes p into fd and closes it, whatever happens; sync: fsync it first.
 * Returns 0 or a negative errno (-ENOSPC on a full disk). */
static int encode_fd(int fd, const struct profile *p, const struct output_format_desc *f,
		     const struct output_opts *o, bool sync)
{
	FILE *out = fdopen(fd, "w");
	if (!out) {
		int e = -errno;
		close(fd);
		return e;
	}
	int err = f->write(p, out, o);
	errno = 0;
	if (!err && (fflush(out) != 0 || ferror(out)))
		err = errno ? -errno : -EIO;
	if (!err && sync && fsync(fileno(out)) < 0)
		err = -errno;
	if (fclose(out) != 0 && !err)
		err = -errno;
	return err;
}

struct output_file {
	const struct output_format_desc *format;
	char *path;	  /* as given, for messages */
	const char *base; /* the name in dir */
	char *dir;	  /* for messages */
	int dfd;	  /* the destination's directory, or -1 for standard output */
	int fd;		  /* the temporary file, or the saved standard output; -1 once used */
	char tmp[64];	  /* the temporary file's name in dfd, "" once gone */
};

void output_file_free(struct output_file *of)
{
	if (!of)
		return;
	if (of->fd >= 0)
		close(of->fd);
	if (of->tmp[0])
		unlinkat(of->dfd, of->tmp, 0);
	if (of->dfd >= 0)
		close(of->dfd);
	free(of->path);
	free(of->dir);
	free(of);
}

/* Standard output as the destination: a private descriptor for it, and fd 1
 * pointed at stderr, so that nothing else (a command taipan starts, a stray
 * printf) writes into the profile. */
static int open_stdout(struct output_file *of, char *err, size_t errlen)
{
	if (of->format->binary && isatty(STDOUT_FILENO)) {
		snprintf(err, errlen,
			 "will not write a %s profile to a terminal: it is binary (%s); "
			 "redirect it (-o - > profile%s) or pipe it",
			 of->format->name, of->format->binary, of->format->extensions[0]);
		return -EINVAL;
	}
	of->fd = fcntl(STDOUT_FILENO, F_DUPFD_CLOEXEC, 3);
	if (of->fd < 0) {
		int e = errno;
		snprintf(err, errlen, "cannot use standard output: %s", strerror(e));
		return -e;
	}
	if (dup2(STDERR_FILENO, STDOUT_FILENO) < 0) {
		int e = errno;
		snprintf(err, errlen, "cannot set standard output aside: %s", strerror(e));
		return -e;
	}
	return 0;
}

int output_file_open(const char *path, const struct output_format_desc *f, struct output_file **res,
		     char *err, size_t errlen)
{
	struct output_file *of = NULL;
	int ret;

	*res = NULL;
	if (!path || !*path || !f) {
		snprintf(err, errlen, "no output file or format");
		return -EINVAL;
	}
	of = calloc(1, sizeof(*of));
	if (!of || !(of->path = strdup(path))) {
		ret = -ENOMEM;
		snprintf(err, errlen, "out of memory");
		goto fail;
	}
	of->format = f;
	of->dfd = of->fd = -1;
	if (strcmp(path, "-") == 0) {
		ret = open_stdout(of, err, errlen);
		if (ret)
			goto fail;
		*res = of;
		return 0;
	}

	/* Everything below works relative to one directory fd, so the directory
	 * cannot be swapped between the checks and the rename. */
	const char *slash = strrchr(path, '/');
	if (slash) {
		size_t dlen = slash == path ? 1 : (size_t)(slash - path);
		of->dir = strndup(path, dlen);
		of->base = slash + 1;
	} else {
		of->dir = strdup(".");
		of->base = path;
	}
	if (!of->dir) {
		ret = -ENOMEM;
		snprintf(err, errlen, "out of memory");
		goto fail;
	}
	if (!*of->base || strcmp(of->base, ".") == 0 || strcmp(of->base, "..") == 0) {
		ret = -EISDIR;
		snprintf(err, errlen, "cannot write %s: it names a directory; name a file in it",
			 path);
		goto fail;
	}

	of->dfd = open_dir(of->dir, path, err, errlen);
	if (of->dfd < 0) {
		ret = of->dfd;
		goto fail;
	}
	ret = check_replaceable(of->dfd, of->base, path, err, errlen);
	if (ret)
		goto fail;
	remove_stale_temps(of->dfd);
	/* 0600, as the rescued file: a profile names what its processes run,
	 * every user's with -a. */
	of->fd = create_temp(of->dfd, TEMP_PREFIX, TEMP_SUFFIX, 0600, of->tmp, sizeof(of->tmp));
	if (of->fd < 0) {
		ret = of->fd;
		of->tmp[0] = '\0';
		snprintf(err, errlen, "cannot write %s: cannot create a file in %s: %s", path,
			 of->dir, strerror(-ret));
		goto fail;
	}
	*res = of;
	return 0;
fail:
	output_file_free(of);
	return ret;
}

int output_file_commit(struct output_file *of, const struct profile *p, const struct output_opts *o,
		       char *err, size_t errlen)
{
	int ret, fd;

	if (!of || !p || of->fd < 0) {
		snprintf(err, errlen, "no output file to write");
		return -EINVAL;
	}
	fd = of->fd;
	of->fd = -1; /* encode_fd closes it */
	if (of->dfd < 0) {
		/* A reader that went away must not kill taipan (SIGPIPE) before it
		 * can say so and rescue the profile. */
		void (*old)(int) = signal(SIGPIPE, SIG_IGN);
		ret = encode_fd(fd, p, of->format, o, false);
		signal(SIGPIPE, old);
		if (ret)
			snprintf(err, errlen, "cannot write the profile to standard output: %s",
				 strerror(-ret));
		return ret;
	}
	ret = encode_fd(fd, p, of->format, o, true);
	if (ret) {
		snprintf(err, errlen, "cannot write %s: %s", of->path, strerror(-ret));
		goto fail;
	}
	/* The destination may have changed while recording. */
	ret = check_replaceable(of->dfd, of->base, of->path, err, errlen);
	if (ret)
		goto fail;
	if (renameat(of->dfd, of->tmp, of->dfd, of->base) < 0) {
		ret = -errno;
		snprintf(err, errlen, "cannot write %s: cannot rename %s/%s to it: %s", of->path,
			 of->dir, of->tmp, strerror(errno));
		goto fail;
	}
	of->tmp[0] = '\0';
	/* Make the rename itself durable; the data already is, so a failure
	 * here loses nothing a reader could see. */
	(void)fsync(of->dfd);
	return 0;
fail:
	/* A full disk gets its space back. */
	unlinkat(of->dfd, of->tmp, 0);
	of->tmp[0] = '\0';
	return ret;
}

int output_write_rescue(const struct profile *p, const struct output_format_desc *f,
			const struct output_opts *o, char *path, size_t pathlen)
{
	const char *dir = getenv("TMPDIR");
	char name[64];
	if (!f)
		return -EINVAL;
	if (!dir || dir[0] != '/')
		dir = "/tmp";
	int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dfd < 0)
		return -errno;
	/* 0600: a shared directory, and a profile names what others run. */
	int fd = create_temp(dfd, "taipan-rescued-", f->extensions[0], 0600, name, sizeof(name));
	if (fd < 0) {
		close(dfd);
		return fd;
	}
	int ret = encode_fd(fd, p, f, o, true);
	if (ret)
		unlinkat(dfd, name, 0);
	else
		snprintf(path, pathlen, "%s%s%s", dir, dir[strlen(dir) - 1] == '/' ? "" : "/",
			 name);
	close(dfd);
	return ret;
}

int output_write_file(const struct profile *p, const char *path, const struct output_format_desc *f,
		      const struct output_opts *o)
{
	struct output_file *of;
	char err[512];
	if (!p)
		return -EINVAL;
	int ret = output_file_open(path, f, &of, err, sizeof(err));
	if (ret)
		return ret;
	ret = output_file_commit(of, p, o, err, sizeof(err));
	output_file_free(of);
	return ret;
}
