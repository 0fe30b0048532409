/* bpfrun.c - the BPF lifecycle: open, configure, load, fill, attach, consume,
 * with a single cleanup path. */
#include <errno.h>
#include <fcntl.h>
#include <linux/capability.h>
#include <linux/perf_event.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/mman.h>
#include <sys/sysinfo.h>
#include <unistd.h>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "core/bpfrun.h"
#include "util/log.h"
#include "taipan.skel.h"
#include "taipan_runtimes.h"

/* sampler_handler is handed to libbpf as is, without a cast: data is not
 * const there, and a call through a pointer of another type is undefined. */
_Static_assert(__builtin_types_compatible_p(sampler_handler, ring_buffer_sample_fn),
	       "sampler_handler must be libbpf's ring_buffer_sample_fn");

struct bpfrun {
	struct taipan_bpf *skel;
	struct ring_buffer *rb;
	struct bpf_link **perf_links;
	int *perf_fds;
	int ncpus;
	int nattached;
	unsigned int rate_hz;
	uint32_t ring_bytes; /* bpfrun_ring_bytes() */
	bool native;
	bool loop;   /* the bpf_loop programs were loaded */
	bool ksym;   /* ksym_names was loaded */
	bool offcpu; /* on_switch was loaded */
	struct bpf_link *mmap_link;
	struct bpf_link *switch_link;
	/* Unwind tables staged for ufiles, given to BPF by one batch
	 * update (bpfrun_flush_tables): each update of a map of maps waits
	 * for an RCU grace period, 8-11 ms, which one per file made a
	 * process that maps thousands of files stall taipan for seconds. */
	uint32_t *st_slots;
	int *st_fds; /* the inner map, or the placeholder's for a slot freed */
	struct tp_ufile *st_info;
	uint32_t nstaged, staged_cap;
	int empty_fd; /* the placeholder: an inner map of one empty row */
};

/* The programs of the tail-call table, by slot: the native unwinder's, then
 * each runtime's (taipan_runtimes.h). loop: its bpf_loop build, NULL if it
 * has one build only. */
struct slot_prog {
	uint32_t slot;
	const char *prog, *loop;
};

#define X_SLOT(slot, prog, loop) {slot, prog, loop},
static const struct slot_prog slot_progs[] = {{TP_WALK_NATIVE, "walk_native", "walk_native_loop"},
					      TP_RUNTIME_WALKERS(X_SLOT)};
#undef X_SLOT

static int libbpf_quiet(enum libbpf_print_level level, const char *fmt, va_list args)
{
	/* libbpf's warnings go to stderr only when asked for (TAIPAN_DEBUG=1):
	 * our own messages say what failed and what to do. */
	if (level == LIBBPF_DEBUG && !getenv("TAIPAN_DEBUG_VERIFIER"))
		return 0;
	if (!getenv("TAIPAN_DEBUG") && !getenv("TAIPAN_DEBUG_VERIFIER"))
		return 0;
	return vfprintf(stderr, fmt, args);
}

/* Whether to load the programs whose loops are bpf_loop calls (kernels
 * 5.17+): the verifier checks each loop body once, which makes loading
 * cheaper than the unrolled programs kept for older kernels (22 ms of the
 * kernel's CPU against 388 on the development VM).
 * TAIPAN_BPF_LOOP=0 takes the unrolled ones anyway (for tests and for a
 * kernel whose bpf_loop misbehaves). */
static bool use_bpf_loop(void)
{
	const char *env = getenv("TAIPAN_BPF_LOOP");
	if (env && !strcmp(env, "0"))
		return false;
	return libbpf_probe_bpf_helper(BPF_PROG_TYPE_PERF_EVENT, BPF_FUNC_loop, NULL) == 1;
}

/* Whether the kernel can run ksym_names: syscall programs that may call
 * bpf_snprintf (5.14+). TAIPAN_BPF_KSYMS=0 reads /proc/kallsyms instead. */
static bool use_bpf_ksyms(void)
{
	const char *env = getenv("TAIPAN_BPF_KSYMS");
	if (env && !strcmp(env, "0"))
		return false;
	return libbpf_probe_bpf_helper(BPF_PROG_TYPE_SYSCALL, BPF_FUNC_snprintf, NULL) == 1;
}

/* Whether this thread has cap in its effective set; true when that cannot
 * be told, so that no message blames a capability that is there. */
