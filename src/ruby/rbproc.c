/* rbproc.c - a Ruby process as taipan reads it (rbproc.h). */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>

#include "proc/mapfile.h"
#include "proc/procfs.h"
#include "proc/procmaps.h"
#include "ruby/ectls.h"
#include "ruby/rbproc.h"

/* Bytes of an exported function read for the calls it makes. */
#define CALLER_SCAN 256
/* vm_exec_core is the VM's interpreter, one function of every instruction:
 * tens of KiB in every build. A callee of vm_exec smaller than this is not
 * it. */
#define CORE_MIN 4096
/* The most bytes of vm_exec read for its calls. */
#define EXEC_MAX 8192

/* The FDE that starts exactly at vaddr: [vaddr, *end). */
static bool fde_at(struct elf_file *ef, uint64_t vaddr, uint64_t *end)
{
	uint64_t lo, hi;
	return !elf_file_fde_range(ef, vaddr, &lo, &hi) && lo == vaddr && (*end = hi) > lo;
}

/* The targets of the direct calls and jumps (e8/e9 rel32) in [at, at+len)
 * that begin a function, into t[0..max); how many. */
static size_t direct_targets(struct elf_file *ef, uint64_t at, size_t len, uint64_t *t, size_t max)
{
	uint8_t code[EXEC_MAX];
	size_t n = 0;
	if (len > sizeof(code))
		len = sizeof(code);
	if (elf_file_read(ef, at, code, len))
		return 0;
	for (size_t i = 0; i + 5 <= len && n < max; i++) {
		if (code[i] != 0xe8 && code[i] != 0xe9)
			continue;
		int32_t rel;
		memcpy(&rel, code + i + 1, sizeof(rel));
		uint64_t to = at + i + 5 + (int64_t)rel, end;
		if (fde_at(ef, to, &end))
			t[n++] = to;
	}
	return n;
}

int rbproc_find_eval(struct elf_file *ef, struct rb_range *exec, struct rb_range *core)
{
	uint64_t at, size, end;
	*exec = (struct rb_range){0};
	*core = (struct rb_range){0};
	if (!elf_file_symbol(ef, "rb_vm_exec", &at, &size) && fde_at(ef, at, &end)) {
		*exec = (struct rb_range){at, end};
	} else {
		/* 3.3 hides vm_exec. rb_iseq_eval and rb_iseq_eval_main, which
		 * are exported, each end in a call of it: the one function both
		 * call. Each is read to its end, not into the next function
		 * (gcc -O2 puts rb_iseq_eval_main right after rb_iseq_eval, in
		 * a static ruby: their callees would all be common). */
		uint64_t a[64], b[64], fa, fb, s;
		size_t na = 0, nb = 0;
		if (!elf_file_symbol(ef, "rb_iseq_eval", &fa, &s))
			na = direct_targets(ef, fa, s && s < CALLER_SCAN ? s : CALLER_SCAN, a, 64);
		if (!elf_file_symbol(ef, "rb_iseq_eval_main", &fb, &s))
			nb = direct_targets(ef, fb, s && s < CALLER_SCAN ? s : CALLER_SCAN, b, 64);
		uint64_t found = 0;
		int agree = 0;
		for (size_t i = 0; i < na; i++)
			for (size_t j = 0; j < nb; j++)
				if (a[i] == b[j] && a[i] != found) {
					found = a[i];
					agree++;
				}
		if (agree != 1 || !fde_at(ef, found, &end))
			return -ENOENT;
		*exec = (struct rb_range){found, end};
	}
	/* vm_exec_core: vm_exec's largest callee, and a large one. */
	uint64_t t[256];
	size_t n = direct_targets(ef, exec->lo, exec->hi - exec->lo, t, 256);
	for (size_t i = 0; i < n; i++)
		if (fde_at(ef, t[i], &end) && end - t[i] >= CORE_MIN &&
		    end - t[i] > core->hi - core->lo)
			*core = (struct rb_range){t[i], end};
	return 0;
}

