/* cmd_record.c - `taipan record`: profile a process, or a command and its
 * children, into a file. */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cmd/cli.h"
#include "cmd/commands.h"
#include "cmd/sampling_opts.h"
#include "util/log.h"
#include "output/output.h"
#include "core/native.h"
#include "core/session.h"
#include "core/walkerr.h"
#include "util/clock.h"

#define MAX_PIDS 64
/* How long a command has to end after SIGTERM before it gets SIGKILL. */
#define GRACE_SECONDS 5.0

/* How many stop signals arrived: the first ends the recording, another one
 * during a command's grace period ends the command at once. */
static volatile sig_atomic_t stop_requested;

static void on_signal(int sig)
{
	(void)sig;
	stop_requested++;
}

/* The format of -o - and of the file record names itself. */
#define DEFAULT_FORMAT "folded"
/* -o at most this many times: one recording written in several formats. */
#define MAX_OUTPUTS 4
/* Long options without a short one, past the shared options' codes. */
#define OPT_SERVICE 0x300
#define OPT_NO_TIMESTAMPS 0x301

/* -o and -f in --help, from the formats' table. */
static void output_help(FILE *out)
{
	const struct output_format_desc *def = output_format_from_name(DEFAULT_FORMAT);
	char summary[512], names[256], text[1024];
	snprintf(text, sizeof(text),
		 "where to write (default taipan-YYYYmmdd-HHMMSS%s); "
		 "the extension picks the format: %s. '-' is standard output (%s unless "
		 "--format says otherwise). Checked before recording; "
		 "only a regular file of yours is replaced. Up to %d times: the same "
		 "recording in each file, each in the format of its extension",
		 def->extensions[0], output_format_summary(summary, sizeof(summary)), def->name,
		 MAX_OUTPUTS);
	cli_help(out, CLI_HELP_COLUMN, "  -o, --output FILE", text);
	snprintf(text, sizeof(text), "%s, whatever the\nextension says",
		 output_format_names(names, sizeof(names)));
	cli_help(out, CLI_HELP_COLUMN, "  -f, --format FMT", text);
	cli_help(out, CLI_HELP_COLUMN, "      --service NAME",
		 "otlp: the service.name of every process (default: its command name)");
	cli_help(out, CLI_HELP_COLUMN, "      --no-timestamps",
		 "otlp: one value per stack, without the time of each of its samples "
		 "(smaller files)");
}

void cmd_record_usage(FILE *out)
{
	fprintf(out,
		"usage: taipan record [options] -p PID [-p PID …]\n"
		"       taipan record [options] -- COMMAND [ARGS…]\n"
		"       taipan record [options] -a [--comm NAME …] [--cgroup PATH]\n"
		"\n"
		"Samples the Python stacks of every thread of the given processes (or of\n"
		"COMMAND and every process it starts, or of every Python process on the\n"
		"host) and writes a profile. Stops after --duration, when the targets exit,\n"
		"or on Ctrl-C; the profile is written in every case.\n"
		"\n"
		"options:\n"
		"  -p, --pid PID        profile this running process (repeatable; a thread id\n"
		"                       stands for its process)\n"
		"      --subprocesses   with -p: also the processes it starts (forks, execs),\n"
		"                       those it has started already, and theirs\n");
	sampling_opts_help(out, SAMPLING_RECORD, SO_ALL | SO_COMM | SO_CGROUP);
	fprintf(out,
		"  -d, --duration SECS  stop after SECS seconds (default: until the targets exit\n"
		"                       or Ctrl-C); a COMMAND still running then gets SIGTERM,\n"
		"                       and SIGKILL 5 s later\n");
	sampling_opts_help(out, SAMPLING_RECORD, SO_RATE | SO_MODE);
	fprintf(out,
		"      --min-block TIME with --mode wall or off-cpu: leave out stretches off\n"
		"                       the CPU shorter than TIME (e.g. 500us, 2ms; default 0)\n"
		"      --gil            only samples of threads that hold the GIL: who uses\n"
		"                       it. Every sample of a GIL build (3.7+) carries a gil\n"
		"                       label anyway (pprof: held, waiting or released)\n");
	output_help(out);
	sampling_opts_help(out, SAMPLING_RECORD,
			   SO_KERNEL | SO_NATIVE | SO_NICE | SO_MAX_MEMORY | SO_DEBUGINFOD |
			       SO_ASYNC);
	fprintf(out,
		"      --folded-lines   folded: name each frame \"function (file:line)\"\n"
		"      --folded-threads folded: start each stack with its process and thread\n"
		"      --stats          print the sampler's counters at the end\n"
		"  -q, --quiet          no progress line, no summary\n"
		"  -v, --verbose        say how each process was recognised, and when all its\n"
		"                       code was read for native unwinding\n"
		"  -h, --help           this text\n"
		"\n"
		"With -- COMMAND, taipan exits with COMMAND's status (128+N if signal N ended\n"
		"it; 0 if taipan ended it at the end of -d), 127 if COMMAND is not found, 126\n"
		"if it cannot be run. Whatever the target, it exits 1 when every Python process\n"
		"it found was refused (an unsupported version or build) and nothing was\n"
		"recorded.\n"
		"\n"
		"examples:\n"
		"  taipan record -p 4242 -d 30 -o profile.pb.gz\n"
		"  taipan record -a -d 60 -o fleet.pb.gz\n"
		"  taipan record -p 4242 -d 10 -o profile.html    # open in a browser\n"
		"  taipan record -r 1000 -o app.folded -- python3 app.py --port 8000\n"
		"  taipan record --mode wall -p 4242 -d 10 -o slow.html   # why it waits\n"
		"  go tool pprof -top profile.pb.gz\n");
}

