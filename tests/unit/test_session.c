/* test_session.c - the session (src/core/session.c) without the kernel: a fake
 * sampler (fake_sampler.h) feeds it discover, exec and exit events and
 * samples, and keeps what the session tells BPF. The process it profiles
 * is a real Python interpreter, a child of the test, so classification,
 * symbolization and the frame cache run for real.
 *
 * Covers: discovery of a Python process and what BPF is told; the samples
 * taken before it was recognised; markers for failed walks; real frames
 * named, and named again after session_take_profile (the frame cache's
 * epoch); exec forgetting the process; samples that arrive after the exit
 * event keeping their names; a fork inheriting its parent's layout; off-CPU
 * stacks (--mode wall) weighed by the time until their thread's return, cut
 * at a window's boundary and at the stop.
 */
#include <errno.h>
#include <glob.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "fake_sampler.h"
#include "cpython/pywalk.h"
#include "core/session.h"

struct child {
	pid_t pid;
	int in; /* its stdin: closing it ends it */
};

/* A Python interpreter to run: pyenv's newest first, else the system's. */
static const char *find_python(void)
{
	static char path[4096];
	static const char *const patterns[] = {
	    "/root/.pyenv/versions/3.12*/bin/python", "/root/.pyenv/versions/3.11*/bin/python",
	    "/root/.pyenv/versions/3.9*/bin/python", "/usr/bin/python3"};
	for (size_t i = 0; i < sizeof(patterns) / sizeof(patterns[0]); i++) {
		glob_t g;
		if (glob(patterns[i], 0, NULL, &g) == 0 && g.gl_pathc &&
		    access(g.gl_pathv[0], X_OK) == 0) {
			snprintf(path, sizeof(path), "%s", g.gl_pathv[0]);
			globfree(&g);
			return path;
		}
		globfree(&g);
	}
	return NULL;
}

/* Starts Python blocked on its stdin, once it has said it runs. */
static int child_start(struct child *c)
{
	const char *py = find_python();
	int in[2], out[2];
	char buf[8];
	if (!py)
		return -ENOENT;
	if (pipe(in) || pipe(out))
		return -errno;
	c->pid = fork();
	if (c->pid == 0) {
		dup2(in[0], 0);
		dup2(out[1], 1);
		close(in[1]);
		close(out[0]);
		execl(py, py, "-c",
		      "import sys; sys.stdout.write('ready\\n'); sys.stdout.flush(); "
		      "sys.stdin.read()",
		      (char *)NULL);
		_exit(127);
	}
	close(in[0]);
	close(out[1]);
	c->in = in[1];
	ssize_t n = read(out[0], buf, sizeof(buf));
	close(out[0]);
	return n == 6 && !memcmp(buf, "ready\n", 6) ? 0 : -EIO;
}

static void child_stop(struct child *c)
{
	close(c->in);
	waitpid(c->pid, NULL, 0);
}

static uint64_t mono_ns(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (uint64_t)t.tv_sec * 1000000000ULL + (uint64_t)t.tv_nsec;
}

struct fixture {
	struct child child;
	struct session *s;
};

static int setup(void **state)
{
	static struct fixture fx;
	char err[512];
	memset(&fx, 0, sizeof(fx));
	int ret = child_start(&fx.child);
	if (ret == -ENOENT) {
		if (getenv("CI") && !strcmp(getenv("CI"), "true"))
			fail_msg("CI=true and no Python interpreter to profile");
		skip();
	}
	assert_int_equal(ret, 0);
	struct session_opts o = {.rate_hz = 100, .open_sampler = fake_open};
	assert_int_equal(session_new(&o, &fx.s, err, sizeof(err)), 0);
	assert_non_null(fake);
	*state = &fx;
	return 0;
}

/* As setup, with --mode wall and --min-block 1ms. */
static int setup_wall(void **state)
{
	char err[512];
	int ret = setup(state);
	struct fixture *fx = *state;
	session_free(fx->s);
	struct session_opts o = {.rate_hz = 100,
				 .open_sampler = fake_open,
				 .mode = PROF_MODE_WALL,
				 .min_block_ns = 1000000};
	assert_int_equal(session_new(&o, &fx->s, err, sizeof(err)), 0);
	assert_true(fake->opts.offcpu);
	return ret;
}

