/* test_pywalk.c - unit tests for the user-space thread and frame walker,
 * run against thread states and frames built in this process's own memory
 * (process_vm_readv on ourselves needs no privileges). */
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cmocka.h>

#include "cpython/pywalk.h"

/* Stand-ins for CPython's structs: only the offsets matter. */
struct fake_interp {
	uint64_t next;
	uint64_t tstate_head;
};

struct fake_ts {
	uint64_t next;
	uint64_t thread_id;
	uint64_t frame; /* the frame, or the cframe with TP_LF_CFRAME */
	uint64_t native_tid;
};

struct fake_cframe {
	uint64_t pad;
	uint64_t current_frame;
};

struct fake_frame {
	uint64_t back;
	uint64_t code;
	uint64_t lasti; /* an int (<= 3.10) or a pointer into the code object */
	uint8_t owner;
	uint8_t is_entry;
	uint8_t pad[6];
	uint64_t localsplus[1];
};

struct fake_obj {
	uint64_t refcnt;
	uint64_t type;
	uint64_t flags; /* as a type: tp_flags */
};

static uint64_t A(const void *p)
{
	return (uint64_t)(uintptr_t)p;
}

/* A process description for the fakes above. */
static void fake_pyproc(struct pyproc *pp, uint32_t flags, const uint64_t *head)
{
	memset(pp, 0, sizeof(*pp));
	pp->pid = getpid();
	pp->tp.interp_head_addr = A(head);
	struct tp_py_offsets *o = &pp->tp.off;
	o->interp_next = offsetof(struct fake_interp, next);
	o->interp_tstate_head = offsetof(struct fake_interp, tstate_head);
	o->ts_next = offsetof(struct fake_ts, next);
	o->ts_thread_id = offsetof(struct fake_ts, thread_id);
	o->ts_frame = offsetof(struct fake_ts, frame);
	o->cframe_current_frame = offsetof(struct fake_cframe, current_frame);
	o->frame_back = offsetof(struct fake_frame, back);
	o->frame_code = offsetof(struct fake_frame, code);
	o->frame_lasti = offsetof(struct fake_frame, lasti);
	o->frame_owner = offsetof(struct fake_frame, owner);
	o->frame_is_entry = offsetof(struct fake_frame, is_entry);
	o->frame_localsplus = offsetof(struct fake_frame, localsplus);
	o->obj_type = offsetof(struct fake_obj, type);
	o->type_flags = offsetof(struct fake_obj, flags);
	/* As pyproc.c computes it: every field the walker reads, f_localsplus[0] included. */
	o->frame_span = sizeof(struct fake_frame);
	o->flags = flags;
	pp->layout.ts_native_thread_id = offsetof(struct fake_ts, native_tid);
}

static pid_t my_tid(void)
{
	return (pid_t)syscall(SYS_gettid);
}

