/* accept.c - the agent's listening socket (TCP, or a Unix socket in a
 * directory only root may write) and its acceptor thread.
 *
 * Connections are accepted here, on a thread of ours (the acceptor), and
 * handed to libmicrohttpd (MHD_add_connection), which has no listening
 * socket: its own accept() would count a connection before anyone could
 * look at it, refuse by its count alone, and spin when accept() fails for
 * want of descriptors with no connection open. The acceptor decides at
 * accept, before a byte is read:
 *
 *  - a uid that may not ask is answered 403 there and then and never holds
 *    a slot (the socket is 0666 with --allow-uid);
 *  - a peer has at most CONN_PER_PEER of the CONN_LIMIT slots: one address
 *    on TCP, one allowed uid on the Unix socket, where the allowed uids
 *    together leave CONN_RESERVED to root and the agent's user;
 *  - when the slots are all taken, an idle connection (no request under
 *    way) is closed to make room: one that never showed the token first,
 *    of the peer that holds the most, the oldest (evict_idle). A local
 *    user can bind any address of 127/8, so per-address counts alone
 *    would not keep the slots for the token's holders;
 *  - accept() failing for want of descriptors (EMFILE, ENFILE) is met with
 *    a descriptor kept in reserve, closed to accept and opened again when
 *    one is free, with a connection idle for SHORT_IDLE_S closed to free
 *    one, and with pauses (ACCEPT_PAUSE_MIN_S doubling up to
 *    ACCEPT_PAUSE_MAX_S) while none is free: never a spin.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "agent/agentlog.h"
#include "agent/httpd_int.h"
#include "util/clock.h"

/* --- the listening socket ---------------------------------------------------- */

/* A listening socket of our own, for an exact error when the bind fails
 * (libmicrohttpd only says that it did). */
static int listen_on(const struct sockaddr_storage *ss, socklen_t len, char *err, size_t errlen,
		     const char *what)
{
	int one = 1;
	int fd = socket(ss->ss_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0) {
		snprintf(err, errlen, "cannot listen on %s: %s", what, strerror(errno));
		return -errno;
	}
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (ss->ss_family == AF_INET6)
		setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof(one));
	if (bind(fd, (const struct sockaddr *)ss, len) || listen(fd, SOMAXCONN)) {
		int e = errno;
		snprintf(err, errlen, "cannot listen on %s: %s", what, strerror(e));
		close(fd);
		return -e;
	}
	return fd;
}

/* The directory of a Unix socket: made 0755 when missing; refused when
 * anyone but root (or the agent's user) may write in it, who could put a
 * socket of their own in the agent's place. */
static int check_dir(const char *path, char *err, size_t errlen)
{
	char dir[PATH_MAX];
	struct stat st;
	const char *slash = strrchr(path, '/');
	size_t len = slash ? (size_t)(slash - path) : 1;
	if (!slash)
		path = ".";
	if (len == 0)
		len = 1; /* "/name" */
	if (len >= sizeof(dir)) {
		snprintf(err, errlen, "socket path too long: %s", path);
		return -ENAMETOOLONG;
	}
	memcpy(dir, slash ? path : ".", len);
	dir[len] = 0;
	if (mkdir(dir, 0755) && errno != EEXIST) {
		int e = errno;
		snprintf(err, errlen, "cannot create the socket's directory %s: %s", dir,
			 strerror(e));
		return -e;
	}
	if (lstat(dir, &st)) {
		int e = errno;
		snprintf(err, errlen, "cannot use the socket's directory %s: %s", dir, strerror(e));
		return -e;
	}
	if (!S_ISDIR(st.st_mode) || (st.st_uid != 0 && st.st_uid != geteuid()) ||
	    (st.st_mode & 022)) {
		snprintf(err, errlen,
			 "the socket's directory %s must be a directory of root's that only it "
			 "may write (it is mode %04o, owner uid %u): another user could put "
			 "their own socket there",
			 dir, (unsigned int)(st.st_mode & 07777), (unsigned int)st.st_uid);
		return -EPERM;
	}
	return 0;
}

/* Binds the Unix socket at h->path, mode 0600 (0666 when uids are
 * allowed: the acceptor checks each peer's uid), replacing a stale one. */
