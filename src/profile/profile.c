/* profile.c - aggregation of samples into interned frames and stacks.
 *
 * Strings are interned once, so frames and label sets compare by pointer and
 * a sample's identity is a flat byte key: labels followed by frame ids.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

/* An insert that cannot grow its table leaves the entry out and sets its oom
 * flag, instead of uthash's default of calling exit(). */
#define HASH_NONFATAL_OOM 1
#define uthash_nonfatal_oom(ent) ((ent)->oom = true)
#include <uthash.h>

#include "profile/profile.h"
#include "util/hashfree.h"
#include "util/strutil.h"

struct istr {
	UT_hash_handle hh;
	bool oom;
	char s[]; /* key */
};

struct frame_ent {
	UT_hash_handle hh;
	bool oom;
	uint32_t id;
	size_t keylen;
	char *key;
};

/* The key of an aggregated sample: labels by value (strings as interned
 * pointers), then the frame ids. */
struct sample_key {
	uint32_t pid, tid, ns_pid, nframes, state, lock;
	const char *thread_name, *comm, *runtime, *runtime_version, *version_alias, *lock_name,
	    *cgroup, *container_id, *task, *exe;
	uint32_t frames[];
};

struct sample_ent {
	UT_hash_handle hh;
	bool oom;
	size_t index;
	struct sample_key *key;
	size_t keylen;
};

/* The string labels of a sample, in profile_add_at()'s order. */
enum label_slot {
	LABEL_THREAD,
	LABEL_COMM,
	LABEL_RUNTIME,
	LABEL_VERSION,
	LABEL_ALIAS,
	LABEL_LOCK,
	LABEL_CGROUP,
	LABEL_CONTAINER,
	LABEL_TASK,
	LABEL_EXE,
	LABEL__COUNT
};

struct profile {
	struct istr *strings;
	struct frame_ent *frame_index;
	struct prof_frame *frames;
	uint32_t nframes, frames_cap;
	struct sample_ent *sample_index;
	struct prof_sample *samples;
	size_t nsamples, samples_cap;
	uint64_t total;
	uint64_t period_ns, start_ns, duration_ns;
	enum prof_mode mode;
	/* profile_keep_events(): the limit, the events kept, and the adds
	 * that went into a latest event past it. */
	bool keep_events;
	size_t events_max, nevents;
	uint64_t events_merged;
	/* The last string each label of profile_add_at() interned: the next
	 * sample's labels are nearly always the same, and a compare costs
	 * less than cleaning, hashing and finding it again. */
	const char *last_label[LABEL__COUNT];
	/* The key of the sample being added, kept between calls. */
	struct sample_key *scratch;
	size_t scratch_len;
};

struct profile *profile_new(void)
{
	return calloc(1, sizeof(struct profile));
}

void profile_free(struct profile *p)
{
	if (!p)
		return;
	HASH_FREE_ALL(p->strings, s, (void)0);
	HASH_FREE_ALL(p->frame_index, f, free(f->key));
	HASH_FREE_ALL(p->sample_index, e, free(e->key));
	for (size_t i = 0; i < p->nsamples; i++)
		free(p->samples[i].events);
	free(p->frames);
	free(p->samples);
	free(p->scratch);
	free(p);
}

void profile_set_timing(struct profile *p, uint64_t period_ns, uint64_t start_unix_ns,
			uint64_t duration_ns)
{
	p->period_ns = period_ns;
	p->start_ns = start_unix_ns;
	p->duration_ns = duration_ns;
}

uint64_t profile_period_ns(const struct profile *p)
{
	return p->period_ns;
}

uint64_t profile_start_ns(const struct profile *p)
{
	return p->start_ns;
}

uint64_t profile_duration_ns(const struct profile *p)
{
	return p->duration_ns;
}

/* s itself when it is valid UTF-8, else a malloc'd copy (into *copy) with
 * each bad byte replaced by U+FFFD. Names come from other processes' memory
 * and comm fields cut at 16 bytes; every output format wants UTF-8. */
