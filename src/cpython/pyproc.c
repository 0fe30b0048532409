/* pyproc.c - classifying a process: which CPython, where its runtime lives,
 * and the offsets and capability flags the BPF walker needs. */
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>
#include <uthash.h>

#include "cpython/debugoffsets.h"
#include "cpython/pyproc.h"
#include "proc/elfsym.h"
#include "proc/memread.h"
#include "proc/procfs.h"
#include "proc/procmaps.h"
#include "proc/safeopen.h"
#include "util/hashfree.h"
#include "util/log.h"
#include "util/strutil.h"

/* major.minor from a name like libpython3.11.so.1.0, python3.9, libpython3.6m.so. */
static bool version_from_name(const char *name, unsigned int *major, unsigned int *minor)
{
	for (const char *p = strstr(name, "python"); p; p = strstr(p + 1, "python")) {
		const char *q = p + 6;
		if (!isdigit((unsigned char)q[0]) || q[1] != '.' || !isdigit((unsigned char)q[2]))
			continue;
		char *end;
		unsigned long mi = strtoul(q + 2, &end, 10);
		if (mi > 99)
			continue;
		*major = (unsigned int)(q[0] - '0');
		*minor = (unsigned int)mi;
		return true;
	}
	return false;
}

struct rodata_scan {
	unsigned int major, minor; /* wanted; 0 when not known */
	unsigned int found_major, found_minor, found_micro;
	int matches;
};

/* Looks for PY_VERSION ("3.9.18", "2.7.18+") among .rodata strings. */
static int rodata_version_cb(const char *s, size_t len, void *ctx)
{
	struct rodata_scan *sc = ctx;
	unsigned int a, b, c;
	int used = 0;
	if (len < 5 || len > 12 || !isdigit((unsigned char)s[0]))
		return 0;
	if (sscanf(s, "%1u.%2u.%2u%n", &a, &b, &c, &used) != 3)
		return 0;
	if (s[used] && !strchr("abrc+", s[used]))
		return 0;
	if (a != 2 && a != 3)
		return 0;
	if (sc->major && (a != sc->major || b != sc->minor))
		return 0;
	if (sc->matches && (sc->found_major != a || sc->found_minor != b || sc->found_micro != c)) {
		sc->matches = -1; /* ambiguous: trust none */
		return 1;
	}
	sc->found_major = a;
	sc->found_minor = b;
	sc->found_micro = c;
	sc->matches = 1;
	return 0;
}

/* PY_VERSION through Py_GetVersion(), which formats it with snprintf: the
 * string is one of the function's RIP-relative lea operands. Linkers merge it
 * into the tail of a longer string, so it is not always a string of its own
 * in .rodata. Returns 0 with the version, or -ENOENT. */
static int version_from_getversion(struct elf_file *ef, unsigned int *major, unsigned int *minor,
				   unsigned int *micro)
{
	uint64_t fn, size;
	uint8_t code[96];
	if (elf_file_symbol(ef, "Py_GetVersion", &fn, &size) ||
	    elf_file_read(ef, fn, code, sizeof(code)))
		return -ENOENT;
	for (size_t i = 0; i + 7 <= sizeof(code); i++) {
		/* lea disp32(%rip),reg: REX.W (0x48 or 0x4c), 8d, ModRM 00 reg 101 */
		if ((code[i] != 0x48 && code[i] != 0x4c) || code[i + 1] != 0x8d ||
		    (code[i + 2] & 0xc7) != 0x05)
			continue;
		int32_t disp;
		memcpy(&disp, code + i + 3, 4);
		char str[16] = {0};
		if (elf_file_read(ef, fn + i + 7 + (int64_t)disp, str, sizeof(str) - 1))
			continue;
		unsigned int a, b, c;
		int used = 0;
		if (sscanf(str, "%1u.%2u.%2u%n", &a, &b, &c, &used) == 3 && used >= 5 &&
		    (!str[used] || strchr("abrc+", str[used])) && (a == 2 || a == 3)) {
			*major = a;
			*minor = b;
			*micro = c;
			return 0;
		}
	}
	return -ENOENT;
}

/* Finds &interp_head on versions without _PyRuntime (2.7, 3.6): the static
 * symbol when .symtab is there, else the target of the RIP-relative load in
 * PyInterpreterState_Head(), which is `return interp_head;`. */
