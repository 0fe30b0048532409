/* sampling_opts.c - the sampling options of record, top and agent: one
 * table of their long options and --help words, one parser. */
#include <errno.h>
#include <getopt.h>
#include <string.h>

#include "cmd/sampling_opts.h"

/* A shared option: its getopt entry and its --help lead, and its words for
 * each command that takes it (NULL: record's words). */
static const struct shared {
	enum sampling_opt bit;
	struct option lo;
	const char *lead;
	const char *help[SAMPLING__CMDS];
} shared[] = {
    {SO_ALL,
     {"all", no_argument, NULL, 'a'},
     "  -a, --all",
     {[SAMPLING_RECORD] = "profile every Python process on the host, including\n"
			  "those in containers and those that start later",
      [SAMPLING_TOP] = "every Python process on the host instead"}},
    {SO_COMM,
     {"comm", required_argument, NULL, 'C'},
     "      --comm NAME",
     {[SAMPLING_RECORD] = "with -a: only processes with this name (repeatable)",
      [SAMPLING_AGENT] = "only processes with this name (repeatable)"}},
    {SO_CGROUP,
     {"cgroup", required_argument, NULL, 'G'},
     "      --cgroup PATH",
     {[SAMPLING_RECORD] = "with -a: only processes in this cgroup or below it (v2\n"
			  "path, e.g. /system.slice/app.service)",
      [SAMPLING_AGENT] = "only processes in this cgroup or below it (v2 path,\n"
			 "e.g. /system.slice/app.service)"}},
    {SO_RATE,
     {"rate", required_argument, NULL, 'r'},
     "  -r, --rate HZ",
     {[SAMPLING_RECORD] = "samples per second per CPU (default 100; 1 to 10000)"}},
    {SO_MODE,
     {"mode", required_argument, NULL, 'M'},
     "      --mode MODE",
     {[SAMPLING_RECORD] = "cpu (the default): where the CPU time goes, from\n"
			  "samples of running threads; wall: where the time goes,\n"
			  "running or not: also the stack of each thread as it\n"
			  "leaves the CPU, weighed by how long until it runs\n"
			  "again, with its state (runnable, sleeping, blocked) as\n"
			  "the leaf; off-cpu: only the latter. Wall and off-cpu\n"
			  "values are time (pprof: wall/nanoseconds; folded:\n"
			  "microseconds) and need Linux 5.17+",
      [SAMPLING_TOP] = "cpu (the default), wall (time on and off the CPU) or\n"
		       "off-cpu (time off it only), as in taipan record",
      [SAMPLING_AGENT] = "cpu (default), or wall: also the stacks of threads\n"
			 "off the CPU, weighed by the time away, as in taipan\n"
			 "record; served on /debug/pprof/wall (Linux 5.17+)"}},
    {SO_KERNEL,
     {"no-kernel", no_argument, NULL, 'K'},
     "      --no-kernel",
     {[SAMPLING_RECORD] = "leave out kernel frames"}},
    {SO_NATIVE,
     {"native", required_argument, NULL, 'N'},
     "      --native MODE",
     {[SAMPLING_RECORD] = "native (C) frames: filtered (the default) hides the\n"
			  "interpreter's own call machinery between Python frames\n"
			  "and the native frames above the first Python one; all\n"
			  "keeps every frame; none: Python and kernel frames only",
      [SAMPLING_AGENT] = "native (C) frames: filtered (default), all or none,\n"
			 "as in taipan record"}},
    {SO_NICE,
     {"nice", required_argument, NULL, 'n'},
     "      --nice N",
     {[SAMPLING_RECORD] = "the nice value taipan reads samples at (default -5;\n"
			  "0 leaves it): on a loaded host a new process must be\n"
			  "recognised within milliseconds of its first sample",
      [SAMPLING_AGENT] = "the nice value taipan reads samples at (default -5;\n"
			 "0 leaves it), as in taipan record"}},
    {SO_MAX_MEMORY,
     {"max-memory", required_argument, NULL, 'm'},
     "      --max-memory SIZE",
     {[SAMPLING_RECORD] = "what taipan keeps of its targets at most, together:\n"
			  "unwind tables, native symbols, code objects (default\n"
			  "256M): past it, frames are named or unwound less\n"
			  "well, never taipan killed (--stats says what)",
      [SAMPLING_TOP] = "what taipan keeps of its targets at most, together:\n"
		       "unwind tables, native symbols, code objects (default\n"
		       "256M): past it, frames are named or unwound less\n"
		       "well, never taipan killed",
      [SAMPLING_AGENT] = "what taipan keeps of its targets at most, together\n"
			 "(default 256M), as in taipan record; /stats\n"
			 "says how much is held"}},
    {SO_DEBUGINFOD,
     {"no-debuginfod", no_argument, NULL, 'D'},
     "      --no-debuginfod",
     {[SAMPLING_RECORD] = "fetch no debug files: where DEBUGINFOD_URLS is set,\n"
			  "taipan asks its servers for those of stripped files\n"
			  "(in a thread of its own) to name their functions"}},
    {SO_ASYNC,
     {"async", no_argument, NULL, SAMPLING_OPT_ASYNC},
     "      --async",
     {[SAMPLING_RECORD] = "asyncio tasks (CPython 3.8+): above the frames of\n"
			  "the coroutine a task runs, a [task NAME] frame for\n"
			  "it and for each task that awaits it, the outermost\n"
			  "first; the task label names it (pprof). With --mode\n"
			  "wall, each task that waits weighs its await stack\n"
			  "for the time it waits, above an [awaiting] leaf"}},
};