/* Bytes of ruby_vm_at_exit read for its loads. */
#define AT_EXIT_SCAN 96

int rbproc_find_vm(struct elf_file *ef, uint32_t at_exit, uint64_t *vm_ptr)
{
	uint64_t fn, size;
	uint8_t c[AT_EXIT_SCAN];
	*vm_ptr = 0;
	if (!elf_file_symbol(ef, "ruby_current_vm_ptr", vm_ptr, &size))
		return 0;
	if (!at_exit || elf_file_symbol(ef, "ruby_vm_at_exit", &fn, &size) ||
	    elf_file_read(ef, fn, c, sizeof(c)))
		return -ENOENT;
	for (size_t i = 0; i + 7 <= sizeof(c); i++) {
		/* mov disp32(%rip),%reg: REX.W (48, or 4c for r8-r15) 8b, ModRM
		 * 00 reg 101 */
		if ((c[i] != 0x48 && c[i] != 0x4c) || c[i + 1] != 0x8b || (c[i + 2] & 0xc7) != 0x05)
			continue;
		int32_t rel;
		memcpy(&rel, c + i + 3, sizeof(rel));
		uint8_t reg = (uint8_t)((c[i + 2] >> 3) & 7), rexb = c[i] == 0x4c ? 0x41 : 0;
		/* Then a load or a store at disp32(%reg): [REX] 8b/89, ModRM 10 x
		 * reg, disp32 = at_exit (as REX.B says which register set). A
		 * base of rsp or r12 (reg 4: r12 where a build keeps frame
		 * pointers and rbx is taken) takes a SIB byte, 24, before the
		 * displacement. */
		size_t sib = reg == 4;
		for (size_t j = i + 7; j + 6 + sib <= sizeof(c); j++) {
			int32_t d;
			memcpy(&d, c + j + 2 + sib, sizeof(d));
			bool rex_ok = j > i + 7 && (c[j - 1] & 0xf0) == 0x40
					  ? (c[j - 1] & 0x41) == (0x40 | rexb)
					  : !rexb;
			if ((c[j] == 0x8b || c[j] == 0x89) && (c[j + 1] & 0xc7) == (0x80 | reg) &&
			    (!sib || c[j + 2] == 0x24) && (uint32_t)d == at_exit && rex_ok) {
				*vm_ptr = fn + i + 7 + (int64_t)rel;
				return 0;
			}
		}
		return -ENOENT; /* the VM is the function's first load */
	}
	return -ENOENT;
}

/* Bytes of rb_during_gc read for its loads. */
#define DURING_GC_SCAN 64

int rbproc_find_gc(struct elf_file *ef, uint32_t objspace, uint32_t *flags, uint32_t *bit)
{
	uint64_t fn, size;
	uint8_t c[DURING_GC_SCAN];
	*flags = *bit = 0;
	if (!objspace || elf_file_symbol(ef, "rb_during_gc", &fn, &size) ||
	    elf_file_read(ef, fn, c, sizeof(c)))
		return -ENOENT;
	size_t i = 0;
	/* mov disp32(%reg),%reg: REX.W 8b, ModRM 10 reg rm (no SIB), disp32 =
	 * vm->objspace */
	for (;; i++) {
		if (i + 7 > sizeof(c))
			return -ENOENT;
		int32_t d;
		memcpy(&d, c + i + 3, sizeof(d));
		if ((c[i] & 0xf8) == 0x48 && c[i + 1] == 0x8b && (c[i + 2] & 0xc0) == 0x80 &&
		    (c[i + 2] & 7) != 4 && (uint32_t)d == objspace)
			break;
	}
	i += 7;
	/* movzbl disp8(%reg),%r32 (0f b6, ModRM 01 x rm), or disp32 (10) */
	if (i + 4 > sizeof(c) || c[i] != 0x0f || c[i + 1] != 0xb6 || (c[i + 2] & 7) == 4)
		return -ENOENT;
	uint8_t mod = c[i + 2] >> 6;
	if (mod == 1) {
		*flags = c[i + 3];
		i += 4;
	} else if (mod == 2 && i + 7 <= sizeof(c)) {
		uint32_t d;
		memcpy(&d, c + i + 3, sizeof(d));
		*flags = d;
		i += 7;
	} else {
		return -ENOENT;
	}
	/* shr $n,%al (c0 e8 n; d0 e8 for 1), then and $1 (83 e0 01, 24 01) */
	if (i + 3 <= sizeof(c) && c[i] == 0xc0 && c[i + 1] == 0xe8) {
		*bit = c[i + 2];
		i += 3;
	} else if (i + 2 <= sizeof(c) && c[i] == 0xd0 && c[i + 1] == 0xe8) {
		*bit = 1;
		i += 2;
	}
	bool and1 = (i + 3 <= sizeof(c) && c[i] == 0x83 && c[i + 1] == 0xe0 && c[i + 2] == 1) ||
		    (i + 2 <= sizeof(c) && c[i] == 0x24 && c[i + 1] == 1);
	if (!and1 || *bit > 7 || !*flags || *flags > 0xffff) {
		*flags = *bit = 0;
		return -ENOENT;
	}
	return 0;
}