static int find_interp_head(struct elf_file *ef, uint64_t *vaddr)
{
	uint64_t fn, size;
	uint8_t code[16];
	if (!elf_file_symbol(ef, "interp_head", vaddr, &size))
		return 0;
	if (elf_file_symbol(ef, "PyInterpreterState_Head", &fn, &size))
		return -ENOENT;
	if (elf_file_read(ef, fn, code, sizeof(code)))
		return -ENOENT;
	size_t at = 0;
	if (code[0] == 0xf3 && code[1] == 0x0f && code[2] == 0x1e && code[3] == 0xfa)
		at = 4; /* endbr64 */
	/* mov disp32(%rip),%rax = 48 8b 05 disp32 */
	if (code[at] != 0x48 || code[at + 1] != 0x8b || code[at + 2] != 0x05)
		return -ENOENT;
	int32_t disp;
	memcpy(&disp, code + at + 3, sizeof(disp));
	*vaddr = fn + at + 7 + (int64_t)disp;
	return 0;
}

/* Whether the file open at fd is the one mapped at m (device and inode). */
static bool is_mapped_file(int fd, const struct map_entry *m)
{
	struct stat st;
	return !fstat(fd, &st) && st.st_ino == m->inode && major(st.st_dev) == m->dev_major &&
	       minor(st.st_dev) == m->dev_minor;
}

/* Opens the ELF behind a mapping as the process sees it: through map_files
 * (works for deleted files and other mount namespaces), else through the
 * process's root directory, resolved inside it. */
static int open_mapped(pid_t pid, const struct map_entry *m, struct elf_file **ef)
{
	char path[PATH_MAX];
	if (!procfs_map_file_path(pid, m->start, m->end, path, sizeof(path)) &&
	    !elf_file_open(path, ef))
		return 0;
	/* map_files needs CAP_CHECKPOINT_RESTORE. Without it: the path as
	 * maps shows it, which is relative to our root (a chroot seen from the
	 * host), if what opens there is the mapped file itself (device and
	 * inode, checked on the open file); else the same path inside the
	 * process's root (another mount namespace). */
	int fd = safe_open(m->path);
	if (fd >= 0 && is_mapped_file(fd, m))
		return elf_file_open_fd(fd, ef);
	if (fd >= 0)
		close(fd);
	fd = safe_open_in_proc_root(pid, m->path);
	if (fd < 0)
		return fd;
	return elf_file_open_fd(fd, ef);
}

static bool has_interpreter(struct elf_file *ef)
{
	uint64_t v, s;
	return !elf_file_symbol(ef, "_PyRuntime", &v, &s) ||
	       !elf_file_section(ef, ".PyRuntime", &v, &s) ||
	       !elf_file_symbol(ef, "PyInterpreterState_Head", &v, &s);
}

/* What the interpreter's ELF file tells, the same for every process that maps
 * it; cached per file. Addresses are link-time virtual addresses. */
struct elf_facts {
	bool python; /* it holds a CPython interpreter */
	bool exact;  /* the micro version is known */
	unsigned int major, minor;
	uint32_t hexversion;
	const char *version_source;
	uint64_t base_vaddr;  /* elf_file_base_vaddr() */
	uint64_t runtime;     /* &_PyRuntime, 0 before 3.7 */
	uint64_t code_type;   /* &PyCode_Type, 0 if not exported */
	uint64_t interp_head; /* &interp_head (2.7, 3.6), 0 if not found */
};

