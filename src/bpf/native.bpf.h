// SPDX-License-Identifier: (BSD-2-Clause OR GPL-2.0-only)
/* native.bpf.h - native unwinding (walk/native.h,
 * doc/design/native-stacks.md, decision 12): each file's unwind table is an
 * inner array sized by user space; ufile_info says how it is laid out; umaps
 * leads from a process's address range to its file. The unwinder runs after
 * the interpreted walk, as programs of its own (walk_native) that tail-call
 * themselves, or in the calling program (native_whole).
 */
#ifndef TAIPAN_BPF_NATIVE_BPF_H
#define TAIPAN_BPF_NATIVE_BPF_H

/* A table (struct tp_ufile). */
struct urows {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(map_flags, BPF_F_INNER_MAP | BPF_F_MMAPABLE);
	__uint(max_entries, 1);
	__uint(key_size, sizeof(__u32));
	__uint(value_size, sizeof(__u64));
};

/* The rules every table's rows name (struct tp_urule): user space adds
 * them, never changes one. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, TP_MAX_URULES);
	__type(key, __u32);
	__type(value, struct tp_urule);
} urules SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY_OF_MAPS);
	__uint(max_entries, TP_MAX_UFILES);
	__type(key, __u32);
	__array(values, struct urows);
} ufiles SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, TP_MAX_UFILES);
	__type(key, __u32);
	__type(value, struct tp_ufile);
} ufile_info SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_LPM_TRIE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__uint(max_entries, TP_MAX_URANGES);
	__type(key, struct tp_umap_key);
	__type(value, struct tp_umap);
} umaps SEC(".maps");

/* When each tracked tgid last reported code in an unknown mapping. */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, TP_MAX_TARGETS);
	__type(key, __u32);
	__type(value, __u64);
} unmapped_sent SEC(".maps");

static __always_inline int tpn_mapping(struct tpw_state *st, __u64 ip, struct tp_umap *out)
{
	struct tp_umap_key k = {
	    .prefixlen = 96,
	    .tgid = st->s.pid,
	    .addr_be = __builtin_bswap64(ip),
	};
	struct tp_umap *m = bpf_map_lookup_elem(&umaps, &k);
	if (!m)
		return -1;
	*out = *m;
	return 0;
}

static __always_inline void *tpn_table(struct tpw_state *st, __u32 file)
{
	return bpf_map_lookup_elem(&ufiles, &file);
}

static __always_inline int tpn_file(struct tpw_state *st, __u32 file, struct tp_ufile *out)
{
	struct tp_ufile *f = bpf_map_lookup_elem(&ufile_info, &file);
	if (!f)
		return -1;
	*out = *f;
	return 0;
}

static __always_inline int tpn_elem(struct tpw_state *st, void *t, __u32 i, __u64 *v)
{
	const __u64 *e = bpf_map_lookup_elem(t, &i);
	if (!e)
		return -1;
	*v = *e;
	return 0;
}

static __always_inline const struct tp_urule *tpn_rule(struct tpw_state *st, __u32 id)
{
	return bpf_map_lookup_elem(&urules, &id);
}

#include "walk/native.h"

/* Tells user space that tgid ran code in a mapping it has not given BPF (a
 * library loaded since it read the process), at most once per
 * TP_ANNOUNCE_NS / 10. */
static __always_inline void report_unmapped(__u32 tgid, __u32 tid)
{
	__u64 now = bpf_ktime_get_ns();
	__u64 *last = bpf_map_lookup_elem(&unmapped_sent, &tgid);
	if (last && now - *last < TP_ANNOUNCE_NS / 10)
		return;
	bpf_map_update_elem(&unmapped_sent, &tgid, &now, BPF_ANY);
	send_event(TP_EV_UNMAPPED, tgid, tid);
	stat_inc(TP_STAT_NATIVE_UNMAPPED_SENT);
}

/* Starts the native walk at the user registers the sampled thread had when
 * it was interrupted or entered the kernel; false, with the error in the
 * sample, when they cannot be read. */
static __always_inline bool native_start(struct tpw_state *st)
{
	struct pt_regs regs;
	struct task_struct *task = bpf_get_current_task_btf();
	if (bpf_probe_read_kernel(&regs, sizeof(regs), (void *)bpf_task_pt_regs(task))) {
		st->s.flags |= TP_SF_NATIVE;
		st->s.uerr = TP_UERR_REGS;
		return false;
	}
	tpn_begin(st, regs.ip, regs.sp, regs.bp, regs.r10, regs.r11, regs.r13);
	if (st->s.pid == st->s.tid)
		st->u.top = BPF_CORE_READ(task, mm, start_stack);
	return true;
}

static long native_frame_cb(__u64 i, void *ctx)
{
	struct tpw_state *st = ((struct loop_ctx *)ctx)->st;
	if (st->u.done)
		return 1;
	tpn_frame(st);
	return st->u.done != 0;
}

/* The native walk native_start() started, whole, in the calling program:
 * the budget of the tail-call chain (TP_USTACK_MAX frames). */
static __always_inline void native_whole(struct tpw_state *st)
{
	struct loop_ctx l = {.st = st};
	bpf_loop(TP_USTACK_MAX, native_frame_cb, &l, 0);
	if (!st->u.done)
		st->s.uerr = TP_UERR_STEPS;
	if (st->s.uerr == TP_UERR_UNMAPPED)
		report_unmapped(st->s.pid, st->s.tid);
}

/* The native unwinder: a step, then the next program or the sample. With
 * loop set, the step's frames go through bpf_loop. */
static __always_inline int native_prog(struct bpf_perf_event_data *ctx, bool loop)
{
	struct tpw_state *st = cpu_state(NULL);
	if (!st)
		return 0;
	bool more;
	if (loop) {
		struct loop_ctx l = {.st = st};
		bpf_loop(TP_UFRAMES_PER_LOOP, native_frame_cb, &l, 0);
		more = !st->u.done;
	} else {
		more = tpn_step(st);
	}
	if (more) {
		st->s.walk_calls++;
		bpf_tail_call(ctx, &progs, TP_WALK_NATIVE);
		st->s.uerr = TP_UERR_STEPS;
	}
	if (st->s.uerr == TP_UERR_UNMAPPED)
		report_unmapped(st->s.pid, st->s.tid);
	submit(st);
	return 0;
}

SEC("perf_event")
int walk_native(struct bpf_perf_event_data *ctx)
{
	return native_prog(ctx, false);
}

SEC("perf_event")
int walk_native_loop(struct bpf_perf_event_data *ctx)
{
	return native_prog(ctx, true);
}

#endif /* TAIPAN_BPF_NATIVE_BPF_H */
