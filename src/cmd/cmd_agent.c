/* cmd_agent.c - `taipan agent`: profile every Python process on the host,
 * always on; serve pprof over HTTP and push fixed windows to Pyroscope.
 * Its options, its secrets, and its start: the session, the sinks (the
 * pushes, then the HTTP server) and the loop (agent/agent.c) that gives
 * them the profiles.
 */
#include <errno.h>
#include <getopt.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "agent/agent.h"
#include "agent/agentlog.h"
#include "agent/httpd.h"
#include "agent/otlp.h"
#include "agent/push.h"
#include "agent/serve.h"
#include "cmd/cli.h"
#include "cmd/commands.h"
#include "cmd/sampling_opts.h"
#include "core/session.h"
#include "util/log.h"
#include "util/safefile.h"

#define DEFAULT_SOCKET "/run/taipan/agent.sock"
#define TOKEN_MIN 16
#define TOKEN_MAX 1024
#define CREDS_MAX 4096
#define OTLP_HEADERS_MAX 16384 /* bytes of --otlp-headers-file */
/* A long option without a short one, past the shared options' codes. */
#define OPT_NO_TIMESTAMPS 0x300
/* The push's credentials, when they come from the environment. */
#define ENV_PUSH_USER "TAIPAN_PUSH_USER"
#define ENV_PUSH_PASSWORD "TAIPAN_PUSH_PASSWORD"

static volatile sig_atomic_t stop_signal, hup_requested;

static void on_signal(int sig)
{
	if (sig == SIGHUP)
		hup_requested = 1;
	else
		stop_signal = sig;
}