static bool have_cap(unsigned int cap)
{
	struct __user_cap_header_struct h = {.version = _LINUX_CAPABILITY_VERSION_3};
	struct __user_cap_data_struct d[_LINUX_CAPABILITY_U32S_3] = {0};

	if (syscall(SYS_capget, &h, d))
		return true;
	return d[cap / 32].effective & (1u << (cap % 32));
}

/* What to add to a message about a BPF or perf call that failed with err:
 * the capabilities it needs that this process lacks. Root without them
 * (a container, capsh --drop) is refused like anyone else, so the check is
 * on capabilities, not on the uid. CAP_SYS_ADMIN stands for both. */
static const char *privilege_hint(int err, bool need_bpf)
{
	if (err != -EPERM && err != -EACCES)
		return "";
	bool admin = have_cap(CAP_SYS_ADMIN);
	bool no_bpf = need_bpf && !admin && !have_cap(CAP_BPF);
	bool no_perfmon = !admin && !have_cap(CAP_PERFMON);
	if (no_bpf && no_perfmon)
		return " (taipan needs CAP_BPF and CAP_PERFMON, and has neither: run it as root, "
		       "or grant them)";
	if (no_bpf)
		return " (taipan needs CAP_BPF, which it does not have)";
	if (no_perfmon)
		return " (taipan needs CAP_PERFMON, which it does not have)";
	if (err == -EACCES)
		return " (the kernel's verifier rejected them)";
	return "";
}

/* Opens, configures and loads the BPF object into br->skel, with the
 * bpf_loop build of each looping program if br->loop, else the unrolled
 * one. 0, or a negative errno with err filled. */
/* The ring's size: a quarter of a second of samples from every CPU at the
 * rate, at the size of a typical one with native frames (about 1.3 KiB
 * packed), so that the reader may stall that long (a burst of new
 * libraries to read, a slow disk) and lose nothing; off-CPU stacks double
 * it. A power of two (BPF's rule), from TP_RING_BYTES (8 MiB, 2 CPUs at
 * 10 kHz) to TP_RING_MAX_BYTES (256 MiB). */
uint32_t bpfrun_ring_bytes(unsigned int ncpus, unsigned int rate_hz, bool native, bool offcpu)
{
	uint64_t want = (uint64_t)ncpus * rate_hz * (native ? 1536 : 768) / 4 * (offcpu ? 2 : 1);
	uint64_t bytes = TP_RING_BYTES;
	while (bytes < want && bytes < TP_RING_MAX_BYTES)
		bytes <<= 1;
	return (uint32_t)bytes;
}

