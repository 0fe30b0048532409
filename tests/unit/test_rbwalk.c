/* test_rbwalk.c - unit tests for Ruby's walker (src/ruby/walk.h), the one
 * BPF runs on every sample, over a fake process's memory: the thread
 * pointer to the EC through the DTV, glibc's and musl's, the control
 * frames with their flags, and every value a hostile process could set
 * wrong; and what rbproc.c and rbids.c find in Debian's libruby 3.1, sid's
 * stripped 3.3 and the 3.3 built against musl (the eval loop's functions,
 * the table of method names), checked against the layout generated from
 * each version's headers. tests/functional/
 * test_ruby.py checks the walk against live processes. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "need_file.h"

#include "proc/elfsym.h"
#include "ruby/rbids.h"
#include "ruby/rboffsets.h"
#include "ruby/rbproc.h"

/* The fake process: one buffer at a fixed address. */
#define BASE 0x10000ULL
#define MEM (512 << 10)
static uint8_t mem[MEM];

struct tpw_host {
	int reads;
	uint64_t stats[TP_STAT__COUNT];
};

static int fake_read(void *dst, size_t len, uint64_t addr)
{
	if (addr < BASE || addr - BASE > MEM || len > MEM - (addr - BASE))
		return -EFAULT;
	memcpy(dst, mem + (addr - BASE), len);
	return 0;
}

#define tpw_read(st, dst, len, addr) ((st)->host.reads++, fake_read((dst), (len), (addr)))
#define tpw_count(st, stat) ((st)->host.stats[(stat)]++)
#include "walk/state.h"
#include "ruby/walk.h"

/* Where the fake process keeps each part. */
#define GOT (BASE + 0x100)
#define FS (BASE + 0x200)
#define DTV (BASE + 0x400)
#define BLOCK (BASE + 0x800)
#define EC (BASE + 0x900)
#define STACK (BASE + 0x4000)
#define ENVS (STACK + 0x100) /* the environments, 32 bytes each: at the VM stack's bottom */
#define HEAP_ENV (BASE + 0x1000 + 16) /* one that moved to the heap */
#define STACK_WORDS 49152	      /* 384 KiB: the control frames at its end */
#define TH (BASE + 0xa00)	      /* the thread (rb_thread_t) */
#define RACTOR (BASE + 0xb00)	      /* its ractor */
#define DTPOFF 16
#define CFP 56 /* 3.3's control frame */

#define MAGIC_MASK 0x7fff0001u
#define MAGIC_CFUNC 0x55550001u
#define MAGIC_IFUNC 0x66660001u
#define MAGIC_METHOD 0x11110001u
#define FLAG_CFRAME 0x80u
#define FLAG_FINISH 0x20u

static void put64(uint64_t addr, uint64_t v)
{
	memcpy(mem + (addr - BASE), &v, sizeof(v));
}

static struct tpw_state *st;

static const struct tp_rb_proc payload = {
    .got = GOT,
    .dtpoff = DTPOFF,
    .magic_mask = MAGIC_MASK,
    .magic_cfunc = MAGIC_CFUNC,
    .flag_cframe = FLAG_CFRAME,
    .flag_finish = FLAG_FINISH,
    .ec_vm_stack = 0,
    .ec_vm_stack_size = 8,
    .ec_cfp = 16,
    .cfp_size = CFP,
    .cfp_pc = 0,
    .cfp_iseq = 16,
    .cfp_ep = 32,
    .ec_thread = 48,
    .thread_ractor = 24,
    .ractor_gvl_owner = 40,
    .thread_blocking = 64,
    .thread_status = 80,
    .status_shift = 2,
};

/* One control frame, n from the end (0: the dummy at the very end), with
 * its environment's flags and ep[-2]. */
static uint64_t frame_at(int n, uint64_t pc, uint64_t iseq, uint64_t flags, uint64_t me)
{
	uint64_t end = STACK + STACK_WORDS * 8 - CFP, cfp = end - (uint64_t)n * CFP;
	uint64_t ep = ENVS + (uint64_t)n * 32 + 16;
	put64(cfp + 0, pc);
	put64(cfp + 16, iseq);
	put64(cfp + 32, ep);
	put64(ep - 16, me);
	put64(ep, flags);
	return cfp;
}

