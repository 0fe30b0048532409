/* pywalk.c - walking a live process's thread states and frames from user
 * space, by the rules the BPF walkers follow (src/bpf/taipan.bpf.c).
 *
 * Everything is read with process_vm_readv while the target runs. Lists are
 * bounded (PYWALK_MAX_*), so a loop in a list that is being changed, or a
 * corrupt one, ends the walk with TP_ERR_TRUNCATED instead of hanging it.
 */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "memread.h"
#include "pywalk.h"

/* Py_TPFLAGS_TYPE_SUBCLASS: the object is itself a class (as in the BPF code). */
#define PY_TPFLAGS_TYPE_SUBCLASS (1UL << 31)
/* owner >= 3 is a C-stack shim, an entry frame or a sentinel (3.12+). */
#define PY_OWNER_NOT_PYTHON 3

/* glibc's struct pthread on x86-64 starts with tcbhead_t (704 bytes) and a
 * list_t (16 bytes); tid follows, at 0x2d0, in every glibc since 2.x that
 * Debian ships. It is checked against /proc/PID/task before it is used. */
#define GLIBC_X86_64_PTHREAD_TID 0x2d0
/* Bytes of each struct pthread read when looking for tid. */
#define PTHREAD_SCAN 1024

/* An OS thread of the target: its tid in our pid namespace, and in its own. */
struct task_ids {
	pid_t host, ns;
};

static int rd64(pid_t pid, uint64_t addr, uint64_t *v)
{
	*v = 0;
	return mem_read(pid, addr, v, sizeof(*v));
}

/* The tid of task in its innermost pid namespace: the last NSpid field. */
static pid_t ns_tid(pid_t pid, pid_t tid)
{
	char path[96], line[256];
	pid_t last = tid;
	snprintf(path, sizeof(path), "/proc/%d/task/%d/status", pid, tid);
	FILE *f = fopen(path, "re");
	if (!f)
		return tid;
	while (fgets(line, sizeof(line), f)) {
		if (strncmp(line, "NSpid:", 6))
			continue;
		char *p = line + 6, *end;
		for (;;) {
			long v = strtol(p, &end, 10);
			if (end == p)
				break;
			last = (pid_t)v;
			p = end;
		}
		break;
	}
	fclose(f);
	return last;
}

/* The target's threads from /proc/PID/task. Returns how many, or a negative
 * errno; *out is malloc'd. */
static int read_tasks(const struct pyproc *pp, struct task_ids **out)
{
	char path[64];
	struct task_ids *t = NULL;
	size_t n = 0, cap = 0;
	int err = 0;
	snprintf(path, sizeof(path), "/proc/%d/task", pp->pid);
	DIR *d = opendir(path);
	if (!d)
		return errno == ENOENT ? -ESRCH : -errno;
	struct dirent *de;
	while ((de = readdir(d))) {
		char *end;
		long tid = strtol(de->d_name, &end, 10);
		if (*end || tid <= 0)
			continue;
		if (n == cap) {
			size_t ncap = cap ? 2 * cap : 64;
			struct task_ids *nt = realloc(t, ncap * sizeof(*nt));
			if (!nt) {
				err = -ENOMEM;
				goto out;
			}
			t = nt;
			cap = ncap;
		}
		t[n].host = (pid_t)tid;
		/* Inside a pid namespace, Python and the C library hold the
		 * namespace's tids; /proc here shows ours. */
		t[n].ns = pp->ns_pid ? ns_tid(pp->pid, (pid_t)tid) : (pid_t)tid;
		n++;
	}
out:
	closedir(d);
	if (err) {
		free(t);
		return err;
	}
	*out = t;
	return (int)n;
}

static pid_t host_tid(const struct task_ids *t, size_t n, uint64_t ns)
{
	for (size_t i = 0; i < n; i++)
		if ((uint64_t)t[i].ns == ns)
			return t[i].host;
	return 0;
}

static bool in_tids(const pid_t *tids, size_t n, pid_t v)
{
	for (size_t i = 0; i < n; i++)
		if (tids[i] == v)
			return true;
	return false;
}

/* How many of the structs hold a distinct known tid at off. */
static size_t tid_score(const uint8_t *const *pthreads, size_t n, size_t off, const pid_t *tids,
			size_t ntids)
{
	size_t score = 0;
	for (size_t i = 0; i < n; i++) {
		pid_t v;
		memcpy(&v, pthreads[i] + off, sizeof(v));
		if (v <= 0 || !in_tids(tids, ntids, v))
			continue;
		bool dup = false;
		for (size_t j = 0; j < i && !dup; j++) {
			pid_t w;
			memcpy(&w, pthreads[j] + off, sizeof(w));
			dup = w == v;
		}
		if (!dup)
			score++;
	}
	return score;
}

