/* cli.c - option parsing, clocks and signals shared by the subcommands. */
#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdlib.h>
#include <time.h>

#include "cmd/cli.h"
#include "target/procfs.h"
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

int cli_comm(const char *arg, const char **comms, int *n)
{
	if (*n >= CLI_MAX_COMMS) {
		log_error("at most %d --comm options", CLI_MAX_COMMS);
		return -EINVAL;
	}
	comms[(*n)++] = arg;
	return 0;
}

double cli_now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
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