/* The shared options record takes: all of them. */
#define SAMPLING_MASK                                                                              \
	(SO_ALL | SO_COMM | SO_CGROUP | SO_RATE | SO_MODE | SO_KERNEL | SO_NATIVE | SO_NICE |      \
	 SO_MAX_MEMORY | SO_DEBUGINFOD | SO_ASYNC)

struct record_args {
	struct sampling_opts so;
	pid_t pids[MAX_PIDS];
	int npids;
	double duration;
	const char *outputs[MAX_OUTPUTS];
	int noutputs;
	const struct output_format_desc *format; /* --format, or NULL */
	struct output_opts oo;
	bool stats, subprocesses;
	bool no_timestamps; /* --no-timestamps: OTLP without each sample's time */
	uint64_t min_block_ns;
	bool min_block_set;
	bool gil;
	char **cmd;
};

/* Whether pid is among a's: the same process named twice is one process. */
static bool has_pid(const struct record_args *a, pid_t pid)
{
	for (int i = 0; i < a->npids; i++)
		if (a->pids[i] == pid)
			return true;
	return false;
}

static int parse_args(int argc, char **argv, struct record_args *a)
{
	static const struct option own[] = {
	    {"pid", required_argument, NULL, 'p'},
	    {"duration", required_argument, NULL, 'd'},
	    {"output", required_argument, NULL, 'o'},
	    {"format", required_argument, NULL, 'f'},
	    {"folded-lines", no_argument, NULL, 'L'},
	    {"folded-threads", no_argument, NULL, 'T'},
	    {"stats", no_argument, NULL, 'S'},
	    {"quiet", no_argument, NULL, 'q'},
	    {"verbose", no_argument, NULL, 'v'},
	    {"help", no_argument, NULL, 'h'},
	    {"subprocesses", no_argument, NULL, 's'},
	    {"min-block", required_argument, NULL, 'B'},
	    {"gil", no_argument, NULL, 'g'},
	    {"service", required_argument, NULL, OPT_SERVICE},
	    {"no-timestamps", no_argument, NULL, OPT_NO_TIMESTAMPS},
	    {0},
	};
	struct option longopts[sizeof(own) / sizeof(own[0]) + SAMPLING_LONGOPTS];
	char *end;
	int c, r;
	sampling_opts_init(&a->so);
	if (sampling_longopts(SAMPLING_MASK, own, longopts, sizeof(longopts) / sizeof(longopts[0])))
		return -EINVAL;
	optind = 1;
	while ((c = cli_getopt("record", argc, argv, "+p:ad:r:o:f:qvh", longopts)) != -1) {
		r = sampling_opts_parse(&a->so, c, optarg);
		if (r < 0)
			return r;
		if (r == 0)
			continue;
		switch (c) {
		case 'p': {
			pid_t pid;
			if (cli_pid(optarg, &pid))
				return -EINVAL;
			if (has_pid(a, pid))
				break;
			if (a->npids == MAX_PIDS) {
				log_error("at most %d --pid options", MAX_PIDS);
				return -EINVAL;
			}
			a->pids[a->npids++] = pid;
			break;
		}
		case 's':
			a->subprocesses = true;
			break;
		case 'd':
			a->duration = strtod(optarg, &end);
			if (*end || !(a->duration > 0)) {
				log_error("--duration wants a number of seconds > 0, not '%s'",
					  optarg);
				return -EINVAL;
			}
			break;
		case 'o':
			if (a->noutputs == MAX_OUTPUTS) {
				log_error("at most %d --output options", MAX_OUTPUTS);
				return -EINVAL;
			}
			for (int i = 0; i < a->noutputs; i++)
				if (!strcmp(a->outputs[i], optarg)) {
					log_error("--output %s given twice", optarg);
					return -EINVAL;
				}
			a->outputs[a->noutputs++] = optarg;
			break;
		case OPT_NO_TIMESTAMPS:
			a->no_timestamps = true;
			break;
		case OPT_SERVICE:
			if (!*optarg) {
				log_error("--service wants a name");
				return -EINVAL;
			}
			a->oo.service = optarg;
			break;
		case 'f':
			a->format = output_format_from_name(optarg);
			if (!a->format) {
				char names[256];
				log_error("unknown --format '%s' (use %s)", optarg,
					  output_format_names(names, sizeof(names)));
				return -EINVAL;
			}
			break;
		case 'B':
			if (cli_min_block(optarg, &a->min_block_ns))
				return -EINVAL;
			a->min_block_set = true;
			break;
		case 'g':
			a->gil = true;
			break;
		case 'L':
			a->oo.folded_lines = true;
			break;
		case 'T':
			a->oo.folded_threads = true;
			break;
		case 'S':
			a->stats = true;
			break;
		case 'q':
			log_set_level(LOG_QUIET);
			break;
		case 'v':
			log_set_level(LOG_VERBOSE);
			break;
		case 'h':
			cmd_record_usage(stdout);
			exit(0);
		default:
			return -EINVAL;
		}
	}
	if (optind < argc)
		a->cmd = &argv[optind];
	/* After the loop, so that -q given later silences the notes. */
	int n = a->npids;
	a->npids = 0;
	for (int i = 0; i < n; i++) {
		pid_t pid = cli_process_of(a->pids[i]);
		if (!has_pid(a, pid))
			a->pids[a->npids++] = pid;
	}
	if (!a->npids && !a->cmd && !a->so.all) {
		log_error("record needs -p PID, -a or -- COMMAND (see 'taipan help record')");
		return -EINVAL;
	}
	if ((a->npids > 0) + (a->cmd != NULL) + a->so.all > 1) {
		log_error("give one of -p PID, -a or -- COMMAND");
		return -EINVAL;
	}
	if (a->subprocesses && !a->npids) {
		log_error("--subprocesses follows the processes of -p (a COMMAND's are followed "
			  "anyway, and -a sees every process)");
		return -EINVAL;
	}
	if (a->min_block_set && a->so.mode == PROF_MODE_CPU) {
		log_error("--min-block is for --mode wall or off-cpu: a CPU profile has no time "
			  "off the CPU");
		return -EINVAL;
	}
	if ((a->so.ncomms || a->so.cgroup) && !a->so.all) {
		log_error(
		    "--comm and --cgroup filter -a; with -p or a command, name the processes");
		return -EINVAL;
	}
	return 0;
}