#define NSHARED (sizeof(shared) / sizeof(shared[0]))
_Static_assert(NSHARED == SAMPLING_LONGOPTS, "SAMPLING_LONGOPTS counts the shared options");

/* Where each command's option words start: the agent's names are longer. */
static const int help_column[SAMPLING__CMDS] = {
    [SAMPLING_RECORD] = CLI_HELP_COLUMN,
    [SAMPLING_TOP] = CLI_HELP_COLUMN,
    [SAMPLING_AGENT] = 26,
};

void sampling_opts_init(struct sampling_opts *so)
{
	memset(so, 0, sizeof(*so));
	so->rate = 100;
	so->mode = PROF_MODE_CPU;
	so->kernel = true;
	so->native = SESSION_NATIVE_FILTERED;
	so->nice = SESSION_NICE_DEFAULT;
}

int sampling_longopts(unsigned int mask, const struct option *own, struct option *out, size_t n)
{
	size_t k = 0;
	for (; own && own->name; own++) {
		if (k + 1 >= n)
			return -ENOSPC;
		out[k++] = *own;
	}
	for (size_t i = 0; i < NSHARED; i++) {
		if (!(mask & shared[i].bit))
			continue;
		if (k + 1 >= n)
			return -ENOSPC;
		out[k++] = shared[i].lo;
	}
	out[k] = (struct option){0};
	return 0;
}

int sampling_opts_parse(struct sampling_opts *so, int c, const char *arg)
{
	int v;
	switch (c) {
	case 'a':
		so->all = true;
		return 0;
	case 'C':
		return cli_comm(arg, so->comms, &so->ncomms) ? -EINVAL : 0;
	case 'G':
		so->cgroup = arg;
		return 0;
	case 'r':
		return cli_rate(arg, &so->rate) ? -EINVAL : 0;
	case 'M':
		if (cli_mode(arg, &v))
			return -EINVAL;
		so->mode = (enum prof_mode)v;
		return 0;
	case 'K':
		so->kernel = false;
		return 0;
	case 'N':
		if (cli_native(arg, &v))
			return -EINVAL;
		so->native = (enum session_native)v;
		return 0;
	case 'n':
		return cli_nice(arg, &so->nice) ? -EINVAL : 0;
	case 'm':
		return cli_max_memory(arg, &so->max_memory) ? -EINVAL : 0;
	case 'D':
		so->no_debuginfod = true;
		return 0;
	case SAMPLING_OPT_ASYNC:
		so->async = true;
		return 0;
	default:
		return 1;
	}
}

void sampling_opts_help(FILE *out, enum sampling_cmd cmd, unsigned int mask)
{
	for (size_t i = 0; i < NSHARED; i++) {
		if (!(mask & shared[i].bit))
			continue;
		const char *text = shared[i].help[cmd];
		cli_help(out, help_column[cmd], shared[i].lead,
			 text ? text : shared[i].help[SAMPLING_RECORD]);
	}
}

void sampling_opts_session(const struct sampling_opts *so, struct session_opts *o)
{
	o->system_wide = so->all;
	o->comms = so->ncomms ? so->comms : NULL;
	o->cgroup = so->cgroup;
	o->rate_hz = so->rate;
	o->mode = so->mode;
	o->kernel_stacks = so->kernel;
	o->native = so->native;
	o->nice = so->nice;
	o->max_memory = so->max_memory;
	o->no_debuginfod = so->no_debuginfod;
	o->async = so->async;
}