int pywalk_pthread_tid_offset(const uint8_t *const *pthreads, size_t n, size_t scan_len,
			      const pid_t *tids, size_t ntids)
{
	if (!n || scan_len < sizeof(pid_t))
		return -ENOENT;
	size_t best = 0, best_off = 0;
	if (GLIBC_X86_64_PTHREAD_TID + sizeof(pid_t) <= scan_len) {
		best = tid_score(pthreads, n, GLIBC_X86_64_PTHREAD_TID, tids, ntids);
		if (best == n)
			return GLIBC_X86_64_PTHREAD_TID;
		best_off = GLIBC_X86_64_PTHREAD_TID;
	}
	/* Another C library, or another glibc layout: the offset at which
	 * the most threads hold their own tid. */
	for (size_t off = 0; off + sizeof(pid_t) <= scan_len; off += sizeof(pid_t)) {
		size_t s = tid_score(pthreads, n, off, tids, ntids);
		if (s > best) {
			best = s;
			best_off = off;
		}
	}
	return best ? (int)best_off : -ENOENT;
}

/* Fills the tid of every thread: native_thread_id where Python has it, else
 * through the C library's struct pthread, which thread_id points to. */
static int match_tids(const struct pyproc *pp, struct pywalk *w)
{
	struct task_ids *tasks = NULL;
	uint8_t *buf = NULL;
	const uint8_t **ptrs = NULL;
	pid_t *ns = NULL;
	size_t *which = NULL, nread = 0;
	int ntasks, err = 0;

	w->pthread_tid_off = -1;
	ntasks = read_tasks(pp, &tasks);
	if (ntasks < 0)
		return ntasks;
	if (pp->layout.ts_native_thread_id >= 0) {
		for (size_t i = 0; i < w->nthreads; i++) {
			uint64_t v;
			struct pywalk_thread *t = &w->threads[i];
			if (!rd64(pp->pid, t->tstate + (uint64_t)pp->layout.ts_native_thread_id,
				  &v))
				t->tid = host_tid(tasks, (size_t)ntasks, v);
			if (t->tid)
				w->tid_source = PYWALK_TID_NATIVE;
		}
		goto out;
	}
	if (!w->nthreads || !ntasks)
		goto out;
	buf = malloc(w->nthreads * PTHREAD_SCAN);
	ptrs = calloc(w->nthreads, sizeof(*ptrs));
	which = calloc(w->nthreads, sizeof(*which));
	ns = calloc((size_t)ntasks, sizeof(*ns));
	if (!buf || !ptrs || !which || !ns) {
		err = -ENOMEM;
		goto out;
	}
	for (int i = 0; i < ntasks; i++)
		ns[i] = tasks[i].ns;
	for (size_t i = 0; i < w->nthreads; i++) {
		uint8_t *b = buf + nread * PTHREAD_SCAN;
		if (mem_read(pp->pid, w->threads[i].thread_id, b, PTHREAD_SCAN))
			continue;
		ptrs[nread] = b;
		which[nread++] = i;
	}
	int off = pywalk_pthread_tid_offset(ptrs, nread, PTHREAD_SCAN, ns, (size_t)ntasks);
	if (off < 0)
		goto out;
	w->pthread_tid_off = off;
	for (size_t k = 0; k < nread; k++) {
		pid_t v;
		memcpy(&v, ptrs[k] + off, sizeof(v));
		struct pywalk_thread *t = &w->threads[which[k]];
		t->tid = v > 0 ? host_tid(tasks, (size_t)ntasks, (uint64_t)v) : 0;
		if (t->tid)
			w->tid_source = PYWALK_TID_PTHREAD;
	}
out:
	free(tasks);
	free(buf);
	free(ptrs);
	free(which);
	free(ns);
	return err;
}

/* <= 3.10: the class behind the first local, exactly as first_local_class()
 * in the BPF code computes it, so that `self.method` is named Class.method. */
static uint64_t first_local_class(const struct pyproc *pp, uint64_t frame)
{
	const struct tp_py_offsets *o = &pp->tp.off;
	uint64_t local0, type, tflags;
	if (rd64(pp->pid, frame + o->frame_localsplus, &local0) || !local0)
		return 0;
	if (rd64(pp->pid, local0 + o->obj_type, &type) || !type)
		return 0;
	if (rd64(pp->pid, type + o->type_flags, &tflags))
		return 0;
	return (tflags & PY_TPFLAGS_TYPE_SUBCLASS) ? local0 : type;
}

static uint64_t fbuf_u64(const uint8_t *b, uint16_t off)
{
	uint64_t v;
	memcpy(&v, b + off, sizeof(v));
	return v;
}

static int push_frame(struct pywalk_thread *t, uint32_t *cap, const struct tp_frame *f)
{
	if (t->nframes == *cap) {
		uint32_t ncap = *cap ? 2 * *cap : 64;
		struct tp_frame *nf = realloc(t->frames, ncap * sizeof(*nf));
		if (!nf)
			return -ENOMEM;
		t->frames = nf;
		*cap = ncap;
	}
	t->frames[t->nframes++] = *f;
	return 0;
}

/* The frames of thread t, innermost first, taking each frame visited from
 * *budget. Returns 0 or -ENOMEM; read failures end the walk and are
 * recorded in t->err. */