/* 3.12-like: cframe hop, position pointers, owner bytes, tagged code. */
static void test_interp_frames(void **state)
{
	(void)state;
	/* Aligned as PyObjects are: the walker stops at a frame whose code
	 * pointer is not. */
	static _Alignas(16) uint8_t code_a[64], code_b[64];
	struct fake_frame inner = {0}, shim = {0}, outer = {0};
	struct fake_cframe cf = {.current_frame = A(&inner)};
	struct fake_ts ts = {.thread_id = 0x1234, .frame = A(&cf), .native_tid = my_tid()};
	struct fake_interp in = {.tstate_head = A(&ts)};
	uint64_t head = A(&in);
	struct pyproc pp;
	struct pywalk w;

	inner.back = A(&shim);
	inner.code = A(code_a) | 1; /* a tagged reference: masked with STACKREF */
	inner.lasti = A(code_a) + 40;
	shim.back = A(&outer);
	shim.code = A(code_b);
	shim.owner = 3; /* the C stack's: skipped */
	outer.code = A(code_b);
	outer.lasti = A(code_b) + 18;
	fake_pyproc(
	    &pp, TP_LF_INTERP_FRAME | TP_LF_CFRAME | TP_LF_LASTI_PTR | TP_LF_OWNER | TP_LF_STACKREF,
	    &head);

	assert_int_equal(pywalk_read(&pp, &w), 0);
	assert_int_equal(w.nthreads, 1);
	assert_int_equal(w.err, TP_ERR_NONE);
	const struct pywalk_thread *t = &w.threads[0];
	assert_int_equal(t->tstate, A(&ts));
	assert_int_equal(t->thread_id, 0x1234);
	assert_int_equal(t->tid, my_tid());
	assert_int_equal(w.tid_source, PYWALK_TID_NATIVE);
	assert_int_equal(t->err, TP_ERR_NONE);
	assert_int_equal(t->nframes, 2);
	assert_int_equal(t->frames[0].code, A(code_a));
	assert_int_equal(t->frames[0].pos, 40);
	/* The shim under it: inner is where an eval loop was entered. */
	assert_true(t->frames[0].flags & TP_FF_ENTRY);
	assert_int_equal(t->frames[1].code, A(code_b));
	assert_int_equal(t->frames[1].pos, 18);
	assert_false(t->frames[1].flags & TP_FF_ENTRY);
	pywalk_free(&w);

	/* 3.11: no owner check, but is_entry is kept. */
	shim.owner = 0;
	shim.is_entry = 1;
	inner.code = A(code_a);
	pp.tp.off.flags = TP_LF_INTERP_FRAME | TP_LF_CFRAME | TP_LF_LASTI_PTR | TP_LF_IS_ENTRY;
	assert_int_equal(pywalk_read(&pp, &w), 0);
	assert_int_equal(w.threads[0].nframes, 3);
	assert_int_equal(w.threads[0].frames[1].flags, TP_FF_ENTRY);
	assert_int_equal(w.threads[0].frames[0].flags, 0);
	pywalk_free(&w);
}

/* <= 3.10: PyFrameObject chain, int f_lasti, the class of the first local. */
static void test_frame_objects(void **state)
{
	(void)state;
	/* Py_TPFLAGS_TYPE_SUBCLASS on the metaclass: its instances are classes. */
	struct fake_obj meta = {.flags = 1UL << 31};
	struct fake_obj cls = {.flags = 0};
	struct fake_obj self = {.type = A(&cls)};
	cls.type = A(&meta);
	struct fake_frame meth = {0}, classmeth = {0}, plain = {0};
	struct fake_ts ts = {.frame = A(&meth)};
	struct fake_interp in = {.tstate_head = A(&ts)};
	uint64_t head = A(&in);
	struct pyproc pp;
	struct pywalk w;

	meth.back = A(&classmeth);
	meth.code = 0x100000; /* where an object could be, and unreadable */
	meth.lasti = 24;
	meth.localsplus[0] = A(&self); /* self: its type */
	classmeth.back = A(&plain);
	classmeth.code = 0x200000;
	classmeth.localsplus[0] = A(&cls); /* cls: a class, so itself */
	plain.code = 0x300000;
	plain.lasti = (uint64_t)-1; /* not started: f_lasti is -1 */
	fake_pyproc(&pp, TP_LF_SELF_CLASS, &head);

	assert_int_equal(pywalk_read(&pp, &w), 0);
	assert_int_equal(w.nthreads, 1);
	const struct pywalk_thread *t = &w.threads[0];
	assert_int_equal(t->nframes, 3);
	assert_int_equal(t->frames[0].code, 0x100000);
	assert_int_equal(t->frames[0].pos, 24);
	assert_int_equal(t->frames[0].aux, A(&cls));
	assert_int_equal(t->frames[1].aux, A(&cls));
	assert_int_equal(t->frames[2].aux, 0);
	assert_int_equal(t->frames[2].pos, UINT32_MAX);
	pywalk_free(&w);
}

/* A frame list that loops, or that ends in unreadable memory, or a thread
 * list that loops: bounded, flagged, never a hang. */