static int load_skel(struct bpfrun *br, const struct sampler_opts *o, char *err, size_t errlen)
{
	int ret;
	br->skel = taipan_bpf__open();
	if (!br->skel) {
		ret = -errno;
		snprintf(err, errlen, "cannot open the BPF object: %s", strerror(-ret));
		return ret;
	}
	int online = get_nprocs();
	br->ring_bytes = bpfrun_ring_bytes(online > 0 ? (unsigned int)online : 1, o->rate_hz,
					   o->native, o->offcpu);
	ret = bpf_map__set_max_entries(br->skel->maps.events, br->ring_bytes);
	if (ret) {
		snprintf(err, errlen, "cannot size the ring buffer: %s", strerror(-ret));
		return ret;
	}
	br->skel->rodata->cfg.system_wide = o->system_wide;
	br->skel->rodata->cfg.kernel_stacks = o->kernel_stacks;
	br->skel->rodata->cfg.follow_children = o->follow_children;
	br->skel->rodata->cfg.self_tgid = (uint32_t)getpid();
	br->skel->rodata->cfg.native = o->native;
	br->skel->rodata->cfg.offcpu = o->offcpu;
	if (o->offcpu && getenv("TAIPAN_BENCH_EMPTY_SWITCH"))
		br->skel->rodata->cfg.offcpu = TP_OFFCPU_EMPTY;
	/* bench/overhead.py --native-cost: the cost of a perf event with a
	 * BPF program that does nothing. */
	br->skel->rodata->cfg.empty_sample = getenv("TAIPAN_BENCH_EMPTY_SAMPLE") != NULL;
	/* tests/functional/test_wall.py: the recovery of returns that no
	 * sched_switch reported, on demand. */
	const char *drop = getenv("TAIPAN_TEST_DROP_SWITCH_IN");
	if (o->offcpu && drop)
		br->skel->rodata->cfg.drop_in = (uint32_t)strtoul(drop, NULL, 10);
	/* Off-CPU stacks are walked in one program, through bpf_loop. */
	bpf_program__set_autoload(br->skel->progs.on_switch, o->offcpu && br->loop);
	bpf_program__set_autoattach(br->skel->progs.on_switch, false);
	/* Run by hand: the threads asleep when a wall recording starts. */
	bpf_program__set_autoload(br->skel->progs.snap_threads, o->offcpu && br->loop);
	bpf_program__set_autoattach(br->skel->progs.snap_threads, false);
	/* Attached by hand, and only for native unwinding: a kernel without
	 * syscall tracepoints still profiles, reading new mappings late. */
	bpf_program__set_autoload(br->skel->progs.on_mmap, o->native);
	bpf_program__set_autoattach(br->skel->progs.on_mmap, false);
	bpf_program__set_autoload(br->skel->progs.ksym_names, br->ksym);
	bpf_program__set_autoattach(br->skel->progs.ksym_names, false);
	/* Of each program that loops, one of its two builds is loaded. */
	bpf_program__set_autoload(br->skel->progs.on_sample, !br->loop);
	bpf_program__set_autoload(br->skel->progs.on_sample_loop, br->loop);
	bpf_program__set_autoattach(br->skel->progs.on_sample, false);
	bpf_program__set_autoattach(br->skel->progs.on_sample_loop, false);
	for (size_t i = 0; i < sizeof(slot_progs) / sizeof(slot_progs[0]); i++) {
		struct bpf_program *unrolled =
		    bpf_object__find_program_by_name(br->skel->obj, slot_progs[i].prog);
		struct bpf_program *looped =
		    slot_progs[i].loop
			? bpf_object__find_program_by_name(br->skel->obj, slot_progs[i].loop)
			: NULL;
		if (!unrolled || (slot_progs[i].loop && !looped)) {
			snprintf(err, errlen, "the BPF object has no program %s: a bug in taipan",
				 unrolled ? slot_progs[i].loop : slot_progs[i].prog);
			return -ENOENT;
		}
		bpf_program__set_autoattach(unrolled, false);
		if (!looped)
			continue;
		bpf_program__set_autoload(unrolled, !br->loop);
		bpf_program__set_autoload(looped, br->loop);
		bpf_program__set_autoattach(looped, false);
	}
	if (getenv("TAIPAN_DEBUG"))
		fprintf(stderr, "taipan: debug: BPF loops: %s\n",
			br->loop ? "bpf_loop" : "unrolled (no bpf_loop)");
	ret = bpf_map__set_max_entries(br->skel->maps.scratch, (uint32_t)br->ncpus);
	if (!ret)
		ret = bpf_map__set_max_entries(br->skel->maps.wire, (uint32_t)br->ncpus);
	if (ret) {
		snprintf(err, errlen, "cannot size the scratch maps: %s", strerror(-ret));
		return ret;
	}
	ret = taipan_bpf__load(br->skel);
	if (ret)
		snprintf(err, errlen,
			 "cannot load the BPF programs: %s%s; TAIPAN_DEBUG_VERIFIER=1 shows the "
			 "verifier log",
			 strerror(-ret), privilege_hint(ret, true));
	return ret;
}

