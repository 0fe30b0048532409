/* sampling_opts.h - the options that record, top and agent share: which
 * processes to sample and how (-a, --comm, --cgroup, --rate, --mode,
 * --no-kernel, --native, --nice, --max-memory, --no-debuginfod, --async),
 * parsed and explained in one
 * place. Each command takes the ones in its mask; its own options stay in
 * its cmd_*.c. */
#ifndef TAIPAN_SAMPLING_OPTS_H
#define TAIPAN_SAMPLING_OPTS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#include "cmd/cli.h"
#include "core/session.h"

/* The shared options, as bits of a command's mask. */
enum sampling_opt {
	SO_ALL = 1 << 0,	/* -a, --all */
	SO_COMM = 1 << 1,	/* --comm NAME, repeatable */
	SO_CGROUP = 1 << 2,	/* --cgroup PATH */
	SO_RATE = 1 << 3,	/* -r, --rate HZ */
	SO_MODE = 1 << 4,	/* --mode MODE */
	SO_KERNEL = 1 << 5,	/* --no-kernel */
	SO_NATIVE = 1 << 6,	/* --native MODE */
	SO_NICE = 1 << 7,	/* --nice N */
	SO_MAX_MEMORY = 1 << 8, /* --max-memory SIZE */
	SO_DEBUGINFOD = 1 << 9, /* --no-debuginfod */
	SO_ASYNC = 1 << 10,	/* --async */
};

/* getopt's value for --async, which has no short form. */
#define SAMPLING_OPT_ASYNC 0x200

/* The commands that take them, whose --help words differ. */
enum sampling_cmd {
	SAMPLING_RECORD,
	SAMPLING_TOP,
	SAMPLING_AGENT,
	SAMPLING__CMDS,
};

struct sampling_opts {
	bool all; /* every Python process on the host */
	const char *comms[CLI_MAX_COMMS + 1];
	int ncomms;
	const char *cgroup;
	unsigned int rate;
	enum prof_mode mode;
	bool kernel; /* kernel frames */
	enum session_native native;
	int nice;
	size_t max_memory; /* 0: the session's default */
	bool no_debuginfod;
	bool async; /* asyncio tasks in the stacks */
};

/* The defaults: 100 Hz, CPU mode, kernel frames, filtered native frames,
 * SESSION_NICE_DEFAULT, no filter. */
void sampling_opts_init(struct sampling_opts *so);

/* The long options for getopt_long: own's (ended by an entry of zeros), then
 * the shared ones in mask, then the zeros, into out (n entries). Returns 0,
 * or -ENOSPC when out is too small. */
#define SAMPLING_LONGOPTS 11
int sampling_longopts(unsigned int mask, const struct option *own, struct option *out, size_t n);

/* Takes the option getopt returned as c, with its argument arg. Returns 0
 * when c is a shared option and its value is good, 1 when c is not a shared
 * option (the command's own, or an error of getopt's), -EINVAL after
 * logging what a bad value should be. */
int sampling_opts_parse(struct sampling_opts *so, int c, const char *arg);

/* Prints the --help lines of the options in mask, in the order above, in
 * cmd's words and columns. */
void sampling_opts_help(FILE *out, enum sampling_cmd cmd, unsigned int mask);

/* Sets what so says in o: the processes, the rate and how to sample. */
void sampling_opts_session(const struct sampling_opts *so, struct session_opts *o);

#endif /* TAIPAN_SAMPLING_OPTS_H */