static int teardown(void **state)
{
	struct fixture *fx = *state;
	session_free(fx->s);
	child_stop(&fx->child);
	return 0;
}

/* The stack of the profile's only sample with this root frame name, or NULL. */
static const struct prof_sample *find_stack(struct profile *p, const char *root)
{
	for (size_t i = 0; i < profile_sample_count(p); i++) {
		const struct prof_sample *s = profile_sample(p, i);
		if (s->nframes && !strcmp(profile_frame(p, s->frames[0])->name, root))
			return s;
	}
	return NULL;
}

/* Discovered through an event: BPF gets its walking layout, and what BPF
 * sampled before that shows as one marker with the process's labels. */
static void test_discover_and_early_samples(void **state)
{
	struct fixture *fx = *state;
	struct session_stats st;
	uint32_t pid = (uint32_t)fx->child.pid;

	assert_int_equal(session_add_pid(fx->s, fx->child.pid, false, NULL, 0), 0);
	assert_int_equal(fake->ntargets, 1);
	assert_int_equal(fake->targets[0], pid);
	fake_unknown(pid, 5);
	fake_event(TP_EV_DISCOVER, pid, mono_ns());
	assert_int_equal(session_poll(fx->s, 0), 0);

	struct fake_proc *e = fake_proc_find(pid);
	assert_non_null(e);
	assert_int_equal(e->p.runtime, TP_RT_CPYTHON);
	assert_true(tp_py_data(&e->p)->interp_head_addr != 0);
	assert_true(tp_py_data(&e->p)->off.frame_span > 0);
	session_stats(fx->s, &st);
	assert_int_equal(st.processes, 1);
	assert_int_equal(st.lost_early, 5);

	struct profile *p = session_profile(fx->s);
	const struct prof_sample *early = find_stack(p, "[before taipan recognised the process]");
	assert_non_null(early);
	assert_int_equal(early->count, 5);
	assert_int_equal(early->labels.pid, pid);

	/* A second announcement of a known process puts it back in BPF (it
	 * was evicted, say) and is not counted as a new process. */
	fake_del_proc(fake, pid);
	fake_event(TP_EV_DISCOVER, pid, mono_ns());
	assert_int_equal(session_poll(fx->s, 0), 0);
	assert_non_null(fake_proc_find(pid));
	session_stats(fx->s, &st);
	assert_int_equal(st.processes, 1);
}

static void discover(struct fixture *fx)
{
	fake_event(TP_EV_DISCOVER, (uint32_t)fx->child.pid, mono_ns());
	assert_int_equal(session_poll(fx->s, 0), 0);
	assert_non_null(fake_proc_find((uint32_t)fx->child.pid));
}

/* A walk that stopped short: its marker at the root, counted by site. */
static void test_markers(void **state)
{
	struct fixture *fx = *state;
	struct session_stats st;
	uint32_t pid = (uint32_t)fx->child.pid;

	discover(fx);
	fake_sample(pid, NULL, 0, TP_ERR_FRAME);
	fake_sample(pid, NULL, 0, TP_ERR_DEPTH);
	fake_sample(pid, NULL, 0, TP_ERR_CFRAME);
	fake_sample(pid, NULL, 0, TP_ERR__COUNT + 3); /* from a newer BPF object */
	assert_int_equal(session_poll(fx->s, 0), 0);

	struct profile *p = session_profile(fx->s);
	assert_non_null(find_stack(p, "[frame unreadable]"));
	assert_non_null(find_stack(p, "[truncated]"));
	assert_non_null(find_stack(p, "[thread state unreadable]"));
	assert_non_null(find_stack(p, "[unknown error]"));
	assert_int_equal(profile_frame(p, find_stack(p, "[truncated]")->frames[0])->kind,
			 PROF_FRAME_MARKER);
	session_stats(fx->s, &st);
	assert_int_equal(st.walk_errors[TP_ERR_FRAME], 1);
	assert_int_equal(st.walk_errors[TP_ERR_DEPTH], 1);
	assert_int_equal(st.walk_errors[TP_ERR_CFRAME], 1);
	assert_int_equal(st.truncated, 1);
	assert_int_equal(st.samples, 4);
}

