/* runtime.h - CPython as a runtime of the session (core/runtime.h). */
#ifndef TAIPAN_CPYTHON_RUNTIME_H
#define TAIPAN_CPYTHON_RUNTIME_H

#include "core/runtime.h"
#include "cpython/pyproc.h"

extern const struct runtime_ops cpython_runtime;

/* The process a CPython rt_proc holds: for the CPython wing's own users
 * (dump's thread list). */
const struct pyproc *cpython_proc(const struct rt_proc *rp);

#endif /* TAIPAN_CPYTHON_RUNTIME_H */