int bpfrun_open(const struct sampler_opts *o, sampler_handler fn, void *ctx, struct bpfrun **out,
		char *err, size_t errlen)
{
	struct bpfrun *br = calloc(1, sizeof(*br));
	int ret = 0;
	if (!br)
		return -ENOMEM;
	libbpf_set_print(libbpf_quiet);
	br->empty_fd = -1;
	br->rate_hz = o->rate_hz;
	br->ncpus = libbpf_num_possible_cpus();
	if (br->ncpus <= 0) {
		ret = br->ncpus ? br->ncpus : -EINVAL;
		snprintf(err, errlen, "cannot count CPUs: %s", strerror(-ret));
		goto fail;
	}

	br->native = o->native;
	br->loop = use_bpf_loop();
	br->ksym = o->kernel_stacks && use_bpf_ksyms();
	ret = load_skel(br, o, err, errlen);
	if (ret && (br->loop || br->ksym) && ret != -EPERM) {
		/* A kernel that has bpf_loop (or syscall programs) but refuses
		 * these programs' use of it: the unrolled build, without
		 * ksym_names, may still load. */
		if (getenv("TAIPAN_DEBUG"))
			fprintf(stderr, "taipan: debug: %s; trying the unrolled build\n", err);
		taipan_bpf__destroy(br->skel);
		br->skel = NULL;
		br->loop = false;
		br->ksym = false;
		ret = load_skel(br, o, err, errlen);
	}
	if (ret)
		goto fail;
	log_debug("ring buffer: %u MiB, a quarter of a second of samples of %d CPUs at %u Hz",
		  br->ring_bytes >> 20, get_nprocs(), o->rate_hz);
	if (o->offcpu && !br->loop) {
		ret = -EOPNOTSUPP;
		snprintf(err, errlen,
			 "off-CPU samples (--mode wall, off-cpu) need a kernel whose BPF has "
			 "bpf_loop (Linux 5.17 or later)%s",
			 getenv("TAIPAN_BPF_LOOP") ? "; TAIPAN_BPF_LOOP=0 turns it off" : "");
		goto fail;
	}
	br->offcpu = o->offcpu;
	for (size_t i = 0; i < sizeof(slot_progs) / sizeof(slot_progs[0]) && !ret; i++) {
		const char *name =
		    br->loop && slot_progs[i].loop ? slot_progs[i].loop : slot_progs[i].prog;
		int fd = bpf_program__fd(bpf_object__find_program_by_name(br->skel->obj, name));
		uint32_t slot = slot_progs[i].slot;
		ret = bpf_map_update_elem(bpf_map__fd(br->skel->maps.progs), &slot, &fd, BPF_ANY);
	}
	if (ret) {
		ret = -errno;
		snprintf(err, errlen, "cannot fill the tail-call table: %s", strerror(-ret));
		goto fail;
	}
	br->rb = ring_buffer__new(bpf_map__fd(br->skel->maps.events), fn, ctx, NULL);
	if (!br->rb) {
		ret = -errno;
		snprintf(err, errlen, "cannot open the ring buffer: %s", strerror(-ret));
		goto fail;
	}
	*out = br;
	return 0;
fail:
	bpfrun_free(br);
	return ret;
}

int bpfrun_start(struct bpfrun *br, char *err, size_t errlen)
{
	int ret = taipan_bpf__attach(br->skel);
	if (ret) {
		snprintf(err, errlen, "cannot attach the process tracepoints: %s%s", strerror(-ret),
			 privilege_hint(ret, true));
		return ret;
	}
	if (br->native) {
		br->mmap_link = bpf_program__attach(br->skel->progs.on_mmap);
		if (!br->mmap_link && getenv("TAIPAN_DEBUG"))
			fprintf(stderr,
				"taipan: debug: no mmap tracepoint (%s): libraries loaded "
				"later are found at their first sample\n",
				strerror(errno));
	}
	if (br->offcpu && !br->switch_link) {
		br->switch_link = bpf_program__attach(br->skel->progs.on_switch);
		if (!br->switch_link) {
			ret = -errno;
			snprintf(err, errlen, "cannot attach to the sched_switch tracepoint: %s%s",
				 strerror(-ret), privilege_hint(ret, true));
			return ret;
		}
	}
	br->perf_links = calloc((size_t)br->ncpus, sizeof(*br->perf_links));
	br->perf_fds = malloc((size_t)br->ncpus * sizeof(*br->perf_fds));
	/* Every slot says "no descriptor" before anything can fail:
	 * bpfrun_free() closes each one that is >= 0, and zeros would be
	 * fd 0 for every CPU the loop below never reached. */
	for (int cpu = 0; br->perf_fds && cpu < br->ncpus; cpu++)
		br->perf_fds[cpu] = -1;
	if (!br->perf_links || !br->perf_fds) {
		snprintf(err, errlen, "cannot attach the perf events: %s", strerror(ENOMEM));
		return -ENOMEM;
	}
	for (int cpu = 0; cpu < br->ncpus; cpu++) {
		struct perf_event_attr attr = {
		    .type = PERF_TYPE_SOFTWARE,
		    .size = sizeof(attr),
		    .config = PERF_COUNT_SW_CPU_CLOCK,
		    .sample_freq = br->rate_hz,
		    .freq = 1,
		};
		int fd =
		    (int)syscall(__NR_perf_event_open, &attr, -1, cpu, -1, PERF_FLAG_FD_CLOEXEC);
		if (fd < 0) {
			if (errno == ENODEV) /* offline CPU */
				continue;
			ret = -errno;
			snprintf(err, errlen, "perf_event_open on CPU %d: %s%s", cpu,
				 strerror(errno), privilege_hint(ret, false));
			return ret;
		}
		br->perf_fds[cpu] = fd;
		br->perf_links[cpu] = bpf_program__attach_perf_event(
		    br->loop ? br->skel->progs.on_sample_loop : br->skel->progs.on_sample, fd);
		if (!br->perf_links[cpu]) {
			ret = -errno;
			snprintf(err, errlen, "cannot attach to the perf event on CPU %d: %s", cpu,
				 strerror(-ret));
			return ret;
		}
		br->nattached++;
	}
	if (!br->nattached) {
		snprintf(err, errlen, "no online CPU to sample");
		return -ENODEV;
	}
	return 0;
}

