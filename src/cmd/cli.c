/* cli.c - option parsing, clocks and signals shared by the subcommands. */
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include "cmd/cli.h"
#include "core/session.h"
#include "proc/procfs.h"
#include "util/log.h"

int cli_pid(const char *arg, pid_t *out)
{
	char *end;
	errno = 0;
	long v = strtol(arg, &end, 10);
	if (errno || end == arg || *end || v <= 0 || v > INT_MAX) {
		log_error("--pid wants a process id, not '%s'", arg);
		return -EINVAL;
	}
	*out = (pid_t)v;
	return 0;
}

pid_t cli_process_of(pid_t pid)
{
	struct procfs_status st;
	char comm[PROCFS_COMM_LEN];
	if (procfs_status(pid, &st) || st.tgid <= 0 || st.tgid == pid)
		return pid; /* a process, or gone: classification says which */
	procfs_comm(st.tgid, 0, comm, sizeof(comm));
	log_info("%d is a thread of process %d (%s): profiling the process, every thread", pid,
		 st.tgid, comm);
	return st.tgid;
}

int cli_rate(const char *arg, unsigned int *out)
{
	char *end;
	errno = 0;
	long v = strtol(arg, &end, 10);
	if (errno || end == arg || *end || v < 1 || v > 10000) {
		log_error("--rate wants a number from 1 to 10000 (Hz), not '%s'", arg);
		return -EINVAL;
	}
	*out = (unsigned int)v;
	return 0;
}

int cli_nice(const char *arg, int *out)
{
	char *end;
	errno = 0;
	long v = strtol(arg, &end, 10);
	if (errno || end == arg || *end || v < -20 || v > 19) {
		log_error("--nice wants a nice value from -20 to 19, not '%s'", arg);
		return -EINVAL;
	}
	*out = (int)v;
	return 0;
}

int cli_native(const char *arg, int *out)
{
	static const char *const modes[] = {
	    [SESSION_NATIVE_NONE] = "none",
	    [SESSION_NATIVE_FILTERED] = "filtered",
	    [SESSION_NATIVE_ALL] = "all",
	};
	for (int i = 0; i < 3; i++)
		if (!strcmp(arg, modes[i])) {
			*out = i;
			return 0;
		}
	log_error("--native wants none, filtered or all, not '%s'", arg);
	return -EINVAL;
}

int cli_mode(const char *arg, int *out)
{
	static const int modes[] = {PROF_MODE_CPU, PROF_MODE_WALL, PROF_MODE_OFFCPU};
	for (size_t i = 0; i < sizeof(modes) / sizeof(modes[0]); i++)
		if (!strcmp(arg, prof_mode_name(modes[i]))) {
			*out = modes[i];
			return 0;
		}
	log_error("--mode wants cpu, wall or off-cpu, not '%s'", arg);
	return -EINVAL;
}

int cli_min_block(const char *arg, uint64_t *out)
{
	static const struct {
		const char *unit;
		double ns;
	} units[] = {{"", 1e3}, {"us", 1e3}, {"ms", 1e6}, {"s", 1e9}, {"ns", 1}};
	char *end;
	errno = 0;
	double v = strtod(arg, &end);
	for (size_t i = 0; !errno && end != arg && v >= 0 && i < sizeof(units) / sizeof(units[0]);
	     i++)
		if (!strcmp(end, units[i].unit) && v * units[i].ns < 1e18) {
			*out = (uint64_t)(v * units[i].ns + 0.5);
			return 0;
		}
	log_error("--min-block wants a time such as 500us, 2ms or 1s, not '%s'", arg);
	return -EINVAL;
}

int cli_max_memory(const char *arg, size_t *out)
{
	static const struct {
		const char *unit;
		double bytes;
	} units[] = {{"", 1 << 20},    {"K", 1 << 10}, {"KiB", 1 << 10}, {"M", 1 << 20},
		     {"MiB", 1 << 20}, {"G", 1 << 30}, {"GiB", 1 << 30}};
	char *end;
	errno = 0;
	double v = strtod(arg, &end);
	for (size_t i = 0; !errno && end != arg && v > 0 && i < sizeof(units) / sizeof(units[0]);
	     i++)
		if (!strcmp(end, units[i].unit)) {
			double b = v * units[i].bytes;
			if (b < (double)CLI_MIN_MEMORY || b > (double)((size_t)1 << 40))
				break;
			*out = (size_t)b;
			return 0;
		}
	log_error("--max-memory wants a size from 16M to 1024G such as 256M or 1G (a bare number "
		  "is MiB), not '%s'",
		  arg);
	return -EINVAL;
}

