/* cmd_top.c - `taipan top`: a live, refreshing view of the functions a
 * process spends its CPU time in, from the same BPF sampling session as
 * `record`. */
#include <curses.h>
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <locale.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cmd/commands.h"
#include "cmd/sampling_opts.h"
#include "util/log.h"
#include "core/runtime.h"
#include "cmd/cli.h"
#include "core/session.h"
#include "util/strutil.h"
#include "profile/topstats.h"
#include "util/clock.h"

#define MAX_WINDOW 3600

static volatile sig_atomic_t stop_requested;

static void on_signal(int sig)
{
	(void)sig;
	stop_requested = 1;
}

void cmd_top_usage(FILE *out)
{
	fprintf(out, "usage: taipan top -p PID [-r HZ] [-w SECS]\n"
		     "       taipan top -a [-r HZ] [-w SECS]\n"
		     "\n"
		     "A live view of where process PID (or, with -a, every Python process on\n"
		     "the host) spends its CPU time, refreshed every second: one row per\n"
		     "Python function (name and file) and per native function (name and\n"
		     "module; with --native=none, none), with\n"
		     "  OWN%%    the share of samples in which it was the innermost frame that is\n"
		     "          not the kernel's (running its own code, or a system call it made)\n"
		     "  TOTAL%%  the share of samples in which it was anywhere on the stack\n"
		     "over every thread, or one. Counts run from the start (or the last reset),\n"
		     "or over the last SECS seconds with --window. The header shows the pid,\n"
		     "Python version, sample rate, samples counted and samples lost.\n"
		     "With --mode wall, the shares are of the threads' time, on the CPU or\n"
		     "not, the OWN and TOTAL columns are seconds, and STATE says how a\n"
		     "function's own time was spent: running, runnable (waiting for a CPU),\n"
		     "sleeping or blocked (the disk), the largest share first.\n"
		     "\n"
		     "options:\n"
		     "  -p, --pid PID        the process to watch\n");
	sampling_opts_help(out, SAMPLING_TOP, SO_ALL | SO_RATE);
	fprintf(out,
		"  -w, --window SECS    count only the last SECS seconds (1 to %d; default:\n"
		"                       everything since the start or the last reset)\n",
		MAX_WINDOW);
	sampling_opts_help(out, SAMPLING_TOP, SO_NATIVE);
	sampling_opts_help(out, SAMPLING_TOP,
			   SO_MODE | SO_NICE | SO_MAX_MEMORY | SO_DEBUGINFOD | SO_ASYNC);
	fprintf(out,
		"  -h, --help           this text\n"
		"\n"
		"keys:\n"
		"  o       sort by own share (the default)\n"
		"  t       sort by total share\n"
		"  h / H   show the next / previous thread only; after the last, all again\n"
		"  a       all threads again\n"
		"  r       reset: count from now\n"
		"  q       quit (or Ctrl-C)\n"
		"\n"
		"It needs a terminal; to keep a profile, use 'taipan record'. The exit status\n"
		"is 0 after q or Ctrl-C, 1 when the process could not be watched (no such\n"
		"process, not Python, an unsupported version, no terminal), 2 for a usage\n"
		"error.\n"
		"\n"
		"examples:\n"
		"  taipan top -p 4242\n"
		"  taipan top -p 4242 -r 1000 -w 10\n");
}

/* The shared options top takes. */
#define SAMPLING_MASK                                                                              \
	(SO_ALL | SO_RATE | SO_MODE | SO_NATIVE | SO_NICE | SO_MAX_MEMORY | SO_DEBUGINFOD |        \
	 SO_ASYNC)

struct top_args {
	struct sampling_opts so;
	pid_t pid;
	unsigned int window;
};

static int parse_args(int argc, char **argv, struct top_args *a)
{
	static const struct option own[] = {
	    {"pid", required_argument, NULL, 'p'},
	    {"window", required_argument, NULL, 'w'},
	    {"help", no_argument, NULL, 'h'},
	    {0},
	};
	struct option longopts[sizeof(own) / sizeof(own[0]) + SAMPLING_LONGOPTS];
	char *end;
	long v;
	int c, r;
	sampling_opts_init(&a->so);
	/* Its rows leave kernel frames out anyway (OWN% is of the innermost
	 * frame that is not the kernel's): it has no --no-kernel, and reads
	 * none. */
	a->so.kernel = false;
	if (sampling_longopts(SAMPLING_MASK, own, longopts, sizeof(longopts) / sizeof(longopts[0])))
		return -EINVAL;
	optind = 1;
	while ((c = cli_getopt("top", argc, argv, "p:ar:w:h", longopts)) != -1) {
		r = sampling_opts_parse(&a->so, c, optarg);
		if (r < 0)
			return r;
		if (r == 0)
			continue;
		switch (c) {
		case 'p':
			if (a->pid) {
				log_error("top watches one process: give -p once");
				return -EINVAL;
			}
			if (cli_pid(optarg, &a->pid))
				return -EINVAL;
			break;
		case 'w':
			v = strtol(optarg, &end, 10);
			if (*end || v < 1 || v > MAX_WINDOW) {
				log_error(
				    "--window wants a number of seconds from 1 to %d, not '%s'",
				    MAX_WINDOW, optarg);
				return -EINVAL;
			}
			a->window = (unsigned int)v;
			break;
		case 'h':
			cmd_top_usage(stdout);
			exit(0);
		default:
			return -EINVAL;
		}
	}
	if (optind < argc) {
		log_error("unexpected argument '%s' (see 'taipan help top')", argv[optind]);
		return -EINVAL;
	}
	if (!a->pid == !a->so.all) {
		log_error("top needs -p PID or -a, one of them (see 'taipan help top')");
		return -EINVAL;
	}
	if (a->pid)
		a->pid = cli_process_of(a->pid);
	return 0;
}