/* The version, most reliable source first (doc/design/python-stacks.md, decision 3). */
static void read_version(struct elf_file *ef, const char *file_name, struct elf_facts *f)
{
	uint64_t v, size, hex = 0;
	char cookie[PY_DEBUG_OFFSETS_COOKIE_LEN];
	unsigned int a, b, c;
	if (f->runtime && !elf_file_read(ef, f->runtime, cookie, sizeof(cookie)) &&
	    !memcmp(cookie, PY_DEBUG_OFFSETS_COOKIE, sizeof(cookie)) &&
	    !elf_file_read(ef, f->runtime + PY_DEBUG_OFFSETS_VERSION_POS, &hex, 8)) {
		f->version_source = "_Py_DebugOffsets";
	} else if (!elf_file_symbol(ef, "Py_Version", &v, &size) &&
		   !elf_file_read(ef, v, &hex, 8)) {
		f->version_source = "Py_Version";
	}
	if (hex) {
		f->exact = true;
		f->hexversion = (uint32_t)hex;
		f->major = (hex >> 24) & 0xff;
		f->minor = (hex >> 16) & 0xff;
		return;
	}
	if (!version_from_getversion(ef, &a, &b, &c)) {
		f->exact = true;
		f->version_source = "Py_GetVersion's PY_VERSION";
		f->major = a;
		f->minor = b;
		f->hexversion = (a << 24) | (b << 16) | (c << 8);
		return;
	}
	const char *so = elf_file_soname(ef);
	if ((so && version_from_name(so, &f->major, &f->minor)) ||
	    version_from_name(file_name, &f->major, &f->minor))
		f->version_source = "file name";
	struct rodata_scan sc = {.major = f->major, .minor = f->minor};
	elf_file_rodata_strings(ef, rodata_version_cb, &sc);
	if (sc.matches == 1) {
		if (!f->major)
			f->version_source = ".rodata version string";
		f->major = sc.found_major;
		f->minor = sc.found_minor;
		f->hexversion =
		    (sc.found_major << 24) | (sc.found_minor << 16) | (sc.found_micro << 8);
		f->exact = true;
	} else if (f->major) {
		f->hexversion = (f->major << 24) | (f->minor << 16);
	}
}

static void read_facts(struct elf_file *ef, const char *file_name, struct elf_facts *f)
{
	uint64_t v, size;
	memset(f, 0, sizeof(*f));
	f->python = has_interpreter(ef);
	if (!f->python)
		return;
	f->base_vaddr = elf_file_base_vaddr(ef);
	if (!elf_file_symbol(ef, "_PyRuntime", &v, &size) ||
	    !elf_file_section(ef, ".PyRuntime", &v, &size))
		f->runtime = v;
	if (!elf_file_symbol(ef, "PyCode_Type", &v, &size))
		f->code_type = v;
	if (!find_interp_head(ef, &v))
		f->interp_head = v;
	read_version(ef, file_name, f);
}

struct file_key {
	dev_t dev;
	ino_t ino;
	off_t size;
	struct timespec mtime;
};

struct fact_ent {
	UT_hash_handle hh;
	struct file_key key;
	struct elf_facts facts;
};

/* Files examined at most before the cache starts again from empty. */
#define FACT_CACHE_MAX 4096

struct pyproc_cache {
	struct fact_ent *by_file;
	unsigned int n;
	uint64_t hits, misses;
};

struct pyproc_cache *pyproc_cache_new(void)
{
	return calloc(1, sizeof(struct pyproc_cache));
}

static void cache_clear(struct pyproc_cache *c)
{
	HASH_FREE_ALL(c->by_file, e, (void)0);
	c->n = 0;
}

void pyproc_cache_free(struct pyproc_cache *c)
{
	if (!c)
		return;
	cache_clear(c);
	free(c);
}

/* The facts of the file behind mapping m, from the cache when the same file
 * (device, inode, size, mtime) was read before. Returns 0, or a negative
 * errno when the file cannot be opened or is not ELF. */
static int facts_for(struct pyproc_cache *c, pid_t pid, const struct map_entry *m,
		     struct elf_facts *out)
{
	char path[PATH_MAX];
	struct stat st;
	struct file_key key;
	struct fact_ent *e = NULL;
	bool have_key =
	    !procfs_map_file_path(pid, m->start, m->end, path, sizeof(path)) && !stat(path, &st);
	if (c && have_key) {
		memset(&key, 0, sizeof(key));
		key.dev = st.st_dev;
		key.ino = st.st_ino;
		key.size = st.st_size;
		key.mtime = st.st_mtim;
		HASH_FIND(hh, c->by_file, &key, sizeof(key), e);
		if (e) {
			c->hits++;
			*out = e->facts;
			return 0;
		}
		c->misses++;
	}
	struct elf_file *ef;
	int ret = open_mapped(pid, m, &ef);
	if (ret)
		return ret;
	read_facts(ef, base_name(m->path), out);
	elf_file_close(ef);
	if (c && have_key) {
		if (c->n >= FACT_CACHE_MAX)
			cache_clear(c);
		e = calloc(1, sizeof(*e));
		if (e) {
			e->key = key;
			e->facts = *out;
			HASH_ADD(hh, c->by_file, key, sizeof(e->key), e);
			c->n++;
		}
	}
	return 0;
}