static void test_bounds_and_failures(void **state)
{
	(void)state;
	/* Long chains, which do not loop: frames one after another. */
	static struct fake_frame chain[TP_WALK_STEPS + 8];
	struct fake_frame loop = {0}, other = {0};
	struct fake_ts ts = {.frame = A(&loop)};
	struct fake_interp in = {.tstate_head = A(&ts)};
	uint64_t head = A(&in);
	struct pyproc pp;
	struct pywalk w;

	/* A frame that is its own caller: the frame once, then the error. */
	loop.back = A(&loop);
	loop.code = 0x100000;
	fake_pyproc(&pp, TP_LF_INTERP_FRAME | TP_LF_LASTI_PTR | TP_LF_OWNER, &head);
	assert_int_equal(pywalk_read(&pp, &w), 0);
	assert_int_equal(w.threads[0].nframes, 1);
	assert_int_equal(w.threads[0].err, TP_ERR_FRAME_LOOP);
	pywalk_free(&w);

	/* Two frames that call each other: each once. */
	loop.back = A(&other);
	other.back = A(&loop);
	other.code = 0x200000;
	assert_int_equal(pywalk_read(&pp, &w), 0);
	assert_int_equal(w.threads[0].nframes, 2);
	assert_int_equal(w.threads[0].err, TP_ERR_FRAME_LOOP);
	pywalk_free(&w);

	/* A stale caller link to an object, not a frame (3.12, sampled in
	 * its generic CALL): where the code would be, its reference count,
	 * small or 3.12's immortal one. Not one frame of it is kept. */
	other.back = A(&other);
	const uint64_t refcnts[] = {0, 3, 24, 0xFFFFFFFF};
	for (size_t i = 0; i < sizeof(refcnts) / sizeof(refcnts[0]); i++) {
		other.code = refcnts[i];
		assert_int_equal(pywalk_read(&pp, &w), 0);
		assert_int_equal(w.threads[0].nframes, 1);
		assert_int_equal(w.threads[0].err, TP_ERR_FRAME_LOOP);
		pywalk_free(&w);
	}
	/* The same on <= 3.10's frame objects. */
	pp.tp.off.flags = TP_LF_SELF_CLASS;
	assert_int_equal(pywalk_read(&pp, &w), 0);
	assert_int_equal(w.threads[0].nframes, 1);
	assert_int_equal(w.threads[0].err, TP_ERR_FRAME_LOOP);
	pywalk_free(&w);
	other.code = 0x200000;
	assert_int_equal(pywalk_read(&pp, &w), 0);
	assert_int_equal(w.threads[0].nframes, 2);
	assert_int_equal(w.threads[0].err, TP_ERR_FRAME_LOOP);
	pywalk_free(&w);
	pp.tp.off.flags = TP_LF_INTERP_FRAME | TP_LF_LASTI_PTR | TP_LF_OWNER;

	/* Deeper than a stack holds: cut at TP_MAX_FRAMES. */
	for (size_t i = 0; i < sizeof(chain) / sizeof(chain[0]); i++) {
		chain[i].code = 0x100000 + 16 * (i % 4);
		chain[i].back = i + 1 < sizeof(chain) / sizeof(chain[0]) ? A(&chain[i + 1]) : 0;
	}
	ts.frame = A(&chain[0]);
	assert_int_equal(pywalk_read(&pp, &w), 0);
	assert_int_equal(w.threads[0].nframes, TP_MAX_FRAMES);
	assert_int_equal(w.threads[0].err, TP_ERR_DEPTH);
	pywalk_free(&w);

	/* Only shims: nothing kept, still bounded, by the steps the BPF
	 * walker has (its tail calls). */
	for (size_t i = 0; i < sizeof(chain) / sizeof(chain[0]); i++)
		chain[i].owner = 4;
	assert_int_equal(pywalk_read(&pp, &w), 0);
	assert_int_equal(w.threads[0].nframes, 0);
	assert_int_equal(w.threads[0].err, TP_ERR_STEPS);
	pywalk_free(&w);
	ts.frame = A(&loop);

	/* A back pointer into nothing: what was read, and the error. */
	loop.owner = 0;
	loop.back = 8;
	assert_int_equal(pywalk_read(&pp, &w), 0);
	assert_int_equal(w.threads[0].nframes, 1);
	assert_int_equal(w.threads[0].err, TP_ERR_FRAME);
	pywalk_free(&w);

	/* A thread list that loops. */
	loop.back = 0;
	ts.next = A(&ts);
	assert_int_equal(pywalk_read(&pp, &w), 0);
	assert_int_equal(w.nthreads, PYWALK_MAX_THREADS);
	assert_int_equal(w.err, TP_ERR_THREAD_LIMIT);
	pywalk_free(&w);

	/* No interpreter yet: no threads, no error. */
	uint64_t none = 0;
	pp.tp.interp_head_addr = A(&none);
	assert_int_equal(pywalk_read(&pp, &w), 0);
	assert_int_equal(w.nthreads, 0);
	pywalk_free(&w);

	/* The list head unreadable. */
	pp.tp.interp_head_addr = 16;
	assert_int_equal(pywalk_read(&pp, &w), -EFAULT);
	pywalk_free(&w);
}