/* What the screen shows besides the rows. */
struct view {
	const struct top_args *args;
	pid_t pid;		      /* the one process shown, 0 with -a */
	const struct runtime_ops *rt; /* its runtime, */
	struct rt_facts f;	      /* and what that says of it */
	enum top_sort sort;
	uint32_t tid;	   /* 0: every thread */
	const char *tname; /* the shown thread's name */
	double since;	   /* when counting started: the start, or the last reset */
	bool was_reset;
	unsigned int ticks;
	bool exited;
	bool wall;	   /* values are time (--mode wall, off-cpu) */
	const char *error; /* a failure to show in place of the rows, or NULL */
};

/* A row's value: a sample count, or (a wall-clock or off-CPU view) its
 * nanoseconds as seconds, in 8 columns. */
static const char *amount(char *buf, size_t len, uint64_t v, bool time)
{
	if (time)
		snprintf(buf, len, "%7.2fs", (double)v / 1e9);
	else
		snprintf(buf, len, "%8llu", (unsigned long long)v);
	return buf;
}

/* How a row's own time was spent, the largest share first: "sleeping 97%",
 * or "running 60% sleeping 40%" when two share it. */
static const char *state_text(char *buf, size_t len, const struct top_row *r)
{
	int best = -1, second = -1;
	for (int i = PROF_STATE_RUNNING; i < PROF_STATE__COUNT; i++) {
		if (!r->own_state[i])
			continue;
		if (best < 0 || r->own_state[i] > r->own_state[best]) {
			second = best;
			best = i;
		} else if (second < 0 || r->own_state[i] > r->own_state[second]) {
			second = i;
		}
	}
	if (best < 0 || !r->own) {
		snprintf(buf, len, "%-24s", "-");
		return buf;
	}
	char one[32];
	snprintf(one, sizeof(one), "%s %.0f%%", prof_state_name(best),
		 100.0 * (double)r->own_state[best] / (double)r->own);
	char two[64];
	if (second >= 0 && 100 * r->own_state[second] >= 5 * r->own)
		snprintf(two, sizeof(two), "%s %s %.0f%%", one, prof_state_name(second),
			 100.0 * (double)r->own_state[second] / (double)r->own);
	else
		snprintf(two, sizeof(two), "%s", one);
	snprintf(buf, len, "%-24s", two);
	return buf;
}

static double pct(uint64_t n, uint64_t of)
{
	return of ? 100.0 * (double)n / (double)of : 0.0;
}

/* Prints a formatted line at row y, cut at the screen's width w. */
static void __attribute__((format(printf, 3, 4))) put(int y, int w, const char *fmt, ...)
{
	char line[1024];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	mvaddnstr(y, 0, line, w);
}

/* s escaped (str_escape) into buf, cut to fit: a name the target chose
 * must show as text, not move the cursor or retitle the terminal. The row is
 * cut at the screen's width anyway. */
static const char *esc(char *buf, size_t len, const char *s)
{
	str_escape(buf, len, s, NULL);
	return buf;
}