void cmd_agent_usage(FILE *out)
{
	fprintf(out,
		"usage: taipan agent [options]\n"
		"\n"
		"Profiles every Python process on the host, continuously, the way\n"
		"'record -a' does. Serves pprof CPU profiles over HTTP (Go's\n"
		"/debug/pprof/profile convention, which Parca scrapes and go tool pprof\n"
		"reads) and, with --push, sends a profile of every window to Pyroscope.\n"
		"Runs until SIGTERM or SIGINT, which push the current window, answer the\n"
		"waiting requests with what there is, and exit 0. SIGHUP reopens --log.\n"
		"\n"
		"It serves on the Unix socket " DEFAULT_SOCKET " (mode 0600: root only)\n"
		"unless --listen asks for TCP, which needs --auth-token-file.\n"
		"\n"
		"options:\n"
		"      --socket PATH       the Unix socket (default " DEFAULT_SOCKET "); its\n"
		"                          directory is made 0755 when missing, and must be\n"
		"                          writable by root only\n"
		"      --allow-uid UID[,UID]  let these users in on the Unix socket too (it\n"
		"                          is then mode 0666 and each request's uid, from\n"
		"                          SO_PEERCRED, is checked: others get 403)\n"
		"  -l, --listen ADDR:PORT  serve HTTP on TCP here instead ([ADDR6]:PORT for\n"
		"                          IPv6); needs --auth-token-file\n"
		"      --auth-token-file FILE  every request must send 'Authorization: Bearer\n"
		"                          TOKEN', TOKEN being FILE's content (16 to 1024\n"
		"                          printable characters; a final newline is dropped;\n"
		"                          FILE must be root's, mode 0600 or 0400, and no\n"
		"                          symbolic link); others get 401\n"
		"      --push URL          send each window to the Pyroscope server at URL\n"
		"                          (POST URL/ingest, pprof); a user name or password\n"
		"                          in URL is refused (ps shows it): see below\n"
		"      --push-credentials-file FILE  authenticate the pushes (HTTP Basic) as\n"
		"                          FILE says: USER:PASSWORD on one line; FILE must\n"
		"                          be root's, mode 0600 or 0400, and no symbolic\n"
		"                          link. Or set " ENV_PUSH_USER " and\n"
		"                          " ENV_PUSH_PASSWORD " in the agent's environment\n"
		"      --otlp URL          send each window to the OpenTelemetry profiles\n"
		"                          receiver at URL (POST URL" OTLP_PROFILES_PATH ",\n"
		"                          protobuf, gzip; e.g. a Collector's http://HOST:4318)\n"
		"      --otlp-headers-file FILE  headers for the OTLP pushes (a token, say):\n"
		"                          'Key: Value' a line; FILE must be root's, mode 0600\n"
		"                          or 0400, and no symbolic link\n"
		"      --no-timestamps     OTLP: one value per stack, without the time of each\n"
		"                          of its samples (smaller requests)\n"
		"  -w, --window SECS       the push window (default 15; 1 to 3600)\n");
	sampling_opts_help(out, SAMPLING_AGENT, SO_RATE);
	fprintf(out,
		"      --app NAME          the application name in Pyroscope (default taipan;\n"
		"                          letters, digits, '.', '_', '-'); the host name goes\n"
		"                          in its hostname label: NAME{hostname=HOST}\n");
	sampling_opts_help(out, SAMPLING_AGENT, SO_COMM | SO_CGROUP);
	fprintf(out,
		"      --backlog N         windows kept for a push that fails, at most (default\n"
		"                          8; each of --push and --otlp has its own); older\n"
		"                          ones are dropped and counted\n");
	sampling_opts_help(out, SAMPLING_AGENT, SO_KERNEL | SO_NATIVE);
	sampling_opts_help(out, SAMPLING_AGENT,
			   SO_MODE | SO_NICE | SO_MAX_MEMORY | SO_DEBUGINFOD | SO_ASYNC);
	fprintf(
	    out,
	    "      --log FILE          log here instead of stderr (appended to, made 0640;\n"
	    "                          SIGHUP reopens it, for log rotation); a file of\n"
	    "                          another user's or a symbolic link is refused\n"
	    "      --stats             log the counters at exit\n"
	    "  -v, --verbose           log how each process was recognised\n"
	    "  -h, --help              this text\n"
	    "\n"
	    "endpoints:\n"
	    "  GET /debug/pprof/profile?seconds=N  a pprof CPU profile of the next N\n"
	    "                                      seconds (default 30, 1 to 300) of every\n"
	    "                                      process; labels (pid, comm, …) tell\n"
	    "                                      them apart\n"
	    "  GET /debug/pprof/wall?seconds=N     with --mode wall: a wall-clock profile\n"
	    "                                      (wall/nanoseconds, state and gil labels);\n"
	    "                                      /debug/pprof/profile keeps Go's CPU\n"
	    "                                      profile, the samples on the CPU\n"
	    "  GET /stats                          counters as JSON\n"
	    "  GET /healthz                        \"ok\"\n"
	    "\n"
	    "examples:\n"
	    "  taipan agent\n"
	    "  curl -s --unix-socket " DEFAULT_SOCKET " \\\n"
	    "      'http://localhost/debug/pprof/profile?seconds=10' > p.pb.gz\n"
	    "  go tool pprof -top p.pb.gz\n"
	    "  curl -s --unix-socket " DEFAULT_SOCKET " http://localhost/stats\n"
	    "  taipan agent --push http://pyroscope:4040 --app web --comm gunicorn\n"
	    "  (umask 077; printf '%%s:%%s\\n' USER PASSWORD > /etc/taipan/push)\n"
	    "  taipan agent --push https://profiles.example.com \\\n"
	    "      --push-credentials-file /etc/taipan/push\n"
	    "  head -c 32 /dev/urandom | base64 > /etc/taipan/token; chmod 600 /etc/taipan/token\n"
	    "  taipan agent --listen 0.0.0.0:9100 --auth-token-file /etc/taipan/token\n"
	    "  curl -s -H \"Authorization: Bearer $(cat /etc/taipan/token)\" \\\n"
	    "      'http://HOST:9100/debug/pprof/profile?seconds=10' > p.pb.gz\n");
}

/* The shared options the agent takes: it samples every process. */
#define SAMPLING_MASK                                                                              \
	(SO_COMM | SO_CGROUP | SO_RATE | SO_MODE | SO_KERNEL | SO_NATIVE | SO_NICE |               \
	 SO_MAX_MEMORY | SO_DEBUGINFOD | SO_ASYNC)

