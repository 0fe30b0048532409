/* httpd_int.h - what the two halves of the agent's HTTP server share:
 * httpd.c (the requests, on libmicrohttpd's thread, and the main loop's
 * side) and accept.c (the listening socket and the acceptor thread). Its
 * state, its connections and their limits. Not for anything else. */
#ifndef TAIPAN_HTTPD_INT_H
#define TAIPAN_HTTPD_INT_H

#include <microhttpd.h>
#include <pthread.h>
#include <stdbool.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <sys/un.h>

#include "agent/agentlog.h"
#include "agent/httpd.h"

#define CONN_LIMIT 32		 /* connections served at once */
#define CONN_PER_PEER 16	 /* of one address (TCP), or of one uid of --allow-uid */
#define CONN_RESERVED 8		 /* Unix socket: slots the uids of --allow-uid leave to root */
#define CONN_CLOSING 32		 /* closed to make room, not yet closed by libmicrohttpd */
#define ACCEPT_PAUSE_MIN_S 0.001 /* accept() failed: the first pause, doubled ... */
#define ACCEPT_PAUSE_MAX_S 0.1	 /* ... up to this, while it fails */
#define SHORT_IDLE_S 0.2	 /* out of descriptors: idle this long gives way */
#define ACCEPT_BATCH 16		 /* connections accepted at one wake-up, at most */
#define LINGER_MAX 8		 /* refused connections whose 403 is still being read */
#define LINGER_S 1.0
#define UNCLAIMED_S 5.0		/* handed to libmicrohttpd, never seen by it: forgotten */
#define CONN_MEMORY (16 * 1024) /* request line and headers must fit */
#define CONN_TIMEOUT_S 10	/* idle; waiting requests are exempt */
#define LOG_EVERY_S 5		/* a refusal of a kind is logged once per this */

#define FORBIDDEN_BODY "this user may not use the agent; see --allow-uid\n"

/* Who is at the other end of a connection. */
struct peer {
	int family;		/* AF_UNIX, AF_INET or AF_INET6 */
	uid_t uid;		/* AF_UNIX: SO_PEERCRED's */
	unsigned char addr[16]; /* AF_INET(6): the address, not the port */
};

/* A connection, from accept to close (libmicrohttpd's socket context once
 * it has it). */
struct conn {
	struct conn *prev, *next;
	int fd;
	struct peer peer;
	double accepted;    /* CLOCK_MONOTONIC s */
	double head_start;  /* CLOCK_MONOTONIC s: accepted, or the last request ended */
	bool head_done;	    /* the current request's head is in */
	bool cut;	    /* shut down at the head deadline */
	bool too_many_args; /* its request line had more than HTTPD_MAX_ARGS */
	bool claimed;	    /* libmicrohttpd has it (its STARTED notification came) */
	bool counted;	    /* holds a slot: not closed to make room */
	bool privileged;    /* Unix socket: root or the agent's user */
	bool proven;	    /* TCP: a request of it had the token; Unix socket: always */
};

/* A refused connection whose answer the peer is reading (the acceptor's). */
struct lingerer {
	int fd;
	double until;
};

struct httpd_req {
	struct httpd_req *next;
	struct MHD_Connection *conn;
	int fd;
	unsigned int seconds;
	bool wall; /* WALL_PATH */
	unsigned int status;
	const char *ctype;
	void *body; /* until handed to a response */
	size_t len;
};

struct httpd {
	struct MHD_Daemon *d;
	struct httpd_opts o;
	char addr[sizeof(((struct sockaddr_un *)0)->sun_path) + 16];
	bool is_unix;
	char *path;	/* the Unix socket, removed at the end */
	dev_t sock_dev; /* ... when it is still the one bound */
	ino_t sock_ino;
	uid_t allow[HTTPD_MAX_ALLOW_UIDS + 2]; /* root, the agent's user, --allow-uid */
	unsigned int nallow;
	struct agentlog_limiter lim;

	/* The acceptor's. */
	int lfd;     /* the listening socket */
	int wake[2]; /* httpd_stop: a byte in wake[1] */
	int reserve; /* kept for accept() when descriptors run out; -1: in use */
	pthread_t acceptor;
	bool acceptor_up;
	struct lingerer lingering[LINGER_MAX];
	unsigned int nlinger;

	pthread_mutex_t mu;
	pthread_cond_t cv;	    /* in_flight went down; CLOCK_MONOTONIC */
	struct httpd_req *incoming; /* arrived, not taken yet (oldest first) */
	unsigned int waiting;	    /* profile requests not answered yet */
	unsigned int in_flight;	    /* profile requests whose connection is open */
	struct httpd_counts counts;
	struct conn *conns;  /* every connection accepted and not closed */
	unsigned int nconns; /* of them, those counted */
	unsigned int nlisted;
	bool stopping;
};

/* accept.c */

/* Binds the listening socket: the Unix socket at h->path (its directory
 * checked, a stale socket replaced), or TCP at ss. Sets h->addr. Returns
 * the socket, or a negative errno with err filled. */
int accept_listen(struct httpd *h, const struct sockaddr_storage *ss, socklen_t len, char *err,
		  size_t errlen);

/* The acceptor thread (h): accepts, admits or refuses, until a byte comes
 * on h->wake[0]. */
void *accept_run(void *h);

/* Removes the Unix socket, if it is still the one bound, and forgets its
 * path. */
void accept_remove_socket(struct httpd *h);

/* Takes cn out of h's list of connections. Under h->mu. */
void accept_unlist(struct httpd *h, struct conn *cn);

/* httpd.c */

/* Whether uid may use the agent on the Unix socket. */
bool httpd_uid_allowed(const struct httpd *h, uid_t uid);

/* Hands fd, just accepted and admitted, to libmicrohttpd. False when it
 * could not take it: it has closed fd then. */
bool httpd_hand_over(struct httpd *h, int fd, const struct sockaddr_storage *ss, socklen_t len);

#endif /* TAIPAN_HTTPD_INT_H */
