/* debuginfod.c - debug files by build-id through libdebuginfod, in a worker
 * thread (debuginfod.h). */
#include "profile/debuginfod.h"

#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/stat.h>
#include <unistd.h>

#define uthash_nonfatal_oom(ent) ((ent)->oom = true)
#include <uthash.h>

#include "util/clock.h"
#include "util/hashfree.h"
#include "util/log.h"

/* Build-ids asked for at most: a host runs a few thousand files. */
#define MAX_ASKED 4096
#define BUILD_ID_MAX 128

/* libdebuginfod's API (elfutils/debuginfod.h), declared here: the library
 * is loaded at run time, and its headers need not be installed. */
typedef struct debuginfod_client debuginfod_client;
typedef int (*debuginfod_progressfn_t)(debuginfod_client *c, long a, long b);

enum dstate { D_QUEUED, D_FOUND, D_MISSING };

struct dent {
	char id[BUILD_ID_MAX + 1];
	enum dstate state;
	char *path;	   /* D_FOUND: in libdebuginfod's cache */
	struct dent *next; /* in the queue */
	bool oom;
	UT_hash_handle hh;
};

struct dinfod {
	void *lib;
	debuginfod_client *(*begin)(void);
	void (*end)(debuginfod_client *);
	int (*find)(debuginfod_client *, const unsigned char *, int, char **);
	void (*set_progressfn)(debuginfod_client *, debuginfod_progressfn_t);
	debuginfod_client *client;
	pthread_t worker;
	pthread_mutex_t lock;
	pthread_cond_t wake;
	struct dent *all; /* by build-id */
	struct dent *head, *tail;
	char cache[512]; /* libdebuginfod's cache: <cache>/<build-id>/debuginfo */
	atomic_bool stop;
	atomic_uint_fast64_t ended;
	uint64_t asked, found, missing;
};

/* libdebuginfod calls it while a transfer runs: non-zero cuts it short. */
static struct dinfod *the_one;
static int progress(debuginfod_client *c, long a, long b)
{
	(void)c, (void)a, (void)b;
	return the_one && atomic_load(&the_one->stop);
}

static void *work(void *arg)
{
	struct dinfod *d = arg;
	for (;;) {
		pthread_mutex_lock(&d->lock);
		while (!d->head && !atomic_load(&d->stop))
			pthread_cond_wait(&d->wake, &d->lock);
		if (atomic_load(&d->stop)) {
			pthread_mutex_unlock(&d->lock);
			return NULL;
		}
		struct dent *e = d->head;
		d->head = e->next;
		if (!d->head)
			d->tail = NULL;
		char id[BUILD_ID_MAX + 1];
		memcpy(id, e->id, sizeof(id));
		pthread_mutex_unlock(&d->lock);

		char *path = NULL;
		uint64_t t0 = clock_ns(CLOCK_MONOTONIC);
		/* A length of 0: the build-id is given as hex text. */
		int fd = d->find(d->client, (const unsigned char *)id, 0, &path);
		if (fd >= 0)
			close(fd);
		log_debug("debuginfod: %s: %s in %.0f ms", id,
			  fd >= 0 ? path : strerror(fd < 0 ? -fd : EIO),
			  (clock_ns(CLOCK_MONOTONIC) - t0) / 1e6);
		pthread_mutex_lock(&d->lock);
		if (fd >= 0 && path) {
			e->state = D_FOUND;
			e->path = path;
			d->found++;
		} else {
			free(path);
			e->state = D_MISSING;
			d->missing++;
		}
		pthread_mutex_unlock(&d->lock);
		atomic_fetch_add(&d->ended, 1);
	}
}

struct dinfod *dinfod_new(char *why, size_t len)
{
	const char *urls = getenv("DEBUGINFOD_URLS");
	if (!urls || !*urls) {
		snprintf(why, len, "DEBUGINFOD_URLS is not set");
		return NULL;
	}
	struct dinfod *d = calloc(1, sizeof(*d));
	if (!d) {
		snprintf(why, len, "out of memory");
		return NULL;
	}
	/* Where libdebuginfod keeps what it fetched (debuginfod-client-config(7)). */
	const char *c = getenv("DEBUGINFOD_CACHE_PATH"), *xdg = getenv("XDG_CACHE_HOME"),
		   *home = getenv("HOME");
	if (c && *c)
		snprintf(d->cache, sizeof(d->cache), "%s", c);
	else if (xdg && *xdg)
		snprintf(d->cache, sizeof(d->cache), "%s/debuginfod_client", xdg);
	else if (home && *home)
		snprintf(d->cache, sizeof(d->cache), "%s/.cache/debuginfod_client", home);
	d->lib = dlopen("libdebuginfod.so.1", RTLD_NOW | RTLD_LOCAL);
	if (!d->lib) {
		snprintf(why, len, "libdebuginfod.so.1 cannot be loaded (Debian: libdebuginfod1)");
		free(d);
		return NULL;
	}
	*(void **)&d->begin = dlsym(d->lib, "debuginfod_begin");
	*(void **)&d->end = dlsym(d->lib, "debuginfod_end");
	*(void **)&d->find = dlsym(d->lib, "debuginfod_find_debuginfo");
	*(void **)&d->set_progressfn = dlsym(d->lib, "debuginfod_set_progressfn");
	if (!d->begin || !d->end || !d->find || !(d->client = d->begin())) {
		snprintf(why, len, "libdebuginfod.so.1 has no usable client");
		dlclose(d->lib);
		free(d);
		return NULL;
	}
	if (d->set_progressfn) {
		the_one = d;
		d->set_progressfn(d->client, progress);
	}
	pthread_mutex_init(&d->lock, NULL);
	pthread_cond_init(&d->wake, NULL);
	if (pthread_create(&d->worker, NULL, work, d)) {
		snprintf(why, len, "cannot start its thread");
		d->end(d->client);
		dlclose(d->lib);
		if (the_one == d)
			the_one = NULL;
		free(d);
		return NULL;
	}
	return d;
}