/* The real frames of the child's main thread, as dump reads them. */
static uint16_t child_frames(struct fixture *fx, struct tp_frame *out, uint16_t max)
{
	struct pyproc pp;
	struct pywalk w;
	char err[512];
	assert_int_equal(pyproc_inspect(fx->child.pid, &pp, err, sizeof(err)), 0);
	assert_int_equal(pywalk_read(&pp, &w), 0);
	assert_true(w.nthreads >= 1);
	uint16_t n = (uint16_t)(w.threads[0].nframes < max ? w.threads[0].nframes : max);
	memcpy(out, w.threads[0].frames, n * sizeof(*out));
	pywalk_free(&w);
	return n;
}

/* Real frames are named; after the profile is handed over, the same frames
 * are named again in the new profile, not taken from the old one's ids. */
static void test_frames_and_epoch(void **state)
{
	struct fixture *fx = *state;
	struct tp_frame frames[8];
	uint32_t pid = (uint32_t)fx->child.pid;

	discover(fx);
	uint16_t n = child_frames(fx, frames, 8);
	assert_true(n >= 1);
	/* A marker first, so that the frame ids of the two profiles differ. */
	fake_sample(pid, NULL, 0, TP_ERR_FRAME);
	fake_sample(pid, frames, n, TP_ERR_NONE);
	assert_int_equal(session_poll(fx->s, 0), 0);
	struct profile *p = session_profile(fx->s);
	const struct prof_sample *s = find_stack(p, "<module>");
	assert_non_null(s);
	assert_string_equal(profile_frame(p, s->frames[0])->file, "<string>");

	struct profile *old = session_take_profile(fx->s);
	assert_non_null(old);
	profile_free(old);
	fake_sample(pid, frames, n, TP_ERR_NONE);
	assert_int_equal(session_poll(fx->s, 0), 0);
	p = session_profile(fx->s);
	assert_int_equal(profile_sample_count(p), 1);
	s = find_stack(p, "<module>");
	assert_non_null(s);
	assert_int_equal(s->count, 1);
	assert_string_equal(profile_frame(p, s->frames[0])->file, "<string>");
}

/* After exec the process is another program: BPF forgets it, and samples
 * still in flight are counted, never named after the old program. */
static void test_exec_forgets(void **state)
{
	struct fixture *fx = *state;
	struct session_stats before, after;
	struct tp_frame frames[8];
	uint32_t pid = (uint32_t)fx->child.pid;

	discover(fx);
	uint16_t n = child_frames(fx, frames, 8);
	session_stats(fx->s, &before);
	fake_event(TP_EV_EXEC, pid, mono_ns() + 1000000000ULL);
	fake_sample(pid, frames, n, TP_ERR_NONE);
	assert_int_equal(session_poll(fx->s, 0), 0);
	assert_null(fake_proc_find(pid));
	session_stats(fx->s, &after);
	assert_int_equal(after.samples, before.samples);
	assert_int_equal(after.lost_unknown, before.lost_unknown + 1);

	/* An exec older than what the session knows (it looked at the
	 * process after the exec) changes nothing. */
	discover(fx);
	int deletes = fake->deletes;
	fake_event(TP_EV_EXEC, pid, 1);
	assert_int_equal(session_poll(fx->s, 0), 0);
	assert_non_null(fake_proc_find(pid));
	assert_int_equal(fake->deletes, deletes);
}

/* A fork of a known process is known at once (BPF copied the layout), its
 * samples are kept, and an exec after the fork forgets it; a fork of a
 * process the session does not vouch for makes BPF forget the copy. */