static const char *utf8_clean(const char *s, char **copy)
{
	*copy = NULL;
	if (utf8_valid(s))
		return s;
	return *copy = utf8_repair(s);
}

/* Returns the interned copy of s (NULL stays NULL), or sets *err. Invalid
 * UTF-8 is repaired first. */
static const char *intern(struct profile *p, const char *raw, int *err)
{
	if (!raw)
		return NULL;
	char *copy;
	const char *s = utf8_clean(raw, &copy);
	if (!s) {
		*err = -ENOMEM;
		return NULL;
	}
	const char *ret = NULL;
	struct istr *e;
	size_t len = strlen(s);
	HASH_FIND(hh, p->strings, s, len, e);
	if (e) {
		ret = e->s;
		goto out;
	}
	e = malloc(sizeof(*e) + len + 1);
	if (!e) {
		*err = -ENOMEM;
		goto out;
	}
	e->oom = false;
	memcpy(e->s, s, len + 1);
	HASH_ADD_KEYPTR(hh, p->strings, e->s, len, e);
	if (e->oom) {
		free(e);
		*err = -ENOMEM;
		goto out;
	}
	ret = e->s;
out:
	free(copy);
	return ret;
}

static int grow(void **arr, size_t *cap, size_t need, size_t elem)
{
	if (need <= *cap)
		return 0;
	size_t ncap = *cap ? *cap * 2 : 64;
	while (ncap < need)
		ncap *= 2;
	void *n = realloc(*arr, ncap * elem);
	if (!n)
		return -ENOMEM;
	*arr = n;
	*cap = ncap;
	return 0;
}

/* Whether s is "0x" followed by one or more hex digits and nothing else. */
static bool is_hex_addr(const char *s)
{
	if (s[0] != '0' || s[1] != 'x' || !s[2])
		return false;
	for (s += 2; *s; s++)
		if (!((*s >= '0' && *s <= '9') || (*s >= 'a' && *s <= 'f') ||
		      (*s >= 'A' && *s <= 'F')))
			return false;
	return true;
}

bool prof_frame_unnamed(const struct prof_frame *f)
{
	if (f->kind != PROF_FRAME_NATIVE && f->kind != PROF_FRAME_KERNEL)
		return false;
	if (!f->name || !*f->name || is_hex_addr(f->name))
		return true;
	if (!f->module)
		return false;
	const char *base = strrchr(f->module, '/');
	base = base ? base + 1 : f->module;
	size_t n = strlen(base);
	return !strncmp(f->name, base, n) && f->name[n] == '+' && is_hex_addr(f->name + n + 1);
}

int profile_intern_frame(struct profile *p, const struct prof_frame *f)
{
	int err = 0;
	struct prof_frame in;
	/* Zeroed first: padding bytes are part of the hash key. */
	memset(&in, 0, sizeof(in));
	in.line = f->line;
	in.first_line = f->first_line;
	in.addr = f->addr;
	in.kind = f->kind;
	in.name = intern(p, f->name ? f->name : "", &err);
	in.file = intern(p, f->file, &err);
	in.module = intern(p, f->module, &err);
	in.build_id = intern(p, f->build_id, &err);
	in.runtime = intern(p, f->runtime, &err);
	if (err)
		return err;

	/* Interned pointers make the struct itself a usable key. */
	struct frame_ent *e;
	HASH_FIND(hh, p->frame_index, &in, sizeof(in), e);
	if (e)
		return (int)e->id;

	size_t cap = p->frames_cap;
	if (grow((void **)&p->frames, &cap, (size_t)p->nframes + 1, sizeof(*p->frames)))
		return -ENOMEM;
	p->frames_cap = (uint32_t)cap;
	e = calloc(1, sizeof(*e));
	if (!e)
		return -ENOMEM;
	e->key = malloc(sizeof(in));
	if (!e->key) {
		free(e);
		return -ENOMEM;
	}
	memcpy(e->key, &in, sizeof(in));
	e->keylen = sizeof(in);
	e->id = p->nframes;
	HASH_ADD_KEYPTR(hh, p->frame_index, e->key, e->keylen, e);
	if (e->oom) {
		free(e->key);
		free(e);
		return -ENOMEM;
	}
	p->frames[p->nframes++] = in;
	return (int)e->id;
}