/* The progress line rewrites itself: each one clears what is left of the
 * one before, which may be longer ("recording" is longer than "recorded"). */
static void progress(struct session *s, double elapsed, bool final)
{
	struct session_stats st;
	session_stats(s, &st);
	fprintf(stderr, "\rtaipan: %s %.1fs, %llu samples, %u process%s, %llu lost\033[K%s",
		final ? "recorded" : "recording", elapsed, (unsigned long long)st.samples,
		st.processes, st.processes == 1 ? "" : "es", (unsigned long long)st.lost,
		final ? "\n" : "");
	fflush(stderr);
}

/* One counter of --stats's first line, when it has words for it there. */
static void stat_item(const char *text, uint64_t n, const char **sep)
{
	if (!text)
		return;
	fprintf(stderr, "%s%llu %s", *sep, (unsigned long long)n, text);
	*sep = ", ";
}

/* st: the counters as of the stop. */
static void print_stats(const struct session_stats *st)
{
	const char *sep = "";
	fprintf(stderr, "taipan: stats: ");
#define STAT_ITEM(type, field, key, text) stat_item(text, (uint64_t)st->field, &sep);
#define STAT_VECTOR(field, count, first, name, key)
	SESSION_COUNTERS(STAT_ITEM, STAT_VECTOR)
#undef STAT_ITEM
#undef STAT_VECTOR
	fprintf(stderr, "\n");
	fprintf(stderr,
		"taipan: stats: %llu code objects described by BPF at first sight, %llu of them "
		"named from that copy (gone when taipan read them), %llu left for a later sample "
		"(%d a sample at most)\n",
		(unsigned long long)st->codes_described, (unsigned long long)st->snapped_codes,
		(unsigned long long)st->codes_undescribed, TP_DESCRIBE_MAX);
	for (unsigned int i = 1; i < TP_ERR__COUNT; i++)
		if (st->walk_errors[i])
			fprintf(stderr, "taipan: stats: %llu samples: %s %s: %s\n",
				(unsigned long long)st->walk_errors[i], walkerr_marker(i),
				walkerr_key(i), walkerr_desc(i));
	uint64_t walks = 0;
	if (st->gil_other)
		fprintf(stderr,
			"taipan: stats: --gil: %llu samples of threads without the GIL left out, "
			"%llu of them of builds whose GIL cannot be read\n",
			(unsigned long long)st->gil_other, (unsigned long long)st->gil_unknown);
	if (st->task_reads)
		fprintf(
		    stderr,
		    "taipan: stats: --async: %llu reads of the processes' tasks, %llu ms in all, "
		    "%llu of them finding none to read (asyncio not imported, or unreadable); "
		    "%llu await stacks of waiting tasks weighed (--mode wall)\n",
		    (unsigned long long)st->task_reads, (unsigned long long)st->task_read_ms,
		    (unsigned long long)st->task_read_failures,
		    (unsigned long long)st->task_awaits);
	if (st->offcpu || st->offcpu_short || st->offcpu_unended || st->offcpu_early)
		fprintf(
		    stderr,
		    "taipan: stats: off-CPU: %llu stretches in the profile (%llu of them still "
		    "off the CPU at the end, weighed until then), %llu shorter than --min-block "
		    "left out, %llu whose end was lost (ring full) weighed 0, %llu of those ended "
		    "by a sample of the thread running; %llu returns that no sched_switch "
		    "reported, timed from the thread's CPU time at its next switch-out; %llu "
		    "before taipan recognised their process, under its marker; %llu of threads "
		    "asleep when the recording started, their stacks read then (%llu more ran "
		    "while read, and were left to BPF)\n",
		    (unsigned long long)st->offcpu, (unsigned long long)st->offcpu_open,
		    (unsigned long long)st->offcpu_short, (unsigned long long)st->offcpu_unended,
		    (unsigned long long)st->offcpu_seen_back, (unsigned long long)st->offcpu_missed,
		    (unsigned long long)st->offcpu_early, (unsigned long long)st->offcpu_asleep,
		    (unsigned long long)st->offcpu_asleep_ran);
	fprintf(stderr,
		"taipan: stats: memory: %.1f MiB kept of the targets now, at most %.1f MiB, under "
		"--max-memory %.0f MiB: unwind tables %.1f MiB, native symbols %.1f MiB, code "
		"objects %.1f MiB (%llu sharing another's line table); %llu things not kept or cut "
		"for want of room (%llu unwind tables, %llu symbol indexes; %llu indexes cut at "
		"their 64 MiB bound); %llu mapped files held open\n",
		(double)st->memory_used / (1 << 20), (double)st->memory_peak / (1 << 20),
		(double)st->memory_limit / (1 << 20), (double)st->native_table_bytes / (1 << 20),
		(double)st->symbol_bytes / (1 << 20), (double)st->code_bytes / (1 << 20),
		(unsigned long long)st->lines_shared, (unsigned long long)st->memory_refused,
		(unsigned long long)st->native_over_budget,
		(unsigned long long)st->symbols_over_budget, (unsigned long long)st->symbols_cut,
		(unsigned long long)st->native_fds);
	if (st->native_maps_capped || st->native_builds_capped || st->native_scans_partial)
		fprintf(stderr,
			"taipan: stats: native: %llu executable mappings past a process's %u not "
			"tracked ([native: unknown code]), %llu files past a process's %u tables "
			"followed by frame pointer, %llu reads of a process's mappings that left "
			"files for the next turn\n",
			(unsigned long long)st->native_maps_capped, NATIVE_MAPS_PER_PROC,
			(unsigned long long)st->native_builds_capped, NATIVE_BUILDS_PER_PROC,
			(unsigned long long)st->native_scans_partial);
	if (st->debuginfod_asked)
		fprintf(stderr,
			"taipan: stats: debuginfod: %llu debug files asked for, %llu fetched, "
			"%llu that no server had\n",
			(unsigned long long)st->debuginfod_asked,
			(unsigned long long)st->debuginfod_found,
			(unsigned long long)st->debuginfod_missing);
	for (unsigned int i = 0; i < TP_UERR__COUNT; i++)
		walks += st->native_errors[i];
	if (!walks)
		return;
	fprintf(stderr,
		"taipan: stats: native: %llu of %llu stacks unwound to the thread's root, %llu "
		"where the native and Python stacks disagreed; unwind tables of %llu files "
		"(%.1f MiB, built in %llu ms; %llu rules shared), %llu files followed by frame "
		"pointer\n",
		(unsigned long long)st->native_errors[TP_UERR_NONE], (unsigned long long)walks,
		(unsigned long long)st->merge_failures, (unsigned long long)st->native_files,
		(double)st->native_table_bytes / (1 << 20), (unsigned long long)st->native_build_ms,
		(unsigned long long)st->native_rules, (unsigned long long)st->native_files_failed);
	if (st->merge_failures)
		fprintf(
		    stderr,
		    "taipan: stats: %llu samples: [native and Python stacks disagree] merge: the "
		    "eval-loop frames of the native stack and the Python frames could not be "
		    "paired\n",
		    (unsigned long long)st->merge_failures);
	for (unsigned int i = 1; i < TP_UERR__COUNT; i++)
		if (st->native_errors[i])
			fprintf(stderr, "taipan: stats: %llu samples: %s native %s: %s\n",
				(unsigned long long)st->native_errors[i], walkerr_native_marker(i),
				walkerr_native_key(i), walkerr_native_desc(i));
}