static void draw(const struct view *v, struct topstats *ts, struct session *s)
{
	struct session_stats st;
	const struct top_row *const *rows;
	const struct top_thread *threads;
	int h, w, y;
	size_t nrows = topstats_rows(ts, &rows), nthreads = topstats_threads(ts, &threads);
	uint64_t view = topstats_view_samples(ts);
	char span[64], e1[256], e2[256];

	session_stats(s, &st);
	getmaxyx(stdscr, h, w);
	erase();
	if (v->args->window)
		snprintf(span, sizeof(span), "last %us",
			 v->ticks < v->args->window ? v->ticks : v->args->window);
	else
		snprintf(span, sizeof(span), "%s %.0fs",
			 v->was_reset ? "since reset" : "since start", mono_seconds() - v->since);
	if (v->pid)
		put(0, w, "taipan top - pid %d (%s), %s %s, %s, %u Hz, %s%s", v->pid,
		    esc(e1, sizeof(e1), v->f.comm), v->rt->title, v->f.version,
		    prof_mode_name(v->args->so.mode), v->args->so.rate, span,
		    v->exited ? " - the process exited" : "");
	else
		put(0, w, "taipan top - every Python process (%u seen), %s, %u Hz, %s",
		    st.processes, prof_mode_name(v->args->so.mode), v->args->so.rate, span);
	/* Samples counted, or (--mode wall, off-cpu) the threads' time. */
	char counted[64], inview[64];
	if (v->wall) {
		snprintf(counted, sizeof(counted), "time %.1fs",
			 (double)topstats_window_samples(ts) / 1e9);
		snprintf(inview, sizeof(inview), "%.1fs", (double)view / 1e9);
	} else {
		snprintf(counted, sizeof(counted), "samples %llu",
			 (unsigned long long)topstats_window_samples(ts));
		snprintf(inview, sizeof(inview), "%llu", (unsigned long long)view);
	}
	if (v->tid)
		put(1, w,
		    "%s (%s in view), lost %llu, threads %zu, showing thread %u (%s), sorted by %s",
		    counted, inview, (unsigned long long)st.lost, nthreads, v->tid,
		    v->tname ? esc(e1, sizeof(e1), v->tname) : "?",
		    v->sort == TOP_SORT_OWN ? "own" : "total");
	else
		put(1, w, "%s, lost %llu, threads %zu, showing all threads, sorted by %s", counted,
		    (unsigned long long)st.lost, nthreads,
		    v->sort == TOP_SORT_OWN ? "own" : "total");

	attron(A_REVERSE);
	mvhline(3, 0, ' ', w);
	mvaddnstr(3, 0,
		  v->wall ? "   OWN%  TOTAL%      OWN    TOTAL  STATE                     FUNCTION"
			  : "   OWN%  TOTAL%      OWN    TOTAL  FUNCTION",
		  w);
	attroff(A_REVERSE);
	/* The sort column in bold as well. */
	attron(A_REVERSE | A_BOLD);
	if (v->sort == TOP_SORT_OWN)
		mvaddnstr(3, 0, "   OWN%", w);
	else
		mvaddnstr(3, 7, "  TOTAL%", w > 7 ? w - 7 : 0);
	attroff(A_REVERSE | A_BOLD);

	y = 4;
	if (v->error) {
		mvaddnstr(y, 0, v->error, w);
	} else if (!nrows) {
		mvaddnstr(y, 0,
			  v->exited ? "(no samples)"
				    : "(no samples yet: the process has not run Python on a CPU)",
			  w);
	}
	for (size_t i = 0; i < nrows && y < h - 1; i++, y++) {
		const struct top_row *r = rows[i];
		char where[300] = "", a1[32], a2[32], stb[64];
		if (r->file) /* "run  (app.py:12)" */
			snprintf(where, sizeof(where), "  (%s:%d)",
				 esc(e2, sizeof(e2), base_name(r->file)), r->first_line);
		else if (r->module) /* native code: "sre_ucs1_match  (libpython3.12.so.1.0)" */
			snprintf(where, sizeof(where), "  (%s)",
				 esc(e2, sizeof(e2), base_name(r->module)));
		put(y, w, "%6.1f%% %6.1f%% %s %s  %s%s%s%s", pct(r->own, view), pct(r->total, view),
		    amount(a1, sizeof(a1), r->own, v->wall),
		    amount(a2, sizeof(a2), r->total, v->wall),
		    v->wall ? state_text(stb, sizeof(stb), r) : "", v->wall ? "  " : "",
		    esc(e1, sizeof(e1), r->name), where);
	}
	attron(A_DIM);
	mvaddnstr(h - 1, 0,
		  "o: sort by own  t: sort by total  h/H: next/previous thread  a: all threads  "
		  "r: reset  q: quit",
		  w);
	attroff(A_DIM);
	refresh();
}

/* Moves the thread filter to the next (dir 1) or previous (-1) thread with
 * samples in the window; past either end it shows every thread again. */
static void cycle_thread(struct view *v, struct topstats *ts, int dir)
{
	const struct top_thread *th;
	size_t n = topstats_threads(ts, &th);
	long at = -1;
	for (size_t i = 0; i < n; i++)
		if (th[i].tid == v->tid)
			at = (long)i;
	long next;
	if (!v->tid)
		next = dir > 0 ? 0 : (long)n - 1;
	else if (at < 0)
		/* The shown thread has no samples any more: the first one after
		 * (or before) it by tid. */
		for (next = dir > 0 ? 0 : (long)n - 1;
		     next >= 0 && next < (long)n &&
		     (dir > 0 ? th[next].tid < v->tid : th[next].tid > v->tid);
		     next += dir)
			;
	else
		next = at + dir;
	if (next < 0 || next >= (long)n) {
		v->tid = 0;
		v->tname = NULL;
	} else {
		v->tid = th[next].tid;
		v->tname = th[next].name;
	}
}