int profile_add(struct profile *p, const uint32_t *frames, uint32_t n,
		const struct prof_labels *labels, uint64_t count)
{
	return profile_add_off(p, frames, n, labels, count, 0);
}

static uint64_t sat_add(uint64_t a, uint64_t b)
{
	uint64_t r;
	return __builtin_add_overflow(a, b, &r) ? UINT64_MAX : r;
}

int profile_add_off(struct profile *p, const uint32_t *frames, uint32_t n,
		    const struct prof_labels *labels, uint64_t count, uint64_t off_ns)
{
	return profile_add_at(p, frames, n, labels, count, off_ns, NULL);
}

void profile_keep_events(struct profile *p, size_t max)
{
	p->keep_events = true;
	p->events_max = max;
}

bool profile_keeps_events(const struct profile *p)
{
	return p->keep_events;
}

uint64_t profile_events_merged(const struct profile *p)
{
	return p->events_merged;
}

/* The add (count, off_ns at at_ns) as an event of s: a new one, or past the
 * limit (or out of memory) into its latest. */
static void add_event(struct profile *p, struct prof_sample *s, uint64_t count, uint64_t off_ns,
		      uint64_t at_ns)
{
	if (!s->nevents && (s->count || s->off_ns))
		return; /* it could not keep its first: it keeps none */
	bool room = !s->nevents || p->nevents < p->events_max;
	if (room && s->nevents == s->events_cap) {
		uint32_t cap = s->events_cap ? s->events_cap * 2 : 1;
		struct prof_event *ev =
		    s->events_cap < UINT32_MAX / 2 ? realloc(s->events, cap * sizeof(*ev)) : NULL;
		if (ev) {
			s->events = ev;
			s->events_cap = cap;
		} else {
			room = false;
		}
	}
	if (!room) {
		if (s->nevents) {
			struct prof_event *last = &s->events[s->nevents - 1];
			last->count += count;
			last->off_ns = sat_add(last->off_ns, off_ns);
			p->events_merged++;
		}
		return;
	}
	s->events[s->nevents++] = (struct prof_event){at_ns, count, off_ns};
	p->nevents++;
}

void profile_bump_at(struct profile *p, size_t index, uint64_t count, uint64_t off_ns,
		     uint64_t at_ns)
{
	if (index >= p->nsamples || (!count && !off_ns))
		return;
	struct prof_sample *s = &p->samples[index];
	if (p->keep_events)
		add_event(p, s, count, off_ns, at_ns);
	s->count += count;
	s->off_ns = sat_add(s->off_ns, off_ns);
	p->total += count;
}

void profile_bump(struct profile *p, size_t index, uint64_t count, uint64_t off_ns)
{
	profile_bump_at(p, index, count, off_ns, 0);
}

int profile_copy_stack(struct profile *dst, const struct profile *src, size_t index, size_t *out)
{
	if (index >= src->nsamples)
		return -EINVAL;
	const struct prof_sample *s = &src->samples[index];
	uint32_t *stack = malloc(((size_t)s->nframes + 1) * sizeof(*stack));
	if (!stack)
		return -ENOMEM;
	int err = 0;
	for (uint32_t j = 0; j < s->nframes && !err; j++) {
		int id = profile_intern_frame(dst, &src->frames[s->frames[j]]);
		if (id < 0)
			err = id;
		else
			stack[j] = (uint32_t)id;
	}
	if (!err)
		err = profile_add_at(dst, stack, s->nframes, &s->labels, 0, 0, out);
	free(stack);
	return err;
}

