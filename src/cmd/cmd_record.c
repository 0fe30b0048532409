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
#include "util/log.h"
#include "output/output.h"
#include "core/session.h"
#include "core/walkerr.h"

#define MAX_PIDS 64

static volatile sig_atomic_t stop_requested;

static void on_signal(int sig)
{
	(void)sig;
	stop_requested = 1;
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
		"  -p, --pid PID        profile this running process (repeatable)\n"
		"  -a, --all            profile every Python process on the host, including\n"
		"                       those in containers and those that start later\n"
		"      --comm NAME      with -a: only processes with this name (repeatable)\n"
		"      --cgroup PATH    with -a: only processes in this cgroup (v2 path prefix,\n"
		"                       e.g. /system.slice/app.service)\n"
		"  -d, --duration SECS  stop after SECS seconds (default: until the targets exit\n"
		"                       or Ctrl-C)\n"
		"  -r, --rate HZ        samples per second per CPU (default 100; 1 to 10000)\n"
		"  -o, --output FILE    where to write (default taipan-YYYYmmdd-HHMMSS.folded);\n"
		"                       the extension picks the format: .html/.htm flame graph,\n"
		"                       .json speedscope, .pb.gz/.pprof pprof, .folded/.txt\n"
		"                       folded stacks. '-' is standard output (folded unless\n"
		"                       --format says otherwise). Checked before recording;\n"
		"                       only a regular file of yours is replaced\n"
		"  -f, --format FMT     html, speedscope, pprof or folded, whatever the\n"
		"                       extension says\n"
		"      --no-kernel      leave out kernel frames\n"
		"      --folded-lines   folded: name each frame \"function (file:line)\"\n"
		"      --folded-threads folded: start each stack with its process and thread\n"
		"      --stats          print the sampler's counters at the end\n"
		"  -q, --quiet          no progress line, no summary\n"
		"  -v, --verbose        say how each process was recognised\n"
		"  -h, --help           this text\n"
		"\n"
		"examples:\n"
		"  taipan record -p 4242 -d 30 -o profile.pb.gz\n"
		"  taipan record -a -d 60 -o fleet.pb.gz\n"
		"  taipan record -p 4242 -d 10 -o profile.html    # open in a browser\n"
		"  taipan record -r 1000 -o app.folded -- python3 app.py --port 8000\n"
		"  go tool pprof -top profile.pb.gz\n");
}

struct record_args {
	pid_t pids[MAX_PIDS];
	int npids;
	bool all;
	const char *comms[CLI_MAX_COMMS + 1];
	int ncomms;
	const char *cgroup;
	double duration;
	unsigned int rate;
	const char *output;
	enum output_format format;
	struct output_opts oo;
	bool kernel, stats;
	char **cmd;
};

