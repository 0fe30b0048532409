/* rbproc.h - a Ruby process as taipan reads it: its libruby (or its
 * executable, for a ruby linked statically), the version and layout, where
 * each thread's execution context is, and which native functions are the
 * VM's eval loop (doc/design/ruby.md).
 */
#ifndef TAIPAN_RUBY_RBPROC_H
#define TAIPAN_RUBY_RBPROC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "proc/elfsym.h"
#include "ruby/abi.h"
#include "ruby/ectls.h"
#include "ruby/rbids.h"
#include "ruby/rboffsets.h"

/* A function of libruby, in its link-time addresses: [lo, hi). */
struct rb_range {
	uint64_t lo, hi;
};

struct rbproc {
	pid_t pid;
	uint32_t ns_pid;  /* its pid in its own namespace; 0: the same */
	char version[16]; /* ruby_version: "3.3.8" */
	char comm[16];
	/* libruby's path, as /proc/PID/maps shows it; the executable's, for a
	 * ruby linked statically (--disable-shared) */
	char lib[512];
	const struct rb_offsets *o;
	struct tp_rb_proc tp;	/* BPF's payload */
	uint32_t ec_thread_ptr; /* rb_execution_context_t.thread_ptr */
	uint64_t bias;		/* libruby's load bias */
	struct rb_ids ids;	/* its method names (symbols 0: not found) */
	/* The VM's eval loop: vm_exec (rb_vm_exec before 3.3), which each
	 * call of the VM from C enters once, and vm_exec_core, the
	 * interpreter it calls, 0 when not found. */
	struct rb_range exec, core;
	/* Where the thread's EC is (BPF's payload holds its GOT entry and
	 * offset). */
	struct rb_ectls tls;
	/* ruby_current_vm_ptr (link-time): the VM, whose ractors list the
	 * threads (dump); 0 when not found. */
	uint64_t vm_ptr;
	/* libruby was built with YJIT (its description says "+YJIT"): code
	 * in anonymous executable memory is YJIT's. */
	bool yjit;
	char how[320];
};

/* Whether pid runs Ruby: 0 with *out; -ENOEXEC: no libruby is mapped and
 * the executable is no ruby linked statically (no ruby_version);
 * -ENOTSUP: a libruby taipan cannot read (its version, its TLS); -ESRCH:
 * gone; another negative errno. msg always gets a line naming the pid. */
int rbproc_inspect(pid_t pid, struct rbproc *out, char *msg, size_t msglen);

/* vm_exec and vm_exec_core in libruby ef (rbproc.exec, .core), found by
 * symbol where one is exported, else through the exported functions that
 * call them. 0, or -ENOENT with *exec zeroed. */
int rbproc_find_eval(struct elf_file *ef, struct rb_range *exec, struct rb_range *core);

/* ruby_current_vm_ptr in libruby ef: by symbol where it is exported
 * (before 3.3), else the one 64-bit RIP-relative load of exported
 * ruby_vm_at_exit whose register is then used at vm->at_exit's offset
 * (at_exit, from the layout). 0 with *vm_ptr, or -ENOENT. */
int rbproc_find_vm(struct elf_file *ef, uint32_t at_exit, uint64_t *vm_ptr);

/* Where the GC's during_gc flag is, from exported rb_during_gc's code:
 * vm->objspace's load (at objspace, from the layout), then a byte of the
 * objspace (*flags) and its bit (*bit). 0, or -ENOENT with both 0. */
int rbproc_find_gc(struct elf_file *ef, uint32_t objspace, uint32_t *flags, uint32_t *bit);

/* Whether libruby ef was built with YJIT: RUBY_DESCRIPTION's "+YJIT" is
 * among its strings (ruby --yjit is what starts it, at run time), and not
 * the message that ruby --yjit gets from a build without it: 3.3 keeps
 * "+YJIT" either way. */
bool rbproc_built_with_yjit(struct elf_file *ef);

#endif /* TAIPAN_RUBY_RBPROC_H */