static int listen_unix(struct httpd *h, char *err, size_t errlen)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	struct stat st;
	const char *path = h->path;
	if (strlen(path) >= sizeof(sa.sun_path)) {
		snprintf(err, errlen, "socket path too long (at most %zu bytes): %s",
			 sizeof(sa.sun_path) - 1, path);
		return -ENAMETOOLONG;
	}
	strcpy(sa.sun_path, path);
	int ret = check_dir(path, err, errlen);
	if (ret)
		return ret;
	if (!lstat(path, &st)) {
		if (!S_ISSOCK(st.st_mode)) {
			snprintf(err, errlen, "cannot listen on %s: it exists and is not a socket",
				 path);
			return -EEXIST;
		}
		int probe = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
		bool live = probe >= 0 && !connect(probe, (struct sockaddr *)&sa, sizeof(sa));
		if (probe >= 0)
			close(probe);
		if (live) {
			snprintf(err, errlen, "cannot listen on %s: another agent is serving there",
				 path);
			return -EADDRINUSE;
		}
		unlink(path); /* left by an agent that died */
	}
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0) {
		int e = errno;
		snprintf(err, errlen, "cannot listen on %s: %s", path, strerror(e));
		return -e;
	}
	/* Created with its mode, never a moment more open. */
	mode_t old = umask(0177);
	int b = bind(fd, (struct sockaddr *)&sa, sizeof(sa));
	umask(old);
	if (b || (h->nallow > 2 && chmod(path, 0666)) || lstat(path, &st) ||
	    listen(fd, SOMAXCONN)) {
		int e = errno;
		snprintf(err, errlen, "cannot listen on %s: %s", path, strerror(e));
		if (!b)
			unlink(path);
		close(fd);
		return -e;
	}
	h->sock_dev = st.st_dev;
	h->sock_ino = st.st_ino;
	snprintf(h->addr, sizeof(h->addr), "unix:%s", path);
	return fd;
}

static void name_address(struct httpd *h, int fd)
{
	struct sockaddr_storage ss;
	socklen_t len = sizeof(ss);
	char host[INET6_ADDRSTRLEN] = "?";
	unsigned int port = 0;
	if (getsockname(fd, (struct sockaddr *)&ss, &len))
		return;
	if (ss.ss_family == AF_INET6) {
		struct sockaddr_in6 *a = (struct sockaddr_in6 *)&ss;
		inet_ntop(AF_INET6, &a->sin6_addr, host, sizeof(host));
		port = ntohs(a->sin6_port);
		snprintf(h->addr, sizeof(h->addr), "http://[%s]:%u", host, port);
	} else {
		struct sockaddr_in *a = (struct sockaddr_in *)&ss;
		inet_ntop(AF_INET, &a->sin_addr, host, sizeof(host));
		port = ntohs(a->sin_port);
		snprintf(h->addr, sizeof(h->addr), "http://%s:%u", host, port);
	}
}

int accept_listen(struct httpd *h, const struct sockaddr_storage *ss, socklen_t len, char *err,
		  size_t errlen)
{
	if (h->is_unix)
		return listen_unix(h, err, errlen);
	int fd = listen_on(ss, len, err, errlen, h->o.listen);
	if (fd >= 0)
		name_address(h, fd);
	return fd;
}

void accept_remove_socket(struct httpd *h)
{
	struct stat st;
	if (h->path && !lstat(h->path, &st) && st.st_dev == h->sock_dev && st.st_ino == h->sock_ino)
		unlink(h->path);
	free(h->path);
	h->path = NULL;
}

/* --- the acceptor -------------------------------------------------------------- */

void accept_unlist(struct httpd *h, struct conn *cn)
{
	if (cn->prev)
		cn->prev->next = cn->next;
	else
		h->conns = cn->next;
	if (cn->next)
		cn->next->prev = cn->prev;
	if (cn->counted)
		h->nconns--;
	h->nlisted--;
}

static int peer_of(const struct httpd *h, int fd, const struct sockaddr_storage *ss, struct peer *p)
{
	memset(p, 0, sizeof(*p));
	p->family = ss->ss_family;
	if (h->is_unix) {
		struct ucred uc;
		socklen_t len = sizeof(uc);
		p->family = AF_UNIX;
		if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &uc, &len))
			return -errno;
		p->uid = uc.uid;
	} else if (ss->ss_family == AF_INET) {
		memcpy(p->addr, &((const struct sockaddr_in *)ss)->sin_addr, 4);
	} else if (ss->ss_family == AF_INET6) {
		memcpy(p->addr, &((const struct sockaddr_in6 *)ss)->sin6_addr, 16);
	}
	return 0;
}

static bool same_peer(const struct peer *a, const struct peer *b)
{
	if (a->family != b->family)
		return false;
	if (a->family == AF_UNIX)
		return a->uid == b->uid;
	return !memcmp(a->addr, b->addr, sizeof(a->addr));
}