/* intern(), first trying the string that label interned last. */
static const char *intern_label(struct profile *p, enum label_slot slot, const char *raw, int *err)
{
	const char *last = p->last_label[slot];
	if (!raw)
		return NULL;
	if (last && !strcmp(raw, last))
		return last; /* interned strings are clean: raw is too */
	const char *s = intern(p, raw, err);
	if (s)
		p->last_label[slot] = s;
	return s;
}

int profile_add_at(struct profile *p, const uint32_t *frames, uint32_t n,
		   const struct prof_labels *labels, uint64_t count, uint64_t off_ns, size_t *index)
{
	int err = 0;
	for (uint32_t i = 0; i < n; i++)
		if (frames[i] >= p->nframes)
			return -EINVAL;
	size_t keylen = sizeof(struct sample_key) + (size_t)n * sizeof(uint32_t);
	if (keylen > p->scratch_len) {
		struct sample_key *k = malloc(keylen);
		if (!k)
			return -ENOMEM;
		free(p->scratch);
		p->scratch = k;
		p->scratch_len = keylen;
	}
	struct sample_key *key = p->scratch;
	memset(key, 0, sizeof(*key)); /* its padding is hashed too */
	key->pid = labels->pid;
	key->tid = labels->tid;
	key->ns_pid = labels->ns_pid;
	key->nframes = n;
	key->state = labels->state;
	key->lock = labels->lock;
	key->thread_name = intern_label(p, LABEL_THREAD, labels->thread_name, &err);
	key->comm = intern_label(p, LABEL_COMM, labels->comm, &err);
	key->runtime = intern_label(p, LABEL_RUNTIME, labels->runtime, &err);
	key->runtime_version = intern_label(p, LABEL_VERSION, labels->runtime_version, &err);
	key->version_alias = intern_label(p, LABEL_ALIAS, labels->version_alias, &err);
	key->lock_name = intern_label(p, LABEL_LOCK, labels->lock_name, &err);
	key->cgroup = intern_label(p, LABEL_CGROUP, labels->cgroup, &err);
	key->container_id = intern_label(p, LABEL_CONTAINER, labels->container_id, &err);
	key->task = intern_label(p, LABEL_TASK, labels->task, &err);
	key->exe = intern_label(p, LABEL_EXE, labels->exe, &err);
	if (err)
		return err;
	if (n)
		memcpy(key->frames, frames, (size_t)n * sizeof(uint32_t));

	struct sample_ent *e;
	HASH_FIND(hh, p->sample_index, key, keylen, e);
	if (e) {
		profile_bump(p, e->index, count, off_ns);
		if (index)
			*index = e->index;
		return 0;
	}
	if (grow((void **)&p->samples, &p->samples_cap, p->nsamples + 1, sizeof(*p->samples)) ||
	    !(e = calloc(1, sizeof(*e))))
		return -ENOMEM;
	if (!(key = malloc(keylen))) {
		free(e);
		return -ENOMEM;
	}
	memcpy(key, p->scratch, keylen);
	e->key = key;
	e->keylen = keylen;
	e->index = p->nsamples;
	HASH_ADD_KEYPTR(hh, p->sample_index, e->key, e->keylen, e);
	if (e->oom) {
		free(key);
		free(e);
		return -ENOMEM;
	}
	struct prof_sample *s = &p->samples[p->nsamples++];
	s->frames = key->frames;
	s->nframes = n;
	s->labels = (struct prof_labels){.pid = key->pid,
					 .tid = key->tid,
					 .ns_pid = key->ns_pid,
					 .thread_name = key->thread_name,
					 .comm = key->comm,
					 .runtime = key->runtime,
					 .runtime_version = key->runtime_version,
					 .version_alias = key->version_alias,
					 .lock_name = key->lock_name,
					 .cgroup = key->cgroup,
					 .container_id = key->container_id,
					 .task = key->task,
					 .exe = key->exe,
					 .state = (uint8_t)key->state,
					 .lock = (uint8_t)key->lock};
	s->count = 0;
	s->off_ns = 0;
	s->events = NULL;
	s->nevents = s->events_cap = 0;
	profile_bump(p, e->index, count, off_ns);
	if (index)
		*index = e->index;
	return 0;
}