/* The file that holds the interpreter: libpython if one is mapped, else the
 * executable itself (static builds such as Debian's /usr/bin/python3.X, or
 * embedders that link libpython statically). Returns 0 with *where, or
 * -ENOEXEC; *unopened is then the first candidate that could not be opened
 * (not permitted, or deleted), with why in *open_err, or stays NULL. */
static int find_interpreter(struct pyproc_cache *c, pid_t pid, const struct proc_maps *maps,
			    struct elf_facts *out, const struct map_entry **where,
			    const struct map_entry **unopened, int *open_err)
{
	struct stat exe;
	char path[64];
	bool have_exe = !procfs_exe_path(pid, path, sizeof(path)) && !stat(path, &exe);

	for (int pass = 0; pass < 2; pass++) {
		for (size_t i = 0; i < maps->n; i++) {
			const struct map_entry *m = &maps->v[i];
			if (m->path[0] != '/' || m->offset != 0)
				continue;
			bool lib = strncmp(base_name(m->path), "libpython", 9) == 0;
			if (pass == 0 ? !lib : (lib || !have_exe || m->inode != exe.st_ino))
				continue;
			int ret = facts_for(c, pid, m, out);
			if (!ret && out->python) {
				*where = m;
				return 0;
			}
			if (!*unopened && (ret == -EACCES || ret == -EPERM || ret == -ENOENT)) {
				*unopened = m;
				*open_err = ret;
			}
		}
	}
	return -ENOEXEC;
}

/* Turns the flat layout into what BPF needs. */
static int fill_tp(struct pyproc *pp, const struct py_caps *caps, char *err, size_t errlen)
{
	const struct py_layout *l = &pp->layout;
	struct tp_py_offsets *o = &pp->tp.off;
	uint32_t f = caps->lflags;
	/* 3.14t and later: frames may run thread-local copies of the bytecode. */
	if (l->frame_tlbc_index >= 0 && l->code_tlbc >= 0)
		f |= TP_LF_TLBC;
	int32_t ts_frame = (f & TP_LF_CFRAME) ? l->ts_cframe
			   : (f & TP_LF_INTERP_FRAME) && l->ts_current_frame >= 0
			       ? l->ts_current_frame
			       : l->ts_frame;
	struct {
		const char *name;
		int32_t v;
		__u16 *dst;
		bool needed;
	} fields[] = {
	    {"interpreter next", l->interp_next, &o->interp_next, true},
	    {"interpreter thread list", l->interp_tstate_head, &o->interp_tstate_head, true},
	    {"thread next", l->ts_next, &o->ts_next, true},
	    {"thread id", l->ts_thread_id, &o->ts_thread_id, true},
	    {"thread frame", ts_frame, &o->ts_frame, true},
	    {"cframe current frame", l->cframe_current_frame, &o->cframe_current_frame,
	     f & TP_LF_CFRAME},
	    {"frame back", l->frame_back, &o->frame_back, true},
	    {"frame code", l->frame_code, &o->frame_code, true},
	    {"frame position", l->frame_lasti, &o->frame_lasti, true},
	    {"frame owner", (f & TP_LF_INTERP_FRAME) ? l->frame_owner : l->frame_gen,
	     &o->frame_owner, f & TP_LF_OWNER},
	    {"frame is_entry", l->frame_is_entry, &o->frame_is_entry, f & TP_LF_IS_ENTRY},
	    {"frame locals", l->frame_localsplus, &o->frame_localsplus, f & TP_LF_SELF_CLASS},
	    {"object type", l->obj_type, &o->obj_type, f & TP_LF_SELF_CLASS},
	    {"type flags", l->type_flags, &o->type_flags, f & TP_LF_SELF_CLASS},
	    {"code name", l->code_name, &o->code_name, true},
	    {"code file name", l->code_filename, &o->code_filename, true},
	    {"code qualified name", l->code_qualname, &o->code_qualname, false},
	    {"code line table", l->code_linetable, &o->code_linetable, false},
	    {"code variable names", l->code_varnames, &o->code_varnames, false},
	    {"tuple items", l->tuple_item, &o->tuple_item, false},
	    /* Where a name's characters start: BPF reads the first 8 of them
	     * as part of a code object's identity. */
	    {"str characters", l->unicode_state >= 0 ? l->unicode_ascii_size : l->bytes_sval,
	     &o->name_data, true},
	};
	for (size_t i = 0; i < sizeof(fields) / sizeof(fields[0]); i++) {
		if (fields[i].v < 0 || fields[i].v > 0xffff) {
			if (fields[i].needed) {
				snprintf(err, errlen, "pid %d: Python %s: no offset for %s",
					 pp->pid, pp->version, fields[i].name);
				return -ENOTSUP;
			}
			*fields[i].dst = 0;
			continue;
		}
		*fields[i].dst = (__u16)fields[i].v;
	}
	/* The walkers read each frame whole: the span covers every field they use. */
	int32_t span = 0,
		at[] = {l->frame_back + 8, l->frame_code + 8,
			l->frame_lasti + ((f & TP_LF_LASTI_PTR) ? 8 : 4),
			/* 3.11 too: its owner says which frame is a
			 * coroutine's (record --async), as f_gen does
			 * before */
			l->frame_owner >= 0 ? l->frame_owner + 1 : 0,
			!(f & TP_LF_INTERP_FRAME) && l->frame_gen >= 0 ? l->frame_gen + 8 : 0,
			(f & TP_LF_IS_ENTRY) ? l->frame_is_entry + 1 : 0,
			(f & TP_LF_SELF_CLASS) ? l->frame_localsplus + 8 : 0};
	for (size_t i = 0; i < sizeof(at) / sizeof(at[0]); i++)
		if (at[i] > span)
			span = at[i];
	if (span > TP_FRAME_BUF) {
		snprintf(err, errlen, "pid %d: Python %s: frame fields span %d bytes, more than %d",
			 pp->pid, pp->version, span, TP_FRAME_BUF);
		return -ENOTSUP;
	}
	o->frame_span = (__u16)span;
	o->flags = f;
	/* The GIL of a GIL build, if its offsets are known: in _PyRuntime, or
	 * through each interpreter (3.12+). */
	memset(&pp->tp.gil, 0, sizeof(pp->tp.gil));
	bool in_rt = l->rt_gil >= 0 && pp->runtime_addr;
	if (!pp->free_threaded && (in_rt || l->interp_gil >= 0) && l->ts_interp >= 0 &&
	    l->gil_locked > 0 && l->gil_holder > 0 && l->ts_interp <= 0xffff &&
	    l->interp_gil <= 0xffff && l->gil_locked <= 0xffff && l->gil_holder <= 0xffff) {
		pp->tp.gil.addr = in_rt ? pp->runtime_addr + (uint64_t)l->rt_gil : 0;
		pp->tp.gil.ts_interp = (__u16)l->ts_interp;
		pp->tp.gil.interp = in_rt ? 0 : (__u16)l->interp_gil;
		pp->tp.gil.locked = (__u16)l->gil_locked;
		pp->tp.gil.holder = (__u16)l->gil_holder;
	}
	pp->linetable = caps->linetable;
	pp->lasti_in_units = caps->lasti_in_units;
	pp->objdict = caps->objdict;
	return 0;
}