static void describe_peer(const struct peer *p, char *buf, size_t len)
{
	char host[INET6_ADDRSTRLEN] = "?";
	if (p->family == AF_UNIX) {
		snprintf(buf, len, "uid %u", (unsigned int)p->uid);
		return;
	}
	inet_ntop(p->family, p->addr, host, sizeof(host));
	snprintf(buf, len, "%s", host);
}

/* How many counted connections p has. Under h->mu. */
static unsigned int held_by(const struct httpd *h, const struct peer *p)
{
	unsigned int n = 0;
	for (const struct conn *cn = h->conns; cn; cn = cn->next)
		n += cn->counted && same_peer(&cn->peer, p);
	return n;
}

/* Closes a connection idle (no request under way) for min_idle seconds at
 * least, to make room: one that never showed the token first (TCP), or of a
 * uid of --allow-uid (Unix socket); then one of the peer that holds the
 * most; then the oldest. Not the newest: a client that just connected has
 * its request on the way, and an attacker who connects over and over
 * closes its own connections first. Its slot is free at once;
 * libmicrohttpd reads end of file and closes it, which frees its
 * descriptor. Under h->mu. Returns whether one was closed. */
static bool evict_idle(struct httpd *h, double now, double min_idle)
{
	struct conn *victim = NULL;
	unsigned int best = 0, best_held = 0;
	for (struct conn *cn = h->conns; cn; cn = cn->next) {
		/* A request under way (a profile waiting too) is not idle.
		 * One not claimed yet is libmicrohttpd's all the same, on its
		 * way in, unless it is old: then libmicrohttpd closed it unseen
		 * and its fd number is not ours (httpd_tick forgets it). */
		if (!cn->counted || cn->cut || cn->head_done || now - cn->head_start < min_idle ||
		    (!cn->claimed && now - cn->accepted >= UNCLAIMED_S))
			continue;
		unsigned int rank = (cn->proven ? 2 : 0) + (cn->privileged ? 1 : 0);
		unsigned int held = held_by(h, &cn->peer);
		if (!victim || rank < best || (rank == best && held > best_held) ||
		    (rank == best && held == best_held && cn->head_start < victim->head_start)) {
			victim = cn;
			best = rank;
			best_held = held;
		}
	}
	if (!victim)
		return false;
	shutdown(victim->fd, SHUT_RDWR);
	victim->counted = false;
	h->nconns--;
	h->counts.evicted++;
	return true;
}

enum verdict {
	ADMIT,
	REFUSE_UID,	 /* Unix socket: not allowed */
	REFUSE_PEER,	 /* the peer has CONN_PER_PEER */
	REFUSE_RESERVED, /* the uids of --allow-uid have all they may have */
	REFUSE_FULL,	 /* every slot taken, none idle */
};

/* Whether a connection from p may be served, making room when the slots
 * are all taken or the descriptors ran out (fds_short). Under h->mu. */
static enum verdict make_room(struct httpd *h, const struct peer *p, bool privileged,
			      bool fds_short, double now)
{
	unsigned int same = 0, others = 0;
	if (h->is_unix && !httpd_uid_allowed(h, p->uid))
		return REFUSE_UID;
	for (struct conn *cn = h->conns; cn; cn = cn->next) {
		if (!cn->counted)
			continue;
		same += same_peer(&cn->peer, p);
		others += h->is_unix && !cn->privileged;
	}
	if (!privileged && same >= CONN_PER_PEER)
		return REFUSE_PEER;
	if (h->is_unix && !privileged && others >= CONN_LIMIT - CONN_RESERVED)
		return REFUSE_RESERVED;
	/* libmicrohttpd's own limit (it would close it unseen), counting
	 * those closed to make room that it has not closed yet. */
	if (h->nlisted >= CONN_LIMIT + CONN_CLOSING)
		return REFUSE_FULL;
	if (h->nconns >= CONN_LIMIT) {
		if (!evict_idle(h, now, 0))
			return REFUSE_FULL;
	} else if (fds_short) {
		/* It is served with the reserve's descriptor; one idle for
		 * long gives its own back for the next. */
		evict_idle(h, now, SHORT_IDLE_S);
	}
	return ADMIT;
}

/* A refused connection: closed once its peer read the answer (or after
 * LINGER_S), so that the peer sees the answer, not a reset for what it
 * sent meanwhile. At once when too many linger or descriptors are short. */
