/* fake_sampler.h - a sampler (src/core/sampler.h) for the session's unit tests:
 * it keeps what the session tells BPF in plain arrays, and hands the
 * session whatever events and samples a test queues, at its next poll. */
#ifndef TAIPAN_FAKE_SAMPLER_H
#define TAIPAN_FAKE_SAMPLER_H

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "core/sampler.h"
#include "core/wire.h"

#define FAKE_MAX 64

struct fake_proc {
	uint32_t tgid;
	struct tp_proc p;
};

struct fake_sampler {
	sampler_handler fn;
	void *ctx;
	struct sampler_opts opts;
	bool started;
	uint32_t targets[FAKE_MAX];
	int ntargets;
	struct fake_proc procs[FAKE_MAX];
	int nprocs;
	uint32_t unknown_tgid[FAKE_MAX];
	struct tp_unknown unknown[FAKE_MAX]; /* unknown_tgid[i] 0: free */
	int deletes; /* del_proc calls */
	struct {
		void *data;
		size_t size;
	} queue[FAKE_MAX];
	int nqueued;
};

/* The fake the last open made: the tests' handle on it. */
static struct fake_sampler *fake;

static struct fake_proc *fake_proc_find(uint32_t tgid)
{
	for (int i = 0; i < fake->nprocs; i++)
		if (fake->procs[i].tgid == tgid)
			return &fake->procs[i];
	return NULL;
}

static int fake_start(void *impl, char *err, size_t errlen)
{
	(void)err;
	(void)errlen;
	((struct fake_sampler *)impl)->started = true;
	return 0;
}

static void fake_free(void *impl)
{
	struct fake_sampler *f = impl;
	for (int i = 0; f && i < f->nqueued; i++)
		free(f->queue[i].data);
	free(f);
	if (fake == f)
		fake = NULL;
}

static int fake_add_target(void *impl, uint32_t tgid)
{
	struct fake_sampler *f = impl;
	if (f->ntargets == FAKE_MAX)
		return -E2BIG;
	f->targets[f->ntargets++] = tgid;
	return 0;
}

static int fake_set_proc(void *impl, uint32_t tgid, const struct tp_proc *p)
{
	struct fake_sampler *f = impl;
	struct fake_proc *e = fake_proc_find(tgid);
	if (!e) {
		if (f->nprocs == FAKE_MAX)
			return -E2BIG;
		e = &f->procs[f->nprocs++];
		e->tgid = tgid;
	}
	e->p = *p;
	return 0;
}

static int fake_del_proc(void *impl, uint32_t tgid)
{
	struct fake_sampler *f = impl;
	struct fake_proc *e = fake_proc_find(tgid);
	f->deletes++;
	if (e)
		*e = f->procs[--f->nprocs];
	return 0;
}

static int fake_take_unknown(void *impl, uint32_t tgid, struct tp_unknown *out)
{
	struct fake_sampler *f = impl;
	for (int i = 0; i < FAKE_MAX; i++) {
		if (tgid && f->unknown_tgid[i] == tgid) {
			if (out)
				*out = f->unknown[i];
			f->unknown_tgid[i] = 0;
			memset(&f->unknown[i], 0, sizeof(f->unknown[i]));
			return 0;
		}
	}
	return -ENOENT;
}

static int fake_poll(void *impl, int timeout_ms)
{
	struct fake_sampler *f = impl;
	int n = f->nqueued;
	(void)timeout_ms;
	for (int i = 0; i < n; i++) {
		f->fn(f->ctx, f->queue[i].data, f->queue[i].size);
		free(f->queue[i].data);
	}
	f->nqueued = 0;
	return n;
}

static int fake_stats(void *impl, uint64_t *out)
{
	(void)impl;
	memset(out, 0, TP_STAT__COUNT * sizeof(*out));
	return 0;
}

static const struct sampler_ops fake_ops = {
    .start = fake_start,
    .free = fake_free,
    .add_target = fake_add_target,
    .set_proc = fake_set_proc,
    .del_proc = fake_del_proc,
    .take_unknown = fake_take_unknown,
    .poll = fake_poll,
    .stats = fake_stats,
};

