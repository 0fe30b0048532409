/* runtimes.c - the runtimes taipan reads, in the order they are tried: a
 * runtime is added with a row here (core/runtime.h). */
#include <stddef.h>

#include "core/runtime.h"
#include "cpython/runtime.h"

const struct runtime_ops *const runtimes[] = {
    &cpython_runtime,
    NULL,
};
