/* walkerr.c - the tables of walkerr.h, expanded from TP_WALK_ERRORS and each
 * runtime's list (taipan_runtimes.h), every row at its id. An id outside
 * them (one between two ranges' rows, a newer BPF object, a corrupt sample)
 * gets names that say so instead of an out-of-bounds read. */
#include <stddef.h>

#include "core/walkerr.h"
#include "taipan_runtimes.h"

#define X_MARKER(id, marker, key, desc) [TP_ERR_##id] = marker,
#define X_KEY(id, marker, key, desc) [TP_ERR_##id] = key,
#define X_DESC(id, marker, key, desc) [TP_ERR_##id] = desc,
static const char *const markers[TP_ERR__COUNT] = {TP_WALK_ERRORS(X_MARKER)
						       TP_RUNTIME_ERRORS(X_MARKER)};
static const char *const keys[TP_ERR__COUNT] = {TP_WALK_ERRORS(X_KEY) TP_RUNTIME_ERRORS(X_KEY)};
static const char *const descs[TP_ERR__COUNT] = {TP_WALK_ERRORS(X_DESC) TP_RUNTIME_ERRORS(X_DESC)};

bool walkerr_known(unsigned int err)
{
	return err < TP_ERR__COUNT && keys[err];
}

const char *walkerr_marker(unsigned int err)
{
	return walkerr_known(err) ? markers[err] : "[unknown error]";
}

const char *walkerr_key(unsigned int err)
{
	return walkerr_known(err) ? keys[err] : "unknown";
}

const char *walkerr_row_key(unsigned int err)
{
	return walkerr_known(err) ? keys[err] : NULL;
}

const char *walkerr_desc(unsigned int err)
{
	return walkerr_known(err) ? descs[err] : "a failure this taipan does not know";
}

bool walkerr_is_cut(unsigned int err)
{
	return err == TP_ERR_DEPTH || err == TP_ERR_STEPS;
}

#define X_NMARKER(id, marker, key, desc) [TP_UERR_##id] = marker,
#define X_NKEY(id, marker, key, desc) [TP_UERR_##id] = key,
#define X_NDESC(id, marker, key, desc) [TP_UERR_##id] = desc,
static const char *const nmarkers[TP_UERR__COUNT] = {TP_NATIVE_ERRORS(X_NMARKER)};
static const char *const nkeys[TP_UERR__COUNT] = {TP_NATIVE_ERRORS(X_NKEY)};
static const char *const ndescs[TP_UERR__COUNT] = {TP_NATIVE_ERRORS(X_NDESC)};

const char *walkerr_native_marker(unsigned int err)
{
	return err < TP_UERR__COUNT ? nmarkers[err] : "[native: unknown error]";
}

const char *walkerr_native_key(unsigned int err)
{
	return err < TP_UERR__COUNT ? nkeys[err] : "unknown";
}

const char *walkerr_native_desc(unsigned int err)
{
	return err < TP_UERR__COUNT ? ndescs[err] : "a failure this taipan does not know";
}
