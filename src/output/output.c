/* output.c - choosing an output format, and writing a profile file safely.
 *
 * The profile is written into a fresh temporary file in the destination's
 * directory and renamed over the destination, so a reader (a flame-graph
 * viewer, a pprof scraper) sees either the old file or the whole new one.
 * taipan usually runs as root and the destination is named by a user, so the
 * rename refuses to replace a symlink or somebody else's file.
 */
#include <errno.h>
#include <fcntl.h>
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

struct format_suffix {
	const char *suffix;
	enum output_format format;
};

/* Longer suffixes first: ".pb.gz" must win over any future ".gz". */
static const struct format_suffix suffixes[] = {
    {".pb.gz", OUTPUT_PPROF},
    {".pprof", OUTPUT_PPROF},
    {".folded", OUTPUT_FOLDED},
    {".txt", OUTPUT_FOLDED},
    {".html", OUTPUT_HTML},
    {".htm", OUTPUT_HTML},
    /* .json alone is speedscope: the only JSON profile format taipan writes */
    {".json", OUTPUT_SPEEDSCOPE},
};

enum output_format output_format_from_path(const char *path)
{
	if (!path)
		return OUTPUT_UNKNOWN;
	size_t len = strlen(path);
	for (size_t i = 0; i < sizeof(suffixes) / sizeof(suffixes[0]); i++) {
		size_t slen = strlen(suffixes[i].suffix);
		/* A bare ".txt" is a hidden file with no extension, not a format. */
		if (len > slen && strcasecmp(path + len - slen, suffixes[i].suffix) == 0 &&
		    path[len - slen - 1] != '/')
			return suffixes[i].format;
	}
	return OUTPUT_UNKNOWN;
}

enum output_format output_format_from_name(const char *name)
{
	if (!name)
		return OUTPUT_UNKNOWN;
	if (strcmp(name, "folded") == 0)
		return OUTPUT_FOLDED;
	if (strcmp(name, "pprof") == 0)
		return OUTPUT_PPROF;
	if (strcmp(name, "html") == 0)
		return OUTPUT_HTML;
	if (strcmp(name, "speedscope") == 0)
		return OUTPUT_SPEEDSCOPE;
	return OUTPUT_UNKNOWN;
}

const char *output_format_name(enum output_format f)
{
	switch (f) {
	case OUTPUT_FOLDED:
		return "folded";
	case OUTPUT_PPROF:
		return "pprof";
	case OUTPUT_HTML:
		return "html";
	case OUTPUT_SPEEDSCOPE:
		return "speedscope";
	case OUTPUT_UNKNOWN:
		break;
	}
	return "unknown";
}

/* -EPERM when the entry base in dfd must not be replaced: a symlink (the user
 * may have aimed it at a file they could not write themselves), or a file
 * owned by someone else. 0 when it is ours or absent. */
static int check_replaceable(int dfd, const char *base)
{
	struct stat st;
	if (fstatat(dfd, base, &st, AT_SYMLINK_NOFOLLOW) < 0)
		return errno == ENOENT ? 0 : -errno;
	if (S_ISLNK(st.st_mode) || st.st_uid != geteuid())
		return -EPERM;
	return 0;
}

/* Creates a new temporary file in dfd, with a name that does not depend on
 * the destination's so that a long destination name still fits NAME_MAX.
 * O_EXCL|O_NOFOLLOW: never open something another user planted there.
 * Returns the fd (name in tmp) or a negative errno. */
static int create_temp(int dfd, char *tmp, size_t tmpsz)
{
	for (int attempt = 0; attempt < 16; attempt++) {
		uint64_t r;
		if (getrandom(&r, sizeof(r), GRND_NONBLOCK) != (ssize_t)sizeof(r)) {
			/* No entropy yet (early boot): O_EXCL still makes a clash safe. */
			struct timespec ts;
			clock_gettime(CLOCK_MONOTONIC, &ts);
			r = (uint64_t)ts.tv_nsec ^ ((uint64_t)ts.tv_sec << 30) ^ (uint64_t)attempt;
		}
		snprintf(tmp, tmpsz, ".taipan-%d-%016llx.tmp", (int)getpid(),
			 (unsigned long long)r);
		int fd =
		    openat(dfd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
		if (fd >= 0)
			return fd;
		if (errno != EEXIST)
			return -errno;
	}
	return -EEXIST;
}

static int encode(const struct profile *p, FILE *out, enum output_format f,
		  const struct output_opts *o)
{
	static const struct output_opts defaults;
	switch (f) {
	case OUTPUT_FOLDED:
		return output_write_folded(p, out, o ? o : &defaults);
	case OUTPUT_PPROF:
		return output_write_pprof(p, out);
	case OUTPUT_HTML:
		return output_write_html(p, out);
	case OUTPUT_SPEEDSCOPE:
		return output_write_speedscope(p, out);
	case OUTPUT_UNKNOWN:
		break;
	}
	return -EINVAL;
}

int output_write_file(const struct profile *p, const char *path, enum output_format f,
		      const struct output_opts *o)
{
	char tmp[64];
	char *dir = NULL;
	const char *base;
	int dfd = -1, fd = -1, err;
	FILE *out = NULL;
	bool created = false;

	if (!p || !path || !*path || f == OUTPUT_UNKNOWN)
		return -EINVAL;

	/* Everything below works relative to one directory fd, so the directory
	 * cannot be swapped between the checks and the rename. */
	const char *slash = strrchr(path, '/');
	if (slash) {
		size_t dlen = slash == path ? 1 : (size_t)(slash - path);
		dir = strndup(path, dlen);
		if (!dir)
			return -ENOMEM;
		base = slash + 1;
	} else {
		base = path;
	}
	if (!*base || strcmp(base, ".") == 0 || strcmp(base, "..") == 0) {
		err = -EISDIR;
		goto cleanup;
	}

	dfd = open(dir ? dir : ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dfd < 0) {
		err = -errno;
		goto cleanup;
	}
	/* Checked before encoding too, so a refusal costs nothing. */
	err = check_replaceable(dfd, base);
	if (err)
		goto cleanup;

	fd = create_temp(dfd, tmp, sizeof(tmp));
	if (fd < 0) {
		err = fd;
		goto cleanup;
	}
	created = true;
	out = fdopen(fd, "w");
	if (!out) {
		err = -errno;
		goto cleanup;
	}
	fd = -1; /* owned by out now */

	err = encode(p, out, f, o);
	if (err)
		goto cleanup;
	errno = 0;
	if (fflush(out) != 0 || ferror(out)) {
		err = errno ? -errno : -EIO;
		goto cleanup;
	}
	if (fsync(fileno(out)) < 0) {
		err = -errno;
		goto cleanup;
	}
	int rc = fclose(out);
	out = NULL;
	if (rc != 0) {
		err = -errno;
		goto cleanup;
	}

	err = check_replaceable(dfd, base);
	if (err)
		goto cleanup;
	if (renameat(dfd, tmp, dfd, base) < 0) {
		err = -errno;
		goto cleanup;
	}
	created = false;
	/* Make the rename itself durable; the data already is, so a failure
	 * here loses nothing a reader could see. */
	(void)fsync(dfd);

cleanup:
	if (out)
		fclose(out);
	if (fd >= 0)
		close(fd);
	if (created)
		unlinkat(dfd, tmp, 0);
	if (dfd >= 0)
		close(dfd);
	free(dir);
	return err;
}
