/* dynlib.c - see dynlib.h. */
#include "util/dynlib.h"

#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

static pthread_mutex_t dynlib_mu = PTHREAD_MUTEX_INITIALIZER;

int dynlib_open(const char *soname, const char *const *names, size_t n, void (**fns)(void),
		char *err, size_t errlen)
{
	int ret = 0;

	pthread_mutex_lock(&dynlib_mu);
	if (n && fns[0]) /* resolved before */
		goto out;
	/* RTLD_NOW: a missing symbol fails here, not in a later call. */
	void *h = dlopen(soname, RTLD_NOW | RTLD_LOCAL);
	if (!h) {
		const char *why = dlerror();
		snprintf(err, errlen, "cannot load %s: %s", soname, why ? why : "not found");
		ret = -ENOENT;
		goto out;
	}
	for (size_t i = 0; i < n; i++) {
		void *sym = dlsym(h, names[i]);
		if (!sym) {
			snprintf(err, errlen,
				 "%s has no %s: another version than taipan was built for", soname,
				 names[i]);
			memset(fns, 0, n * sizeof(*fns));
			ret = -ENOENT;
			goto out; /* the handle stays: nothing may be unloaded under a thread */
		}
		/* POSIX: a dlsym() result converts to a function pointer. */
		memcpy(&fns[i], &sym, sizeof(sym));
	}
out:
	pthread_mutex_unlock(&dynlib_mu);
	return ret;
}