struct agent_args {
	struct sampling_opts so;
	const char *listen;
	const char *socket;
	const char *token_file;
	char *token; /* from malloc */
	uid_t allow[HTTPD_MAX_ALLOW_UIDS];
	unsigned int nallow;
	const char *push;
	const char *creds_file;
	char *push_user, *push_password; /* from malloc; NULL: none */
	const char *otlp;
	const char *otlp_headers_file;
	bool no_timestamps; /* --no-timestamps: OTLP without each sample's time */
	/* --otlp-headers-file's content, split in place into otlp_headers. */
	char *otlp_buf;
	size_t otlp_buf_len;
	char *otlp_headers[OTLP_MAX_HEADERS];
	size_t notlp_headers;
	double window;
	const char *app;
	const char *log;
	unsigned int backlog;
	bool stats;
};

/* --allow-uid 1000,1001: numeric uids, added to a's. */
static int parse_uids(const char *arg, struct agent_args *a)
{
	const char *p = arg;
	for (;;) {
		char *end;
		errno = 0;
		unsigned long v = strtoul(p, &end, 10);
		if (errno || end == p || *p == '-' || *p == '+' || v >= (uid_t)-1 ||
		    (*end && *end != ',')) {
			log_error("--allow-uid wants numeric uids separated by commas, not '%s'",
				  arg);
			return -EINVAL;
		}
		if (a->nallow >= HTTPD_MAX_ALLOW_UIDS) {
			log_error("--allow-uid: at most %d uids", HTTPD_MAX_ALLOW_UIDS);
			return -EINVAL;
		}
		a->allow[a->nallow++] = (uid_t)v;
		if (!*end)
			return 0;
		p = end + 1;
	}
}

/* Reads the bearer token of --auth-token-file into a->token. */
static int read_token(struct agent_args *a)
{
	const char *path = a->token_file;
	char buf[TOKEN_MAX + 2], why[512];
	size_t n = 0;
	int ret = safefile_read_secret(path, buf, sizeof(buf), &n, why, sizeof(why));
	if (ret) {
		log_error("--auth-token-file: %s", why);
		return ret;
	}
	while (n && (buf[n - 1] == '\n' || buf[n - 1] == '\r'))
		n--;
	bool printable = true;
	for (size_t i = 0; i < n; i++)
		printable &= buf[i] > ' ' && buf[i] < 0x7f;
	if (n < TOKEN_MIN || n > TOKEN_MAX || !printable) {
		explicit_bzero(buf, sizeof(buf));
		log_error("--auth-token-file %s must hold one token of %d to %d printable "
			  "characters without spaces (e.g. head -c 32 /dev/urandom | base64)",
			  path, TOKEN_MIN, TOKEN_MAX);
		return -EINVAL;
	}
	a->token = strndup(buf, n);
	explicit_bzero(buf, sizeof(buf));
	return a->token ? 0 : -ENOMEM;
}

/* The pushes' user name and password into a->push_user and
 * a->push_password: from --push-credentials-file, or from the environment
 * (only with --push). */
static int read_push_credentials(struct agent_args *a)
{
	const char *eu = getenv(ENV_PUSH_USER), *ep = getenv(ENV_PUSH_PASSWORD);
	char buf[CREDS_MAX + 1], why[512], *user, *password;
	size_t n = 0;
	int ret;

	if (!a->push || (!a->creds_file && !eu && !ep))
		return 0;
	if (a->creds_file && (eu || ep)) {
		log_error(
		    "the push credentials come one way: --push-credentials-file, or " ENV_PUSH_USER
		    " and " ENV_PUSH_PASSWORD " in the environment, not both");
		return -EINVAL;
	}
	if (!a->creds_file) {
		if (!eu || !*eu || !ep) {
			log_error("set both " ENV_PUSH_USER " (not empty) and " ENV_PUSH_PASSWORD
				  ", or neither");
			return -EINVAL;
		}
		a->push_user = strdup(eu);
		a->push_password = strdup(ep);
		return a->push_user && a->push_password ? 0 : -ENOMEM;
	}
	ret = safefile_read_secret(a->creds_file, buf, sizeof(buf) - 1, &n, why, sizeof(why));
	if (ret) {
		log_error("--push-credentials-file: %s", why);
		return ret;
	}
	buf[n] = 0;
	ret = -EINVAL;
	if (n >= sizeof(buf) - 1 || strlen(buf) != n ||
	    push_parse_credentials(buf, &user, &password)) {
		log_error("--push-credentials-file %s must hold USER:PASSWORD on one line (at most "
			  "%d bytes, no control characters)",
			  a->creds_file, CREDS_MAX - 1);
	} else {
		a->push_user = strdup(user);
		a->push_password = strdup(password);
		ret = a->push_user && a->push_password ? 0 : -ENOMEM;
	}
	explicit_bzero(buf, sizeof(buf));
	return ret;
}

