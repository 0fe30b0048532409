/* rules.h - CPython's rules for the merged stack: which native frames are
 * its eval loop (the frame whose Python frames go in its place) and which
 * are its call machinery (hidden between Python frames in the filtered
 * view), known by name. */
#ifndef TAIPAN_CPYTHON_RULES_H
#define TAIPAN_CPYTHON_RULES_H

#include <stdbool.h>

/* Whether a function name is CPython's eval loop, the frame that runs
 * Python frames: _PyEval_EvalFrameDefault (3.6+), PyEval_EvalFrameEx
 * (2.7), and their compiler-split parts and clones (".cold", ".part.N",
 * ".constprop.N", ...). */
bool cpython_is_eval_loop(const char *name);

/* Whether module (as the process names it) is the interpreter: equal to
 * interp_binary (struct pyproc's binary: the executable or libpython that
 * holds the interpreter) when that is given, else by name, a base name
 * "libpython*" or "python*" (which misses renamed interpreters). */
bool cpython_is_interpreter(const char *module, const char *interp_binary);

/* Whether a named native frame is the interpreter's own call machinery, the
 * frames that only get a call from one Python frame to the next or into a
 * builtin. The rule: the frame is in the interpreter (in_interpreter, from
 * cpython_is_interpreter()), it is named, it is not the eval loop, and its
 * name is a C-API or private entry point ("Py*", "_Py*": PyObject_Vectorcall,
 * _PyFunction_Vectorcall, _PyEval_Vector, ...) or one of the static
 * trampolines of Objects/ and Python/ (cfunction_*, method_vectorcall_*,
 * call_function, ...). A builtin's implementation (list_sort,
 * sre_ucs1_match, time_sleep) is not machinery; neither is an unnamed frame
 * (a stripped interpreter's statics): what cannot be identified is shown.
 * The filtered view hides machinery frames that lie between an eval loop and
 * the next frame that is not machinery. */
bool cpython_is_call_machinery(const char *name, bool in_interpreter);

/* The merge kind (enum merge_nkind) of a named native frame: name (NULL:
 * unnamed) in module, for an interpreter whose code is in interp_binary
 * (struct pyproc's binary) and whose version string is version. */
int cpython_native_kind(const char *name, const char *module, const char *interp_binary,
			const char *version);

#endif /* TAIPAN_CPYTHON_RULES_H */