const char *prof_state_name(enum prof_state st)
{
	static const char *const names[PROF_STATE__COUNT] = {
	    [PROF_STATE_RUNNING] = "running",	[PROF_STATE_RUNNABLE] = "runnable",
	    [PROF_STATE_SLEEPING] = "sleeping", [PROF_STATE_BLOCKED] = "blocked",
	    [PROF_STATE_AWAITING] = "awaiting",
	};
	return (unsigned)st < PROF_STATE__COUNT ? names[st] : NULL;
}

/* Adds sample s of src to p as stack (p's frame ids) under labels: event by
 * event where src kept them (untimed ones at src's start), with its time
 * off the CPU when off. */
static int add_events_of(struct profile *p, const struct profile *src, const struct prof_sample *s,
			 const uint32_t *stack, const struct prof_labels *labels, bool off)
{
	size_t idx;
	int err = profile_add_at(p, stack, s->nframes, labels, 0, 0, &idx);
	if (err)
		return err;
	if (!s->nevents) {
		profile_bump_at(p, idx, s->count, off ? s->off_ns : 0, src->start_ns);
		return 0;
	}
	for (uint32_t k = 0; k < s->nevents; k++) {
		const struct prof_event *ev = &s->events[k];
		profile_bump_at(p, idx, ev->count, off ? ev->off_ns : 0,
				ev->at_ns ? ev->at_ns : src->start_ns);
	}
	return 0;
}

struct profile *profile_cpu_view(const struct profile *src)
{
	struct profile *p = profile_new();
	uint32_t *ids = malloc(((size_t)src->nframes + 1) * sizeof(*ids));
	uint32_t *stack = NULL;
	uint32_t deepest = 0;
	int err = !p || !ids ? -ENOMEM : 0;
	if (p && src->keep_events)
		profile_keep_events(p, src->events_max);
	for (size_t i = 0; i < src->nsamples; i++)
		if (src->samples[i].nframes > deepest)
			deepest = src->samples[i].nframes;
	if (!err && !(stack = malloc(((size_t)deepest + 1) * sizeof(*stack))))
		err = -ENOMEM;
	/* Frames are interned as met: only those of samples on the CPU. */
	for (uint32_t i = 0; i <= src->nframes && ids; i++)
		ids[i] = UINT32_MAX;
	for (size_t i = 0; i < src->nsamples && !err; i++) {
		const struct prof_sample *s = &src->samples[i];
		if (s->labels.state > PROF_STATE_RUNNING || !s->count)
			continue;
		for (uint32_t j = 0; j < s->nframes && !err; j++) {
			uint32_t f = s->frames[j];
			if (ids[f] == UINT32_MAX) {
				int id = profile_intern_frame(p, &src->frames[f]);
				if (id < 0)
					err = id;
				else
					ids[f] = (uint32_t)id;
			}
			stack[j] = ids[f];
		}
		struct prof_labels lb = s->labels;
		lb.state = PROF_STATE_NONE;
		if (!err)
			err = add_events_of(p, src, s, stack, &lb, false);
	}
	free(ids);
	free(stack);
	if (err) {
		profile_free(p);
		return NULL;
	}
	p->period_ns = src->period_ns;
	p->start_ns = src->start_ns;
	p->duration_ns = src->duration_ns;
	return p;
}

const char *prof_lock_name(enum prof_lock l)
{
	static const char *const names[PROF_LOCK__COUNT] = {
	    [PROF_LOCK_HELD] = "held",
	    [PROF_LOCK_WAITING] = "waiting",
	    [PROF_LOCK_RELEASED] = "released",
	};
	return (unsigned)l < PROF_LOCK__COUNT ? names[l] : NULL;
}

const char *prof_mode_name(enum prof_mode mode)
{
	return mode == PROF_MODE_WALL ? "wall" : mode == PROF_MODE_OFFCPU ? "off-cpu" : "cpu";
}

void profile_set_mode(struct profile *p, enum prof_mode mode)
{
	p->mode = mode;
}