/* What ruby.c says when --yjit is asked of a build without it. */
#define NO_YJIT "built without YJIT support"

bool rbproc_built_with_yjit(struct elf_file *ef)
{
	const void *ro;
	size_t len;
	return !elf_file_section_bytes(ef, ".rodata", &ro, &len) && memmem(ro, len, "+YJIT", 5) &&
	       !memmem(ro, len, NO_YJIT, sizeof(NO_YJIT) - 1);
}

/* The first mapping at offset 0 of a file whose name starts with
 * "libruby": the Ruby library. */
static const struct map_entry *find_lib(const struct proc_maps *m)
{
	for (size_t i = 0; i < m->n; i++) {
		const char *base = strrchr(m->v[i].path, '/');
		if (base && !strncmp(base + 1, "libruby", 7) && !m->v[i].offset)
			return &m->v[i];
	}
	return NULL;
}

/* The executable's own mapping at offset 0 (the file /proc/PID/exe names,
 * by inode and device): where a ruby built with --disable-shared holds the
 * interpreter. NULL when it is not mapped (or the link cannot be read). */
static const struct map_entry *find_exe(pid_t pid, const struct proc_maps *m)
{
	char path[64];
	struct stat st;
	if (procfs_exe_path(pid, path, sizeof(path)) || stat(path, &st))
		return NULL;
	for (size_t i = 0; i < m->n; i++)
		if (m->v[i].path[0] == '/' && !m->v[i].offset && m->v[i].inode == st.st_ino &&
		    makedev(m->v[i].dev_major, m->v[i].dev_minor) == st.st_dev)
			return &m->v[i];
	return NULL;
}

/* Whether the process runs on musl: it maps musl's dynamic linker, which
 * is its C library too, by Alpine's names (/lib/ld-musl-x86_64.so.1, and
 * libc.musl-x86_64.so.1 that links to it) or by that of Debian's musl
 * package (/usr/lib/x86_64-linux-musl/libc.so, which its
 * /lib/ld-musl-x86_64.so.1 links to: the maps name the file the link
 * leads to). */
static bool maps_musl(const struct proc_maps *m)
{
	for (size_t i = 0; i < m->n; i++) {
		const char *path = m->v[i].path, *base = strrchr(path, '/');
		if (!base)
			continue;
		if (!strncmp(base + 1, "ld-musl-", 8) || !strncmp(base + 1, "libc.musl-", 10))
			return true;
		if (!strcmp(base + 1, "libc.so") && base - path >= 5 &&
		    !memcmp(base - 5, "-musl", 5))
			return true;
	}
	return false;
}

/* What of the library the process needs: its TLS variable (through libc's
 * DTV), version and layout, and eval loop. */