/* Checks the offsets against the live process where it has started: the
 * first thread state must point back at its interpreter. A build whose
 * layout differs from the table fails here instead of producing garbage. */
static int check_live(struct pyproc *pp, char *err, size_t errlen)
{
	uint64_t interp = 0, ts = 0, back = 0;
	const struct py_layout *l = &pp->layout;
	int ret = mem_read(pp->pid, pp->tp.interp_head_addr, &interp, 8);
	if (ret == -EPERM || ret == -EACCES) {
		/* Its files were readable but its memory is not: every frame
		 * would be unreadable, so say so now. */
		snprintf(err, errlen,
			 "pid %d: cannot read its memory: %s (reading another process needs "
			 "CAP_SYS_PTRACE, or the same user and no capabilities the target has and "
			 "taipan lacks)",
			 pp->pid, strerror(-ret));
		return ret;
	}
	if (ret)
		return 0; /* not readable yet: BPF counts it if it stays so */
	if (!interp || mem_read(pp->pid, interp + (uint64_t)l->interp_tstate_head, &ts, 8) || !ts)
		return 0;
	if (l->ts_interp < 0 || mem_read(pp->pid, ts + (uint64_t)l->ts_interp, &back, 8))
		return 0;
	if (back != interp) {
		snprintf(err, errlen,
			 "pid %d: Python %s (%s): the thread state does not point back to its "
			 "interpreter; "
			 "this build's layout differs from taipan's offsets",
			 pp->pid, pp->version, pp->binary);
		return -ENOTSUP;
	}
	return 0;
}

/* What to add to a message about reading pid's maps or memory that failed
 * with err: the kernel's ptrace access check refused it. */
