/* cli.h - small pieces that every subcommand's command line needs. */
#ifndef TAIPAN_CLI_H
#define TAIPAN_CLI_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

/* Parses the argument of -p/--pid. Returns 0, or -EINVAL after logging
 * "--pid wants a process id, not 'ARG'". */
int cli_pid(const char *arg, pid_t *out);

/* The process that pid belongs to: pid itself, or when pid is a thread id
 * (which /proc answers for too) its process, after a note saying so. */
pid_t cli_process_of(pid_t pid);

/* Parses the argument of -r/--rate (1 to 10000 Hz). Returns 0, or -EINVAL
 * after logging what it wants. */
int cli_rate(const char *arg, unsigned int *out);

/* Parses the argument of --native: none, filtered or all, into an enum
 * session_native. Returns 0, or -EINVAL after logging what it wants. */
int cli_native(const char *arg, int *out);

/* Parses the argument of --mode: cpu, wall or off-cpu, into an enum
 * prof_mode. Returns 0, or -EINVAL after logging what it wants. */
int cli_mode(const char *arg, int *out);

/* Parses the argument of --min-block: a time with a unit (500us, 2ms, 1s;
 * a bare number is microseconds, as offcputime's -m) into nanoseconds.
 * Returns 0, or -EINVAL after logging what it wants. */
int cli_min_block(const char *arg, uint64_t *out);

/* --max-memory: a size with a unit (256M, 1G; K, M, G, KiB, MiB, GiB; a
 * bare number is MiB) of at least CLI_MIN_MEMORY, in bytes. Returns 0, or
 * -EINVAL after logging what it wants. */
#define CLI_MIN_MEMORY ((size_t)16 << 20)
int cli_max_memory(const char *arg, size_t *out);

/* --nice: a nice value from -20 to 19 into out. 0, or -EINVAL after an
 * error message. */
int cli_nice(const char *arg, int *out);

/* How many --comm options record and the agent take. */
#define CLI_MAX_COMMS 32

/* Appends the argument of a repeatable --comm to comms[*n], at most
 * CLI_MAX_COMMS of them. comms has room for CLI_MAX_COMMS + 1 pointers: the
 * last one is for the NULL that ends the list. Returns 0, or -EINVAL after
 * logging that there are too many. */
int cli_comm(const char *arg, const char **comms, int *n);

/* The width of --help texts, and the column where record's and top's
 * option texts start. */
#define CLI_HELP_WIDTH 79
#define CLI_HELP_COLUMN 23

/* Prints one option of a --help text: lead ("  -r, --rate HZ"), then text
 * from column (one space after a longer lead), its lines wrapped at
 * CLI_HELP_WIDTH and indented to column; a newline in text ends a line
 * there as well. */
void cli_help(FILE *out, int column, const char *lead, const char *text);

struct option;

/* getopt_long for subcommand cmd, with its errors in taipan's own form:
 * "taipan: error: record: unknown option '--bogus'; try 'taipan help
 * record'" or "... option '-r' needs a value ...". Returns what getopt_long
 * returns, with '?' for both kinds of error once the message is logged. */
int cli_getopt(const char *cmd, int argc, char **argv, const char *optstring,
	       const struct option *longopts);

/* Calls handler on SIGINT and SIGTERM (and SIGHUP with hup), without
 * SA_RESTART, so that a blocking wait returns and the caller can stop
 * cleanly and still write what it has. */
void cli_on_stop_signals(void (*handler)(int), bool hup);

/* Raises the soft limit on open files (RLIMIT_NOFILE) to the hard one,
 * after the command line is read (-v says the limit): the agent and
 * `record -a` hold descriptors for every process they follow, and the
 * agent's connections besides. Failing is not an error. */
void cli_raise_fd_limit(void);

/* Puts the soft limit back to what it was before cli_raise_fd_limit(), in
 * a child before it execs the command to profile: a program that uses
 * select() breaks on descriptors of 1024 and above, which is why the soft
 * limit is kept low by default. Async-signal-safe. */
void cli_restore_fd_limit(void);

#endif /* TAIPAN_CLI_H */