static int read_lib(struct rbproc *rp, struct elf_file *ef, uint64_t start, enum rb_libc libc,
		    char *msg, size_t msglen)
{
	struct rb_ectls t;
	char err[256];
	uint64_t at;
	char v[16] = {0};
	unsigned int major, minor;
	if (elf_file_symbol(ef, "ruby_version", &at, NULL) ||
	    elf_file_read(ef, at, v, sizeof(v) - 1) || sscanf(v, "%u.%u", &major, &minor) != 2) {
		snprintf(msg, msglen,
			 "pid %d: %s has no ruby_version: not a Ruby library taipan reads", rp->pid,
			 rp->lib);
		return -ENOTSUP;
	}
	snprintf(rp->version, sizeof(rp->version), "%s", v);
	rp->o = rb_offsets_find(major, minor);
	if (!rp->o) {
		snprintf(msg, msglen,
			 "pid %d: Ruby %s: taipan has no layout of this version (it reads 3.1 and "
			 "3.3; src/ruby/gen/)",
			 rp->pid, v);
		return -ENOTSUP;
	}
	int ret = rb_ectls_find(ef, &t, err, sizeof(err));
	if (ret) {
		snprintf(msg, msglen, "pid %d: Ruby %s: %s", rp->pid, v, err);
		return -ENOTSUP;
	}
	t.libc = libc;
	uint64_t bias = start - elf_file_base_vaddr(ef);
	const struct rb_offsets *o = rp->o;
	rp->tp = (struct tp_rb_proc){
	    .got = t.model == RB_TLS_LE ? 0 : bias + t.got,
	    .dtpoff = (uint32_t)t.dtpoff,
	    .magic_mask = (uint32_t)o->frame_magic_mask,
	    .magic_cfunc = (uint32_t)o->frame_magic_cfunc,
	    .flag_cframe = (uint32_t)o->frame_flag_cframe,
	    .flag_finish = (uint32_t)o->frame_flag_finish,
	    .ec_vm_stack = (uint16_t)o->ec_vm_stack,
	    .ec_vm_stack_size = (uint16_t)o->ec_vm_stack_size,
	    .ec_cfp = (uint16_t)o->ec_cfp,
	    .cfp_size = (uint16_t)o->cfp_size,
	    .cfp_pc = (uint16_t)o->cfp_pc,
	    .cfp_iseq = (uint16_t)o->cfp_iseq,
	    .cfp_ep = (uint16_t)o->cfp_ep,
	    .ec_thread = (uint16_t)o->ec_thread_ptr,
	    .thread_ractor = (uint16_t)o->thread_ractor,
	    .ractor_gvl_owner = (uint16_t)o->ractor_gvl_owner,
	    .thread_blocking = (uint16_t)o->thread_blocking_region,
	    .thread_status = (uint16_t)o->thread_status,
	    .status_shift = (uint16_t)o->thread_status_shift,
	    .tls_libc = (uint16_t)libc,
	};
	rp->ec_thread_ptr = o->ec_thread_ptr;
	rp->bias = bias;
	rp->tls = t;
	bool vm = !rbproc_find_vm(ef, o->vm_at_exit, &rp->vm_ptr);
	uint32_t gc_flags, gc_bit;
	bool gc = !rbproc_find_gc(ef, o->vm_objspace, &gc_flags, &gc_bit);
	rp->tp.thread_vm = (uint16_t)o->thread_vm;
	rp->tp.vm_objspace = (uint16_t)o->vm_objspace;
	rp->tp.gc_flags = (uint16_t)gc_flags;
	rp->tp.gc_bit = (uint16_t)gc_bit;
	bool found = !rbproc_find_eval(ef, &rp->exec, &rp->core);
	rp->yjit = rbproc_built_with_yjit(ef);
	/* What rb_id2str's code says of IDs must be what the headers say. */
	bool ids = !rb_ids_find(ef, &rp->ids) && rp->ids.shift == o->id_scope_shift &&
		   rp->ids.last_op == o->last_op_id;
	if (!ids)
		rp->ids.symbols = 0;
	snprintf(rp->how, sizeof(rp->how),
		 "version from ruby_version, offsets from the %u.%u table, EC %s%s (%u readers "
		 "agree), eval loop %s, method names %s, VM %s, GC flag %s%s",
		 major, minor, t.by_symbol ? "by symbol" : "by its readers' TLS sequence",
		 t.model == RB_TLS_LE	  ? " (local exec, in the executable)"
		 : t.libc == RB_LIBC_MUSL ? " (musl's DTV)"
					  : "",
		 t.agreed, found ? "found" : "not found (native frames are not merged)",
		 ids ? "found" : "not found",
		 !vm ? "not found (dump cannot list threads)"
		 : elf_file_symbol(ef, "ruby_current_vm_ptr", &at, NULL)
		     ? "by ruby_vm_at_exit's code"
		     : "by symbol",
		 gc ? "found" : "not found (no [GC] marker)", rp->yjit ? ", built with YJIT" : "");
	return 0;
}