static int walk_frames(const struct pyproc *pp, struct pywalk_thread *t, unsigned int *budget)
{
	const struct tp_py_offsets *o = &pp->tp.off;
	uint32_t fl = o->flags, cap = 0;
	uint64_t frame = 0;
	uint8_t fb[TP_FRAME_BUF];
	int ret;

	if (fl & TP_LF_CFRAME) {
		uint64_t cframe;
		if (rd64(pp->pid, t->tstate + o->ts_frame, &cframe) ||
		    (cframe && rd64(pp->pid, cframe + o->cframe_current_frame, &frame))) {
			t->err = TP_ERR_READ_TSTATE;
			return 0;
		}
	} else if (rd64(pp->pid, t->tstate + o->ts_frame, &frame)) {
		t->err = TP_ERR_READ_TSTATE;
		return 0;
	}
	uint64_t code_mask = (fl & TP_LF_STACKREF) ? ~3ULL : ~0ULL;
	size_t span = o->frame_span;
	if (span > sizeof(fb))
		span = sizeof(fb);
	memset(fb, 0, sizeof(fb));
	for (unsigned int steps = 0; frame; steps++) {
		if (steps == PYWALK_MAX_STEPS || t->nframes == PYWALK_MAX_FRAMES || !*budget) {
			t->err = TP_ERR_TRUNCATED;
			break;
		}
		(*budget)--;
		if (mem_read(pp->pid, frame, fb, span)) {
			t->err = TP_ERR_READ_FRAME;
			break;
		}
		struct tp_frame f = {.code = fbuf_u64(fb, o->frame_code) & code_mask};
		uint64_t back = fbuf_u64(fb, o->frame_back);
		if (fl & TP_LF_INTERP_FRAME) {
			if ((fl & TP_LF_OWNER) && fb[o->frame_owner] >= PY_OWNER_NOT_PYTHON) {
				/* A shim: the Python frame below it entered an eval loop. */
				if (t->nframes)
					t->frames[t->nframes - 1].flags |= TP_FF_ENTRY;
				frame = back;
				continue;
			}
			f.pos = (uint32_t)(fbuf_u64(fb, o->frame_lasti) - f.code);
			if ((fl & TP_LF_IS_ENTRY) && fb[o->frame_is_entry])
				f.flags |= TP_FF_ENTRY;
		} else {
			uint32_t lasti;
			memcpy(&lasti, fb + o->frame_lasti, sizeof(lasti));
			f.pos = lasti;
			if (fl & TP_LF_SELF_CLASS)
				f.aux = first_local_class(pp, frame);
		}
		ret = push_frame(t, &cap, &f);
		if (ret)
			return ret;
		frame = back;
	}
	return 0;
}

static int push_thread(struct pywalk *w, size_t *cap, const struct pywalk_thread *t)
{
	if (w->nthreads == *cap) {
		size_t ncap = *cap ? 2 * *cap : 16;
		struct pywalk_thread *nt = realloc(w->threads, ncap * sizeof(*nt));
		if (!nt)
			return -ENOMEM;
		w->threads = nt;
		*cap = ncap;
	}
	w->threads[w->nthreads++] = *t;
	return 0;
}

int pywalk_read(const struct pyproc *pp, struct pywalk *w)
{
	const struct tp_py_offsets *o = &pp->tp.off;
	uint64_t interp = 0, ts = 0;
	unsigned int budget = PYWALK_MAX_TOTAL_STEPS;
	size_t cap = 0;
	int ret;

	memset(w, 0, sizeof(*w));
	w->pthread_tid_off = -1;
	ret = rd64(pp->pid, pp->tp.interp_head_addr, &interp);
	if (ret)
		return ret == -ESRCH ? -ESRCH : -EFAULT;
	for (unsigned int i = 0; interp; i++) {
		if (i == PYWALK_MAX_INTERPS) {
			w->err = TP_ERR_TRUNCATED;
			break;
		}
		if (rd64(pp->pid, interp + o->interp_tstate_head, &ts)) {
			w->err = TP_ERR_READ_INTERP;
			break;
		}
		while (ts) {
			struct pywalk_thread t = {.tstate = ts, .interp = i};
			if (w->nthreads == PYWALK_MAX_THREADS) {
				w->err = TP_ERR_TRUNCATED;
				break;
			}
			if (rd64(pp->pid, ts + o->ts_thread_id, &t.thread_id)) {
				w->err = TP_ERR_READ_TSTATE;
				break;
			}
			ret = push_thread(w, &cap, &t);
			if (ret)
				return ret;
			if (rd64(pp->pid, ts + o->ts_next, &ts)) {
				w->err = TP_ERR_READ_TSTATE;
				break;
			}
		}
		if (rd64(pp->pid, interp + o->interp_next, &interp))
			break;
	}
	for (size_t i = 0; i < w->nthreads; i++) {
		ret = walk_frames(pp, &w->threads[i], &budget);
		if (ret)
			return ret;
	}
	ret = match_tids(pp, w);
	return ret == -ENOMEM ? ret : 0;
}

void pywalk_free(struct pywalk *w)
{
	for (size_t i = 0; i < w->nthreads; i++)
		free(w->threads[i].frames);
	free(w->threads);
	memset(w, 0, sizeof(*w));
}
