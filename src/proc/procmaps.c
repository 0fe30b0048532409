/* procmaps.c - /proc/PID/maps parsing: strict line parser, whole-file reader. */
#include "proc/procmaps.h"
#include "proc/procfs.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#define DELETED_SUFFIX " (deleted)"

/* Parses 1 to 16 hex digits (either case) at *p and advances past them.
 * Stricter than strtoull: no sign, no "0x", no leading space, no overflow. */
static int parse_hex(const char **p, uint64_t *out)
{
	const char *s = *p;
	uint64_t v = 0;
	int n = 0;

	for (;; s++, n++) {
		unsigned d;

		if (*s >= '0' && *s <= '9')
			d = *s - '0';
		else if (*s >= 'a' && *s <= 'f')
			d = *s - 'a' + 10;
		else if (*s >= 'A' && *s <= 'F')
			d = *s - 'A' + 10;
		else
			break;
		if (n == 16)
			return -EINVAL;
		v = v << 4 | d;
	}
	if (n == 0)
		return -EINVAL;
	*p = s;
	*out = v;
	return 0;
}

/* Parses a decimal uint64_t (the inode) and advances past it. */
static int parse_dec(const char **p, uint64_t *out)
{
	const char *s = *p;
	uint64_t v = 0;

	if (*s < '0' || *s > '9')
		return -EINVAL;
	for (; *s >= '0' && *s <= '9'; s++) {
		unsigned d = *s - '0';

		if (v > (UINT64_MAX - d) / 10)
			return -EINVAL;
		v = v * 10 + d;
	}
	*p = s;
	*out = v;
	return 0;
}

static int expect(const char **p, char c)
{
	if (**p != c)
		return -EINVAL;
	(*p)++;
	return 0;
}

/* The kernel prints exactly these letters in these positions. */
static bool perms_valid(const char *s)
{
	return (s[0] == 'r' || s[0] == '-') && (s[1] == 'w' || s[1] == '-') &&
	       (s[2] == 'x' || s[2] == '-') && (s[3] == 'p' || s[3] == 's');
}

int procmaps_parse_line(const char *line, struct map_entry *out)
{
	const char *p = line, *path, *path_end;
	struct map_entry e = {0};
	uint64_t major, minor;
	size_t len;

	if (parse_hex(&p, &e.start) || expect(&p, '-') || parse_hex(&p, &e.end) || expect(&p, ' '))
		return -EINVAL;
	if (e.start >= e.end)
		return -EINVAL;

	if (strnlen(p, 5) < 5 || p[4] != ' ' || !perms_valid(p))
		return -EINVAL;
	memcpy(e.perms, p, 4);
	e.perms[4] = '\0';
	p += 5;

	/* Device numbers: the kernel prints "%02x:%02x"; majors are 12 bits
	 * and minors 20 bits, so more digits are possible, but never 9. */
	if (parse_hex(&p, &e.offset) || expect(&p, ' ') || parse_hex(&p, &major) ||
	    expect(&p, ':') || parse_hex(&p, &minor) || expect(&p, ' '))
		return -EINVAL;
	if (major > UINT32_MAX || minor > UINT32_MAX)
		return -EINVAL;
	e.dev_major = major;
	e.dev_minor = minor;

	if (parse_dec(&p, &e.inode))
		return -EINVAL;

	/* After the inode: end of line, or padding spaces and then the path.
	 * The kernel pads to a column, so the number of spaces varies. A path
	 * that itself begins with a space is indistinguishable from padding;
	 * such paths lose their leading spaces here. */
	if (*p != '\0' && *p != '\n' && *p != ' ')
		return -EINVAL;
	while (*p == ' ')
		p++;
	path = p;
	path_end = path + strcspn(path, "\n");
	/* The kernel escapes newlines in paths, so a second line is garbage. */
	if (*path_end == '\n' && path_end[1] != '\0')
		return -EINVAL;

	len = path_end - path;
	if (len >= sizeof(DELETED_SUFFIX) - 1 &&
	    !memcmp(path_end - (sizeof(DELETED_SUFFIX) - 1), DELETED_SUFFIX,
		    sizeof(DELETED_SUFFIX) - 1)) {
		e.deleted = true;
		len -= sizeof(DELETED_SUFFIX) - 1;
	}

	e.path = strndup(path, len);
	if (!e.path)
		return -ENOMEM;
	*out = e;
	return 0;
}

int procmaps_read(pid_t pid, struct proc_maps *out)
{
	struct proc_maps m = {0};
	size_t len = 0, cap = 0;
	char *buf = NULL, *line, *nl;
	int err;

	/* A process that exits while we read gives ESRCH from read(2). */
	err = procfs_read(pid, 0, "maps", 64 * 1024, &buf, &len);
	if (err)
		return err;

	for (line = buf; line < buf + len; line = nl + 1) {
		struct map_entry e;

		nl = memchr(line, '\n', buf + len - line);
		if (!nl)
			nl = buf + len;
		*nl = '\0';
		err = procmaps_parse_line(line, &e);
		if (err == -ENOMEM)
			goto fail;
		if (err)
			continue;
		if (m.n == cap) {
			size_t ncap = cap ? cap * 2 : 64;
			struct map_entry *nv = realloc(m.v, ncap * sizeof(*nv));

			if (!nv) {
				free(e.path);
				err = -ENOMEM;
				goto fail;
			}
			m.v = nv;
			cap = ncap;
		}
		m.v[m.n++] = e;
	}
	free(buf);
	*out = m;
	return 0;
fail:
	free(buf);
	procmaps_free(&m);
	return err;
}

void procmaps_free(struct proc_maps *m)
{
	if (!m)
		return;
	for (size_t i = 0; i < m->n; i++)
		free(m->v[i].path);
	free(m->v);
	m->v = NULL;
	m->n = 0;
}

const struct map_entry *procmaps_find_base(const struct proc_maps *m, const struct map_entry *of)
{
	/* Anonymous mappings all share inode 0 on device 0:0 (or a pseudo
	 * device); they have no file to relate to. */
	if (of->inode == 0)
		return NULL;
	for (size_t i = 0; i < m->n; i++) {
		const struct map_entry *e = &m->v[i];

		if (e->inode == of->inode && e->dev_major == of->dev_major &&
		    e->dev_minor == of->dev_minor && e->offset == 0)
			return e;
	}
	return NULL;
}