/* A thread with EC at EC whose current frame is cfp. */
static void thread(uint64_t cfp)
{
	put64(GOT, 3);		    /* the module id */
	put64(FS + 8, DTV);	    /* the TCB's DTV */
	put64(DTV - 16, 8);	    /* the vector's length */
	put64(DTV + 3 * 16, BLOCK); /* module 3's block */
	put64(BLOCK + DTPOFF, EC);
	put64(EC + 0, STACK);
	put64(EC + 8, STACK_WORDS);
	put64(EC + 16, cfp);
}

static int setup(void **state)
{
	(void)state;
	memset(mem, 0, sizeof(mem));
	st = calloc(1, sizeof(*st));
	tp_rb_proc_set(&st->proc, &payload);
	tpw_begin(st);
	tpw_rb_begin(st);
	return st ? 0 : -1;
}

static int teardown(void **state)
{
	(void)state;
	free(st);
	return 0;
}

/* The whole walk as BPF chains it: the EC, then steps up to the tail
 * calls' budget. */
static void walk(void)
{
	uint64_t ec = tpw_rb_ec(st, FS);
	if (ec && tpw_rb_start(st, ec)) {
		for (int i = 0; i < TP_MAX_TAIL_CALLS && tpw_rb_step(st); i++)
			;
		tpw_rb_end(st);
	}
}

/* <main> (finish), a method, a C function (sort_by) that called back a
 * block (finish), an ifunc and a frame without pc between: the frames,
 * innermost first, with the groups of the VM's calls from C marked. */
static void test_frames_and_groups(void **state)
{
	(void)state;
	frame_at(0, 0, 0, MAGIC_METHOD | FLAG_CFRAME | FLAG_FINISH, 0); /* the dummy */
	frame_at(1, 0x1111, 0xa1, MAGIC_METHOD | FLAG_FINISH, 0);	/* <main> */
	frame_at(2, 0x2222, 0xa2, MAGIC_METHOD, 0);			/* a method */
	frame_at(3, 0, 0, MAGIC_CFUNC | FLAG_CFRAME, 0x5e);		/* sort_by */
	frame_at(4, 0, 0, MAGIC_IFUNC | FLAG_CFRAME, 0);		/* its C block */
	frame_at(5, 0x5555, 0xa5, MAGIC_METHOD | FLAG_FINISH, 0);	/* the block */
	uint64_t top = frame_at(6, 0, 0xa6, MAGIC_METHOD, 0);		/* no pc yet */
	thread(top);
	walk();
	assert_int_equal(st->s.err, TP_ERR_NONE);
	assert_int_equal(st->s.tstate, EC);
	assert_int_equal(st->s.nframes, 4);
	const struct tp_frame *f = st->s.frames;
	assert_true(f[0].code == 0xa5 && f[0].aux == 0x5555 && f[0].flags == TP_FF_ENTRY);
	assert_true(f[1].code == 0x5e && f[1].aux == 0 && f[1].flags == TP_FF_RB_CFUNC);
	assert_true(f[2].code == 0xa2 && f[2].aux == 0x2222 && f[2].flags == 0);
	assert_true(f[3].code == 0xa1 && f[3].aux == 0x1111 && f[3].flags == TP_FF_ENTRY);
	assert_false(st->s.flags & (TP_SF_TRUNCATED | TP_SF_TOP_SHIM));
}

/* A call of the VM from C whose first frame is one no profile shows (an
 * ifunc with the flag): the group ends at the frame shown before it; at
 * the top, the innermost call runs no frame shown (TP_SF_TOP_SHIM). */
static void test_finish_on_a_skipped_frame(void **state)
{
	(void)state;
	frame_at(1, 0x1111, 0xa1, MAGIC_METHOD | FLAG_FINISH, 0);
	frame_at(2, 0, 0, MAGIC_IFUNC | FLAG_CFRAME | FLAG_FINISH, 0);
	frame_at(3, 0x3333, 0xa3, MAGIC_METHOD, 0);
	uint64_t top = frame_at(4, 0, 0, MAGIC_IFUNC | FLAG_CFRAME | FLAG_FINISH, 0);
	thread(top);
	walk();
	assert_int_equal(st->s.nframes, 2);
	assert_int_equal(st->s.frames[0].flags, TP_FF_ENTRY); /* a3: its group ends there */
	assert_int_equal(st->s.frames[1].flags, TP_FF_ENTRY);
	assert_true(st->s.flags & TP_SF_TOP_SHIM);
}