static void test_fork_shares_the_layout(void **state)
{
	struct fixture *fx = *state;
	struct session_stats st;
	uint32_t pid = (uint32_t)fx->child.pid, kid = 0x7ffffff0, stray = 0x7ffffff1;

	discover(fx);
	uint64_t t_fork = mono_ns();
	struct tp_event ev = {
	    .kind = TP_EV_FORK, .pid = kid, .tid = kid, .ppid = pid, .time_ns = t_fork};
	fake_queue(&ev, sizeof(ev));
	fake_sample(kid, NULL, 0, TP_ERR_FRAME); /* a marker: no memory to read */
	assert_int_equal(session_poll(fx->s, 0), 0);
	session_stats(fx->s, &st);
	assert_int_equal(st.processes, 2);
	assert_int_equal(st.samples, 1);
	assert_int_equal(st.lost, 0);
	const struct prof_sample *smp = find_stack(session_profile(fx->s), "[frame unreadable]");
	assert_non_null(smp);
	assert_int_equal(smp->labels.pid, kid);

	/* The exec, read after the fork: the copied layout is forgotten. */
	int deletes = fake->deletes;
	fake_event(TP_EV_EXEC, kid, t_fork + 1);
	fake_sample(kid, NULL, 0, TP_ERR_FRAME);
	assert_int_equal(session_poll(fx->s, 0), 0);
	assert_true(fake->deletes > deletes);
	session_stats(fx->s, &st);
	assert_int_equal(st.samples, 1);
	assert_int_equal(st.lost, 1);

	/* A parent the session does not know. */
	deletes = fake->deletes;
	ev = (struct tp_event){
	    .kind = TP_EV_FORK, .pid = stray, .tid = stray, .ppid = kid, .time_ns = mono_ns()};
	fake_queue(&ev, sizeof(ev));
	assert_int_equal(session_poll(fx->s, 0), 0);
	assert_int_equal(fake->deletes, deletes + 1);
	session_stats(fx->s, &st);
	assert_int_equal(st.processes, 2);
}

/* Samples read after the exit event were taken before the exit: they keep
 * their names. */
static void test_exit_keeps_late_samples(void **state)
{
	struct fixture *fx = *state;
	struct tp_frame frames[8];
	uint32_t pid = (uint32_t)fx->child.pid;

	discover(fx);
	uint16_t n = child_frames(fx, frames, 8);
	fake_event(TP_EV_EXIT, pid, mono_ns());
	fake_sample(pid, frames, n, TP_ERR_NONE);
	assert_int_equal(session_poll(fx->s, 0), 0);
	assert_non_null(find_stack(session_profile(fx->s), "<module>"));
	assert_int_equal(session_live_targets(fx->s), 0); /* gone, as far as it knows */
}

/* The profile's only sample whose leaf frame is named leaf, or NULL. */
static const struct prof_sample *find_leaf(struct profile *p, const char *leaf)
{
	const struct prof_sample *found = NULL;
	for (size_t i = 0; i < profile_sample_count(p); i++) {
		const struct prof_sample *s = profile_sample(p, i);
		if (s->nframes &&
		    !strcmp(profile_frame(p, s->frames[s->nframes - 1])->name, leaf)) {
			assert_null(found);
			found = s;
		}
	}
	return found;
}

/* --mode wall: an off-CPU stack weighs nothing until its thread returns,
 * then the time it was away; a stretch under --min-block is left out; a
 * return that names another stretch is ignored; a stack whose return was
 * lost weighs 0. */
