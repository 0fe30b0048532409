/* rboffsets.h - the layout of each Ruby version that taipan reads: offsets
 * generated ahead of time by tools/gen_ruby_offsets.sh from each version's
 * own headers, compiled (src/ruby/gen/rboffsets_table.c), never typed in.
 * Names follow tools/ruby_offsets.c, which prints them.
 */
#ifndef TAIPAN_RUBY_RBOFFSETS_H
#define TAIPAN_RUBY_RBOFFSETS_H

#include <stddef.h>
#include <stdint.h>

struct rb_offsets {
	uint16_t major, minor;
	/* rb_execution_context_t */
	uint32_t ec_vm_stack, ec_vm_stack_size, ec_cfp, ec_thread_ptr;
	/* rb_control_frame_t */
	uint32_t cfp_size, cfp_pc, cfp_iseq, cfp_self, cfp_ep;
	/* rb_iseq_t and its constant body */
	uint32_t iseq_body;
	uint32_t body_type, body_iseq_size, body_iseq_encoded, body_path, body_base_label,
	    body_label, body_first_lineno, body_insns_info, body_insns_size, body_succ_table,
	    body_local_iseq;
	uint32_t first_lineno_value; /* 1: location.first_lineno is a Fixnum VALUE, 0: an int */
	uint32_t insn_info_size, insn_info_line;
	/* rb_thread_t */
	uint32_t thread_self, thread_name;
	/* the GVL: rb_thread_t.ractor, .blocking_region_buffer; the thread
	 * that holds the ractor's GVL (threads.gvl.owner; 3.3:
	 * threads.sched.running) */
	uint32_t thread_ractor, thread_blocking_region, ractor_gvl_owner;
	/* its status (2 bits at thread_status_shift of that byte;
	 * THREAD_RUNNABLE: 0) */
	uint32_t thread_status, thread_status_shift;
	/* the VM's ractors (vm->ractor.set, ccan list nodes at
	 * ractor_vmlr_node) and each one's threads (threads.set, nodes at
	 * thread_lt_node); vm->at_exit, which ruby_vm_at_exit's code writes;
	 * the main thread, whose vm must be the VM */
	uint32_t vm_at_exit, vm_ractor_set, vm_main_thread, ractor_vmlr_node, ractor_threads_set,
	    thread_lt_node, thread_vm, thread_ec;
	/* a thread's OS thread id: an int at thread_tid, or (3.3, thread_tid
	 * 0) in its native thread (thread_nt) at nt_tid */
	uint32_t thread_tid, thread_nt, nt_tid;
	/* vm->objspace: the GC's state (rb_objspace_t, private to gc.c: where
	 * its during_gc flag is comes from rb_during_gc's code, rbproc.c) */
	uint32_t vm_objspace;
	/* struct RString: the length of a heap string at str_len; of an
	 * embedded one at str_embed_len, or (before 3.2) in the flags under
	 * str_embed_len_mask */
	uint64_t str_noembed, str_embed_len_mask;
	uint32_t str_len, str_embed_len, str_embed_len_shift, str_heap_ptr, str_embed_ary;
	/* struct RArray */
	uint64_t ary_embed;
	uint32_t ary_heap_ptr, ary_embed_ary;
	uint32_t t_mask, t_string, t_array;
	/* method entries (a C function's frame) */
	uint32_t me_def, me_called_id, me_owner, def_type, def_type_shift, def_original_id;
	uint32_t def_cfunc_func; /* the C function a cfunc method calls */
	uint32_t method_type_iseq, method_type_cfunc;
	/* an imemo's type: (flags >> imemo_shift) & imemo_mask; a method
	 * entry's is imemo_ment */
	uint32_t t_imemo, imemo_shift, imemo_mask, imemo_ment;
	/* a class's name and a singleton class's object (3.2+: fields; before:
	 * ivars, in the st_table at class_ext -> ext_iv_tbl) */
	uint64_t fl_singleton;
	uint32_t t_class, t_module, class_classpath, class_attached;
	uint32_t class_ext, ext_iv_tbl, st_entries, st_entries_start, st_entries_bound;
	/* a frame's environment flags (ep[0]): its magic, a C frame, the
	 * first frame of a call of the VM from C (VM_FRAME_FLAG_FINISH) */
	uint64_t frame_magic_mask, frame_magic_cfunc, frame_flag_cframe, frame_flag_finish,
	    env_flag_local;
	/* an ID's serial is id >> id_scope_shift, or id itself up to
	 * last_op_id (an operator's) */
	uint32_t id_scope_shift, last_op_id;
};

/* The generated table, newest last. */
extern const struct rb_offsets rb_offsets_table[];
extern const size_t rb_offsets_count;

/* The layout of Ruby major.minor, or NULL when the table has none. */
const struct rb_offsets *rb_offsets_find(unsigned int major, unsigned int minor);

#endif /* TAIPAN_RUBY_RBOFFSETS_H */