/* <= 3.10 has no native_thread_id: the tid comes from struct pthread. */
static void test_tid_from_pthread(void **state)
{
	(void)state;
	struct fake_ts ts = {.thread_id = (uint64_t)pthread_self()};
	struct fake_interp in = {.tstate_head = A(&ts)};
	uint64_t head = A(&in);
	struct pyproc pp;
	struct pywalk w;

	fake_pyproc(&pp, TP_LF_SELF_CLASS, &head);
	pp.layout.ts_native_thread_id = -1;
	/* Our own thread: the real glibc struct pthread, tid at 0x2d0. */
	assert_int_equal(pywalk_read(&pp, &w), 0);
	assert_int_equal(w.threads[0].tid, my_tid());
	assert_int_equal(w.tid_source, PYWALK_TID_PTHREAD);
	assert_int_equal(w.pthread_tid_off, 0x2d0);
	pywalk_free(&w);

	/* Another layout: found by scanning, checked against /proc. */
	static uint8_t other[1024];
	pid_t tid = my_tid();
	memcpy(other + 40, &tid, sizeof(tid));
	ts.thread_id = A(other);
	assert_int_equal(pywalk_read(&pp, &w), 0);
	assert_int_equal(w.threads[0].tid, my_tid());
	assert_int_equal(w.pthread_tid_off, 40);
	pywalk_free(&w);

	/* Nothing that matches: no tid, the thread is still there. */
	memset(other, 0, sizeof(other));
	assert_int_equal(pywalk_read(&pp, &w), 0);
	assert_int_equal(w.nthreads, 1);
	assert_int_equal(w.threads[0].tid, 0);
	assert_int_equal(w.tid_source, PYWALK_TID_NONE);
	pywalk_free(&w);
}

static void test_tid_offset_choice(void **state)
{
	(void)state;
	static uint8_t a[1024], b[1024];
	const uint8_t *bufs[] = {a, b};
	pid_t tids[] = {100, 101, 102};
	pid_t v;

	assert_int_equal(pywalk_pthread_tid_offset(bufs, 2, sizeof(a), tids, 3), -ENOENT);
	assert_int_equal(pywalk_pthread_tid_offset(bufs, 0, sizeof(a), tids, 3), -ENOENT);
	/* The same tid in both is one thread's, not two: 0x2d0 scores 1 and
	 * loses to an offset where each holds its own. */
	v = 100;
	memcpy(a + 0x2d0, &v, 4);
	memcpy(b + 0x2d0, &v, 4);
	memcpy(a + 8, &v, 4);
	v = 101;
	memcpy(b + 8, &v, 4);
	assert_int_equal(pywalk_pthread_tid_offset(bufs, 2, sizeof(a), tids, 3), 8);
	/* The glibc offset wins whenever every thread agrees with it. */
	memcpy(b + 0x2d0, &v, 4);
	assert_int_equal(pywalk_pthread_tid_offset(bufs, 2, sizeof(a), tids, 3), 0x2d0);
	/* Too short to hold it: scanned. */
	assert_int_equal(pywalk_pthread_tid_offset(bufs, 2, 64, tids, 3), 8);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_interp_frames),	cmocka_unit_test(test_frame_objects),
	    cmocka_unit_test(test_bounds_and_failures), cmocka_unit_test(test_tid_from_pthread),
	    cmocka_unit_test(test_tid_offset_choice),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