void bpfrun_stop(struct bpfrun *br)
{
	bpf_link__destroy(br->switch_link);
	br->switch_link = NULL;
	for (int cpu = 0; br->perf_links && cpu < br->ncpus; cpu++) {
		bpf_link__destroy(br->perf_links[cpu]);
		br->perf_links[cpu] = NULL;
	}
	for (int cpu = 0; br->perf_fds && cpu < br->ncpus; cpu++) {
		if (br->perf_fds[cpu] >= 0)
			close(br->perf_fds[cpu]);
		br->perf_fds[cpu] = -1;
	}
	br->nattached = 0;
}

void bpfrun_free(struct bpfrun *br)
{
	if (!br)
		return;
	bpfrun_stop(br);
	for (uint32_t i = 0; i < br->nstaged; i++)
		if (br->st_fds[i] != br->empty_fd)
			close(br->st_fds[i]);
	if (br->empty_fd >= 0)
		close(br->empty_fd);
	free(br->st_slots);
	free(br->st_fds);
	free(br->st_info);
	bpf_link__destroy(br->mmap_link);
	free(br->perf_links);
	free(br->perf_fds);
	ring_buffer__free(br->rb);
	taipan_bpf__destroy(br->skel);
	free(br);
}

int bpfrun_add_target(struct bpfrun *br, uint32_t tgid)
{
	uint8_t one = 1;
	if (bpf_map_update_elem(bpf_map__fd(br->skel->maps.targets), &tgid, &one, BPF_ANY))
		return -errno;
	return 0;
}

int bpfrun_set_proc(struct bpfrun *br, uint32_t tgid, const struct tp_proc *p)
{
	if (bpf_map_update_elem(bpf_map__fd(br->skel->maps.procs), &tgid, p, BPF_ANY))
		return -errno;
	return 0;
}

int bpfrun_del_proc(struct bpfrun *br, uint32_t tgid)
{
	if (bpf_map_delete_elem(bpf_map__fd(br->skel->maps.procs), &tgid) && errno != ENOENT)
		return -errno;
	return 0;
}

int bpfrun_last_exec(struct bpfrun *br, uint32_t tgid, uint64_t *ns)
{
	if (bpf_map_lookup_elem(bpf_map__fd(br->skel->maps.exec_ns), &tgid, ns))
		return -errno;
	return 0;
}

int bpfrun_take_unknown(struct bpfrun *br, uint32_t tgid, struct tp_unknown *out)
{
	struct tp_unknown u;
	int fd = bpf_map__fd(br->skel->maps.unknown_samples);
	/* Read and deleted in one step where the kernel can (5.14): BPF adds
	 * to it meanwhile. */
	if (bpf_map_lookup_and_delete_elem(fd, &tgid, &u)) {
		if (errno == ENOENT || bpf_map_lookup_elem(fd, &tgid, &u))
			return -ENOENT;
		bpf_map_delete_elem(fd, &tgid);
	}
	if (out)
		*out = u;
	return 0;
}

int bpfrun_poll(struct bpfrun *br, int timeout_ms)
{
	int n = ring_buffer__poll(br->rb, timeout_ms);
	if (n < 0)
		return n;
	/* Samples are sent without wakeups: take whatever is waiting. */
	int m = ring_buffer__consume(br->rb);
	if (m < 0)
		return m;
	return n + m;
}

int bpfrun_stats(struct bpfrun *br, uint64_t *out)
{
	int fd = bpf_map__fd(br->skel->maps.stats);
	uint64_t *vals = calloc((size_t)br->ncpus, sizeof(uint64_t));
	if (!vals)
		return -ENOMEM;
	for (uint32_t i = 0; i < TP_STAT__COUNT; i++) {
		out[i] = 0;
		if (bpf_map_lookup_elem(fd, &i, vals))
			continue;
		for (int c = 0; c < br->ncpus; c++)
			out[i] += vals[c];
	}
	free(vals);
	return 0;
}