/* COMMAND, started by record. */
struct command {
	char **argv;
	pid_t pid;    /* 0: none */
	int gate;     /* write end: one byte lets it exec; -1 once used */
	int exec_err; /* read end: the errno of a failed exec, EOF when exec worked */
	bool started; /* the gate was opened */
	bool done;    /* reaped; status holds its wait status */
	bool stopped; /* taipan sent it SIGTERM at the end of -d */
	int status;
};

/* Starts argv stopped at a gate, so that it is a target before it runs. */
static int command_spawn(struct command *c)
{
	int gate[2], errp[2];
	if (pipe2(gate, O_CLOEXEC))
		return -errno;
	if (pipe2(errp, O_CLOEXEC)) {
		int e = -errno;
		close(gate[0]);
		close(gate[1]);
		return e;
	}
	pid_t pid = fork();
	if (pid < 0) {
		int e = -errno;
		close(gate[0]);
		close(gate[1]);
		close(errp[0]);
		close(errp[1]);
		return e;
	}
	if (pid == 0) {
		char ch;
		close(gate[1]);
		close(errp[0]);
		signal(SIGINT, SIG_DFL);
		signal(SIGTERM, SIG_DFL);
		if (read(gate[0], &ch, 1) != 1)
			_exit(127); /* taipan gave up before starting */
		cli_restore_fd_limit();
		execvp(c->argv[0], c->argv);
		int e = errno;
		if (write(errp[1], &e, sizeof(e)) != sizeof(e))
			_exit(127);
		_exit(e == ENOENT ? 127 : 126);
	}
	close(gate[0]);
	close(errp[1]);
	c->pid = pid;
	c->gate = gate[1];
	c->exec_err = errp[0];
	return 0;
}