int rbproc_inspect(pid_t pid, struct rbproc *out, char *msg, size_t msglen)
{
	struct proc_maps m = {0};
	memset(out, 0, sizeof(*out));
	out->pid = pid;
	snprintf(msg, msglen,
		 "pid %d: not a Ruby process (no libruby mapped, nor a ruby executable linked "
		 "statically)",
		 pid);
	int ret = procmaps_read(pid, &m);
	if (ret) {
		snprintf(msg, msglen, "pid %d: cannot read its mappings: %s", pid, strerror(-ret));
		return ret;
	}
	const struct map_entry *lib = find_lib(&m);
	bool exe = !lib;
	if (exe)
		lib = find_exe(pid, &m);
	if (!lib) {
		procmaps_free(&m);
		return -ENOEXEC;
	}
	snprintf(out->lib, sizeof(out->lib), "%s", lib->path);
	int fd = mapfile_open(pid, lib);
	struct elf_file *ef = NULL;
	/* The descriptor is ef's from here, closed on failure too. */
	ret = fd < 0 ? fd : elf_file_open_fd(fd, &ef);
	if (ret && exe && ret != -ESRCH) {
		procmaps_free(&m); /* an executable taipan cannot open: not known as Ruby */
		return -ENOEXEC;
	}
	if (ret) {
		snprintf(msg, msglen, "pid %d: cannot open %s: %s", pid, lib->path, strerror(-ret));
		procmaps_free(&m);
		return ret == -ESRCH ? -ESRCH : -ENOTSUP;
	}
	/* An executable without TLS or ruby_version is no static ruby: not a
	 * Ruby process, as when nothing is mapped, rather than one taipan
	 * cannot read. The segment and the name among the dynamic strings
	 * are looked at first: they cost no symbol table, which every other
	 * program of the host would otherwise be indexed for. */
	uint64_t v, align;
	const void *dynstr;
	size_t n;
	if (exe &&
	    (elf_file_tls(ef, &v, &align) || elf_file_section_bytes(ef, ".dynstr", &dynstr, &n) ||
	     !memmem(dynstr, n, "ruby_version", sizeof("ruby_version")) ||
	     elf_file_symbol(ef, "ruby_version", &v, NULL))) {
		elf_file_close(ef);
		procmaps_free(&m);
		return -ENOEXEC;
	}
	ret = read_lib(out, ef, lib->start, maps_musl(&m) ? RB_LIBC_MUSL : RB_LIBC_GLIBC, msg,
		       msglen);
	elf_file_close(ef);
	procmaps_free(&m);
	if (ret)
		return ret;
	if (procfs_comm(pid, 0, out->comm, sizeof(out->comm)))
		snprintf(out->comm, sizeof(out->comm), "ruby");
	pid_t ns;
	if (!procfs_ns_pid(pid, 0, &ns) && ns != pid)
		out->ns_pid = (uint32_t)ns;
	msg[0] = 0;
	return 0;
}