/* The headers of --otlp-headers-file into a->otlp_headers. */
static int read_otlp_headers(struct agent_args *a)
{
	char why[512];
	size_t n = 0;
	if (!a->otlp_headers_file)
		return 0;
	a->otlp_buf_len = OTLP_HEADERS_MAX + 1;
	a->otlp_buf = calloc(1, a->otlp_buf_len);
	if (!a->otlp_buf)
		return -ENOMEM;
	int ret = safefile_read_secret(a->otlp_headers_file, a->otlp_buf, a->otlp_buf_len - 1, &n,
				       why, sizeof(why));
	if (ret) {
		log_error("--otlp-headers-file: %s", why);
		return ret;
	}
	if (n >= a->otlp_buf_len - 1 || strlen(a->otlp_buf) != n) {
		log_error("--otlp-headers-file %s: at most %d bytes of text", a->otlp_headers_file,
			  OTLP_HEADERS_MAX - 1);
		return -EINVAL;
	}
	ret = otlp_parse_headers(a->otlp_buf, a->otlp_headers, OTLP_MAX_HEADERS, &a->notlp_headers,
				 why, sizeof(why));
	if (ret)
		log_error("--otlp-headers-file %s must hold one 'Key: Value' a line: %s",
			  a->otlp_headers_file, why);
	return ret;
}

/* Wipes and frees what read_token, read_push_credentials and
 * read_otlp_headers read. */
static void forget_secrets(struct agent_args *a)
{
	if (a->otlp_buf)
		explicit_bzero(a->otlp_buf, a->otlp_buf_len);
	free(a->otlp_buf);
	a->otlp_buf = NULL;
	a->notlp_headers = 0;
	char **secrets[] = {&a->token, &a->push_user, &a->push_password};
	for (size_t i = 0; i < sizeof(secrets) / sizeof(secrets[0]); i++) {
		if (*secrets[i])
			explicit_bzero(*secrets[i], strlen(*secrets[i]));
		free(*secrets[i]);
		*secrets[i] = NULL;
	}
}