enum prof_mode profile_mode(const struct profile *p)
{
	return p->mode;
}

bool profile_weighted(const struct profile *p)
{
	return p->mode != PROF_MODE_CPU;
}

uint64_t prof_sample_cpu_ns(const struct profile *p, const struct prof_sample *s)
{
	uint64_t r;
	if (s->labels.state > PROF_STATE_RUNNING)
		return 0;
	return __builtin_mul_overflow(s->count, p->period_ns, &r) ? UINT64_MAX : r;
}

uint64_t prof_sample_wall_ns(const struct profile *p, const struct prof_sample *s)
{
	return sat_add(prof_sample_cpu_ns(p, s), s->off_ns);
}

uint64_t prof_value(const struct profile *p, const struct prof_sample *s)
{
	return p->mode == PROF_MODE_CPU ? s->count : prof_sample_wall_ns(p, s);
}

uint64_t profile_total_value(const struct profile *p)
{
	if (p->mode == PROF_MODE_CPU)
		return p->total;
	uint64_t t = 0;
	for (size_t i = 0; i < p->nsamples; i++)
		t = sat_add(t, prof_sample_wall_ns(p, &p->samples[i]));
	return t;
}

uint32_t profile_frame_count(const struct profile *p)
{
	return p->nframes;
}

const struct prof_frame *profile_frame(const struct profile *p, uint32_t id)
{
	return id < p->nframes ? &p->frames[id] : NULL;
}

size_t profile_sample_count(const struct profile *p)
{
	return p->nsamples;
}

const struct prof_sample *profile_sample(const struct profile *p, size_t i)
{
	return i < p->nsamples ? &p->samples[i] : NULL;
}

uint64_t profile_total(const struct profile *p)
{
	return p->total;
}

/* The merged span: from the earliest start to the latest end. A profile
 * with neither a start nor a duration has no span yet. */
static void merge_span(struct profile *dst, const struct profile *src)
{
	if (!src->start_ns && !src->duration_ns)
		return;
	if (!dst->start_ns && !dst->duration_ns) {
		dst->start_ns = src->start_ns;
		dst->duration_ns = src->duration_ns;
		return;
	}
	uint64_t start = dst->start_ns < src->start_ns ? dst->start_ns : src->start_ns;
	uint64_t dend = dst->start_ns + dst->duration_ns;
	uint64_t send = src->start_ns + src->duration_ns;
	dst->start_ns = start;
	dst->duration_ns = (dend > send ? dend : send) - start;
}

int profile_merge(struct profile *dst, const struct profile *src)
{
	uint32_t *ids = NULL, *stack = NULL;
	uint32_t deepest = 0;
	int err = 0;

	if (!dst || !src || dst == src)
		return -EINVAL;
	for (size_t i = 0; i < src->nsamples; i++)
		if (src->samples[i].nframes > deepest)
			deepest = src->samples[i].nframes;
	/* Frame ids differ between profiles: map each of src's to dst's. */
	ids = malloc(((size_t)src->nframes + 1) * sizeof(*ids));
	stack = malloc(((size_t)deepest + 1) * sizeof(*stack));
	if (!ids || !stack) {
		err = -ENOMEM;
		goto out;
	}
	for (uint32_t i = 0; i < src->nframes; i++) {
		int id = profile_intern_frame(dst, &src->frames[i]);
		if (id < 0) {
			err = id;
			goto out;
		}
		ids[i] = (uint32_t)id;
	}
	for (size_t i = 0; i < src->nsamples; i++) {
		const struct prof_sample *s = &src->samples[i];
		for (uint32_t j = 0; j < s->nframes; j++)
			stack[j] = ids[s->frames[j]];
		err = add_events_of(dst, src, s, stack, &s->labels, true);
		if (err)
			goto out;
	}
	if (!dst->period_ns)
		dst->period_ns = src->period_ns;
	if (!dst->mode)
		dst->mode = src->mode;
	merge_span(dst, src);
out:
	free(ids);
	free(stack);
	return err;
}