void dinfod_free(struct dinfod *d)
{
	if (!d)
		return;
	pthread_mutex_lock(&d->lock);
	atomic_store(&d->stop, true);
	pthread_cond_signal(&d->wake);
	pthread_mutex_unlock(&d->lock);
	/* A transfer is cut short at its next progress call; one stuck
	 * before it (a name to resolve, a connection that hangs) must not
	 * hold the profile back: after a second the worker is left to
	 * end with the process, and d with it. */
	struct timespec until;
	clock_gettime(CLOCK_REALTIME, &until);
	until.tv_sec += 1;
	if (pthread_timedjoin_np(d->worker, NULL, &until)) {
		log_debug("debuginfod: a fetch is still under way; left to end with taipan");
		return;
	}
	d->end(d->client);
	/* The library stays loaded: libcurl's threads and state may outlive
	 * the client (as util/dynlib.c never unloads). */
	if (the_one == d)
		the_one = NULL;
	HASH_FREE_ALL(d->all, e, free(e->path));
	pthread_mutex_destroy(&d->lock);
	pthread_cond_destroy(&d->wake);
	free(d);
}

static bool valid_id(const char *id)
{
	size_t n = strlen(id);
	if (n < 2 || n > BUILD_ID_MAX || n % 2)
		return false;
	for (size_t i = 0; i < n; i++)
		if (!((id[i] >= '0' && id[i] <= '9') || (id[i] >= 'a' && id[i] <= 'f')))
			return false;
	return true;
}

int dinfod_find(struct dinfod *d, const char *build_id, char *path, size_t len)
{
	int ret;
	if (!valid_id(build_id))
		return -ENOENT;
	pthread_mutex_lock(&d->lock);
	struct dent *e;
	HASH_FIND_STR(d->all, build_id, e);
	if (!e) {
		if (d->asked >= MAX_ASKED) {
			ret = -ENOENT;
			goto out;
		}
		if (!(e = calloc(1, sizeof(*e)))) {
			ret = -ENOMEM;
			goto out;
		}
		snprintf(e->id, sizeof(e->id), "%s", build_id);
		HASH_ADD_STR(d->all, id, e);
		if (e->oom) {
			free(e);
			ret = -ENOMEM;
			goto out;
		}
		d->asked++;
		/* Fetched by an earlier run: taken from the cache now, without
		 * waiting for the worker. */
		char cached[sizeof(d->cache) + BUILD_ID_MAX + 16];
		struct stat st;
		if (d->cache[0] &&
		    snprintf(cached, sizeof(cached), "%s/%s/debuginfo", d->cache, build_id) <
			(int)sizeof(cached) &&
		    !stat(cached, &st) && S_ISREG(st.st_mode) && st.st_size > 0 &&
		    (e->path = strdup(cached))) {
			e->state = D_FOUND;
			d->found++;
		} else {
			if (d->tail)
				d->tail->next = e;
			else
				d->head = e;
			d->tail = e;
			pthread_cond_signal(&d->wake);
		}
	}
	if (e->state == D_QUEUED)
		ret = -EAGAIN;
	else if (e->state == D_MISSING)
		ret = -ENOENT;
	else
		ret = snprintf(path, len, "%s", e->path) < (int)len ? 0 : -ENAMETOOLONG;
out:
	pthread_mutex_unlock(&d->lock);
	return ret;
}

uint64_t dinfod_ended(const struct dinfod *d)
{
	return atomic_load(&((struct dinfod *)d)->ended);
}

void dinfod_get_stats(const struct dinfod *d, struct dinfod_stats *out)
{
	struct dinfod *m = (struct dinfod *)d;
	pthread_mutex_lock(&m->lock);
	*out = (struct dinfod_stats){.asked = m->asked, .found = m->found, .missing = m->missing};
	pthread_mutex_unlock(&m->lock);
}