int cmd_top(int argc, char **argv)
{
	struct top_args a = {0};
	const struct runtime_ops *rt = NULL;
	struct rt_proc *rp = NULL;
	struct session *s = NULL;
	struct topstats *ts = NULL;
	SCREEN *scr = NULL;
	char err[512];
	int ret, status = 1;

	if (parse_args(argc, argv, &a))
		return 2;
	cli_raise_fd_limit();
	/* The version for the header, and a clear error before BPF loads. */
	ret = a.so.all ? 0 : runtime_detect(NULL, a.pid, &rt, &rp, err, sizeof(err));
	if (ret) {
		log_error("%s", ret == -ENOMEM ? "out of memory" : err);
		return 1;
	}
	if (!isatty(STDIN_FILENO) || !isatty(STDOUT_FILENO)) {
		if (a.so.all)
			log_error("top needs a terminal; to write a profile instead, use 'taipan "
				  "record -a'");
		else
			log_error("top needs a terminal; to write a profile instead, use 'taipan "
				  "record -p %d'",
				  a.pid);
		goto out;
	}
	ts = topstats_new(a.window);
	if (!ts) {
		log_error("out of memory");
		goto out;
	}
	struct session_opts so = {0};
	sampling_opts_session(&a.so, &so);
	ret = session_new(&so, &s, err, sizeof(err));
	if (ret) {
		log_error("%s", err);
		goto out;
	}
	ret = a.so.all ? 0 : session_add_pid(s, a.pid, true, err, sizeof(err));
	if (ret) {
		log_error("%s", err);
		goto out;
	}

	/* Ours before ncurses starts: it then leaves them alone. */
	cli_on_stop_signals(on_signal, true);

	ret = session_start(s, err, sizeof(err));
	if (ret) {
		log_error("%s", err);
		goto out;
	}
	setlocale(LC_ALL, "");
	scr = newterm(NULL, stdout, stdin);
	if (!scr) {
		log_error("cannot drive this terminal (TERM=%s)",
			  getenv("TERM") ? getenv("TERM") : "");
		goto out;
	}
	cbreak();
	noecho();
	nodelay(stdscr, TRUE);
	keypad(stdscr, TRUE);
	curs_set(0);

	struct view v = {.args = &a,
			 .pid = a.so.all ? 0 : a.pid,
			 .rt = rt,
			 .sort = TOP_SORT_OWN,
			 .since = mono_seconds(),
			 .wall = a.so.mode != PROF_MODE_CPU};
	if (rt)
		rt->facts(rp, &v.f);
	double next = mono_seconds() + 1.0;
	bool dirty = true;
	while (!stop_requested) {
		ret = session_poll(s, 50);
		if (ret) {
			v.error = "reading samples failed; q quits";
			dirty = true;
		}
		double now = mono_seconds();
		if (now >= next) {
			if (topstats_tick(ts, session_profile(s)))
				v.error = "out of memory; q quits";
			v.ticks++;
			if (!a.so.all && !v.exited && !session_live_targets(s))
				v.exited = true;
			next += 1.0;
			if (next < now)
				next = now + 1.0;
			dirty = true;
		}
		int ch;
		bool quit = false;
		while ((ch = getch()) != ERR) {
			switch (ch) {
			case 'q':
			case 'Q':
			case 3: /* Ctrl-C, should the terminal not turn it into SIGINT */
				quit = true;
				break;
			case 'o':
				v.sort = TOP_SORT_OWN;
				break;
			case 't':
				v.sort = TOP_SORT_TOTAL;
				break;
			case 'h':
			case 'H':
				cycle_thread(&v, ts, ch == 'h' ? 1 : -1);
				break;
			case 'a':
				v.tid = 0;
				v.tname = NULL;
				break;
			case 'r':
				if (topstats_reset(ts, session_profile(s)))
					v.error = "out of memory; q quits";
				v.since = now;
				v.was_reset = true;
				v.ticks = 0;
				break;
			default:
				break;
			}
			dirty = true;
		}
		if (quit)
			break;
		if (dirty) {
			if (topstats_compute(ts, session_profile(s), v.tid, v.sort))
				v.error = "out of memory; q quits";
			draw(&v, ts, s);
			dirty = false;
		}
	}
	status = 0;
out:
	if (scr) {
		endwin();
		delscreen(scr);
	}
	session_free(s);
	topstats_free(ts);
	if (rt)
		rt->free(rp);
	return status;
}
