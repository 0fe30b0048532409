/* pythreads.h - the Python names of a process's threads ("MainThread",
 * threading.Thread(name="hasher")), read from the target's memory.
 *
 * The name is not in the thread state. It is the _name attribute of the
 * Thread object that threading._active maps the thread's ident to, and the
 * ident is PyThreadState.thread_id. So: sys.modules (the interpreter's
 * modules dict) -> "threading" -> its __dict__ -> "_active" -> each
 * {ident: Thread} -> the Thread's attributes -> "_name". Every dict layout
 * from 2.7 to 3.15 is read, instance attributes included (a __dict__, a
 * managed dict, or values inline in the object). Every loop and every read
 * is bounded: a dict that is being changed, or a corrupt one, gives fewer
 * names or none, never a crash or a hang.
 */
#ifndef TAIPAN_PYTHREADS_H
#define TAIPAN_PYTHREADS_H

#include <stddef.h>
#include <stdint.h>

#include "cpython/pyproc.h"

/* Bytes kept of a name, with its NUL; a longer name is cut at a character. */
#define PYTHREADS_NAME_MAX 128
/* Threads named per read: a process with more keeps the rest's OS names. */
#define PYTHREADS_MAX 4096
/* Memory reads per pythreads_read(): what a thread storm can cost. */
#define PYTHREADS_READ_BUDGET 65536

struct pythread_name {
	uint64_t ident; /* PyThreadState.thread_id, the key of threading._active */
	char name[PYTHREADS_NAME_MAX];
};

/* Reads the names of pp's threads from threading._active in every
 * interpreter into out[0..max). Returns how many (0 when threading has no
 * threads), or -ENOENT when the threading module is not imported,
 * -ENOTSUP when pp's layout lacks a field the reading needs, -ESRCH when the
 * process is gone, -EFAULT when what was read does not hold together. */
int pythreads_read(const struct pyproc *pp, struct pythread_name *out, size_t max);

/* The name of ident in names[0..n) (as pythreads_read() gives them), or
 * NULL. */
const char *pythreads_find(const struct pythread_name *names, size_t n, uint64_t ident);

/* A cache of one process's thread names for a sampler: per OS thread, its
 * thread state's ident; per ident, its name. The names are read again when a
 * sample shows a thread with none (a new thread), at most once per
 * PYTHREADS_RETRY_NS, and when they are older than PYTHREADS_STALE_NS (a
 * renamed thread). */
#define PYTHREADS_RETRY_NS 1000000000ULL
#define PYTHREADS_STALE_NS 10000000000ULL
struct pythreads;

/* NULL when out of memory. */
struct pythreads *pythreads_new(void);

/* Accepts NULL. */
void pythreads_free(struct pythreads *t);

/* The Python name of pp's thread tid, whose PyThreadState is at tstate, at
 * monotonic time now_ns; NULL when it has none (no Thread object, threading
 * not imported, the memory unreadable). tstate 0: the one an earlier call
 * gave for tid (an asyncio task's thread, --async), NULL when none did. The
 * string lives until the next call. */
const char *pythreads_name(struct pythreads *t, const struct pyproc *pp, uint32_t tid,
			   uint64_t tstate, uint64_t now_ns);

#endif /* TAIPAN_PYTHREADS_H */
