/* debuginfod.h - separate debug files fetched by build-id from the servers
 * that DEBUGINFOD_URLS names (Debian, Ubuntu and Fedora set it for their
 * users), through elfutils' libdebuginfod, loaded with dlopen: taipan
 * runs without it.
 *
 * Fetches run in a worker thread of their own, never on the path that
 * reads samples: dinfod_find() only asks and looks at what has arrived.
 * libdebuginfod keeps what it fetched in its cache ($DEBUGINFOD_CACHE_PATH,
 * by default ~/.cache/debuginfod_client), where a later run finds it at
 * once. */
#ifndef TAIPAN_DEBUGINFOD_H
#define TAIPAN_DEBUGINFOD_H

#include <stddef.h>
#include <stdint.h>

struct dinfod;

/* A fetcher, or NULL with why filled: DEBUGINFOD_URLS unset or empty,
 * libdebuginfod.so.1 missing, or no memory or thread. */
struct dinfod *dinfod_new(char *why, size_t len);
/* Stops the worker (a fetch under way is cut short) and frees. Accepts
 * NULL. */
void dinfod_free(struct dinfod *d);

/* The debug file of build_id (lowercase hex): 0 with its path in the
 * cache; -EAGAIN when it is on its way (asked for now, if it was not);
 * -ENOENT when no server has it; -ENOMEM. Never waits on the network. */
int dinfod_find(struct dinfod *d, const char *build_id, char *path, size_t len);

/* How many fetches have ended, found or not: it changes when a debug file
 * that was on its way arrives (nativesym then indexes its file again). */
uint64_t dinfod_ended(const struct dinfod *d);

struct dinfod_stats {
	uint64_t asked;	  /* build-ids asked for */
	uint64_t found;	  /* debug files fetched (or found in the cache) */
	uint64_t missing; /* that no server had, or that failed */
};
void dinfod_get_stats(const struct dinfod *d, struct dinfod_stats *out);

#endif /* TAIPAN_DEBUGINFOD_H */