/* Each hostile value of the way to the EC is refused with its error. */
static void test_thread_pointer_refusals(void **state)
{
	(void)state;
	uint64_t top = frame_at(1, 0x1111, 0xa1, MAGIC_METHOD | FLAG_FINISH, 0);
	struct {
		uint64_t addr, value;
		int err;
	} cases[] = {
	    {GOT, 0, TP_ERR_RB_TLS},			      /* module id 0 */
	    {GOT, 9, TP_ERR_RB_TLS},			      /* past the vector */
	    {GOT, 1ULL << 40, TP_ERR_RB_TLS},		      /* absurd */
	    {FS + 8, 0, TP_ERR_RB_TLS},			      /* no DTV */
	    {FS + 8, 0xdead0000, TP_ERR_RB_TLS},	      /* unreadable */
	    {DTV + 3 * 16, ~0ULL, TP_ERR_RB_TLS},	      /* not allocated */
	    {DTV + 3 * 16, 0, TP_ERR_RB_TLS},		      /* null block */
	    {BLOCK + DTPOFF, 0, TP_ERR_RB_NO_EC},	      /* the timer thread */
	    {EC + 8, 1ULL << 40, TP_ERR_RB_EC},		      /* a stack size no thread has */
	    {EC + 16, STACK - CFP, TP_ERR_RB_EC},	      /* below the stack */
	    {EC + 16, top + 8, TP_ERR_RB_EC},		      /* between frames */
	    {EC + 16, STACK + STACK_WORDS * 8, TP_ERR_RB_EC}, /* past the end */
	    {EC + 0, 0, TP_ERR_RB_EC},			      /* no stack */
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		thread(top);
		put64(cases[i].addr, cases[i].value);
		tpw_begin(st);
		tpw_rb_begin(st);
		walk();
		assert_int_equal(st->s.err, cases[i].err);
		assert_int_equal(st->s.nframes, 0);
	}
	/* A thread whose first frame is not pushed yet: nothing, no error. */
	thread(0);
	tpw_begin(st);
	tpw_rb_begin(st);
	walk();
	assert_int_equal(st->s.err, TP_ERR_NONE);
	assert_int_equal(st->s.nframes, 0);
}

/* A fresh walk of the thread whose thread pointer is fs finds no EC, with
 * error err. */
static void ec_refused(uint64_t fs, int err)
{
	tpw_begin(st);
	tpw_rb_begin(st);
	assert_int_equal(tpw_rb_ec(st, fs), 0);
	assert_int_equal(st->s.err, err);
}

/* A static ruby (local exec, got 0): the EC is read dtpoff below the
 * thread pointer, with no module id, DTV or block; a slot that cannot be
 * read, or no offset, is the thread pointer's error, a null EC the timer
 * thread's. */
static void test_local_exec(void **state)
{
	(void)state;
	struct tp_rb_proc le = payload;
	le.got = 0;
	le.dtpoff = 0x20;
	tp_rb_proc_set(&st->proc, &le);
	uint64_t top = frame_at(1, 0x1111, 0xa1, MAGIC_METHOD | FLAG_FINISH, 0);
	thread(top);
	put64(GOT, 0); /* nothing of the general-dynamic path is read */
	put64(FS + 8, 0);
	put64(FS - 0x20, EC);
	tpw_begin(st);
	tpw_rb_begin(st);
	walk();
	assert_int_equal(st->s.err, TP_ERR_NONE);
	assert_int_equal(st->s.tstate, EC);
	assert_int_equal(st->s.nframes, 1);
	put64(FS - 0x20, 0);
	ec_refused(FS, TP_ERR_RB_NO_EC);
	ec_refused(0x10, TP_ERR_RB_TLS);       /* below the offset */
	ec_refused(0xdead0000, TP_ERR_RB_TLS); /* unreadable */
	le.dtpoff = 0;
	tp_rb_proc_set(&st->proc, &le);
	ec_refused(FS, TP_ERR_RB_TLS);
}

/* musl's DTV (Alpine): module 3's block in 8-byte entry 3, the count of
 * modules in entry 0, where glibc's vector has 16-byte entries and its
 * length in entry -1. The walk goes the way the payload says, and a module
 * past the count, a null block or an unreadable entry is refused. */