static int parse_args(int argc, char **argv, struct record_args *a)
{
	static const struct option longopts[] = {
	    {"pid", required_argument, NULL, 'p'},	{"all", no_argument, NULL, 'a'},
	    {"comm", required_argument, NULL, 'C'},	{"cgroup", required_argument, NULL, 'G'},
	    {"duration", required_argument, NULL, 'd'}, {"rate", required_argument, NULL, 'r'},
	    {"output", required_argument, NULL, 'o'},	{"format", required_argument, NULL, 'f'},
	    {"no-kernel", no_argument, NULL, 'K'},	{"folded-lines", no_argument, NULL, 'L'},
	    {"folded-threads", no_argument, NULL, 'T'}, {"stats", no_argument, NULL, 'S'},
	    {"quiet", no_argument, NULL, 'q'},		{"verbose", no_argument, NULL, 'v'},
	    {"help", no_argument, NULL, 'h'},		{0},
	};
	char *end;
	int c;
	a->rate = 100;
	a->kernel = true;
	optind = 1;
	while ((c = cli_getopt("record", argc, argv, "+p:ad:r:o:f:qvh", longopts)) != -1) {
		switch (c) {
		case 'a':
			a->all = true;
			break;
		case 'C':
			if (cli_comm(optarg, a->comms, &a->ncomms))
				return -EINVAL;
			break;
		case 'G':
			a->cgroup = optarg;
			break;
		case 'p':
			if (a->npids == MAX_PIDS) {
				log_error("at most %d --pid options", MAX_PIDS);
				return -EINVAL;
			}
			if (cli_pid(optarg, &a->pids[a->npids]))
				return -EINVAL;
			a->npids++;
			break;
		case 'd':
			a->duration = strtod(optarg, &end);
			if (*end || !(a->duration > 0)) {
				log_error("--duration wants a number of seconds > 0, not '%s'",
					  optarg);
				return -EINVAL;
			}
			break;
		case 'r':
			if (cli_rate(optarg, &a->rate))
				return -EINVAL;
			break;
		case 'o':
			a->output = optarg;
			break;
		case 'f':
			a->format = output_format_from_name(optarg);
			if (a->format == OUTPUT_UNKNOWN) {
				log_error(
				    "unknown --format '%s' (use html, speedscope, pprof or folded)",
				    optarg);
				return -EINVAL;
			}
			break;
		case 'K':
			a->kernel = false;
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
	if (!a->npids && !a->cmd && !a->all) {
		log_error("record needs -p PID, -a or -- COMMAND (see 'taipan help record')");
		return -EINVAL;
	}
	if ((a->npids > 0) + (a->cmd != NULL) + a->all > 1) {
		log_error("give one of -p PID, -a or -- COMMAND");
		return -EINVAL;
	}
	if ((a->ncomms || a->cgroup) && !a->all) {
		log_error(
		    "--comm and --cgroup filter -a; with -p or a command, name the processes");
		return -EINVAL;
	}
	return 0;
}

static void progress(struct session *s, double elapsed, bool final)
{
	struct session_stats st;
	session_stats(s, &st);
	fprintf(stderr, "\rtaipan: %s %.1fs, %llu samples, %u process%s, %llu lost%s",
		final ? "recorded" : "recording", elapsed, (unsigned long long)st.samples,
		st.processes, st.processes == 1 ? "" : "es",
		(unsigned long long)(st.lost_ring + st.lost_unknown), final ? "\n" : "\033[K");
	fflush(stderr);
}

static void print_stats(struct session *s)
{
	struct session_stats st;
	session_stats(s, &st);
	fprintf(stderr,
		"taipan: stats: %llu perf samples in targets, %llu stacks recorded, "
		"%llu lost (ring full), %llu lost (process not yet known), %llu unreadable code "
		"objects\n",
		(unsigned long long)st.bpf_samples, (unsigned long long)st.samples,
		(unsigned long long)st.lost_ring, (unsigned long long)st.lost_unknown,
		(unsigned long long)st.bad_frames);
	for (unsigned int i = 1; i < TP_ERR__COUNT; i++)
		if (st.walk_errors[i])
			fprintf(stderr, "taipan: stats: %llu samples: %s %s: %s\n",
				(unsigned long long)st.walk_errors[i], walkerr_marker(i),
				walkerr_key(i), walkerr_desc(i));
}

/* Starts argv stopped at a gate, so that it is a target before it runs. */
static pid_t spawn_gated(char **argv, int *gate_fd)
{
	int gate[2];
	if (pipe2(gate, O_CLOEXEC))
		return -errno;
	pid_t pid = fork();
	if (pid < 0) {
		int e = -errno;
		close(gate[0]);
		close(gate[1]);
		return e;
	}
	if (pid == 0) {
		char c;
		close(gate[1]);
		signal(SIGINT, SIG_DFL);
		signal(SIGTERM, SIG_DFL);
		if (read(gate[0], &c, 1) != 1)
			_exit(127); /* taipan gave up before starting */
		execvp(argv[0], argv);
		fprintf(stderr, "taipan: error: cannot run %s: %s\n", argv[0], strerror(errno));
		_exit(127);
	}
	close(gate[0]);
	*gate_fd = gate[1];
	return pid;
}

static void default_output(char *buf, size_t len)
{
	time_t t = time(NULL);
	struct tm tm;
	localtime_r(&t, &tm);
	strftime(buf, len, "taipan-%Y%m%d-%H%M%S.folded", &tm);
}

int cmd_record(int argc, char **argv)
{
	struct record_args a = {0};
	struct session *s = NULL;
	struct output_file *of = NULL;
	char err[512], outbuf[64];
	int ret, gate = -1, status = 1;
	pid_t child = 0;
	bool child_done = false;

	if (parse_args(argc, argv, &a))
		return 2;
	if (!a.output) {
		default_output(outbuf, sizeof(outbuf));
		a.output = outbuf;
	}
	if (a.format == OUTPUT_UNKNOWN)
		a.format =
		    strcmp(a.output, "-") ? output_format_from_path(a.output) : OUTPUT_FOLDED;
	if (a.format == OUTPUT_UNKNOWN) {
		log_error("cannot tell the format of '%s' from its extension; use .html, .json, "
			  ".pb.gz, .pprof, .folded or .txt, or --format",
			  a.output);
		return 2;
	}
	/* Before anything is recorded: a profile that cannot be written is
	 * better refused now than lost at the end. */
	ret = output_file_open(a.output, a.format, &of, err, sizeof(err));
	if (ret) {
		log_error("%s", err);
		return 1;
	}

	struct session_opts so = {
	    .system_wide = a.all,
	    .comms = a.ncomms ? a.comms : NULL,
	    .cgroup = a.cgroup,
	    .kernel_stacks = a.kernel,
	    .follow_children = a.cmd != NULL,
	    .rate_hz = a.rate,
	};
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
		child = spawn_gated(a.cmd, &gate);
		if (child < 0) {
			log_error("cannot start %s: %s", a.cmd[0], strerror(-child));
			goto out;
		}
		ret = session_add_pid(s, child, false, err, sizeof(err));
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
	if (gate >= 0) {
		if (write(gate, "go", 1) != 1)
			log_warn("cannot start the command: %s", strerror(errno));
		close(gate);
		gate = -1;
	}

	bool show = log_get_level() >= LOG_NORMAL && isatty(STDERR_FILENO);
	double t0 = cli_now(), last_shown = 0, elapsed = 0;
	const char *why = "stopped";
	for (;;) {
		ret = session_poll(s, 20);
		if (ret) {
			log_error("reading samples: %s", strerror(-ret));
			break;
		}
		elapsed = cli_now() - t0;
		if (stop_requested) {
			why = "interrupted";
			break;
		}
		if (a.duration > 0 && elapsed >= a.duration) {
			why = "duration reached";
			break;
		}
		if (child) {
			int wst;
			pid_t w;
			while ((w = waitpid(-1, &wst, WNOHANG)) > 0) {
				if (w != child)
					continue;
				child_done = true;
				if (WIFEXITED(wst) && WEXITSTATUS(wst))
					log_info("%s exited with status %d", a.cmd[0],
						 WEXITSTATUS(wst));
				else if (WIFSIGNALED(wst))
					log_info("%s was killed by signal %d", a.cmd[0],
						 WTERMSIG(wst));
			}
			if (child_done) {
				why = "command exited";
				break;
			}
		} else if (!a.all && !session_live_targets(s)) {
			why = "target exited";
			break;
		}
		if (show && elapsed - last_shown >= 1.0) {
			progress(s, elapsed, false);
			last_shown = elapsed;
		}
	}
	/* What the ring still holds belongs to the profile. */
	int last = session_poll(s, 0);
	if (last)
		log_warn("reading the last samples: %s; the profile may miss them",
			 strerror(-last));
	if (show)
		progress(s, elapsed, true);

	struct session_stats st;
	session_stats(s, &st);
	ret = output_file_commit(of, session_profile(s), &a.oo, err, sizeof(err));
	if (ret) {
		char saved[PATH_MAX];
		log_error("%s", err);
		if (output_write_rescue(session_profile(s), a.format, &a.oo, saved, sizeof(saved)))
			log_error("the profile is lost: it cannot be written to $TMPDIR either");
		else
			log_error("the profile is kept in %s", saved);
		goto out;
	}
	log_info("%s: wrote %s (%s): %llu samples from %u Python process%s, %llu lost", why,
		 strcmp(a.output, "-") ? a.output : "standard output", output_format_name(a.format),
		 (unsigned long long)st.samples, st.processes, st.processes == 1 ? "" : "es",
		 (unsigned long long)(st.lost_ring + st.lost_unknown));
	if (!st.samples)
		log_warn("no samples: the targets did not run Python on a CPU while recorded");
	if (a.stats)
		print_stats(s);
	status = 0;
out:
	if (gate >= 0)
		close(gate); /* the child sees EOF and exits without running */
	if (child > 0 && !child_done && status != 0)
		waitpid(child, NULL, 0);
	session_free(s);
	output_file_free(of);
	return status;
}
