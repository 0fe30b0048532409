/* ruby_offsets.c - prints the layout taipan reads of one Ruby version, as
 * its own compiler lays it out: compiled against a configured Ruby source
 * tree by tools/gen_ruby_offsets.sh, which writes src/ruby/gen/. Not part
 * of taipan's build. One "name value" line each, names as in struct
 * rb_offsets (src/ruby/rboffsets.h).
 */
#include "ruby/ruby.h"
#include "ruby/version.h"
#include "vm_core.h"
#include "iseq.h"
#include "method.h"
#include "id.h"
#include "ractor_core.h"
#include "internal/class.h"
#include "internal/imemo.h"

#include <stddef.h>
#include <stdio.h>
#include <string.h>

#define OFF(name, type, field) printf("%s %zu\n", #name, offsetof(type, field))
#define SIZE(name, type) printf("%s %zu\n", #name, sizeof(type))

/* The byte and bit of a bitfield: set it to all ones in a zeroed struct. */
#define BITFIELD_AT(name, type, field, width)                                                      \
	do {                                                                                       \
		type v;                                                                            \
		memset(&v, 0, sizeof(v));                                                          \
		v.field = (1u << (width)) - 1;                                                     \
		const unsigned char *p = (const unsigned char *)&v;                                \
		for (size_t i = 0; i < sizeof(v); i++)                                             \
			if (p[i]) {                                                                \
				printf("%s %zu\n%s_shift %d\n", #name, i, #name,                   \
				       __builtin_ctz(p[i]));                                       \
				break;                                                             \
			}                                                                          \
	} while (0)