static void test_musl_dtv(void **state)
{
	(void)state;
	struct tp_rb_proc musl = payload;
	musl.tls_libc = TP_RB_LIBC_MUSL;
	uint64_t top = frame_at(1, 0x1111, 0xa1, MAGIC_METHOD | FLAG_FINISH, 0);
	thread(top);		   /* glibc's vector: length 8, module 3 at DTV + 48 */
	put64(DTV - 16, 0);	   /* no glibc length */
	put64(DTV + 3 * 16, 0);	   /* nor glibc entry */
	put64(DTV, 3);		   /* musl: three modules */
	put64(DTV + 3 * 8, BLOCK); /* module 3's block */
	tp_rb_proc_set(&st->proc, &musl);
	tpw_begin(st);
	tpw_rb_begin(st);
	walk();
	assert_int_equal(st->s.err, TP_ERR_NONE);
	assert_int_equal(st->s.tstate, EC);
	assert_int_equal(st->s.nframes, 1);
	/* The same memory read as glibc's: nothing. */
	tp_rb_proc_set(&st->proc, &payload);
	ec_refused(FS, TP_ERR_RB_TLS);
	struct {
		uint64_t addr, value;
	} cases[] = {
	    {DTV, 2},		  /* module 3 past the count */
	    {DTV + 3 * 8, 0},	  /* null block */
	    {FS + 8, 8},	  /* a vector no thread has */
	    {FS + 8, MEM + BASE}, /* unreadable */
	};
	tp_rb_proc_set(&st->proc, &musl);
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		thread(top);
		put64(DTV, 3);
		put64(DTV + 3 * 8, BLOCK);
		put64(cases[i].addr, cases[i].value);
		ec_refused(FS, TP_ERR_RB_TLS);
	}
}

/* An environment pointer into nothing ends the walk at that frame with
 * the frames above it kept. */
static void test_unreadable_environment(void **state)
{
	(void)state;
	frame_at(1, 0x1111, 0xa1, MAGIC_METHOD | FLAG_FINISH, 0);
	uint64_t mid = frame_at(2, 0x2222, 0xa2, MAGIC_METHOD, 0);
	uint64_t top = frame_at(3, 0x3333, 0xa3, MAGIC_METHOD, 0);
	put64(mid + 32, 0xdead0000);
	thread(top);
	walk();
	assert_int_equal(st->s.err, TP_ERR_FRAME);
	assert_int_equal(st->s.nframes, 1);
	assert_int_equal(st->s.frames[0].code, 0xa3);
}

/* A stack of depth frames, each every-th of them a C block (skipped), the
 * others methods: its top frame. */
static uint64_t deep(int depth, int every)
{
	uint64_t end = STACK + STACK_WORDS * 8 - CFP, top = end - (uint64_t)depth * CFP;
	put64(ENVS + 16, MAGIC_METHOD);
	put64(ENVS + 48, MAGIC_IFUNC | FLAG_CFRAME);
	for (uint64_t cfp = top, i = 0; cfp < end; cfp += CFP, i++) {
		put64(cfp + 0, 0x1000 + cfp);
		put64(cfp + 16, 0xa0);
		put64(cfp + 32, i % every ? ENVS + 16 : ENVS + 48);
	}
	return top;
}

/* A stack deeper than the tail calls' budget: cut after TP_WALK_STEPS
 * control frames, skipped ones included, and marked, with one read a frame
 * and one a page of control frames; one with more frames shown than a
 * sample holds: cut at TP_MAX_FRAMES. Never past the VM stack. */
static void test_deep_stack_is_cut(void **state)
{
	(void)state;
	int depth = (STACK_WORDS * 8) / CFP - 1;
	assert_true(depth > 2 * TP_WALK_STEPS);
	thread(deep(depth, 2));
	st->host.reads = 0;
	walk();
	assert_int_equal(st->s.err, TP_ERR_STEPS);
	assert_true(st->s.flags & TP_SF_TRUNCATED);
	assert_int_equal(st->s.nframes, TP_WALK_STEPS / 2);
	/* A page of control frames, or of environments, a read. */
	assert_true(st->host.reads <= TP_WALK_STEPS * CFP / TP_WIN_PAGE + 12);

	thread(deep(depth, depth + 1));
	tpw_begin(st);
	tpw_rb_begin(st);
	walk();
	assert_int_equal(st->s.err, TP_ERR_DEPTH);
	assert_true(st->s.flags & TP_SF_TRUNCATED);
	assert_int_equal(st->s.nframes, TP_MAX_FRAMES);
}

