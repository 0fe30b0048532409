/* rules.c - CPython's rules for the merged stack (rules.h). */
#include <stdbool.h>
#include <string.h>

#include "cpython/rules.h"
#include "profile/merge.h"

/* name is stem, or stem followed by a compiler suffix (".cold", ".part.0",
 * ".isra.0", ".constprop.0", ".lto_priv.0"). */
static bool is_or_clone(const char *name, const char *stem)
{
	size_t n = strlen(stem);

	return !strncmp(name, stem, n) && (name[n] == '\0' || name[n] == '.');
}

bool cpython_is_eval_loop(const char *name)
{
	return name && (is_or_clone(name, "_PyEval_EvalFrameDefault") ||
			is_or_clone(name, "PyEval_EvalFrameEx"));
}

bool cpython_is_interpreter(const char *module, const char *interp_binary)
{
	const char *base;

	if (!module)
		return false;
	if (interp_binary && *interp_binary)
		return !strcmp(module, interp_binary);
	base = strrchr(module, '/');
	base = base ? base + 1 : module;
	return !strncmp(base, "libpython", 9) || !strncmp(base, "python", 6);
}

bool cpython_is_call_machinery(const char *name, bool in_interpreter)
{
	/* The static trampolines between a call site and the callee, across
	 * 2.7 to 3.15 (Objects/call.c, methodobject.c, descrobject.c,
	 * classobject.c, typeobject.c's slot_* and vectorcall_*, and the
	 * pre-3.11 Python/ceval.c helpers). */
	static const char *const prefixes[] = {
	    "Py",
	    "_Py",
	    "cfunction_",
	    "method_vectorcall",
	    "vectorcall_",
	    "slot_tp_",
	    "slot_nb_",
	    "slot_sq_",
	    "slot_mp_",
	    "call_function",
	    "do_call_core",
	    "function_code_fastcall",
	    "fast_function",
	    "ext_do_call",
	    "do_call",
	    "function_call",
	    "method_call",
	    "instancemethod_call",
	    "methoddescr_call",
	    "classmethoddescr_call",
	    "wrapperdescr_call",
	    "wrapper_call",
	    "object_vacall",
	    "call_unbound",
	    "type_call",
	    "py_trampoline_evaluator", /* 3.12+ with perf trampolines on */
	};

	if (!in_interpreter || !name || cpython_is_eval_loop(name))
		return false;
	for (size_t i = 0; i < sizeof(prefixes) / sizeof(prefixes[0]); i++)
		if (!strncmp(name, prefixes[i], strlen(prefixes[i])))
			return true;
	return false;
}

int cpython_native_kind(const char *name, const char *module, const char *interp_binary,
			const char *version)
{
	if (!name)
		return MERGE_NK_OTHER;
	/* -X perf (3.12+): each eval-loop call goes through a trampoline in
	 * JIT memory, which the perf map names "py::qualname:file". */
	if (!strncmp(name, "py::", 4))
		return MERGE_NK_MACHINERY;
	/* The eval loop: _PyEval_EvalFrameDefault on 3.x, where
	 * PyEval_EvalFrameEx is only a wrapper around it. */
	if (cpython_is_eval_loop(name) &&
	    (version[0] == '2' || strncmp(name, "PyEval_EvalFrameEx", 18)))
		return MERGE_NK_EVAL;
	if (cpython_is_call_machinery(name, cpython_is_interpreter(module, interp_binary)))
		return MERGE_NK_MACHINERY;
	return MERGE_NK_OTHER;
}
