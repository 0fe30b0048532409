/* runtimes.c - the runtimes taipan reads, in the order they are tried: the
 * rows of TP_RUNTIMES (taipan_runtimes.h), each runtime's operations
 * (core/runtime.h) named NAME_runtime. */
#include <errno.h>
#include <stddef.h>
#include <stdio.h>

#include "core/runtime.h"
#include "taipan_runtimes.h"

#define RT_DECLARE(tag, name) extern const struct runtime_ops name##_runtime;
TP_RUNTIMES(RT_DECLARE)
#undef RT_DECLARE

#define RT_ROW(tag, name) &name##_runtime,
const struct runtime_ops *const runtimes[] = {TP_RUNTIMES(RT_ROW) NULL};
#undef RT_ROW
_Static_assert(sizeof(runtimes) / sizeof(runtimes[0]) - 1 <= RT_MAX, "RT_MAX runtimes at most");

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