/* The GVL: held by the ractor's running thread; else waiting when
 * runnable outside a blocking region, released otherwise; unknown when
 * the way to it cannot be read. */
static void test_gvl(void **state)
{
	(void)state;
	struct {
		uint64_t owner, blocking;
		uint8_t status;
		int want;
	} cases[] = {
	    {TH, 0, 0, TP_GIL_HELD},
	    {TH + 8, 0, 0, TP_GIL_WAITING},		/* runnable */
	    {TH + 8, 0, 1 << 2, TP_GIL_RELEASED},	/* THREAD_STOPPED */
	    {TH + 8, 0x1234, 0, TP_GIL_RELEASED},	/* a blocking region */
	    {TH + 8, 0, (1 << 2) | 3, TP_GIL_RELEASED}, /* other bits are not the status's */
	    {TH + 8, 0, 3, TP_GIL_WAITING},
	};
	uint64_t top = frame_at(1, 0x1111, 0xa1, MAGIC_METHOD | FLAG_FINISH, 0);
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		thread(top);
		put64(EC + 48, TH);
		put64(TH + 24, RACTOR);
		put64(RACTOR + 40, cases[i].owner);
		put64(TH + 64, cases[i].blocking);
		mem[TH + 80 - BASE] = cases[i].status;
		tpw_begin(st);
		tpw_rb_begin(st);
		walk();
		assert_int_equal(st->s.gil, cases[i].want);
		assert_int_equal(st->s.nframes, 1);
	}
	/* No ractor: unknown, and the frames all the same. */
	put64(TH + 24, 0);
	tpw_begin(st);
	tpw_rb_begin(st);
	walk();
	assert_int_equal(st->s.gil, TP_GIL_UNKNOWN);
	assert_int_equal(st->s.nframes, 1);
}

/* Debian's libruby: the eval loop's two functions, the table of method
 * names and the VM, where the layout generated from the headers says; and
 * whether it was built with YJIT. */
static void check_lib(const char *path, unsigned int minor, bool yjit)
{
	need_file(path);
	struct elf_file *ef;
	struct rb_range exec, core;
	struct rb_ids ids;
	const struct rb_offsets *o = rb_offsets_find(3, minor);
	assert_non_null(o);
	assert_int_equal(elf_file_open(path, &ef), 0);
	assert_int_equal(rbproc_find_eval(ef, &exec, &core), 0);
	assert_true(exec.lo && exec.hi > exec.lo && exec.hi - exec.lo < 4096);
	assert_true(core.hi - core.lo >= 4096);
	assert_true(core.hi <= exec.lo || core.lo >= exec.hi);
	uint64_t lo, hi;
	assert_int_equal(elf_file_fde_range(ef, exec.lo + 5, &lo, &hi), 0);
	assert_true(lo == exec.lo && hi == exec.hi);
	assert_int_equal(elf_file_fde_range(ef, 0, &lo, &hi), -ENOENT);
	assert_int_equal(rb_ids_find(ef, &ids), 0);
	assert_int_equal(ids.shift, o->id_scope_shift);
	assert_int_equal(ids.last_op, o->last_op_id);
	assert_true(ids.symbols);
	uint64_t vm;
	assert_int_equal(rbproc_find_vm(ef, (uint32_t)o->vm_at_exit, &vm), 0);
	assert_true(vm);
	assert_int_equal(rbproc_built_with_yjit(ef), yjit);
	elf_file_close(ef);
}

static void test_debian_3_1_eval_and_names(void **state)
{
	(void)state;
	check_lib("/usr/lib/x86_64-linux-gnu/libruby-3.1.so.3.1.2", 1, true);
	/* 3.1 exports rb_vm_exec: found by name. */
	struct elf_file *ef;
	struct rb_range exec, core;
	uint64_t sym;
	assert_int_equal(elf_file_open("/usr/lib/x86_64-linux-gnu/libruby-3.1.so.3.1.2", &ef), 0);
	assert_int_equal(rbproc_find_eval(ef, &exec, &core), 0);
	assert_int_equal(elf_file_symbol(ef, "rb_vm_exec", &sym, NULL), 0);
	assert_int_equal(exec.lo, sym);
	elf_file_close(ef);
}