int cli_comm(const char *arg, const char **comms, int *n)
{
	if (*n >= CLI_MAX_COMMS) {
		log_error("at most %d --comm options", CLI_MAX_COMMS);
		return -EINVAL;
	}
	comms[(*n)++] = arg;
	return 0;
}

void cli_help(FILE *out, int column, const char *lead, const char *text)
{
	int at = fprintf(out, "%s", lead);
	bool empty = true; /* nothing on this line past the indentation */
	do
		fputc(' ', out);
	while (++at < column);
	for (const char *p = text; *p;) {
		size_t w = strcspn(p, " \n");
		if (*p == ' ') {
			p++;
			continue;
		}
		if (*p == '\n' || (!empty && at + 1 + (int)w > CLI_HELP_WIDTH)) {
			fprintf(out, "\n%*s", column, "");
			at = column;
			empty = true;
			p += *p == '\n';
			continue;
		}
		if (!empty) {
			fputc(' ', out);
			at++;
		}
		fwrite(p, 1, w, out);
		at += (int)w;
		empty = false;
		p += w;
	}
	fputc('\n', out);
}

void cli_on_stop_signals(void (*handler)(int), bool hup)
{
	struct sigaction sa = {.sa_handler = handler};
	sigemptyset(&sa.sa_mask);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	if (hup)
		sigaction(SIGHUP, &sa, NULL);
}

int cli_getopt(const char *cmd, int argc, char **argv, const char *optstring,
	       const struct option *longopts)
{
	/* A ':' right after any '+' or '-' makes a missing value ':' rather
	 * than '?', so that the two errors can be told apart. */
	char spec[64];
	size_t lead = strspn(optstring, "+-");
	if (snprintf(spec, sizeof(spec), "%.*s:%s", (int)lead, optstring, optstring + lead) >=
	    (int)sizeof(spec))
		return -1;
	opterr = 0;
	int c = getopt_long(argc, argv, spec, longopts, NULL);
	if (c != '?' && c != ':')
		return c;
	/* A long option is named as written, up to any '='; a short one by
	 * optopt, since it may sit in a cluster like -qx. */
	char what[64] = {'-', (char)optopt, 0};
	const char *word = optind > 0 && optind <= argc ? argv[optind - 1] : "";
	if (!strncmp(word, "--", 2) || !optopt)
		snprintf(what, sizeof(what), "%.*s", (int)strcspn(word, "="), word);
	if (c == '?' && optopt && !strncmp(word, "--", 2) && strchr(word, '='))
		log_error("%s: option '%s' takes no value; try 'taipan help %s'", cmd, what, cmd);
	else if (c == ':')
		log_error("%s: option '%s' needs a value; try 'taipan help %s'", cmd, what, cmd);
	else
		log_error("%s: unknown option '%s'; try 'taipan help %s'", cmd, what, cmd);
	return '?';
}

/* The limit on open files as it was before cli_raise_fd_limit(). */
static struct rlimit fd_limit_before;
static bool fd_limit_raised;

void cli_raise_fd_limit(void)
{
	struct rlimit rl;
	if (getrlimit(RLIMIT_NOFILE, &rl)) {
		log_debug("open files: cannot read the limit: %s", strerror(errno));
		return;
	}
	if (rl.rlim_cur >= rl.rlim_max) {
		log_debug("open files: at most %llu (the hard limit)",
			  (unsigned long long)rl.rlim_cur);
		return;
	}
	struct rlimit raised = {.rlim_cur = rl.rlim_max, .rlim_max = rl.rlim_max};
	if (setrlimit(RLIMIT_NOFILE, &raised)) {
		log_debug("open files: at most %llu; cannot raise it to the hard limit %llu: %s",
			  (unsigned long long)rl.rlim_cur, (unsigned long long)rl.rlim_max,
			  strerror(errno));
		return;
	}
	fd_limit_before = rl;
	fd_limit_raised = true;
	log_debug("open files: at most %llu (raised from %llu to the hard limit)",
		  (unsigned long long)raised.rlim_cur, (unsigned long long)rl.rlim_cur);
}

void cli_restore_fd_limit(void)
{
	if (fd_limit_raised)
		setrlimit(RLIMIT_NOFILE, &fd_limit_before);
}
