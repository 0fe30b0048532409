/* main.c - taipan's command line: dispatch to a subcommand. */
#include <stdio.h>
#include <string.h>

#include "cmd/commands.h"

#define TAIPAN_VERSION "0.1.0"

static const struct command {
	const char *name;
	int (*run)(int argc, char **argv);
	void (*usage)(FILE *out);
} commands[] = {
    {"record", cmd_record, cmd_record_usage},
    {"dump", cmd_dump, cmd_dump_usage},
    {"top", cmd_top, cmd_top_usage},
    {"agent", cmd_agent, cmd_agent_usage},
};

static const struct command *find_command(const char *name)
{
	for (size_t i = 0; i < sizeof(commands) / sizeof(commands[0]); i++)
		if (!strcmp(commands[i].name, name))
			return &commands[i];
	return NULL;
}

static void usage(FILE *out)
{
	fprintf(out, "usage: taipan COMMAND [options]\n"
		     "\n"
		     "A sampling profiler for CPython that walks Python stacks in the kernel\n"
		     "with eBPF: no changes to, restarts of, or pauses in the profiled programs.\n"
		     "Needs root (or CAP_BPF, CAP_PERFMON and CAP_SYS_PTRACE).\n"
		     "\n"
		     "commands:\n"
		     "  record   sample a process or a command into a profile file\n"
		     "  top      live view of the busiest functions of a process\n"
		     "  dump     print the Python stack of every thread of a process, now\n"
		     "  agent    profile every Python process, always on: serve pprof over\n"
		     "           HTTP and push to Pyroscope\n"
		     "  help     help on a command: taipan help record (or taipan record --help)\n"
		     "  version  print the version\n"
		     "\n"
		     "examples:\n"
		     "  taipan record -p 4242 -d 30 -o profile.pb.gz\n"
		     "  taipan record -o app.folded -- python3 app.py\n"
		     "  taipan top -p 4242\n"
		     "  taipan dump -p 4242\n"
		     "  taipan agent --push http://pyroscope:4040\n"
		     "\n"
		     "'man taipan' has the details.\n");
}

int main(int argc, char **argv)
{
	if (argc < 2) {
		usage(stderr);
		return 2;
	}
	const char *cmd = argv[1];
	const struct command *c = find_command(cmd);
	if (c)
		return c->run(argc - 1, argv + 1);
	if (!strcmp(cmd, "version") || !strcmp(cmd, "--version")) {
		printf("taipan %s\n", TAIPAN_VERSION);
		return 0;
	}
	if (!strcmp(cmd, "help") || !strcmp(cmd, "--help") || !strcmp(cmd, "-h")) {
		if (argc > 2) {
			c = find_command(argv[2]);
			if (!c) {
				fprintf(stderr, "taipan: no help for '%s'\n", argv[2]);
				usage(stderr);
				return 2;
			}
			c->usage(stdout);
		} else {
			usage(stdout);
		}
		return 0;
	}
	fprintf(stderr, "taipan: unknown command '%s'\n", cmd);
	usage(stderr);
	return 2;
}