static int fake_open(const struct sampler_opts *o, sampler_handler fn, void *ctx,
		     struct sampler *out, char *err, size_t errlen)
{
	(void)err;
	(void)errlen;
	struct fake_sampler *f = calloc(1, sizeof(*f));
	if (!f)
		return -ENOMEM;
	f->fn = fn;
	f->ctx = ctx;
	f->opts = *o;
	fake = f;
	out->ops = &fake_ops;
	out->impl = f;
	return 0;
}

/* Queues a copy of size bytes for the next poll. */
static void fake_queue(const void *data, size_t size)
{
	if (fake->nqueued == FAKE_MAX)
		abort();
	void *copy = malloc(size);
	if (!copy)
		abort();
	memcpy(copy, data, size);
	fake->queue[fake->nqueued].data = copy;
	fake->queue[fake->nqueued++].size = size;
}

static void fake_event(uint32_t kind, uint32_t pid, uint64_t time_ns)
{
	struct tp_event ev = {.kind = kind, .pid = pid, .tid = pid, .time_ns = time_ns};
	fake_queue(&ev, sizeof(ev));
}

/* A sample of pid's main thread with these frames (innermost first),
 * walk error err, flags besides TP_SF_WALKED, thread state and time. */
static void fake_queue_sample(uint32_t pid, const struct tp_frame *frames, uint16_t n, uint16_t err,
			      uint16_t flags, uint8_t state, uint64_t time_ns)
{
	struct tp_sample *s = calloc(1, sizeof(*s)), *w = malloc(sizeof(*s));
	if (!s || !w)
		abort();
	s->kind = TP_EV_SAMPLE;
	s->pid = s->tid = pid;
	s->time_ns = time_ns;
	s->nframes = n;
	s->err = err;
	s->flags = TP_SF_WALKED | flags;
	s->state = state;
	memcpy(s->comm, "main", 5);
	if (n)
		memcpy(s->frames, frames, n * sizeof(*frames));
	fake_queue(w, wire_pack(s, w)); /* as BPF sends it */
	free(s);
	free(w);
}

/* A sample of pid's main thread with these frames (innermost first). */
static void fake_sample(uint32_t pid, const struct tp_frame *frames, uint16_t n, uint16_t err)
{
	fake_queue_sample(pid, frames, n, err, 0, TP_TS_RUNNING, 0);
}

/* An off-CPU sample of pid's main thread (TP_SF_OFFCPU): it left the CPU
 * at out_ns in state (enum tp_thread_state). */
static void fake_offcpu(uint32_t pid, const struct tp_frame *frames, uint16_t n, uint8_t state,
			uint64_t out_ns)
{
	fake_queue_sample(pid, frames, n, TP_ERR_NONE, TP_SF_OFFCPU, state, out_ns);
}

/* pid's main thread, away since out_ns, runs again at in_ns. */
static void fake_switch_in(uint32_t pid, uint64_t out_ns, uint64_t in_ns)
{
	struct tp_switch_ev ev = {
	    .kind = TP_EV_SWITCH_IN, .pid = pid, .tid = pid, .out_ns = out_ns, .in_ns = in_ns};
	fake_queue(&ev, sizeof(ev));
}

/* What BPF saw of tgid before it was classified. */
static struct tp_unknown *fake_unknown_of(uint32_t tgid)
{
	for (int i = 0; i < FAKE_MAX; i++)
		if (fake->unknown_tgid[i] == tgid)
			return &fake->unknown[i];
	for (int i = 0; i < FAKE_MAX; i++) {
		if (!fake->unknown_tgid[i]) {
			fake->unknown_tgid[i] = tgid;
			return &fake->unknown[i];
		}
	}
	abort();
}

/* Samples of tgid that BPF took before it was classified. */
static void fake_unknown(uint32_t tgid, uint64_t n)
{
	fake_unknown_of(tgid)->samples += n;
}

/* A stretch off the CPU of a thread of tgid before it was classified: ns
 * long, in state (enum tp_thread_state). */
static void fake_unknown_off(uint32_t tgid, uint8_t state, uint64_t ns)
{
	struct tp_unknown *u = fake_unknown_of(tgid);
	u->off_ns[state] += ns;
	u->stretches[state]++;
}

#endif /* TAIPAN_FAKE_SAMPLER_H */