static const char *ptrace_hint(int err)
{
	if (err != -EACCES && err != -EPERM)
		return "";
	return " (reading another process needs CAP_SYS_PTRACE, or the same user and no "
	       "capabilities the target has and taipan lacks)";
}

int pyproc_read(const struct pyproc *pp, uint64_t addr, void *buf, size_t len)
{
	return pp->read ? pp->read(pp->read_ctx, addr, buf, len)
			: mem_read(pp->pid, addr, buf, len);
}

int pyproc_read_cstr(const struct pyproc *pp, uint64_t addr, char *buf, size_t max)
{
	return pp->read ? mem_read_cstr_with(pp->read, pp->read_ctx, addr, buf, max)
			: mem_read_cstr(pp->pid, addr, buf, max);
}

int pyproc_read_debug_offsets(struct pyproc *pp, char *err, size_t errlen)
{
	uint8_t buf[2048];
	uint64_t dhex = 0;
	char perr[256];
	int ret = pyproc_read(pp, pp->runtime_addr, buf, sizeof(buf));
	if (ret) {
		snprintf(err, errlen, "pid %d: cannot read _Py_DebugOffsets: %s%s", pp->pid,
			 strerror(-ret), ptrace_hint(ret));
		return ret;
	}
	ret = py_debug_offsets_parse(buf, sizeof(buf), &pp->layout, &dhex, &pp->free_threaded, perr,
				     sizeof(perr));
	if (ret) {
		snprintf(err, errlen, "pid %d: Python %s: %s", pp->pid, pp->version, perr);
		return -ENOTSUP;
	}
	if (((dhex >> 16) & 0xffff) != ((pp->hexversion >> 16) & 0xffff)) {
		snprintf(err, errlen,
			 "pid %d: _Py_DebugOffsets says version %llx but the binary says %s",
			 pp->pid, (unsigned long long)dhex, pp->version);
		return -ENOTSUP;
	}
	/* Free-threaded builds name themselves as python3.13t does. */
	if (pp->free_threaded && strlen(pp->version) + 1 < sizeof(pp->version))
		strcat(pp->version, "t");
	if (perr[0]) /* positions of an older minor: worth a line with -v */
		log_debug("pid %d: Python %s: %s", pp->pid, pp->version, perr);
	pp->layout_source = "_Py_DebugOffsets read from the process";
	return 0;
}

int pyproc_derive(struct pyproc *pp, char *err, size_t errlen)
{
	const struct py_caps *caps = py_caps_find(pp->major, pp->minor);
	if (!caps) {
		snprintf(err, errlen, "Python %u.%u is not supported", pp->major, pp->minor);
		return -ENOTSUP;
	}
	return fill_tp(pp, caps, err, errlen);
}

int pyproc_inspect(pid_t pid, struct pyproc *pp, char *err, size_t errlen)
{
	return pyproc_inspect_cached(NULL, pid, pp, err, errlen);
}

