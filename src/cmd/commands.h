/* commands.h - the subcommands main() dispatches to. */
#ifndef TAIPAN_COMMANDS_H
#define TAIPAN_COMMANDS_H

#include <stdio.h>

/* Each returns the process exit status. argv[0] is the subcommand's name. */
int cmd_record(int argc, char **argv);
void cmd_record_usage(FILE *out);
int cmd_dump(int argc, char **argv);
void cmd_dump_usage(FILE *out);
int cmd_top(int argc, char **argv);
void cmd_top_usage(FILE *out);
int cmd_agent(int argc, char **argv);
void cmd_agent_usage(FILE *out);

#endif /* TAIPAN_COMMANDS_H */