static void test_offcpu_weighs_time_away(void **state)
{
	struct fixture *fx = *state;
	struct tp_frame frames[8];
	struct session_stats st;
	uint32_t pid = (uint32_t)fx->child.pid;
	const uint64_t ms = 1000000, t = 1000 * ms;

	discover(fx);
	uint16_t n = child_frames(fx, frames, 8);
	fake_offcpu(pid, frames, n, TP_TS_SLEEPING, t);
	assert_int_equal(session_poll(fx->s, 0), 0);
	struct profile *p = session_profile(fx->s);
	assert_true(profile_weighted(p));
	const struct prof_sample *sl = find_leaf(p, "[sleeping]");
	assert_non_null(sl);
	assert_string_equal(profile_frame(p, sl->frames[0])->name, "<module>");
	assert_int_equal(sl->labels.state, PROF_STATE_SLEEPING);
	assert_int_equal(prof_value(p, sl), 0);

	fake_switch_in(pid, t + 1, t + 7 * ms); /* not this stretch */
	fake_switch_in(pid, t, t + 5 * ms);
	assert_int_equal(session_poll(fx->s, 0), 0);
	sl = find_leaf(p, "[sleeping]");
	assert_int_equal(sl->count, 1);
	assert_int_equal(prof_sample_wall_ns(p, sl), 5 * ms);
	assert_int_equal(prof_sample_cpu_ns(p, sl), 0);

	/* Shorter than --min-block. */
	fake_offcpu(pid, frames, n, TP_TS_RUNNABLE, t + 10 * ms);
	fake_switch_in(pid, t + 10 * ms, t + 10 * ms + ms / 2);
	/* Its return lost: the next stack of the thread comes first. */
	fake_offcpu(pid, frames, n, TP_TS_BLOCKED, t + 20 * ms);
	fake_offcpu(pid, frames, n, TP_TS_BLOCKED, t + 30 * ms);
	fake_switch_in(pid, t + 30 * ms, t + 32 * ms);
	/* A sample on the CPU counts the period. */
	fake_sample(pid, frames, n, TP_ERR_NONE);
	assert_int_equal(session_poll(fx->s, 0), 0);
	const struct prof_sample *rq = find_leaf(p, "[runnable]");
	assert_non_null(rq);
	assert_int_equal(prof_value(p, rq), 0);
	const struct prof_sample *bl = find_leaf(p, "[blocked]");
	assert_int_equal(bl->count, 1);
	assert_int_equal(prof_value(p, bl), 2 * ms);
	session_stats(fx->s, &st);
	assert_int_equal(st.offcpu, 2);
	assert_int_equal(st.offcpu_short, 1);
	assert_int_equal(st.offcpu_unended, 1);
	/* 5 + 2 ms away, and one on-CPU sample, worth the period. */
	assert_int_equal(profile_total_value(p), 7 * ms + profile_period_ns(p));
}

/* A stretch whose return was lost (ring full) ends a sampling period before
 * the first cpu-clock sample of its thread on the CPU, whether the next
 * stack of the thread or the stop comes first. */
static void test_offcpu_return_seen_by_a_sample(void **state)
{
	struct fixture *fx = *state;
	struct tp_frame frames[8];
	struct session_stats st;
	uint32_t pid = (uint32_t)fx->child.pid;
	discover(fx);
	const uint64_t per = 10000000; /* 100 Hz */
	uint64_t t = mono_ns() - 100 * per;

	uint16_t n = child_frames(fx, frames, 8);
	fake_offcpu(pid, frames, n, TP_TS_SLEEPING, t);
	fake_queue_sample(pid, frames, n, TP_ERR_NONE, 0, TP_TS_RUNNING, t + 3 * per);
	fake_queue_sample(pid, frames, n, TP_ERR_NONE, 0, TP_TS_RUNNING, t + 4 * per);
	fake_offcpu(pid, frames, n, TP_TS_BLOCKED, t + 5 * per);
	fake_queue_sample(pid, frames, n, TP_ERR_NONE, 0, TP_TS_RUNNING, t + 9 * per);
	assert_int_equal(session_poll(fx->s, 0), 0);
	struct profile *p = session_profile(fx->s);
	const struct prof_sample *sl = find_leaf(p, "[sleeping]");
	assert_int_equal(sl->count, 1);
	assert_int_equal(prof_value(p, sl), 2 * per);
	const struct prof_sample *bl = find_leaf(p, "[blocked]");
	assert_int_equal(bl->count, 0);
	session_stop(fx->s);
	assert_int_equal(session_poll(fx->s, 0), 0);
	bl = find_leaf(p, "[blocked]");
	assert_int_equal(bl->count, 1);
	assert_int_equal(prof_value(p, bl), 3 * per);
	session_stats(fx->s, &st);
	assert_int_equal(st.offcpu, 2);
	assert_int_equal(st.offcpu_seen_back, 2);
	assert_int_equal(st.offcpu_unended, 0);
	assert_int_equal(st.offcpu_open, 0);
}

/* --mode wall: the time a process's threads spent off the CPU before it was
 * recognised is under the early marker, by reason; time away across the
 * recognition, which BPF adds after, comes in at the stop. */