static int parse_args(int argc, char **argv, struct agent_args *a)
{
	static const struct option own[] = {
	    {"listen", required_argument, NULL, 'l'},
	    {"push", required_argument, NULL, 'P'},
	    {"window", required_argument, NULL, 'w'},
	    {"app", required_argument, NULL, 'A'},
	    {"backlog", required_argument, NULL, 'B'},
	    {"log", required_argument, NULL, 'L'},
	    {"stats", no_argument, NULL, 'S'},
	    {"verbose", no_argument, NULL, 'v'},
	    {"help", no_argument, NULL, 'h'},
	    {"socket", required_argument, NULL, 'U'},
	    {"auth-token-file", required_argument, NULL, 'T'},
	    {"allow-uid", required_argument, NULL, 'I'},
	    {"push-credentials-file", required_argument, NULL, 'Q'},
	    {"otlp", required_argument, NULL, 'O'},
	    {"otlp-headers-file", required_argument, NULL, 'H'},
	    {"no-timestamps", no_argument, NULL, OPT_NO_TIMESTAMPS},
	    {0},
	};
	struct option longopts[sizeof(own) / sizeof(own[0]) + SAMPLING_LONGOPTS];
	char *end;
	int c, r;
	long v;

	sampling_opts_init(&a->so);
	a->so.all = true;
	a->socket = DEFAULT_SOCKET;
	bool socket_given = false;
	a->window = 15;
	a->app = "taipan";
	a->backlog = 8;
	if (sampling_longopts(SAMPLING_MASK, own, longopts, sizeof(longopts) / sizeof(longopts[0])))
		return -EINVAL;
	optind = 1;
	while ((c = cli_getopt("agent", argc, argv, "l:w:r:vh", longopts)) != -1) {
		r = sampling_opts_parse(&a->so, c, optarg);
		if (r < 0)
			return r;
		if (r == 0 && c == 'M' && a->so.mode == PROF_MODE_OFFCPU) {
			log_error("the agent takes --mode cpu or wall: /debug/pprof/wall "
				  "holds the off-CPU stacks, with their state");
			return -EINVAL;
		}
		if (r == 0)
			continue;
		switch (c) {
		case 'l':
			a->listen = optarg;
			break;
		case 'P':
			a->push = optarg;
			break;
		case 'U':
			a->socket = optarg;
			socket_given = true;
			break;
		case 'T':
			a->token_file = optarg;
			break;
		case 'Q':
			a->creds_file = optarg;
			break;
		case 'O':
			a->otlp = optarg;
			break;
		case 'H':
			a->otlp_headers_file = optarg;
			break;
		case OPT_NO_TIMESTAMPS:
			a->no_timestamps = true;
			break;
		case 'I':
			if (parse_uids(optarg, a))
				return -EINVAL;
			break;
		case 'w':
			a->window = strtod(optarg, &end);
			if (end == optarg || *end || !(a->window >= 1 && a->window <= 3600)) {
				log_error("--window wants seconds from 1 to 3600, not '%s'",
					  optarg);
				return -EINVAL;
			}
			break;
		case 'A':
			a->app = optarg;
			break;
		case 'B':
			errno = 0;
			v = strtol(optarg, &end, 10);
			if (errno || end == optarg || *end || v < 1 || v > 1024) {
				log_error("--backlog wants a number of windows from 1 to 1024, not "
					  "'%s'",
					  optarg);
				return -EINVAL;
			}
			a->backlog = (unsigned int)v;
			break;
		case 'L':
			a->log = optarg;
			break;
		case 'S':
			a->stats = true;
			break;
		case 'v':
			log_set_level(LOG_VERBOSE);
			break;
		case 'h':
			cmd_agent_usage(stdout);
			exit(0);
		default:
			return -EINVAL;
		}
	}
	if (optind < argc) {
		log_error("agent takes no arguments ('%s'); see 'taipan help agent'", argv[optind]);
		return -EINVAL;
	}
	struct sockaddr_storage ss;
	socklen_t sslen;
	if (a->listen && socket_given) {
		log_error("--listen (TCP) and --socket (a Unix socket) exclude each other");
		return -EINVAL;
	}
	if (!*a->socket) {
		log_error("--socket wants a path");
		return -EINVAL;
	}
	if (a->listen && httpd_parse_listen(a->listen, &ss, &sslen)) {
		log_error("--listen wants ADDR:PORT or [ADDR6]:PORT with a numeric address, not "
			  "'%s'",
			  a->listen);
		return -EINVAL;
	}
	/* TCP reaches every local user at least: without a token, any of
	 * them could read every process's stacks. There is no way around it
	 * on purpose; see the man page. */
	if (a->listen && !a->token_file) {
		log_error("--listen (TCP) needs --auth-token-file FILE: without a token every "
			  "user who can connect could read every process's stacks; the Unix "
			  "socket (the default) needs none");
		return -EINVAL;
	}
	if (a->listen && a->nallow) {
		log_error("--allow-uid is for the Unix socket (peer uids are known there "
			  "only); on TCP the token decides");
		return -EINVAL;
	}
	char shown[512];
	int bad_url = a->push ? push_check_url(a->push) : 0;
	if (bad_url)
		push_redact_url(shown, sizeof(shown), a->push);
	if (bad_url == -EPERM) {
		log_error("--push %s: a user name or password in the URL can be read by every user "
			  "(ps) and would be logged; put USER:PASSWORD in a file of root's, mode "
			  "0600, and give --push-credentials-file FILE, or set " ENV_PUSH_USER
			  " and " ENV_PUSH_PASSWORD " in the agent's environment",
			  shown);
		return -EINVAL;
	}
	if (bad_url) {
		log_error("--push wants an http:// or https:// URL without a query, not '%s'",
			  shown);
		return -EINVAL;
	}
	if (a->creds_file && !a->push) {
		log_error("--push-credentials-file is for --push");
		return -EINVAL;
	}
	if (a->no_timestamps && !a->otlp) {
		log_error("--no-timestamps is for --otlp");
		return -EINVAL;
	}
	bad_url = a->otlp ? push_check_url(a->otlp) : 0;
	if (bad_url)
		push_redact_url(shown, sizeof(shown), a->otlp);
	if (bad_url == -EPERM) {
		log_error(
		    "--otlp %s: a user name or password in the URL can be read by every user "
		    "(ps) and would be logged; put the header that authenticates in a file of "
		    "root's, mode 0600, and give --otlp-headers-file FILE",
		    shown);
		return -EINVAL;
	}
	if (bad_url) {
		log_error("--otlp wants an http:// or https:// URL without a query, not '%s'",
			  shown);
		return -EINVAL;
	}
	if (a->otlp_headers_file && !a->otlp) {
		log_error("--otlp-headers-file is for --otlp");
		return -EINVAL;
	}
	char name[256];
	if (push_app_name(name, sizeof(name), a->app, NULL)) {
		log_error("--app wants 1 to 100 letters, digits, '.', '_' or '-', not '%s'",
			  a->app);
		return -EINVAL;
	}
	return 0;
}

