/* ingest.c - bench: user-space CPU per sample, with the reader fed as fast
 * as it can take them.
 *
 *   build/bench/ingest [-s SECS] [-r HZ] [-n PASSES] [--native MODE] -p PID...
 *
 * First it records the processes with the BPF sampler for SECS seconds (2),
 * at HZ (999), keeping a copy of every sample and code-object record the
 * ring gave. Then a second session over the same processes, which still
 * run, is given those records again from memory, PASSES times (20), as
 * fast as it takes them: nothing waits on the ring or on BPF. The first
 * pass fills the session's caches (native symbols, code objects, stacks);
 * the figure is the CPU (user and system, every thread) per sample of the
 * passes after it, the reader's steady state. MODE: none, filtered (the
 * default) or all.
 *
 * Figures only, nothing asserted: bench/ingest.py runs it on a mixed
 * Python + C workload.
 */
#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/bpfrun.h"
#include "core/session.h"

#define MAX_PIDS 64

/* The records kept: one buffer, each record its size then its bytes. */
struct tape {
	unsigned char *buf;
	size_t len, cap;
	size_t records, samples;
	sampler_handler fn; /* the session's handler, which the tap forwards to */
	void *ctx;
};

static struct tape tape;

static double cpu_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

static double wall_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

static int tap(void *ctx, void *data, size_t size)
{
	struct tape *t = ctx;
	const struct tp_event *ev = data;
	if (size >= sizeof(*ev) && (ev->kind == TP_EV_SAMPLE || ev->kind == TP_EV_CODE)) {
		size_t need = t->len + sizeof(size) + size;
		if (need > t->cap) {
			size_t cap = t->cap ? t->cap * 2 : 1 << 24;
			while (cap < need)
				cap *= 2;
			unsigned char *b = realloc(t->buf, cap);
			if (!b)
				return -ENOMEM;
			t->buf = b;
			t->cap = cap;
		}
		memcpy(t->buf + t->len, &size, sizeof(size));
		memcpy(t->buf + t->len + sizeof(size), data, size);
		t->len = need;
		t->records++;
		t->samples += ev->kind == TP_EV_SAMPLE;
	}
	return t->fn(t->ctx, data, size);
}

static int tap_open(const struct sampler_opts *o, sampler_handler fn, void *ctx,
		    struct sampler *out, char *err, size_t errlen)
{
	tape.fn = fn;
	tape.ctx = ctx;
	return bpfrun_sampler_open(o, tap, &tape, out, err, errlen);
}

/* The replaying sampler: each poll hands the session the whole tape once.
 * What the session tells BPF goes nowhere. */
struct replay {
	sampler_handler fn;
	void *ctx;
};

static int r_start(void *impl, char *err, size_t errlen)
{
	(void)impl, (void)err, (void)errlen;
	return 0;
}

static void r_free(void *impl)
{
	free(impl);
}

static int r_target(void *impl, uint32_t tgid)
{
	(void)impl, (void)tgid;
	return 0;
}

static int r_set_proc(void *impl, uint32_t tgid, const struct tp_proc *p)
{
	(void)impl, (void)tgid, (void)p;
	return 0;
}

static int r_take_unknown(void *impl, uint32_t tgid, struct tp_unknown *out)
{
	(void)impl, (void)tgid, (void)out;
	return -ENOENT;
}

static int r_poll(void *impl, int timeout_ms)
{
	struct replay *r = impl;
	(void)timeout_ms;
	int n = 0;
	for (size_t off = 0; off < tape.len; n++) {
		size_t size;
		memcpy(&size, tape.buf + off, sizeof(size));
		int ret = r->fn(r->ctx, tape.buf + off + sizeof(size), size);
		if (ret)
			return ret;
		off += sizeof(size) + size;
	}
	return n;
}

static int r_stats(void *impl, uint64_t *out)
{
	(void)impl;
	memset(out, 0, TP_STAT__COUNT * sizeof(*out));
	return 0;
}

static int r_put_table(void *impl, uint32_t slot, const struct tp_ufile *info,
		       const uint32_t *words)
{
	(void)impl, (void)slot, (void)info, (void)words;
	return 0;
}

static int r_put_rules(void *impl, uint32_t first, uint32_t n, const struct tp_urule *rules)
{
	(void)impl, (void)first, (void)n, (void)rules;
	return 0;
}

static int r_slot(void *impl, uint32_t slot)
{
	(void)impl, (void)slot;
	return 0;
}

static int r_flush(void *impl)
{
	(void)impl;
	return 0;
}

static int r_set_range(void *impl, const struct tp_umap_key *k, const struct tp_umap *v)
{
	(void)impl, (void)k, (void)v;
	return 0;
}

static int r_del_range(void *impl, const struct tp_umap_key *k)
{
	(void)impl, (void)k;
	return 0;
}

static int r_kernel_names(void *impl, const uint64_t *addr, uint32_t n, char (*name)[TP_KSYM_LEN])
{
	(void)impl, (void)addr, (void)n, (void)name;
	return -ENOTSUP;
}