int main(void)
{
	printf("major %d\nminor %d\n", RUBY_API_VERSION_MAJOR, RUBY_API_VERSION_MINOR);
	OFF(ec_vm_stack, rb_execution_context_t, vm_stack);
	OFF(ec_vm_stack_size, rb_execution_context_t, vm_stack_size);
	OFF(ec_cfp, rb_execution_context_t, cfp);
	OFF(ec_thread_ptr, rb_execution_context_t, thread_ptr);
	SIZE(cfp_size, rb_control_frame_t);
	OFF(cfp_pc, rb_control_frame_t, pc);
	OFF(cfp_iseq, rb_control_frame_t, iseq);
	OFF(cfp_self, rb_control_frame_t, self);
	OFF(cfp_ep, rb_control_frame_t, ep);
	OFF(iseq_body, rb_iseq_t, body);
	OFF(body_type, struct rb_iseq_constant_body, type);
	OFF(body_iseq_size, struct rb_iseq_constant_body, iseq_size);
	OFF(body_iseq_encoded, struct rb_iseq_constant_body, iseq_encoded);
	OFF(body_path, struct rb_iseq_constant_body, location.pathobj);
	OFF(body_base_label, struct rb_iseq_constant_body, location.base_label);
	OFF(body_label, struct rb_iseq_constant_body, location.label);
	OFF(body_first_lineno, struct rb_iseq_constant_body, location.first_lineno);
	/* a Fixnum VALUE before 3.2, an int since */
	printf("first_lineno_value %d\n",
	       __builtin_types_compatible_p(
		   __typeof__(((struct rb_iseq_constant_body *)0)->location.first_lineno), VALUE));
	OFF(body_insns_info, struct rb_iseq_constant_body, insns_info.body);
	OFF(body_insns_size, struct rb_iseq_constant_body, insns_info.size);
	OFF(body_succ_table, struct rb_iseq_constant_body, insns_info.succ_index_table);
	OFF(body_local_iseq, struct rb_iseq_constant_body, local_iseq);
	SIZE(insn_info_size, struct iseq_insn_info_entry);
	OFF(insn_info_line, struct iseq_insn_info_entry, line_no);
	OFF(thread_self, rb_thread_t, self);
	OFF(thread_name, rb_thread_t, name);
	/* The GVL: the ractor's running thread, and whether a thread is in a
	 * blocking region (the GVL released: IO, sleep, a C extension). */
	OFF(thread_ractor, rb_thread_t, ractor);
	OFF(thread_blocking_region, rb_thread_t, blocking_region_buffer);
	BITFIELD_AT(thread_status, rb_thread_t, status, 2); /* THREAD_RUNNABLE is 0 */
	/* The VM's ractors and each one's threads (dump lists them): ccan
	 * lists, each thread with its EC and its OS thread id. */
	OFF(vm_at_exit, rb_vm_t, at_exit);
	OFF(vm_objspace, rb_vm_t, objspace); /* the GC's, whose flags say it runs */
	OFF(vm_ractor_set, rb_vm_t, ractor.set);
	OFF(vm_main_thread, rb_vm_t, ractor.main_thread);
	OFF(ractor_vmlr_node, rb_ractor_t, vmlr_node);
	OFF(ractor_threads_set, rb_ractor_t, threads.set);
	OFF(thread_lt_node, rb_thread_t, lt_node);
	OFF(thread_vm, rb_thread_t, vm);
	OFF(thread_ec, rb_thread_t, ec);
#if RUBY_API_VERSION_MAJOR > 3 || (RUBY_API_VERSION_MAJOR == 3 && RUBY_API_VERSION_MINOR >= 3)
	/* 3.3: the native thread a Ruby thread runs on holds the tid. */
	printf("thread_tid 0\n");
	OFF(thread_nt, rb_thread_t, nt);
	OFF(nt_tid, struct rb_native_thread, tid);
#else
	OFF(thread_tid, rb_thread_t, tid);
	printf("thread_nt 0\nnt_tid 0\n");
#endif
#if RUBY_API_VERSION_MAJOR > 3 || (RUBY_API_VERSION_MAJOR == 3 && RUBY_API_VERSION_MINOR >= 3)
	OFF(ractor_gvl_owner, rb_ractor_t, threads.sched.running);
#else
	OFF(ractor_gvl_owner, rb_ractor_t, threads.gvl.owner);
#endif
	/* Strings: where the length and the bytes are, embedded or not. */
	printf("str_noembed %lu\n", (unsigned long)RSTRING_NOEMBED);
#if RUBY_API_VERSION_MAJOR > 3 || (RUBY_API_VERSION_MAJOR == 3 && RUBY_API_VERSION_MINOR >= 2)
	OFF(str_len, struct RString, len);
	OFF(str_embed_len, struct RString, len);
	printf("str_embed_len_mask 0\nstr_embed_len_shift 0\n");
#else
	OFF(str_len, struct RString, as.heap.len);
	printf("str_embed_len 0\n");
	printf("str_embed_len_mask %lu\nstr_embed_len_shift %d\n",
	       (unsigned long)RSTRING_EMBED_LEN_MASK, (int)RSTRING_EMBED_LEN_SHIFT);
#endif
	OFF(str_heap_ptr, struct RString, as.heap.ptr);
	OFF(str_embed_ary, struct RString, as.embed.ary);
	/* Arrays (a path object is [path, realpath]). */
	printf("ary_embed %lu\n", (unsigned long)RARRAY_EMBED_FLAG);
	OFF(ary_heap_ptr, struct RArray, as.heap.ptr);
	OFF(ary_embed_ary, struct RArray, as.ary);
	printf("t_mask %d\nt_string %d\nt_array %d\n", (int)RUBY_T_MASK, (int)RUBY_T_STRING,
	       (int)RUBY_T_ARRAY);
	/* The method entry of a C function's frame (ep[-2]). */
	OFF(me_def, rb_callable_method_entry_t, def);
	OFF(me_called_id, rb_callable_method_entry_t, called_id);
	OFF(me_owner, rb_callable_method_entry_t, owner);
	BITFIELD_AT(def_type, rb_method_definition_t, type, VM_METHOD_TYPE_MINIMUM_BITS);
	OFF(def_original_id, rb_method_definition_t, original_id);
	OFF(def_cfunc_func, rb_method_definition_t, body.cfunc.func);
	/* A method entry is an imemo of type imemo_ment. */
	printf("t_imemo %d\nimemo_shift %d\nimemo_mask %d\nimemo_ment %d\n", (int)RUBY_T_IMEMO,
	       (int)RUBY_FL_USHIFT, (int)IMEMO_MASK, (int)imemo_ment);
	/* A class's name: its classpath (3.2+: a field of its classext; before:
	 * the __classpath__ ivar of its ivar table, an st_table), and the
	 * object a singleton class is attached to (3.2+: a field; before: the
	 * __attached__ ivar). */
	printf("fl_singleton %lu\nt_class %d\nt_module %d\n", (unsigned long)RUBY_FL_SINGLETON,
	       (int)RUBY_T_CLASS, (int)RUBY_T_MODULE);
#if RUBY_API_VERSION_MAJOR > 3 || (RUBY_API_VERSION_MAJOR == 3 && RUBY_API_VERSION_MINOR >= 2)
	OFF(class_classpath, struct RClass_and_rb_classext_t, classext.classpath);
	OFF(class_attached, struct RClass_and_rb_classext_t,
	    classext.as.singleton_class.attached_object);
	printf("class_ext 0\next_iv_tbl 0\nst_entries 0\nst_entries_start 0\nst_entries_bound 0\n");
#else
	printf("class_classpath 0\nclass_attached 0\n");
	OFF(class_ext, struct RClass, ptr);
	OFF(ext_iv_tbl, rb_classext_t, iv_tbl);
	OFF(st_entries, st_table, entries);
	OFF(st_entries_start, st_table, entries_start);
	OFF(st_entries_bound, st_table, entries_bound);
#endif
	printf("method_type_iseq %d\nmethod_type_cfunc %d\n", (int)VM_METHOD_TYPE_ISEQ,
	       (int)VM_METHOD_TYPE_CFUNC);
	printf("frame_magic_mask %lu\nframe_magic_cfunc %lu\nframe_flag_cframe %lu\n",
	       (unsigned long)VM_FRAME_MAGIC_MASK, (unsigned long)VM_FRAME_MAGIC_CFUNC,
	       (unsigned long)VM_FRAME_FLAG_CFRAME);
	printf("frame_flag_finish %lu\n", (unsigned long)VM_FRAME_FLAG_FINISH);
	/* An ID's serial (symbol.c, rb_id_to_serial). */
	printf("id_scope_shift %d\nlast_op_id %d\n", (int)RUBY_ID_SCOPE_SHIFT, (int)tLAST_OP_ID);
	printf("env_flag_local %lu\n", (unsigned long)VM_ENV_FLAG_LOCAL);
	return 0;
}