/* Lets the command exec. Returns 0, or the positive errno of the exec that
 * failed (the command has then exited). */
static int command_go(struct command *c)
{
	int e = 0;
	c->started = true;
	if (write(c->gate, "go", 1) != 1)
		e = errno;
	close(c->gate);
	c->gate = -1;
	/* Blocks until the exec, which closes the pipe, or its failure. */
	if (!e && read(c->exec_err, &e, sizeof(e)) != sizeof(e))
		e = 0;
	close(c->exec_err);
	c->exec_err = -1;
	return e;
}

/* Reaps whatever ended (orphans come to us as the subreaper). True once the
 * command itself has ended. */
static bool command_reap(struct command *c)
{
	int wst;
	pid_t w;
	while (!c->done && (w = waitpid(-1, &wst, WNOHANG)) > 0) {
		if (w == c->pid) {
			c->done = true;
			c->status = wst;
		}
	}
	return c->done;
}

/* Ends the command if it still runs: SIGTERM, then SIGKILL after the grace
 * period or a second Ctrl-C. Waits for it. */
static void command_end(struct command *c)
{
	if (!c->pid || c->done)
		return;
	if (c->gate >= 0) {
		close(c->gate); /* it sees EOF and exits without running */
		c->gate = -1;
	} else if (!command_reap(c)) {
		int signals = stop_requested;
		double t0 = mono_seconds();
		kill(c->pid, SIGTERM);
		if (stop_requested)
			log_info("%s still runs: sent it SIGTERM", c->argv[0]);
		else
			log_info("%s still runs: sent it SIGTERM (SIGKILL in %g s; Ctrl-C to "
				 "send it now)",
				 c->argv[0], GRACE_SECONDS);
		while (!command_reap(c) && mono_seconds() - t0 < GRACE_SECONDS &&
		       stop_requested == signals)
			usleep(20000);
		if (!c->done) {
			log_warn("%s did not end on SIGTERM: sending SIGKILL", c->argv[0]);
			kill(c->pid, SIGKILL);
		}
	}
	if (c->exec_err >= 0)
		close(c->exec_err);
	c->exec_err = -1;
	while (!c->done) {
		int wst;
		pid_t w = waitpid(c->pid, &wst, 0);
		if (w == c->pid) {
			c->done = true;
			c->status = wst;
		} else if (w < 0 && errno != EINTR) {
			break;
		}
	}
}

