/* main.c - taipan's command line: dispatch to a subcommand. */
#include <stdio.h>
#include <string.h>

#include "commands.h"

#define TAIPAN_VERSION "0.1.0"

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
		     "  help     help on a command: taipan help record\n"
		     "  version  print the version\n"
		     "\n"
		     "examples:\n"
		     "  taipan record -p 4242 -d 30 -o profile.pb.gz\n"
		     "  taipan record -o app.folded -- python3 app.py\n");
}

int main(int argc, char **argv)
{
	if (argc < 2) {
		usage(stderr);
		return 2;
	}
	const char *cmd = argv[1];
	if (!strcmp(cmd, "record"))
		return cmd_record(argc - 1, argv + 1);
	if (!strcmp(cmd, "version") || !strcmp(cmd, "--version")) {
		printf("taipan %s\n", TAIPAN_VERSION);
		return 0;
	}
	if (!strcmp(cmd, "help") || !strcmp(cmd, "--help") || !strcmp(cmd, "-h")) {
		if (argc > 2 && !strcmp(argv[2], "record"))
			cmd_record_usage(stdout);
		else if (argc > 2) {
			fprintf(stderr, "taipan: no help for '%s'\n", argv[2]);
			usage(stderr);
			return 2;
		} else
			usage(stdout);
		return 0;
	}
	fprintf(stderr, "taipan: unknown command '%s'\n", cmd);
	usage(stderr);
	return 2;
}
