/* walkerr.h - names of the walk failures: the generic ones of
 * TP_WALK_ERRORS (taipan_abi.h) and each runtime's (taipan_runtimes.h), each
 * in its range of ids, generated from those tables for every place that
 * prints them. */
#ifndef TAIPAN_WALKERR_H
#define TAIPAN_WALKERR_H

#include <stdbool.h>

#include "taipan_abi.h"

/* The markers of a native walk that met code BPF had no mapping for
 * (TP_UERR_UNMAPPED), and of one that lost the frame pointer in code
 * without CFI (TP_UERR_NOFP; in a file, the module is named). */
#define STACKS_MARKER_NEW_CODE "[native: code taipan had not read yet]"
#define STACKS_MARKER_NOWHERE "[native: return address into no mapping]"
#define STACKS_MARKER_NOFP_JIT "[native: JIT code without a frame pointer]"
#define STACKS_NOFP_IN_FORMAT "[native: no CFI, no frame pointer in %s]"

/* Whether err is the id of a failure: ids between two ranges' rows name
 * none. */
bool walkerr_known(unsigned int err);
/* For lists of every failure: walkerr_key(), or NULL for an id that names
 * none. */
const char *walkerr_row_key(unsigned int err);
/* The marker frame at the root of a stack cut short by err ("[truncated]"). */
const char *walkerr_marker(unsigned int err);
/* A short key for stats and JSON ("depth"). */
const char *walkerr_key(unsigned int err);
/* One sentence on what happened. */
const char *walkerr_desc(unsigned int err);
/* Whether err means the stack was cut at a limit rather than a failed read. */
bool walkerr_is_cut(unsigned int err);

/* The same for the native unwinder's TP_NATIVE_ERRORS. */
const char *walkerr_native_marker(unsigned int err);
const char *walkerr_native_key(unsigned int err);
const char *walkerr_native_desc(unsigned int err);

#endif /* TAIPAN_WALKERR_H */
