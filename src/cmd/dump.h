/* dump.h - the parts of `taipan dump` in files of their own: the task tree
 * (dump_tasks.c), and what they share with cmd_dump.c. */
#ifndef TAIPAN_CMD_DUMP_H
#define TAIPAN_CMD_DUMP_H

#include <jansson.h>
#include <stdbool.h>
#include <sys/types.h>

#include "core/runtime.h"

/* s on stdout, escaped (str_escape): the target chooses its names. */
void dump_put_esc(const char *s);
/* A JSON string, or null when s is not valid UTF-8. */
json_t *dump_jstr(const char *s);

/* dump --tasks: the tasks of process pid (runtime rt, data rp, facts rf)
 * as a tree like `python -m asyncio pstree`, or JSON. The exit status. */
int dump_tasks(const struct runtime_ops *rt, struct rt_proc *rp, const struct rt_facts *rf,
	       pid_t pid, bool json);

#endif /* TAIPAN_CMD_DUMP_H */