static void test_offcpu_before_recognition(void **state)
{
	struct fixture *fx = *state;
	struct session_stats st;
	uint32_t pid = (uint32_t)fx->child.pid;
	const uint64_t ms = 1000000;

	fake_unknown(pid, 3);
	fake_unknown_off(pid, TP_TS_SLEEPING, 40 * ms);
	fake_unknown_off(pid, TP_TS_RUNNABLE, 2 * ms);
	discover(fx);
	struct profile *p = session_profile(fx->s);
	const struct prof_sample *run = find_leaf(p, "[before taipan recognised the process]");
	assert_int_equal(run->count, 3);
	assert_int_equal(run->labels.state, PROF_STATE_RUNNING);
	const struct prof_sample *sl = find_leaf(p, "[sleeping]");
	assert_int_equal(sl->nframes, 2);
	assert_string_equal(profile_frame(p, sl->frames[0])->name,
			    "[before taipan recognised the process]");
	assert_int_equal(sl->labels.state, PROF_STATE_SLEEPING);
	assert_int_equal(sl->labels.pid, pid);
	assert_int_equal(prof_value(p, sl), 40 * ms);
	assert_int_equal(prof_value(p, find_leaf(p, "[runnable]")), 2 * ms);

	fake_unknown_off(pid, TP_TS_SLEEPING, 5 * ms);
	session_stop(fx->s);
	assert_int_equal(session_poll(fx->s, 0), 0);
	sl = find_leaf(p, "[sleeping]");
	assert_int_equal(sl->count, 2);
	assert_int_equal(prof_value(p, sl), 45 * ms);
	session_stats(fx->s, &st);
	assert_int_equal(st.offcpu_early, 3);
	assert_int_equal(profile_total_value(p), 3 * profile_period_ns(p) + 47 * ms);
}

/* A thread away across session_take_profile weighs in both windows, and
 * one still away at the stop weighs until the stop. */
static void test_offcpu_windows_and_stop(void **state)
{
	struct fixture *fx = *state;
	struct tp_frame frames[8];
	struct session_stats st;
	uint32_t pid = (uint32_t)fx->child.pid;
	const uint64_t ms = 1000000;

	discover(fx);
	uint16_t n = child_frames(fx, frames, 8);
	uint64_t out = mono_ns() - 50 * ms;
	fake_offcpu(pid, frames, n, TP_TS_SLEEPING, out);
	assert_int_equal(session_poll(fx->s, 0), 0);
	uint64_t before = mono_ns();
	struct profile *old = session_take_profile(fx->s);
	uint64_t after = mono_ns();
	assert_non_null(old);
	const struct prof_sample *a = find_leaf(old, "[sleeping]");
	assert_int_equal(a->count, 1);
	assert_in_range(prof_value(old, a), before - out, after - out);
	assert_int_equal(profile_mode(old), PROF_MODE_WALL);

	struct profile *p = session_profile(fx->s);
	assert_int_equal(profile_mode(p), PROF_MODE_WALL);
	const struct prof_sample *b = find_leaf(p, "[sleeping]");
	assert_non_null(b);
	assert_int_equal(b->count, 0);
	fake_switch_in(pid, out, after + 3 * ms);
	assert_int_equal(session_poll(fx->s, 0), 0);
	b = find_leaf(p, "[sleeping]");
	assert_int_equal(b->count, 1);
	assert_in_range(prof_value(p, b), 3 * ms, after + 3 * ms - before);
	profile_free(old);

	/* Away at the stop, for longer than --min-block. */
	fake_offcpu(pid, frames, n, TP_TS_BLOCKED, mono_ns() - 5 * ms);
	assert_int_equal(session_poll(fx->s, 0), 0);
	session_stop(fx->s);
	assert_int_equal(session_poll(fx->s, 0), 0);
	const struct prof_sample *c = find_leaf(p, "[blocked]");
	assert_int_equal(c->count, 1);
	session_stats(fx->s, &st);
	assert_int_equal(st.offcpu_open, 1);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_discover_and_early_samples, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_markers, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_frames_and_epoch, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_exec_forgets, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_exit_keeps_late_samples, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_fork_shares_the_layout, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_offcpu_weighs_time_away, setup_wall, teardown),
	    cmocka_unit_test_setup_teardown(test_offcpu_windows_and_stop, setup_wall, teardown),
	    cmocka_unit_test_setup_teardown(test_offcpu_return_seen_by_a_sample, setup_wall,
					    teardown),
	    cmocka_unit_test_setup_teardown(test_offcpu_before_recognition, setup_wall, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