/* Stages fd (owned from now on) with info for slot, replacing what was
 * staged for it. */
static int stage(struct bpfrun *br, uint32_t slot, int fd, const struct tp_ufile *info)
{
	for (uint32_t i = 0; i < br->nstaged; i++) {
		if (br->st_slots[i] != slot)
			continue;
		if (br->st_fds[i] != br->empty_fd)
			close(br->st_fds[i]);
		br->st_fds[i] = fd;
		br->st_info[i] = *info;
		return 0;
	}
	if (br->nstaged == br->staged_cap) {
		uint32_t cap = br->staged_cap ? br->staged_cap * 2 : 64;
		uint32_t *slots = realloc(br->st_slots, cap * sizeof(*slots));
		if (slots)
			br->st_slots = slots;
		int *fds = slots ? realloc(br->st_fds, cap * sizeof(*fds)) : NULL;
		if (fds)
			br->st_fds = fds;
		struct tp_ufile *inf = fds ? realloc(br->st_info, cap * sizeof(*inf)) : NULL;
		if (!inf) {
			if (fd != br->empty_fd)
				close(fd);
			return -ENOMEM;
		}
		br->st_info = inf;
		br->staged_cap = cap;
	}
	br->st_slots[br->nstaged] = slot;
	br->st_fds[br->nstaged] = fd;
	br->st_info[br->nstaged] = *info;
	br->nstaged++;
	return 0;
}

int bpfrun_put_table(struct bpfrun *br, uint32_t slot, const struct tp_ufile *info,
		     const uint32_t *words)
{
	uint32_t n = (2 * info->npages + info->nrows + 1) & ~1u; /* unwtab_words() */
	if (!slot || slot >= TP_MAX_UFILES || !info->nrows)
		return -EINVAL;
	/* Mappable, so that the rows go in by one copy: a batch update costs
	 * the kernel a copy and a check per row, which made the tables of a
	 * process's libraries most of taipan's start-up. Its elements are
	 * 8 bytes, two words each, as in memory (struct tp_ufile). */
	uint32_t elems = n / 2;
	LIBBPF_OPTS(bpf_map_create_opts, mo, .map_flags = BPF_F_INNER_MAP | BPF_F_MMAPABLE);
	int fd = bpf_map_create(BPF_MAP_TYPE_ARRAY, "urows", sizeof(uint32_t), sizeof(uint64_t),
				elems, &mo);
	if (fd < 0)
		return -errno;
	long page = sysconf(_SC_PAGESIZE);
	size_t len = ((size_t)elems * 8 + (size_t)page - 1) & ~((size_t)page - 1);
	char *mem = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (mem == MAP_FAILED) {
		int ret = -errno;
		close(fd);
		return ret;
	}
	memcpy(mem, words, (size_t)n * sizeof(*words));
	munmap(mem, len);
	return stage(br, slot, fd, info);
}

int bpfrun_put_rules(struct bpfrun *br, uint32_t first, uint32_t n, const struct tp_urule *rules)
{
	if (first > TP_MAX_URULES || n > TP_MAX_URULES - first)
		return -EINVAL;
	int fd = bpf_map__fd(br->skel->maps.urules);
	for (uint32_t i = 0; i < n; i++) {
		uint32_t k = first + i;
		if (bpf_map_update_elem(fd, &k, &rules[i], BPF_ANY))
			return -errno;
	}
	return 0;
}

int bpfrun_del_table(struct bpfrun *br, uint32_t slot)
{
	/* A map of maps cannot delete in a batch: the slot gets the
	 * placeholder in the next batch, which frees its table as well. */
	if (br->empty_fd < 0) {
		LIBBPF_OPTS(bpf_map_create_opts, mo, .map_flags = BPF_F_INNER_MAP);
		int fd = bpf_map_create(BPF_MAP_TYPE_ARRAY, "urows_none", sizeof(uint32_t),
					sizeof(uint64_t), 1, &mo);
		if (fd < 0)
			return -errno;
		br->empty_fd = fd;
	}
	return stage(br, slot, br->empty_fd, &(struct tp_ufile){0});
}