static void linger_or_close(struct httpd *h, int fd)
{
	if (h->reserve < 0 || h->nlinger >= LINGER_MAX) {
		close(fd);
		return;
	}
	shutdown(fd, SHUT_WR);
	h->lingering[h->nlinger++] =
	    (struct lingerer){.fd = fd, .until = mono_seconds() + LINGER_S};
}

/* Reads and drops what lingering connections sent; closes those done. p:
 * their pollfds, in the same order. */
static void linger_tend(struct httpd *h, const struct pollfd *p, double now)
{
	char buf[4096];
	/* Backwards: the last one, moved into a closed one's place, was seen. */
	for (unsigned int i = h->nlinger; i-- > 0;) {
		bool done = now >= h->lingering[i].until;
		for (int n = 0; !done && p[i].revents && n < 16; n++) {
			ssize_t r = read(h->lingering[i].fd, buf, sizeof(buf));
			if (r < 0 && (errno == EAGAIN || errno == EINTR))
				break;
			done = r <= 0;
		}
		if (done) {
			close(h->lingering[i].fd);
			h->lingering[i] = h->lingering[--h->nlinger];
		}
	}
}

/* The answer to a uid refused at accept, as admitted() words it. */
static const char forbidden[] = "HTTP/1.1 403 Forbidden\r\n"
				"Content-Type: text/plain; charset=utf-8\r\n"
				"Content-Length: 49\r\n"
				"Connection: close\r\n"
				"Cache-Control: no-store\r\n"
				"X-Content-Type-Options: nosniff\r\n"
				"\r\n" FORBIDDEN_BODY;
_Static_assert(sizeof(FORBIDDEN_BODY) - 1 == 49, "Content-Length");

/* Serves or refuses a connection just accepted. */
static void take(struct httpd *h, int fd, const struct sockaddr_storage *ss, socklen_t len,
		 bool fds_short)
{
	struct peer p;
	char who[INET6_ADDRSTRLEN + 16];
	double now = mono_seconds();
	enum verdict v = REFUSE_FULL;
	struct conn *cn = NULL;
	if (peer_of(h, fd, ss, &p)) {
		close(fd); /* SO_PEERCRED fails only on a socket that is gone */
		return;
	}
	bool privileged = h->is_unix && (p.uid == 0 || p.uid == h->allow[1]);
	cn = calloc(1, sizeof(*cn));
	pthread_mutex_lock(&h->mu);
	if (cn)
		v = make_room(h, &p, privileged, fds_short, now);
	if (v == ADMIT) {
		/* A struct of an fd that libmicrohttpd closed without a word
		 * (it could not take it) has that fd's number: forgotten. */
		for (struct conn *old = h->conns, *next; old; old = next) {
			next = old->next;
			if (!old->claimed && old->fd == fd) {
				accept_unlist(h, old);
				free(old);
			}
		}
		cn->fd = fd;
		cn->peer = p;
		cn->accepted = cn->head_start = now;
		cn->counted = true;
		cn->privileged = privileged;
		cn->proven = h->is_unix;
		cn->next = h->conns;
		if (h->conns)
			h->conns->prev = cn;
		h->conns = cn;
		h->nconns++;
		h->nlisted++;
	} else {
		h->counts.refused_conns++;
		h->counts.denied += v == REFUSE_UID;
	}
	pthread_mutex_unlock(&h->mu);

	if (v == ADMIT) {
		/* It closes fd itself when it cannot take it. */
		if (!httpd_hand_over(h, fd, ss, len)) {
			pthread_mutex_lock(&h->mu);
			accept_unlist(h, cn);
			h->counts.refused_conns++;
			pthread_mutex_unlock(&h->mu);
			free(cn);
		}
		return;
	}
	free(cn);
	describe_peer(&p, who, sizeof(who));
	switch (v) {
	case REFUSE_UID:
		/* The whole answer fits a new socket's buffer: never waits. */
		if (send(fd, forbidden, sizeof(forbidden) - 1, MSG_DONTWAIT | MSG_NOSIGNAL) < 0) {
			close(fd);
		} else {
			linger_or_close(h, fd);
		}
		agentlog_limited(&h->lim, "uid",
				 "refused a connection from %s: not allowed (--allow-uid)", who);
		return;
	case REFUSE_PEER:
		agentlog_limited(
		    &h->lim, "peer",
		    "refused a connection from %s: it has %d open, the most one %s may "
		    "have",
		    who, CONN_PER_PEER, h->is_unix ? "user" : "address");
		break;
	case REFUSE_RESERVED:
		agentlog_limited(&h->lim, "reserved",
				 "refused a connection from %s: the users of --allow-uid have %d "
				 "open, the most they may have (the rest is kept for root)",
				 who, CONN_LIMIT - CONN_RESERVED);
		break;
	default:
		agentlog_limited(&h->lim, "full",
				 "refused a connection from %s: %d open, none of them idle", who,
				 CONN_LIMIT);
		break;
	}
	close(fd);
}