int cmd_agent(int argc, char **argv)
{
	struct agent_args args = {0};
	struct session *s = NULL;
	struct agent *a = NULL;
	struct sink push, serve, otlp;
	char err[512], host[256] = "", name[512];
	sigset_t block, old;
	int ret, status = 1;

	if (parse_args(argc, argv, &args))
		return 2;
	cli_raise_fd_limit();
	if ((args.token_file && read_token(&args)) || read_push_credentials(&args) ||
	    read_otlp_headers(&args)) {
		forget_secrets(&args);
		return 2;
	}
	if (args.log && agentlog_redirect(args.log, err, sizeof(err))) {
		log_error("--log: %s", err);
		forget_secrets(&args);
		return 1;
	}
	gethostname(host, sizeof(host) - 1);
	ret = push_app_name(name, sizeof(name), args.app, host);
	if (ret) {
		log_error("cannot name the application: %s", strerror(-ret));
		forget_secrets(&args);
		return 2;
	}
	signal(SIGPIPE, SIG_IGN);

	/* OTLP's samples carry the times of their events. */
	struct session_opts so = {.events = args.otlp && !args.no_timestamps};
	sampling_opts_session(&args.so, &so);
	ret = session_new(&so, &s, err, sizeof(err));
	if (ret) {
		agentlog("error: %s", err);
		goto out;
	}

	/* The server's and the pusher's threads inherit this mask: the
	 * signals are for the sampling thread, whose poll they cut short. A
	 * signal that comes meanwhile waits for the loop. */
	cli_on_stop_signals(on_signal, true);
	sigemptyset(&block);
	sigaddset(&block, SIGINT);
	sigaddset(&block, SIGTERM);
	sigaddset(&block, SIGHUP);
	pthread_sigmask(SIG_BLOCK, &block, &old);
	struct agent_opts ao = {
	    .window = args.window,
	    .rate = args.so.rate,
	    .log = args.log,
	    .stats = args.stats,
	    .stop_signal = &stop_signal,
	    .hup = &hup_requested,
	};
	ret = agent_new(&ao, s, &a);
	if (ret)
		snprintf(err, sizeof(err), "out of memory");
	/* The sinks: the pushes (or, without --push, their zeros in /stats),
	 * then the HTTP server. */
	struct push_opts po = {
	    .url = args.push,
	    .user = args.push_user,
	    .password = args.push_password,
	    .name = name,
	    .rate_hz = args.so.rate,
	    .backlog = args.backlog,
	};
	if (!ret)
		ret = push_sink_new(args.push ? &po : NULL, &push, err, sizeof(err));
	if (!ret && (ret = agent_add_sink(a, push)))
		snprintf(err, sizeof(err), "too many sinks");
	struct otlp_opts oo = {
	    .url = args.otlp,
	    .headers = (const char *const *)args.otlp_headers,
	    .nheaders = args.notlp_headers,
	    .backlog = args.backlog,
	};
	if (!ret && args.otlp && !(ret = otlp_sink_new(&oo, &otlp, err, sizeof(err))) &&
	    (ret = agent_add_sink(a, otlp)))
		snprintf(err, sizeof(err), "too many sinks");
	/* The sink copied the headers. */
	if (args.otlp_buf)
		explicit_bzero(args.otlp_buf, args.otlp_buf_len);
	if (!ret)
		ret = session_start(s, err, sizeof(err));
	/* Last, so that /healthz answering means sampling; /stats may be
	 * asked as soon as the server runs, the sinks are there by then. */
	struct httpd_opts ho = {
	    .listen = args.listen,
	    .socket_path = args.socket,
	    .allow_uids = args.allow,
	    .nallow_uids = args.nallow,
	    .token = args.token,
	    .wall = args.so.mode == PROF_MODE_WALL,
	    .stats_json = agent_stats_json,
	    .ctx = a,
	};
	if (!ret && (ret = serve_sink_new(&serve)))
		snprintf(err, sizeof(err), "out of memory");
	if (!ret && (ret = agent_add_sink(a, serve)))
		snprintf(err, sizeof(err), "too many sinks");
	if (!ret)
		ret = serve_start(&serve, &ho, err, sizeof(err));
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (ret) {
		agentlog("error: %s", err);
		goto out;
	}
	agentlog("agent started (pid %d): every Python process%s%s%s%s, %u Hz, %g s windows",
		 getpid(), args.so.ncomms ? " named as --comm says" : "",
		 args.so.cgroup ? " in cgroup " : "", args.so.cgroup ? args.so.cgroup : "",
		 args.so.kernel ? "" : ", no kernel frames", args.so.rate, args.window);
	agentlog("listening on %s (GET /debug/pprof/profile?seconds=N%s, /stats, /healthz), for "
		 "%s",
		 serve_address(&serve),
		 args.so.mode == PROF_MODE_WALL ? ", /debug/pprof/wall?seconds=N" : "",
		 args.listen   ? "clients with the bearer token"
		 : args.nallow ? "root and the uids of --allow-uid"
			       : "root only");
	if (args.push) {
		char shown[512];
		push_redact_url(shown, sizeof(shown), args.push);
		agentlog("pushing each window to %s/ingest as %s (backlog %u)%s", shown, name,
			 args.backlog,
			 !args.push_user   ? ""
			 : args.creds_file ? ", with the credentials of --push-credentials-file"
					   : ", with the credentials of " ENV_PUSH_USER
					     " and " ENV_PUSH_PASSWORD);
		if (args.push_user && !strncmp(args.push, "http://", 7))
			agentlog("warning: the push credentials go over http:// as clear text; "
				 "use https:// where the network is not trusted");
	}

	if (args.otlp) {
		char url[4096], shown[4096];
		if (otlp_endpoint(url, sizeof(url), args.otlp))
			snprintf(url, sizeof(url), "%s", args.otlp);
		push_redact_url(shown, sizeof(shown), url);
		agentlog("pushing each window to %s as OTLP (backlog %u)%s", shown, args.backlog,
			 args.notlp_headers ? ", with the headers of --otlp-headers-file" : "");
	}

	status = agent_run(a);
out:
	/* After an error: nothing is waiting any more, the sinks stop at once. */
	agent_free(a);
	session_free(s);
	forget_secrets(&args);
	return status;
}