/* What taipan exits with for the command: its status, unless taipan ended
 * it at the end of -d. */
static int command_exit_status(const struct command *c)
{
	if (c->stopped || !c->done)
		return 0;
	if (WIFEXITED(c->status))
		return WEXITSTATUS(c->status);
	if (WIFSIGNALED(c->status))
		return 128 + WTERMSIG(c->status);
	return 0;
}

/* taipan-YYYYmmdd-HHMMSS with the extension of format f. */
static void default_output(char *buf, size_t len, const struct output_format_desc *f)
{
	time_t t = time(NULL);
	struct tm tm;
	localtime_r(&t, &tm);
	size_t n = strftime(buf, len, "taipan-%Y%m%d-%H%M%S", &tm);
	snprintf(buf + n, len - n, "%s", f->extensions[0]);
}

int cmd_record(int argc, char **argv)
{
	struct record_args a = {0};
	struct session *s = NULL;
	struct output_file *of[MAX_OUTPUTS] = {NULL};
	const struct output_format_desc *fmt[MAX_OUTPUTS] = {NULL};
	char err[512], outbuf[64];
	int ret, status = 1;
	struct command cmd = {.gate = -1, .exec_err = -1};

	if (parse_args(argc, argv, &a))
		return 2;
	cli_raise_fd_limit();
	const struct output_format_desc *def = output_format_from_name(DEFAULT_FORMAT);
	if (!a.noutputs) {
		default_output(outbuf, sizeof(outbuf), def);
		a.outputs[a.noutputs++] = outbuf;
	}
	if (a.format && a.noutputs > 1) {
		log_error("--format with several --output: each file's extension picks its format");
		return 2;
	}
	for (int i = 0; i < a.noutputs; i++) {
		fmt[i] = a.format		     ? a.format
			 : strcmp(a.outputs[i], "-") ? output_format_from_path(a.outputs[i])
						     : def;
		if (!fmt[i]) {
			char exts[256];
			log_error("cannot tell the format of '%s' from its extension; use %s, or "
				  "--format",
				  a.outputs[i], output_format_extensions(exts, sizeof(exts)));
			return 2;
		}
	}
	bool timed = false;
	for (int i = 0; i < a.noutputs; i++)
		timed |= fmt[i]->timed;
	if (a.no_timestamps && !timed) {
		log_error("--no-timestamps is for OTLP: no -o FILE.otlp or --format otlp");
		return 2;
	}
	/* Before anything is recorded: a profile that cannot be written is
	 * better refused now than lost at the end. */
	for (int i = 0; i < a.noutputs; i++) {
		ret = output_file_open(a.outputs[i], fmt[i], &of[i], err, sizeof(err));
		if (ret) {
			log_error("%s", err);
			for (int k = 0; k < i; k++)
				output_file_free(of[k]);
			return 1;
		}
	}

	struct session_opts so = {
	    .min_block_ns = a.min_block_ns,
	    .gil_only = a.gil,
	    .follow_children = a.cmd != NULL || a.subprocesses,
	};
	sampling_opts_session(&a.so, &so);
	so.events = timed && !a.no_timestamps;
	ret = session_new(&so, &s, err, sizeof(err));
	if (ret) {
		log_error("%s", err);
		goto out;
	}
	for (int i = 0; i < a.npids; i++) {
		ret = session_add_pid(s, a.pids[i], true, err, sizeof(err));
		if (ret) {
			log_error("%s", err);
			goto out;
		}
	}
	if (a.cmd) {
		/* Orphaned grandchildren come back to us, so none is left
		 * behind as a zombie. Without it they go to init, which reaps
		 * them too: worth a note, not a failure. */
		if (prctl(PR_SET_CHILD_SUBREAPER, 1))
			log_debug("cannot become a child subreaper: %s; orphaned "
				  "grandchildren of %s go to init",
				  strerror(errno), a.cmd[0]);
		cmd.argv = a.cmd;
		ret = command_spawn(&cmd);
		if (ret) {
			log_error("cannot start %s: %s", a.cmd[0], strerror(-ret));
			goto out;
		}
		ret = session_add_pid(s, cmd.pid, false, err, sizeof(err));
		if (ret) {
			log_error("%s", err);
			goto out;
		}
	}

	cli_on_stop_signals(on_signal, false);

	ret = session_start(s, err, sizeof(err));
	if (ret) {
		log_error("%s", err);
		goto out;
	}
	log_debug("sampling at %u Hz%s; Ctrl-C stops and writes the profile", a.so.rate,
		  a.so.mode == PROF_MODE_WALL	  ? ", and every target thread that leaves the CPU"
		  : a.so.mode == PROF_MODE_OFFCPU ? ", only to find processes: off-CPU stacks only"
						  : "");
	/* Now that BPF sees every fork: what the processes started before. */
	for (int i = 0; a.subprocesses && i < a.npids; i++) {
		ret = session_add_descendants(s, a.pids[i]);
		if (ret < 0)
			log_warn("cannot list the processes that pid %d started: %s; only later "
				 "ones are profiled",
				 a.pids[i], strerror(-ret));
		else
			log_debug("pid %d: %d running processes it started are profiled too",
				  a.pids[i], ret);
	}
	if (a.cmd) {
		int e = command_go(&cmd);
		if (e) {
			/* As a shell says it: 127 for a command not found, 126
			 * for one that cannot be run. */
			log_error("cannot run %s: %s%s", a.cmd[0], strerror(e),
				  e == ENOENT && !strchr(a.cmd[0], '/') ? " (not found in PATH)"
									: "");
			status = e == ENOENT ? 127 : 126;
			command_end(&cmd);
			goto out;
		}
	}

	bool show = log_get_level() >= LOG_NORMAL && isatty(STDERR_FILENO);
	double t0 = mono_seconds(), last_shown = 0, last_checked = -1, elapsed = 0;
	const char *why = "stopped";
	for (;;) {
		ret = session_poll(s, 20);
		if (ret) {
			log_error("reading samples: %s", strerror(-ret));
			break;
		}
		elapsed = mono_seconds() - t0;
		if (stop_requested) {
			why = "interrupted";
			break;
		}
		if (a.duration > 0 && elapsed >= a.duration) {
			why = "duration reached";
			cmd.stopped = cmd.pid && !command_reap(&cmd);
			break;
		}
		if (cmd.pid) {
			if (command_reap(&cmd)) {
				why = "command exited";
				if (WIFEXITED(cmd.status) && WEXITSTATUS(cmd.status))
					log_info("%s exited with status %d", a.cmd[0],
						 WEXITSTATUS(cmd.status));
				else if (WIFSIGNALED(cmd.status))
					log_info("%s was killed by signal %d (%s)", a.cmd[0],
						 WTERMSIG(cmd.status),
						 strsignal(WTERMSIG(cmd.status)));
				break;
			}
		} else if (!a.so.all && elapsed - last_checked >= 0.2) {
			last_checked = elapsed;
			if (!session_live_targets(s)) {
				why = "target exited";
				break;
			}
		}
		if (show && elapsed - last_shown >= 1.0) {
			progress(s, elapsed, false);
			last_shown = elapsed;
		}
	}
	/* The recording ends here: no sample after this counts, and the
	 * counters are those of this moment. */
	session_stop(s);
	bool failed = ret != 0; /* the profile is still written */
	/* What the ring still holds belongs to the profile. */
	int last = session_poll(s, 0);
	if (last)
		log_warn("reading the last samples: %s; the profile may miss them",
			 strerror(-last));
	if (show)
		progress(s, elapsed, true);

	struct session_stats st;
	session_stats(s, &st);
	bool lost = false;
	for (int i = 0; i < a.noutputs; i++) {
		ret = output_file_commit(of[i], session_profile(s), &a.oo, err, sizeof(err));
		if (ret) {
			char saved[PATH_MAX];
			log_error("%s", err);
			if (output_write_rescue(session_profile(s), fmt[i], &a.oo, saved,
						sizeof(saved)))
				log_error("the profile is lost: it cannot be written to $TMPDIR "
					  "either");
			else
				log_error("the profile is kept in %s", saved);
			lost = true;
			continue;
		}
		log_info("%s: wrote %s (%s): %llu samples from %u profiled process%s, %llu lost",
			 why, strcmp(a.outputs[i], "-") ? a.outputs[i] : "standard output",
			 fmt[i]->name, (unsigned long long)st.samples, st.processes,
			 st.processes == 1 ? "" : "es", (unsigned long long)st.lost);
	}
	if (lost)
		goto out;
	if (!st.samples && st.unsupported && !st.processes) {
		/* Not "did not run": what was there could not be read. */
		log_error("no samples: %u Python process%s refused, the first: %s", st.unsupported,
			  st.unsupported == 1 ? " was" : "es were", st.refused);
		failed = true;
	} else if (!st.samples) {
		log_warn("no samples: the targets did not run Python on a CPU while recorded");
	}
	if (a.so.mode != PROF_MODE_CPU) {
		char note[128] = "";
		for (int i = 0; i < a.noutputs; i++)
			if (fmt[i]->time_unit)
				snprintf(note, sizeof(note), "; %s values are %s", fmt[i]->name,
					 fmt[i]->time_unit);
		log_info("%s profile: %.3f s of thread time, with %llu stretches off the CPU%s",
			 prof_mode_name(a.so.mode),
			 (double)profile_total_value(session_profile(s)) / 1e9,
			 (unsigned long long)st.offcpu, note);
	}
	uint64_t merged = profile_events_merged(session_profile(s));
	if (merged)
		log_warn("%llu events past the %u kept with their times went into the latest "
			 "of their stack's: the OTLP timestamps of those are coarser, their "
			 "values whole",
			 (unsigned long long)merged, PROFILE_EVENTS_MAX);
	if (a.gil && st.gil_unknown)
		log_warn("--gil: %llu samples left out of processes whose GIL taipan cannot read "
			 "(Python 2.7, 3.6, free-threaded builds)",
			 (unsigned long long)st.gil_unknown);
	if (a.stats)
		print_stats(&st);
	status = failed ? 1 : 0;
out:
	command_end(&cmd);
	if (status == 0 && cmd.pid)
		status = command_exit_status(&cmd);
	session_free(s);
	for (int i = 0; i < a.noutputs; i++)
		output_file_free(of[i]);
	return status;
}