static void test_sid_3_3_eval_and_names(void **state)
{
	(void)state;
	const char *roots = getenv("TAIPAN_ROOTS");
	char path[512];
	snprintf(path, sizeof(path), "%s/sid/usr/lib/x86_64-linux-gnu/libruby-3.3.so.3.3",
		 roots ? roots : "/var/cache/taipan-test");
	check_lib(path, 3, false); /* sid builds it without YJIT */
}

/* The stripped file at ROOTS/rel and its unstripped build at ROOTS/full_rel
 * (make roots): what check_lib() finds in the stripped one, and the eval
 * loop's functions found there are those the full one's symbol table
 * names; with vm, the VM pointer found through ruby_vm_at_exit's code too,
 * which the stripped file does not export. */
static void check_built(const char *rel, const char *full_rel, bool yjit, bool vm)
{
	const char *roots = getenv("TAIPAN_ROOTS");
	char stripped[512], full[512];
	snprintf(stripped, sizeof(stripped), "%s/%s", roots ? roots : "/var/cache/taipan-test",
		 rel);
	snprintf(full, sizeof(full), "%s/%s", roots ? roots : "/var/cache/taipan-test", full_rel);
	check_lib(stripped, 3, yjit);
	need_file(full);
	struct elf_file *ef;
	struct rb_range exec, core;
	uint64_t sym, vm_ptr = 0;
	assert_int_equal(elf_file_open(stripped, &ef), 0);
	assert_int_equal(rbproc_find_eval(ef, &exec, &core), 0);
	if (vm) {
		assert_int_equal(
		    rbproc_find_vm(ef, (uint32_t)rb_offsets_find(3, 3)->vm_at_exit, &vm_ptr), 0);
		assert_int_equal(elf_file_symbol(ef, "ruby_current_vm_ptr", &sym, NULL), -ENOENT);
	}
	elf_file_close(ef);
	assert_int_equal(elf_file_open(full, &ef), 0);
	assert_int_equal(elf_file_symbol(ef, "rb_vm_exec", &sym, NULL), 0);
	assert_int_equal(exec.lo, sym);
	assert_int_equal(elf_file_symbol(ef, "vm_exec_core", &sym, NULL), 0);
	assert_int_equal(core.lo, sym);
	if (vm) {
		assert_int_equal(elf_file_symbol(ef, "ruby_current_vm_ptr", &sym, NULL), 0);
		assert_int_equal(vm_ptr, sym);
	}
	elf_file_close(ef);
}

/* The static 3.3 of make roots, stripped: vm_exec through its exported
 * callers, each read only to its own end (gcc -O2 put them side by side,
 * and read past rb_iseq_eval's end their callees all agreed). */
static void test_static_3_3_eval_and_names(void **state)
{
	(void)state;
	check_built("ruby-3.3-static/ruby-stripped", "ruby-3.3-static/ruby", true, false);
}

/* The libruby 3.3 built against musl by make roots, stripped: the eval
 * loop's functions through their exported callers, the method names, and
 * the VM through ruby_vm_at_exit's code (which holds it in r12: a SIB
 * byte), as in sid's. No YJIT: no rustc for musl. */
static void test_musl_3_3_eval_and_names(void **state)
{
	(void)state;
	check_built("ruby-3.3-musl/stripped/libruby.so.3.3", "ruby-3.3-musl/libruby.so.3.3.8",
		    false, true);
}

/* A library that is not Ruby's: nothing found, nothing guessed. */
static void test_not_ruby(void **state)
{
	(void)state;
	struct elf_file *ef;
	struct rb_range exec, core;
	struct rb_ids ids;
	assert_int_equal(elf_file_open("/usr/lib/x86_64-linux-gnu/libc.so.6", &ef), 0);
	assert_int_equal(rbproc_find_eval(ef, &exec, &core), -ENOENT);
	assert_int_equal(exec.lo, 0);
	assert_int_equal(rb_ids_find(ef, &ids), -ENOENT);
	elf_file_close(ef);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_frames_and_groups, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_finish_on_a_skipped_frame, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_thread_pointer_refusals, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_local_exec, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_musl_dtv, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_unreadable_environment, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_deep_stack_is_cut, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_gvl, setup, teardown),
	    cmocka_unit_test(test_debian_3_1_eval_and_names),
	    cmocka_unit_test(test_sid_3_3_eval_and_names),
	    cmocka_unit_test(test_static_3_3_eval_and_names),
	    cmocka_unit_test(test_musl_3_3_eval_and_names),
	    cmocka_unit_test(test_not_ruby),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
