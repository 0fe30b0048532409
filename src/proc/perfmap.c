/* perfmap.c - the names of a process's JIT code from its perf map
 * (perfmap.h). */
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "proc/perfmap.h"
#include "proc/procfs.h"
#include "proc/safeopen.h"
#include "util/budget.h"

#define READ_CHUNK (64 << 10)

struct pm_entry {
	uint64_t start, end; /* [start, end) */
	uint32_t name;	     /* offset in names */
	uint32_t seq;	     /* its line's order: of two at one start, the later wins */
};

struct perfmap {
	pid_t pid;
	struct budget *budget;
	size_t charged; /* bytes taken from budget */
	struct pm_entry *v;
	size_t n, cap;
	char *names;
	size_t names_len, names_cap;
	bool sorted;
	bool full;	       /* a bound or the budget stopped the reading */
	uint64_t next_read_ns; /* no read of the file before */
	uint64_t off;	       /* bytes of the file consumed */
	dev_t dev;	       /* the file read, to tell a new one */
	ino_t ino;
	struct perfmap_stats st;
};

struct perfmap *perfmap_new(pid_t pid, struct budget *budget)
{
	struct perfmap *pm = calloc(1, sizeof(*pm));
	if (!pm)
		return NULL;
	pm->pid = pid;
	pm->budget = budget;
	pm->sorted = true;
	return pm;
}

static void forget(struct perfmap *pm)
{
	budget_give(pm->budget, pm->charged);
	pm->charged = 0;
	free(pm->v);
	free(pm->names);
	pm->v = NULL;
	pm->names = NULL;
	pm->n = pm->cap = pm->names_len = pm->names_cap = 0;
	pm->sorted = true;
	pm->full = false;
	pm->off = 0;
}

void perfmap_free(struct perfmap *pm)
{
	if (!pm)
		return;
	forget(pm);
	free(pm);
}

/* Grows *buf (of *cap elements of size each) to hold need, with the bytes
 * taken from the budget. false when they cannot be had. */
static bool grow(struct perfmap *pm, void **buf, size_t *cap, size_t need, size_t size)
{
	if (need <= *cap)
		return true;
	size_t ncap = *cap ? *cap * 2 : 64;
	while (ncap < need)
		ncap *= 2;
	size_t more = (ncap - *cap) * size;
	if (pm->budget && !budget_take(pm->budget, more))
		return false;
	void *nb = realloc(*buf, ncap * size);
	if (!nb) {
		budget_give(pm->budget, more); /* accepts NULL */
		return false;
	}
	if (pm->budget)
		pm->charged += more;
	*buf = nb;
	*cap = ncap;
	return true;
}