int bpfrun_flush_tables(struct bpfrun *br)
{
	int ret = 0;
	if (!br->nstaged)
		return 0;
	LIBBPF_OPTS(bpf_map_batch_opts, bo);
	__u32 n = br->nstaged;
	/* The layout first, then the table: BPF checks each entry's index
	 * against the table's own size. */
	if (bpf_map_update_batch(bpf_map__fd(br->skel->maps.ufile_info), br->st_slots, br->st_info,
				 &n, &bo))
		ret = -errno;
	n = br->nstaged;
	if (!ret && bpf_map_update_batch(bpf_map__fd(br->skel->maps.ufiles), br->st_slots,
					 br->st_fds, &n, &bo))
		ret = -errno;
	for (uint32_t i = 0; i < br->nstaged; i++)
		if (br->st_fds[i] != br->empty_fd)
			close(br->st_fds[i]); /* the outer map holds it */
	br->nstaged = 0;
	return ret;
}

int bpfrun_set_range(struct bpfrun *br, const struct tp_umap_key *k, const struct tp_umap *v)
{
	if (bpf_map_update_elem(bpf_map__fd(br->skel->maps.umaps), k, v, BPF_ANY))
		return -errno;
	return 0;
}

int bpfrun_del_range(struct bpfrun *br, const struct tp_umap_key *k)
{
	if (bpf_map_delete_elem(bpf_map__fd(br->skel->maps.umaps), k) && errno != ENOENT)
		return -errno;
	return 0;
}

int bpfrun_ncpus(const struct bpfrun *br)
{
	return br->ncpus;
}

/* The table of operations: the functions above, with the impl as their
 * struct bpfrun. */
static int op_start(void *impl, char *err, size_t errlen)
{
	return bpfrun_start(impl, err, errlen);
}

static void op_stop(void *impl)
{
	bpfrun_stop(impl);
}

static void op_free(void *impl)
{
	bpfrun_free(impl);
}

static int op_add_target(void *impl, uint32_t tgid)
{
	return bpfrun_add_target(impl, tgid);
}

static int op_set_proc(void *impl, uint32_t tgid, const struct tp_proc *p)
{
	return bpfrun_set_proc(impl, tgid, p);
}

static int op_del_proc(void *impl, uint32_t tgid)
{
	return bpfrun_del_proc(impl, tgid);
}

static int op_last_exec(void *impl, uint32_t tgid, uint64_t *ns)
{
	return bpfrun_last_exec(impl, tgid, ns);
}

static int op_take_unknown(void *impl, uint32_t tgid, struct tp_unknown *out)
{
	return bpfrun_take_unknown(impl, tgid, out);
}

static int op_poll(void *impl, int timeout_ms)
{
	return bpfrun_poll(impl, timeout_ms);
}

static int op_stats(void *impl, uint64_t *out)
{
	return bpfrun_stats(impl, out);
}

static int op_put_table(void *impl, uint32_t slot, const struct tp_ufile *info,
			const uint32_t *words)
{
	return bpfrun_put_table(impl, slot, info, words);
}

static int op_put_rules(void *impl, uint32_t first, uint32_t n, const struct tp_urule *rules)
{
	return bpfrun_put_rules(impl, first, n, rules);
}

static int op_del_table(void *impl, uint32_t slot)
{
	return bpfrun_del_table(impl, slot);
}

static int op_flush_tables(void *impl)
{
	return bpfrun_flush_tables(impl);
}

static int op_set_range(void *impl, const struct tp_umap_key *k, const struct tp_umap *v)
{
	return bpfrun_set_range(impl, k, v);
}

static int op_del_range(void *impl, const struct tp_umap_key *k)
{
	return bpfrun_del_range(impl, k);
}

int bpfrun_kernel_names(struct bpfrun *br, const uint64_t *addr, uint32_t n,
			char (*name)[TP_KSYM_LEN])
{
	if (!br->ksym || !br->skel->bss)
		return -ENOTSUP;
	if (n > TP_KSYM_BATCH)
		return -EINVAL;
	struct tp_ksym_req *req = &br->skel->bss->ksym_req;
	req->n = n;
	if (n)
		memcpy(req->addr, addr, n * sizeof(*addr));
	LIBBPF_OPTS(bpf_test_run_opts, run);
	int ret = bpf_prog_test_run_opts(bpf_program__fd(br->skel->progs.ksym_names), &run);
	if (ret)
		return ret < 0 ? ret : -EIO;
	for (uint32_t i = 0; i < n; i++) {
		memcpy(name[i], req->name[i], TP_KSYM_LEN);
		name[i][TP_KSYM_LEN - 1] = '\0';
	}
	return 0;
}