static const struct sampler_ops replay_ops = {
    .start = r_start,
    .free = r_free,
    .add_target = r_target,
    .set_proc = r_set_proc,
    .del_proc = r_target,
    .take_unknown = r_take_unknown,
    .poll = r_poll,
    .stats = r_stats,
    .put_table = r_put_table,
    .put_rules = r_put_rules,
    .del_table = r_slot,
    .flush_tables = r_flush,
    .set_range = r_set_range,
    .del_range = r_del_range,
    .kernel_names = r_kernel_names,
};

static int replay_open(const struct sampler_opts *o, sampler_handler fn, void *ctx,
		       struct sampler *out, char *err, size_t errlen)
{
	(void)o;
	struct replay *r = calloc(1, sizeof(*r));
	if (!r) {
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	r->fn = fn;
	r->ctx = ctx;
	out->ops = &replay_ops;
	out->impl = r;
	return 0;
}

static int open_session(struct session_opts *o, pid_t *pids, int npids, struct session **s)
{
	char err[512];
	int ret = session_new(o, s, err, sizeof(err));
	for (int i = 0; !ret && i < npids; i++)
		ret = session_add_pid(*s, pids[i], true, err, sizeof(err));
	if (!ret)
		ret = session_start(*s, err, sizeof(err));
	if (ret) {
		fprintf(stderr, "ingest: %s\n", err);
		if (*s)
			session_free(*s);
	}
	return ret;
}

static void usage(FILE *f)
{
	fprintf(f, "usage: ingest [-s SECS] [-r HZ] [-n PASSES] [--native none|filtered|all] "
		   "-p PID...\n");
}

int main(int argc, char **argv)
{
	static const struct option longopts[] = {{"native", required_argument, NULL, 'N'},
						 {"help", no_argument, NULL, 'h'},
						 {NULL, 0, NULL, 0}};
	struct session_opts o = {
	    .kernel_stacks = true,
	    .native = SESSION_NATIVE_FILTERED,
	    .mode = PROF_MODE_CPU,
	    .rate_hz = 999,
	};
	double seconds = 2;
	int passes = 20, npids = 0, c;
	pid_t pids[MAX_PIDS];
	while ((c = getopt_long(argc, argv, "s:r:n:p:h", longopts, NULL)) != -1) {
		switch (c) {
		case 's':
			seconds = atof(optarg);
			break;
		case 'r':
			o.rate_hz = (unsigned int)atoi(optarg);
			break;
		case 'n':
			passes = atoi(optarg);
			break;
		case 'p':
			if (npids < MAX_PIDS)
				pids[npids++] = atoi(optarg);
			break;
		case 'N':
			o.native = !strcmp(optarg, "none")  ? SESSION_NATIVE_NONE
				   : !strcmp(optarg, "all") ? SESSION_NATIVE_ALL
							    : SESSION_NATIVE_FILTERED;
			break;
		case 'h':
			usage(stdout);
			return 0;
		default:
			usage(stderr);
			return 2;
		}
	}
	if (!npids || passes < 2 || seconds <= 0) {
		usage(stderr);
		return 2;
	}
	signal(SIGPIPE, SIG_IGN);

	struct session *s = NULL;
	o.open_sampler = tap_open;
	if (open_session(&o, pids, npids, &s))
		return 1;
	double end = wall_s() + seconds;
	while (wall_s() < end)
		if (session_poll(s, 100) == -ENOMEM)
			break;
	session_stop(s);
	session_poll(s, 0);
	struct session_stats st;
	session_stats(s, &st);
	double rec_cpu = cpu_s();
	session_free(s);
	if (!tape.samples) {
		fprintf(stderr, "ingest: no sample recorded\n");
		return 1;
	}

	o.open_sampler = replay_open;
	s = NULL;
	if (open_session(&o, pids, npids, &s))
		return 1;
	double t0 = cpu_s(), w0 = wall_s();
	if (session_poll(s, 0)) /* the first pass: caches filled */
		return 1;
	double t1 = cpu_s(), w1 = wall_s();
	for (int i = 1; i < passes; i++)
		if (session_poll(s, 0))
			return 1;
	double t2 = cpu_s(), w2 = wall_s();
	struct session_stats rs;
	session_stats(s, &rs);
	session_free(s);
	unsigned long long warm = (unsigned long long)tape.samples * (passes - 1);
	printf("recorded: %zu samples (%.0f KiB on the wire, %.0f bytes each), %zu code "
	       "records; the recording's profile took %llu; its CPU %.2f s\n",
	       tape.samples, tape.len / 1024.0, (double)tape.len / tape.records,
	       tape.records - tape.samples, (unsigned long long)st.samples, rec_cpu);
	printf("replayed: %d passes, %llu samples taken into the profile of %llu fed\n", passes,
	       (unsigned long long)rs.samples, (unsigned long long)tape.samples * passes);
	printf("first pass: %.2f us CPU a sample (%.2f us wall)\n", (t1 - t0) * 1e6 / tape.samples,
	       (w1 - w0) * 1e6 / tape.samples);
	printf("later passes: %.2f us CPU a sample (%.2f us wall), %.0f samples a second\n",
	       (t2 - t1) * 1e6 / warm, (w2 - w1) * 1e6 / warm, warm / (w2 - w1));
	free(tape.buf);
	return 0;
}
