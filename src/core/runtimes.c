/* runtimes.c - the runtimes taipan reads, in the order they are tried: a
 * runtime is added with a row here (core/runtime.h). */
#include <errno.h>
#include <stddef.h>
#include <stdio.h>

#include "core/runtime.h"
#include "cpython/runtime.h"

const struct runtime_ops *const runtimes[] = {
    &cpython_runtime,
    NULL,
};

int runtime_detect(void *const *caches, pid_t pid, const struct runtime_ops **rt,
		   struct rt_proc **rp, char *msg, size_t msglen)
{
	char other[512];
	int first = -ENOEXEC;
	for (size_t i = 0; runtimes[i]; i++) {
		int ret = runtimes[i]->detect(caches ? caches[i] : NULL, pid, rp, i ? other : msg,
					      i ? sizeof(other) : msglen);
		if (!ret) {
			*rt = runtimes[i];
			return 0;
		}
		/* The first runtime's word, unless a later one knew more
		 * than that the process is not its own. */
		if (ret != -ENOEXEC && first == -ENOEXEC) {
			if (i)
				snprintf(msg, msglen, "%s", other);
			first = ret;
		}
	}
	return first;
}
