/* bpfrun.h - loading, attaching and talking to the BPF side. */
#ifndef TAIPAN_BPFRUN_H
#define TAIPAN_BPFRUN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/sampler.h"
#include "taipan_abi.h"

struct bpfrun;

/* The BPF programs as a session's sampler (sampler.h): bpfrun_open() behind
 * the table of operations. */
int bpfrun_sampler_open(const struct sampler_opts *o, sampler_handler fn, void *ctx,
			struct sampler *out, char *err, size_t errlen);

/* The ring buffer's size in bytes for ncpus CPUs online sampling at rate_hz,
 * with native frames, with off-CPU stacks (--mode wall, off-cpu). */
uint32_t bpfrun_ring_bytes(unsigned int ncpus, unsigned int rate_hz, bool native, bool offcpu);

/* Opens and loads the BPF programs and maps. Returns 0, or a negative errno
 * with a one-line explanation in err (missing privileges, old kernel, …). */
int bpfrun_open(const struct sampler_opts *o, sampler_handler fn, void *ctx, struct bpfrun **out,
		char *err, size_t errlen);
/* Attaches the tracepoints and one cpu-clock perf event per online CPU. */
int bpfrun_start(struct bpfrun *br, char *err, size_t errlen);
/* Detaches everything and frees. Accepts NULL. */
/* Detaches the perf events: no more samples. The tracepoints stay. */
void bpfrun_stop(struct bpfrun *br);
void bpfrun_free(struct bpfrun *br);

int bpfrun_add_target(struct bpfrun *br, uint32_t tgid);
int bpfrun_set_proc(struct bpfrun *br, uint32_t tgid, const struct tp_proc *p);
int bpfrun_del_proc(struct bpfrun *br, uint32_t tgid);

/* Reads and clears what BPF saw of tgid before it was classified (struct
 * tp_unknown) into out, which may be NULL; -ENOENT when nothing. */
int bpfrun_take_unknown(struct bpfrun *br, uint32_t tgid, struct tp_unknown *out);

/* Waits up to timeout_ms for records, then consumes everything waiting.
 * Returns the number of records consumed or a negative errno (-EINTR when a
 * signal arrived, which callers treat as a normal wakeup). */
int bpfrun_poll(struct bpfrun *br, int timeout_ms);

/* Sums the per-CPU counters into out[TP_STAT__COUNT]. */
int bpfrun_stats(struct bpfrun *br, uint64_t *out);

/* Native unwinding's maps: see struct sampler_ops. */
int bpfrun_put_table(struct bpfrun *br, uint32_t slot, const struct tp_ufile *info,
		     const uint32_t *words);
int bpfrun_put_rules(struct bpfrun *br, uint32_t first, uint32_t n, const struct tp_urule *rules);
int bpfrun_del_table(struct bpfrun *br, uint32_t slot);
int bpfrun_flush_tables(struct bpfrun *br);
int bpfrun_set_range(struct bpfrun *br, const struct tp_umap_key *k, const struct tp_umap *v);
int bpfrun_del_range(struct bpfrun *br, const struct tp_umap_key *k);

/* The time (CLOCK_MONOTONIC ns) of tgid's last exec that BPF saw, or
 * -ENOENT. */
int bpfrun_last_exec(struct bpfrun *br, uint32_t tgid, uint64_t *ns);

/* Names n (<= TP_KSYM_BATCH) kernel addresses: see struct sampler_ops. */
int bpfrun_kernel_names(struct bpfrun *br, const uint64_t *addr, uint32_t n,
			char (*name)[TP_KSYM_LEN]);

/* sampler_ops.snap_threads and set_away (sampler.h). */
int bpfrun_snap_threads(struct bpfrun *br, uint32_t tgid, struct tp_thread_snap **out, size_t *n);
int bpfrun_set_away(struct bpfrun *br, uint32_t tid, uint64_t away_ns, uint64_t ran_ns);

/* How many CPUs are sampled. */
int bpfrun_ncpus(const struct bpfrun *br);

#endif /* TAIPAN_BPFRUN_H */