int pyproc_inspect_cached(struct pyproc_cache *cache, pid_t pid, struct pyproc *pp, char *err,
			  size_t errlen)
{
	struct proc_maps maps = {0};
	struct elf_facts f;
	const struct map_entry *where = NULL, *unopened = NULL;
	int ret, open_err = 0;

	memset(pp, 0, sizeof(*pp));
	pp->pid = pid;
	ret = procmaps_read(pid, &maps);
	if (ret) {
		if (ret == -ESRCH)
			snprintf(err, errlen, "pid %d: no such process", pid);
		else
			snprintf(err, errlen, "pid %d: cannot read its memory map: %s%s", pid,
				 strerror(-ret), ptrace_hint(ret));
		return ret;
	}
	procfs_comm(pid, 0, pp->comm, sizeof(pp->comm)); /* "" when it cannot be read */
	pid_t ns_pid;
	if (!procfs_ns_pid(pid, 0, &ns_pid) && ns_pid != pid)
		pp->ns_pid = (uint32_t)ns_pid;

	ret = find_interpreter(cache, pid, &maps, &f, &where, &unopened, &open_err);
	if (ret && unopened) {
		/* Not known to be Python: its files could not be read. */
		if (unopened->deleted)
			snprintf(err, errlen,
				 "pid %d (%s): %s was deleted; taipan reads it through "
				 "/proc/PID/map_files, which needs CAP_CHECKPOINT_RESTORE (or "
				 "CAP_SYS_ADMIN)",
				 pid, pp->comm, unopened->path);
		else
			snprintf(err, errlen,
				 "pid %d (%s): cannot open %s: %s (taipan opens it through "
				 "/proc/PID/map_files, which needs CAP_CHECKPOINT_RESTORE or "
				 "CAP_SYS_ADMIN, else through /proc/PID/root, which needs "
				 "CAP_SYS_PTRACE and read access to the path: "
				 "CAP_DAC_READ_SEARCH in another user's private directory)",
				 pid, pp->comm, unopened->path, strerror(-open_err));
		goto out;
	}
	struct procfs_status st;
	if (ret && !procfs_status(pid, &st) && (st.state == 'Z' || st.state == 'X')) {
		/* An exited process has no memory map left to look at. */
		snprintf(err, errlen,
			 "pid %d (%s): has exited (a zombie: its parent, pid %d, has not reaped "
			 "it yet)",
			 pid, pp->comm, st.ppid);
		ret = -ESRCH;
		goto out;
	}
	if (ret) {
		snprintf(
		    err, errlen,
		    "pid %d (%s): not a Python process (no libpython or Python executable mapped)",
		    pid, pp->comm);
		goto out;
	}
	snprintf(pp->binary, sizeof(pp->binary), "%s", where->path);
	const struct map_entry *base = procmaps_find_base(&maps, where);
	pp->bias = (base ? base->start : where->start) - f.base_vaddr;
	pp->version_source = f.version_source;
	pp->major = f.major;
	pp->minor = f.minor;
	pp->hexversion = f.hexversion;
	if (!pp->major) {
		snprintf(err, errlen,
			 "pid %d (%s): %s looks like CPython but its version is unknown", pid,
			 pp->comm, pp->binary);
		ret = -ENOTSUP;
		goto out;
	}
	if (f.exact)
		snprintf(pp->version, sizeof(pp->version), "%u.%u.%u", pp->major, pp->minor,
			 (pp->hexversion >> 8) & 0xff);
	else
		snprintf(pp->version, sizeof(pp->version), "%u.%u", pp->major, pp->minor);

	const struct py_caps *caps = py_caps_find(pp->major, pp->minor);
	if (!caps) {
		snprintf(
		    err, errlen,
		    "pid %d (%s): Python %s is not supported (taipan reads 2.7 and 3.6 and later)",
		    pid, pp->comm, pp->version);
		ret = -ENOTSUP;
		goto out;
	}
	if (f.runtime)
		pp->runtime_addr = f.runtime + pp->bias;
	if (f.code_type)
		pp->code_type_addr = f.code_type + pp->bias;

	/* The offsets: the process's own _Py_DebugOffsets from 3.13 on, the
	 * generated table before. Never a neighbouring version's row. */
	if (py_has_debug_offsets(pp->major, pp->minor)) {
		if (!pp->runtime_addr) {
			snprintf(err, errlen,
				 "pid %d: Python %s without a _PyRuntime symbol or section", pid,
				 pp->version);
			ret = -ENOTSUP;
			goto out;
		}
		ret = pyproc_read_debug_offsets(pp, err, errlen);
		if (ret)
			goto out;
	} else {
		const struct py_layout_entry *row = py_layout_find(pp->major, pp->minor);
		if (!row) {
			snprintf(
			    err, errlen,
			    "pid %d (%s): Python %s has no offsets table and no _Py_DebugOffsets",
			    pid, pp->comm, pp->version);
			ret = -ENOTSUP;
			goto out;
		}
		pp->layout = row->layout;
		pp->layout_source = row->source;
	}

	/* Where the list of interpreters starts. */
	if (pp->runtime_addr && pp->layout.rt_interp_head >= 0) {
		pp->tp.interp_head_addr = pp->runtime_addr + (uint64_t)pp->layout.rt_interp_head;
	} else if (f.interp_head) {
		pp->tp.interp_head_addr = f.interp_head + pp->bias;
	} else {
		snprintf(err, errlen,
			 "pid %d: Python %s: cannot find the interpreter list (no _PyRuntime, "
			 "interp_head or PyInterpreterState_Head in %s)",
			 pid, pp->version, pp->binary);
		ret = -ENOTSUP;
		goto out;
	}
	ret = fill_tp(pp, caps, err, errlen);
	if (!ret)
		ret = check_live(pp, err, errlen);
out:
	procmaps_free(&maps);
	return ret;
}