/* A hex number, "0x" allowed, at *p before end: advances *p. */
static bool hex(const char **p, const char *end, uint64_t *out)
{
	const char *s = *p;
	uint64_t v = 0;
	int digits = 0;
	if (end - s > 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X'))
		s += 2;
	for (; s < end; s++, digits++) {
		int d = *s >= '0' && *s <= '9'	 ? *s - '0'
			: *s >= 'a' && *s <= 'f' ? *s - 'a' + 10
			: *s >= 'A' && *s <= 'F' ? *s - 'A' + 10
						 : -1;
		if (d < 0)
			break;
		if (digits >= 16)
			return false;
		v = v << 4 | (uint64_t)d;
	}
	if (!digits)
		return false;
	*p = s;
	*out = v;
	return true;
}

/* One line, without its newline. */
static void parse_line(struct perfmap *pm, const char *s, const char *end)
{
	uint64_t start, size;
	if (end > s && end[-1] == '\r')
		end--;
	if (s == end)
		return;
	if (pm->full || !hex(&s, end, &start) || s == end || *s != ' ') {
		pm->st.bad++;
		return;
	}
	while (s < end && *s == ' ')
		s++;
	if (!hex(&s, end, &size) || s == end || *s != ' ') {
		pm->st.bad++;
		return;
	}
	while (s < end && *s == ' ')
		s++;
	size_t len = (size_t)(end - s);
	if (!size || start + size < start || !len) {
		pm->st.bad++;
		return;
	}
	if (len > PERFMAP_NAME_MAX)
		len = PERFMAP_NAME_MAX;
	if (pm->n >= PERFMAP_MAX_ENTRIES || pm->names_len + len + 1 > UINT32_MAX ||
	    !grow(pm, (void **)&pm->v, &pm->cap, pm->n + 1, sizeof(*pm->v)) ||
	    !grow(pm, (void **)&pm->names, &pm->names_cap, pm->names_len + len + 1, 1)) {
		pm->full = true;
		pm->st.bad++;
		return;
	}
	memcpy(pm->names + pm->names_len, s, len);
	pm->names[pm->names_len + len] = 0;
	pm->v[pm->n] = (struct pm_entry){.start = start,
					 .end = start + size,
					 .name = (uint32_t)pm->names_len,
					 .seq = (uint32_t)pm->n};
	if (pm->n && start <= pm->v[pm->n - 1].start)
		pm->sorted = false;
	pm->n++;
	pm->names_len += len + 1;
	pm->st.entries++;
}

size_t perfmap_parse(struct perfmap *pm, const char *text, size_t len)
{
	size_t used = 0;
	while (used < len) {
		const char *nl = memchr(text + used, '\n', len - used);
		if (!nl)
			break;
		parse_line(pm, text + used, nl);
		used = (size_t)(nl - text) + 1;
	}
	return used;
}

static int entry_cmp(const void *a, const void *b)
{
	const struct pm_entry *x = a, *y = b;
	if (x->start != y->start)
		return x->start < y->start ? -1 : 1;
	return x->seq < y->seq ? -1 : x->seq > y->seq;
}

static const char *lookup(struct perfmap *pm, uint64_t addr)
{
	if (!pm->sorted) {
		qsort(pm->v, pm->n, sizeof(*pm->v), entry_cmp);
		pm->sorted = true;
	}
	/* The last entry that starts at or before addr. */
	size_t lo = 0, hi = pm->n;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (pm->v[mid].start <= addr)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (!lo || addr >= pm->v[lo - 1].end)
		return NULL;
	return pm->names + pm->v[lo - 1].name;
}

/* Reads what the file holds past what was consumed (all of it if it is a
 * new file). */
static void reload(struct perfmap *pm)
{
	char path[64];
	pid_t ns;
	struct stat sb;
	struct safe_reader r;
	if (procfs_ns_pid(pm->pid, 0, &ns) || safe_reader_of(pm->pid, &r))
		return;
	snprintf(path, sizeof(path), "/tmp/perf-%d.map", (int)ns);
	int fd = safe_open_in_proc_root(pm->pid, path);
	if (fd < 0)
		return;
	/* One another user planted for it names nothing. */
	if (fstat(fd, &sb) || (sb.st_uid != 0 && sb.st_uid != r.uid)) {
		close(fd);
		return;
	}
	if (sb.st_dev != pm->dev || sb.st_ino != pm->ino || (uint64_t)sb.st_size < pm->off) {
		forget(pm);
		pm->dev = sb.st_dev;
		pm->ino = sb.st_ino;
	}
	char *buf = malloc(READ_CHUNK);
	if (!buf) {
		close(fd);
		return;
	}
	pm->st.reads++;
	size_t have = 0;
	while (!pm->full && pm->off + have < PERFMAP_MAX_BYTES) {
		size_t want = READ_CHUNK - have;
		if (want > PERFMAP_MAX_BYTES - pm->off - have)
			want = PERFMAP_MAX_BYTES - pm->off - have;
		ssize_t got = pread(fd, buf + have, want, (off_t)(pm->off + have));
		if (got <= 0)
			break;
		have += (size_t)got;
		size_t used = perfmap_parse(pm, buf, have);
		if (!used && have == READ_CHUNK) {
			/* A line longer than the buffer: passed over. */
			pm->st.bad++;
			used = have;
		}
		pm->off += used;
		have -= used;
		memmove(buf, buf + used, have);
	}
	free(buf);
	close(fd);
}

const char *perfmap_find(struct perfmap *pm, uint64_t addr, uint64_t now_ns)
{
	const char *name = lookup(pm, addr);
	if (name || now_ns < pm->next_read_ns)
		return name;
	pm->next_read_ns = now_ns + PERFMAP_RELOAD_NS;
	reload(pm);
	return lookup(pm, addr);
}

void perfmap_get_stats(const struct perfmap *pm, struct perfmap_stats *out)
{
	*out = pm->st;
}