static bool out_of_fds(int e)
{
	return e == EMFILE || e == ENFILE || e == ENOBUFS || e == ENOMEM;
}

/* Accepts what waits on the listening socket. Returns how long to wait
 * before the next try: 0, or longer each time accept() fails in a row. */
static double accept_pending(struct httpd *h, double pause)
{
	for (int i = 0; i < ACCEPT_BATCH; i++) {
		struct sockaddr_storage ss;
		socklen_t len = sizeof(ss);
		bool fds_short = false;
		int fd =
		    accept4(h->lfd, (struct sockaddr *)&ss, &len, SOCK_NONBLOCK | SOCK_CLOEXEC);
		if (fd < 0 && out_of_fds(errno) && h->reserve >= 0) {
			/* The descriptor kept makes room for this one. */
			close(h->reserve);
			h->reserve = -1;
			len = sizeof(ss);
			fd = accept4(h->lfd, (struct sockaddr *)&ss, &len,
				     SOCK_NONBLOCK | SOCK_CLOEXEC);
			fds_short = true;
		}
		if (fd < 0) {
			int e = errno;
			if (e == EAGAIN || e == EWOULDBLOCK)
				return 0;
			if (e == EINTR || e == ECONNABORTED || e == EPROTO || e == EPERM)
				continue; /* that one is gone; the next may wait */
			pthread_mutex_lock(&h->mu);
			if (out_of_fds(e))
				evict_idle(h, mono_seconds(), SHORT_IDLE_S);
			h->counts.accept_failures++;
			pthread_mutex_unlock(&h->mu);
			agentlog_limited(&h->lim, "accept",
					 "%s to accept a connection (%s): pausing accept(), up to "
					 "%.0f ms at a time, until one is free",
					 out_of_fds(e) ? "out of file descriptors" : "cannot",
					 strerror(e), ACCEPT_PAUSE_MAX_S * 1000);
			pause = pause ? pause * 2 : ACCEPT_PAUSE_MIN_S;
			return pause < ACCEPT_PAUSE_MAX_S ? pause : ACCEPT_PAUSE_MAX_S;
		}
		pause = 0;
		take(h, fd, &ss, len, fds_short);
		if (h->reserve < 0)
			h->reserve = open("/dev/null", O_RDONLY | O_CLOEXEC);
	}
	return 0;
}

static int ms_until(double when, double now)
{
	double ms = (when - now) * 1000 + 1;
	return ms < 0 ? 0 : ms > 60000 ? 60000 : (int)ms;
}

void *accept_run(void *arg)
{
	struct httpd *h = arg;
	double resume = 0, pause = 0;
	for (;;) {
		struct pollfd p[2 + LINGER_MAX];
		double now = mono_seconds();
		bool listening = now >= resume;
		nfds_t n = 0;
		int timeout = -1;
		p[n++] = (struct pollfd){.fd = h->wake[0], .events = POLLIN};
		if (listening)
			p[n++] = (struct pollfd){.fd = h->lfd, .events = POLLIN};
		else
			timeout = ms_until(resume, now);
		nfds_t lingers = n;
		for (unsigned int i = 0; i < h->nlinger; i++) {
			p[n++] = (struct pollfd){.fd = h->lingering[i].fd, .events = POLLIN};
			int t = ms_until(h->lingering[i].until, now);
			if (timeout < 0 || t < timeout)
				timeout = t;
		}
		if (poll(p, n, timeout) < 0 && errno != EINTR) {
			agentlog_limited(&h->lim, "poll", "http: poll: %s", strerror(errno));
			usleep(100000);
			continue;
		}
		if (p[0].revents)
			break;
		now = mono_seconds();
		linger_tend(h, p + lingers, now);
		if (h->reserve < 0)
			h->reserve = open("/dev/null", O_RDONLY | O_CLOEXEC);
		if (listening && p[1].revents) {
			pause = accept_pending(h, pause);
			resume = now + pause;
		}
	}
	for (unsigned int i = 0; i < h->nlinger; i++)
		close(h->lingering[i].fd);
	h->nlinger = 0;
	return NULL;
}