static int op_kernel_names(void *impl, const uint64_t *addr, uint32_t n, char (*name)[TP_KSYM_LEN])
{
	return bpfrun_kernel_names(impl, addr, n, name);
}

int bpfrun_snap_threads(struct bpfrun *br, uint32_t tgid, struct tp_thread_snap **out, size_t *n)
{
	*out = NULL;
	*n = 0;
	if (!br->offcpu || !br->skel->bss)
		return -ENOTSUP;
	br->skel->bss->snap_tgid = tgid;
	struct bpf_link *link = bpf_program__attach_iter(br->skel->progs.snap_threads, NULL);
	if (!link)
		return -errno;
	int ret = 0, fd = bpf_iter_create(bpf_link__fd(link));
	if (fd < 0) {
		ret = -errno;
		goto out;
	}
	size_t cap = 0, got = 0; /* bytes */
	char *buf = NULL;
	for (;;) {
		if (cap - got < sizeof(**out)) {
			size_t ncap = cap ? 2 * cap : 16 * sizeof(**out);
			char *nb = realloc(buf, ncap);
			if (!nb) {
				ret = -ENOMEM;
				break;
			}
			buf = nb;
			cap = ncap;
		}
		ssize_t r = read(fd, buf + got, cap - got);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0) {
			ret = -errno;
			break;
		}
		if (!r)
			break;
		got += (size_t)r;
	}
	close(fd);
	if (ret) {
		free(buf);
	} else {
		*out = (struct tp_thread_snap *)buf;
		*n = got / sizeof(**out);
	}
out:
	br->skel->bss->snap_tgid = 0;
	bpf_link__destroy(link);
	return ret;
}

static int op_snap_threads(void *impl, uint32_t tgid, struct tp_thread_snap **out, size_t *n)
{
	return bpfrun_snap_threads(impl, tgid, out, n);
}

#ifndef PIDFD_THREAD
#define PIDFD_THREAD O_EXCL /* linux/pidfd.h, 6.9 */
#endif

int bpfrun_set_away(struct bpfrun *br, uint32_t tid, uint64_t away_ns, uint64_t ran_ns)
{
	if (!br->offcpu)
		return -ENOTSUP;
	/* Task storage is keyed by a pidfd from user space: one of a thread
	 * that leads no process needs PIDFD_THREAD. */
	int fd = (int)syscall(SYS_pidfd_open, (pid_t)tid, PIDFD_THREAD);
	if (fd < 0 && errno == EINVAL)
		fd = (int)syscall(SYS_pidfd_open, (pid_t)tid, 0);
	if (fd < 0)
		return -errno;
	struct tp_switch_task t = {.away_ns = away_ns, .ran_ns = ran_ns, .target = TP_SWT_RUNTIME};
	/* BPF_NOEXIST: a thread that left the CPU since BPF watches has its
	 * own stack in the ring, and its storage stays as BPF made it. */
	int ret =
	    bpf_map_update_elem(bpf_map__fd(br->skel->maps.switch_tasks), &fd, &t, BPF_NOEXIST);
	ret = ret ? -errno : 0;
	close(fd);
	return ret;
}

static int op_set_away(void *impl, uint32_t tid, uint64_t away_ns, uint64_t ran_ns)
{
	return bpfrun_set_away(impl, tid, away_ns, ran_ns);
}

static const struct sampler_ops bpfrun_ops = {
    .start = op_start,
    .stop = op_stop,
    .free = op_free,
    .add_target = op_add_target,
    .set_proc = op_set_proc,
    .del_proc = op_del_proc,
    .take_unknown = op_take_unknown,
    .last_exec = op_last_exec,
    .poll = op_poll,
    .stats = op_stats,
    .put_table = op_put_table,
    .put_rules = op_put_rules,
    .del_table = op_del_table,
    .flush_tables = op_flush_tables,
    .set_range = op_set_range,
    .del_range = op_del_range,
    .kernel_names = op_kernel_names,
    .snap_threads = op_snap_threads,
    .set_away = op_set_away,
};

int bpfrun_sampler_open(const struct sampler_opts *o, sampler_handler fn, void *ctx,
			struct sampler *out, char *err, size_t errlen)
{
	struct bpfrun *br = NULL;
	int ret = bpfrun_open(o, fn, ctx, &br, err, errlen);
	if (ret)
		return ret;
	out->ops = &bpfrun_ops;
	out->impl = br;
	return 0;
}
