/* sampler.h - what a session needs of the sampler, as a table of
 * operations: the BPF programs (bpfrun.c) in taipan, a fake that feeds
 * chosen events in the unit tests (tests/unit/fake_sampler.h). With it,
 * discovery, exec and exit races, markers and caches are tested without
 * the kernel. */
#ifndef TAIPAN_SAMPLER_H
#define TAIPAN_SAMPLER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "taipan_abi.h"

struct sampler_opts {
	bool system_wide;     /* every process; else only added targets */
	bool kernel_stacks;   /* collect kernel stacks */
	bool follow_children; /* children of targets become targets */
	bool native;	      /* unwind native stacks */
	bool offcpu;	      /* take stacks at sched_switch too (struct tp_config.offcpu) */
	unsigned int rate_hz; /* samples per second per CPU */
};

/* Called for each event record (struct tp_event or struct tp_sample); a
 * non-zero return stops the current poll. Exactly libbpf's
 * ring_buffer_sample_fn, which calls it for the BPF sampler. */
typedef int (*sampler_handler)(void *ctx, void *data, size_t size);

struct sampler_ops {
	/* Starts sampling. 0, or a negative errno with err filled. */
	int (*start)(void *impl, char *err, size_t errlen);
	/* Stops taking samples; the process tracepoints and the ring stay.
	 * May be NULL. */
	void (*stop)(void *impl);
	/* Stops and frees. Accepts NULL. */
	void (*free)(void *impl);
	/* Profile tgid from now on (not system-wide). */
	int (*add_target)(void *impl, uint32_t tgid);
	/* What BPF knows of tgid: how to walk it, or that it is not Python. */
	int (*set_proc)(void *impl, uint32_t tgid, const struct tp_proc *p);
	int (*del_proc)(void *impl, uint32_t tgid);
	/* Reads and clears what BPF saw of tgid before it was classified:
	 * samples, and time off the CPU. 0, or -ENOENT when nothing; out may
	 * be NULL (cleared only). */
	int (*take_unknown)(void *impl, uint32_t tgid, struct tp_unknown *out);
	/* The time (CLOCK_MONOTONIC ns) of tgid's last exec, or -ENOENT. May
	 * be NULL. */
	int (*last_exec)(void *impl, uint32_t tgid, uint64_t *ns);
	/* Waits up to timeout_ms, then hands every waiting record to the
	 * handler. The number of records, or a negative errno (-EINTR on a
	 * signal, which callers treat as a wakeup). */
	int (*poll)(void *impl, int timeout_ms);
	/* The counters, summed over CPUs, into out[TP_STAT__COUNT]. */
	int (*stats)(void *impl, uint64_t *out);
	/* Native unwinding (NULL in a sampler without it). put_table gives
	 * BPF a file's unwind table in slot (1 .. TP_MAX_UFILES - 1):
	 * info, then its words (unwtab_pack(): 2 * info->npages +
	 * info->nrows, rounded up to even), the page index first (struct
	 * tp_ufile). put_rules sets rules first ..
	 * first + n - 1 of the rules the rows name, at once; a table is put
	 * after the rules it names. del_table forgets a table. Both may
	 * only stage the change until flush_tables (may be NULL: nothing
	 * staged), which makes every staged one visible to BPF at once.
	 * set_range and del_range add and remove one prefix of a process's
	 * address space in the umaps trie, at once. */
	int (*put_table)(void *impl, uint32_t slot, const struct tp_ufile *info,
			 const uint32_t *words);
	int (*put_rules)(void *impl, uint32_t first, uint32_t n, const struct tp_urule *rules);
	int (*del_table)(void *impl, uint32_t slot);
	int (*flush_tables)(void *impl);
	int (*set_range)(void *impl, const struct tp_umap_key *k, const struct tp_umap *v);
	int (*del_range)(void *impl, const struct tp_umap_key *k);
	/* Names n (<= TP_KSYM_BATCH) kernel addresses the kernel's way
	 * ("%ps": symbol, " [module]" after a module's, "0x..." for none).
	 * 0, -ENOTSUP where the kernel cannot (the caller reads
	 * /proc/kallsyms), or another negative errno. May be NULL. */
	int (*kernel_names)(void *impl, const uint64_t *addr, uint32_t n,
			    char (*name)[TP_KSYM_LEN]);
	/* Off-CPU samplers (--mode wall, off-cpu), for the threads asleep when
	 * the recording starts; both may be NULL. snap_threads: tgid's
	 * threads now, malloc'd into *out (*n of them); 0, or a negative
	 * errno. set_away: thread tid has been off the CPU since away_ns,
	 * having run ran_ns (se.sum_exec_runtime) by then; its return is
	 * then told as any other's (TP_EV_SWITCH_IN). 0; -EEXIST when the
	 * sampler saw it leave the CPU since, and has its stack; another
	 * negative errno. */
	int (*snap_threads)(void *impl, uint32_t tgid, struct tp_thread_snap **out, size_t *n);
	int (*set_away)(void *impl, uint32_t tid, uint64_t away_ns, uint64_t ran_ns);
};

struct sampler {
	const struct sampler_ops *ops;
	void *impl;
};

/* Opens a sampler that will hand its records to fn(ctx, ...). Fills *out.
 * Returns 0, or a negative errno with a one-line explanation in err. */
typedef int (*sampler_open_fn)(const struct sampler_opts *o, sampler_handler fn, void *ctx,
			       struct sampler *out, char *err, size_t errlen);

#endif /* TAIPAN_SAMPLER_H */
