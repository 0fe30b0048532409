// SPDX-License-Identifier: (BSD-2-Clause OR GPL-2.0-only)
/* maps.bpf.h - what every BPF unit shares: the settings, the maps of
 * processes, the ring buffer and the counters, and how an event is sent.
 * Included first by taipan.bpf.c.
 */
#ifndef TAIPAN_BPF_MAPS_BPF_H
#define TAIPAN_BPF_MAPS_BPF_H

const volatile struct tp_config cfg = {};

/* Processes of a runtime and known processes of none, keyed by tgid: one
 * lookup decides what a sample costs. LRU, so that a host with more
 * processes than entries evicts instead of failing; an evicted process is
 * announced again and user space, which still knows it, puts it back. */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, TP_MAX_PROCS);
	__type(key, __u32);
	__type(value, struct tp_proc);
} procs SEC(".maps");

/* Samples taken of each tgid before user space classified it: they are lost,
 * and user space reports them per process. */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, TP_MAX_TARGETS);
	__type(key, __u32);
	__type(value, struct tp_unknown);
} unknown_samples SEC(".maps");

/* The tgids to profile when not system-wide. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, TP_MAX_TARGETS);
	__type(key, __u32);
	__type(value, __u8);
} targets SEC(".maps");

/* When each unclassified tgid was last announced to user space. */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, TP_MAX_TARGETS);
	__type(key, __u32);
	__type(value, __u64);
} announced SEC(".maps");

/* tgid -> the time of its last exec (CLOCK_MONOTONIC ns). */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, TP_MAX_TARGETS);
	__type(key, __u32);
	__type(value, __u64);
} exec_ns SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, TP_RING_BYTES);
} events SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, TP_STAT__COUNT);
	__type(key, __u32);
	__type(value, __u64);
} stats SEC(".maps");

static __always_inline void stat_inc(__u32 idx)
{
	__u64 *v = bpf_map_lookup_elem(&stats, &idx);
	if (v)
		*v += 1;
}

/* include/linux/sched.h: set at the start of do_exit(). */
#define PF_EXITING 0x00000004

static __always_inline bool tracked(__u32 tgid)
{
	return cfg.system_wide || bpf_map_lookup_elem(&targets, &tgid);
}

static __always_inline void send_event_at(__u32 kind, __u32 tgid, __u32 tid, __u64 time_ns)
{
	struct tp_event ev = {
	    .kind = kind,
	    .pid = tgid,
	    .tid = tid,
	    .time_ns = time_ns,
	};
	if (bpf_ringbuf_output(&events, &ev, sizeof(ev), BPF_RB_FORCE_WAKEUP))
		stat_inc(TP_STAT_RING_FULL);
}

static __always_inline void send_event(__u32 kind, __u32 tgid, __u32 tid)
{
	send_event_at(kind, tgid, tid, bpf_ktime_get_ns());
}

/* Tells user space about a tgid it has not classified yet, at most once
 * per TP_ANNOUNCE_NS per tgid (the first answer may come while the process
 * is still mapping its libraries). */
static __always_inline void announce(__u32 tgid, __u32 tid)
{
	__u64 now = bpf_ktime_get_ns();
	__u64 *last = bpf_map_lookup_elem(&announced, &tgid);
	if (last && now - *last < TP_ANNOUNCE_NS)
		return;
	bpf_map_update_elem(&announced, &tgid, &now, BPF_ANY);
	send_event(TP_EV_DISCOVER, tgid, tid);
	stat_inc(TP_STAT_DISCOVER_SENT);
}

/* How samples, code objects and returns go into the ring: they wake the
 * reader only when a good amount is waiting. It polls on a timer anyway, and
 * a wakeup per record costs a context switch. In --mode wall it did worse:
 * the ring's default wakes a reader that has caught up, so a return woke
 * taipan, which preempted the target on its CPU, whose switch-out and
 * return woke it again, every 40 us while they shared a CPU. */
static __always_inline __u64 ring_flags(void)
{
	return bpf_ringbuf_query(&events, BPF_RB_AVAIL_DATA) > TP_RING_WAKEUP ? BPF_RB_FORCE_WAKEUP
									      : BPF_RB_NO_WAKEUP;
}

#endif /* TAIPAN_BPF_MAPS_BPF_H */
