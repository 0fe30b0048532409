/* runtime.h - CPython as a runtime of the session (core/runtime.h). */
#ifndef TAIPAN_CPYTHON_RUNTIME_H
#define TAIPAN_CPYTHON_RUNTIME_H

#include "core/runtime.h"
#include "cpython/pyproc.h"

extern const struct runtime_ops cpython_runtime;

#endif /* TAIPAN_CPYTHON_RUNTIME_H */
