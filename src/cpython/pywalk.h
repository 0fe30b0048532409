/* pywalk.h - the Python threads of a live process and their stacks, read from
 * user space with process_vm_readv: what `taipan dump` prints.
 *
 * The walk is the one the BPF programs run (src/cpython/walk.h), compiled for
 * user space, so it produces the same struct tp_frame and the symbolizer
 * names both alike.
 * The target keeps running: a stack that changes under the walk comes out
 * as it was read, with its error set where a read failed.
 */
#ifndef TAIPAN_PYWALK_H
#define TAIPAN_PYWALK_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "cpython/pyproc.h"
#include "taipan_abi.h"

/* Bounds that keep a corrupt or looping list from hanging the walk. A
 * thread's frames are bounded by the walker itself, as in BPF: at most
 * TP_MAX_FRAMES kept and TP_WALK_STEPS visited. */
/* Frames visited in all threads together: 4096 threads can share one
 * looping frame list, which per-thread bounds alone would walk 8M times. */
#define PYWALK_MAX_TOTAL_STEPS (1 << 18)
#define PYWALK_MAX_THREADS 4096
#define PYWALK_MAX_INTERPS 64

struct pywalk_thread {
	uint64_t tstate;	 /* PyThreadState address */
	uint64_t thread_id;	 /* PyThreadState.thread_id: the pthread_t */
	pid_t tid;		 /* OS thread id as /proc shows it, 0 when not found */
	unsigned int interp;	 /* index of its interpreter in the list, 0 = main */
	int err;		 /* enum tp_walk_err: why the stack is incomplete */
	int gil;		 /* enum tp_gil_state, as its frames were read */
	uint32_t nframes;	 /* Python frames in frames[] */
	struct tp_frame *frames; /* innermost first */
	uint64_t *frame_addrs;	 /* each frame's address (dump --locals) */
};

struct pywalk {
	struct pywalk_thread *threads; /* in the interpreters' list order */
	size_t nthreads;
	int err;	     /* enum tp_walk_err: the thread list itself was cut short */
	int tid_source;	     /* enum pywalk_tid_source */
	int pthread_tid_off; /* offset of tid in struct pthread, or -1 (<= 3.10) */
};

/* How thread states were matched with OS threads. */
enum pywalk_tid_source {
	PYWALK_TID_NONE = 0,	/* not found: threads are named by thread_id */
	PYWALK_TID_NATIVE = 1,	/* PyThreadState.native_thread_id (3.11+) */
	PYWALK_TID_PTHREAD = 2, /* the tid field of the C library's struct pthread */
};

/* Walks every thread state of every interpreter of pp->pid and each one's
 * frames, innermost first. Fills w, which the caller frees with
 * pywalk_free() in every case. Returns 0 when the interpreter list could be
 * read (a thread or stack read only in part is flagged in its err and still
 * returned), -ESRCH when the process is gone, -EFAULT when the interpreter
 * list is unreadable, -ENOMEM. */
int pywalk_read(const struct pyproc *pp, struct pywalk *w);

/* One thread's stack exactly as the BPF program samples it: the thread
 * state found by matching fsbase (the thread's pthread_self()) against the
 * interpreters' thread lists, then its frames. id is the sample's pid_tgid.
 * Fills *out's frames, tstate, gil, nframes, err and flags, and *anchors
 * (NULL: not wanted) with the entry frames passed. Returns 0 or -ENOMEM
 * (read failures are in out->err). */
int pywalk_sample(const struct pyproc *pp, uint64_t id, uint64_t fsbase, struct tp_sample *out,
		  struct tpw_anchors *anchors);

/* The frames of thread state tstate as the BPF program walks them once it
 * has found it (flags, entry marks, err and GIL state included), into *out,
 * and its anchors into *anchors (NULL: not wanted). Returns 0 or -ENOMEM
 * (read failures are in out->err). */
int pywalk_tstate(const struct pyproc *pp, uint64_t tstate, struct tp_sample *out,
		  struct tpw_anchors *anchors);

/* Frees what pywalk_read() allocated and zeroes w. Accepts a zeroed w. */
void pywalk_free(struct pywalk *w);

/* The offset of the tid field in a struct pthread, found in the target: the
 * known glibc x86-64 offset when every candidate agrees with it, else the
 * first offset under scan_len at which every thread's struct pthread holds
 * a distinct one of the given tids. pthreads[] are the structs' bytes as
 * read (the first scan_len bytes of each, all of them readable). Returns the
 * offset or -ENOENT. Exposed for the unit tests. */
int pywalk_pthread_tid_offset(const uint8_t *const *pthreads, size_t n, size_t scan_len,
			      const pid_t *tids, size_t ntids);

#endif /* TAIPAN_PYWALK_H */
