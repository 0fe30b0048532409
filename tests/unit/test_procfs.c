/* test_procfs.c - unit tests for the /proc readers (src/proc/procfs.c): against
 * this test process, a thread it starts and a child it forks, and the
 * parsers on sample text. */
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <sched.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "proc/procfs.h"

#define HEX64 "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

static pid_t my_tid(void)
{
	return (pid_t)syscall(SYS_gettid);
}

static void sleep_ms(long ms)
{
	struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (ms % 1000) * 1000000L};
	while (nanosleep(&ts, &ts) && errno == EINTR)
		;
}

static bool contains(const pid_t *v, size_t n, pid_t x)
{
	for (size_t i = 0; i < n; i++)
		if (v[i] == x)
			return true;
	return false;
}

/* A child named name that waits to be killed. Returns its pid once it has
 * set its name. */
static pid_t spawn_child(const char *name)
{
	int fds[2];
	char c;
	assert_int_equal(pipe(fds), 0);
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (!pid) {
		/* Should the test fail before reaping it, it must not outlive
		 * the test (and hold its output pipe open). */
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		close(fds[0]);
		prctl(PR_SET_NAME, name);
		if (write(fds[1], "x", 1) != 1)
			_exit(1);
		for (;;)
			pause();
	}
	close(fds[1]);
	assert_int_equal(read(fds[0], &c, 1), 1);
	close(fds[0]);
	return pid;
}

/* Kills and reaps the child: afterwards its pid names no process. */
static void reap_child(pid_t pid)
{
	kill(pid, SIGKILL);
	assert_int_equal(waitpid(pid, NULL, 0), pid);
}

/* A thread that names itself and waits until told to end. */
struct worker {
	pthread_t thread;
	pid_t tid;
	int ready[2], quit[2];
};

static void *worker_main(void *arg)
{
	struct worker *w = arg;
	char c;
	prctl(PR_SET_NAME, "tp-worker");
	w->tid = my_tid();
	if (write(w->ready[1], "x", 1) != 1)
		return NULL;
	if (read(w->quit[0], &c, 1) < 0)
		return NULL;
	return NULL;
}

static void worker_start(struct worker *w)
{
	char c;
	assert_int_equal(pipe(w->ready), 0);
	assert_int_equal(pipe(w->quit), 0);
	assert_int_equal(pthread_create(&w->thread, NULL, worker_main, w), 0);
	assert_int_equal(read(w->ready[0], &c, 1), 1);
}

static void worker_stop(struct worker *w)
{
	assert_int_equal(write(w->quit[1], "x", 1), 1);
	pthread_join(w->thread, NULL);
	close(w->ready[0]);
	close(w->ready[1]);
	close(w->quit[0]);
	close(w->quit[1]);
}

static void test_age(void **state)
{
	uint64_t a1, a2, child;
	(void)state;
	assert_int_equal(procfs_age_ms(getpid(), &a1), 0);
	sleep_ms(60);
	assert_int_equal(procfs_age_ms(getpid(), &a2), 0);
	/* The start time is fixed: the age grows with the clock. */
	assert_true(a2 >= a1 + 50);
	assert_true(a2 < a1 + 60000);

	/* A child with spaces and a ')' in its comm: fields are counted from
	 * the last ')'. It started after us. */
	pid_t pid = spawn_child("a) b c) 1 2 3");
	assert_int_equal(procfs_age_ms(pid, &child), 0);
	assert_true(child < a2 + 20);
	assert_true(child < 10000);
	reap_child(pid);
	assert_int_equal(procfs_age_ms(pid, &child), -ESRCH);
	assert_int_equal(procfs_age_ms(INT_MAX, &child), -ESRCH);
}

static void test_parse_starttime(void **state)
{
	uint64_t t = 7;
	(void)state;
	assert_int_equal(procfs_parse_starttime("1234 (py) thon) S 1 1234 1234 0 -1 4194560 "
						"100 0 0 0 5 3 0 0 20 -5 1 0 987654 12345 "
						"678 18446744073709551615\n",
						&t),
			 0);
	assert_int_equal(t, 987654);
	/* A line that ends before field 22, or has no comm. */
	assert_int_equal(
	    procfs_parse_starttime("1 (x) S 1 1 1 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0\n", &t), -EINVAL);
	assert_int_equal(
	    procfs_parse_starttime("1 x S 1 1 1 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 5\n", &t), -EINVAL);
	assert_int_equal(procfs_parse_starttime("", &t), -EINVAL);
	assert_int_equal(procfs_parse_starttime("1 (x) S 1 1 1 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 "
						"12x 1\n",
						&t),
			 -EINVAL);
	/* Untouched on error. */
	assert_int_equal(t, 987654);
}

static void test_comm(void **state)
{
	char buf[PROCFS_COMM_LEN], small[4];
	(void)state;
	/* Our main thread's name is the process's comm. */
	assert_int_equal(prctl(PR_SET_NAME, "tp-procfs-test"), 0);
	assert_int_equal(procfs_comm(getpid(), 0, buf, sizeof(buf)), 0);
	assert_string_equal(buf, "tp-procfs-test");
	assert_int_equal(procfs_comm(getpid(), getpid(), buf, sizeof(buf)), 0);
	assert_string_equal(buf, "tp-procfs-test");
	/* A short buffer cuts the name. */
	assert_int_equal(procfs_comm(getpid(), 0, small, sizeof(small)), 0);
	assert_string_equal(small, "tp-");

	/* The longest comm the kernel keeps (15 bytes) fits. */
	pid_t pid = spawn_child("fifteen-chars-x");
	assert_int_equal(procfs_comm(pid, 0, buf, sizeof(buf)), 0);
	assert_string_equal(buf, "fifteen-chars-x");
	reap_child(pid);
	strcpy(buf, "stale");
	assert_int_equal(procfs_comm(pid, 0, buf, sizeof(buf)), -ESRCH);
	assert_string_equal(buf, "");
}

static void test_thread_names(void **state)
{
	struct worker w = {0};
	char buf[PROCFS_COMM_LEN];
	(void)state;
	assert_int_equal(prctl(PR_SET_NAME, "tp-main"), 0);
	worker_start(&w);
	assert_int_equal(procfs_comm(getpid(), w.tid, buf, sizeof(buf)), 0);
	assert_string_equal(buf, "tp-worker");
	/* The process's comm is its main thread's. */
	assert_int_equal(procfs_comm(getpid(), 0, buf, sizeof(buf)), 0);
	assert_string_equal(buf, "tp-main");
	worker_stop(&w);
	/* A thread that has ended is gone: pthread_join() may return a little
	 * before the kernel has released it. */
	int ret = 0;
	for (int i = 0; i < 1000 && (ret = procfs_comm(getpid(), w.tid, buf, sizeof(buf))) == 0;
	     i++)
		sleep_ms(1);
	assert_int_equal(ret, -ESRCH);
}

static void test_tasks(void **state)
{
	struct worker w = {0};
	pid_t *tids = (void *)1;
	size_t n = 7;
	(void)state;
	worker_start(&w);
	assert_int_equal(procfs_tasks(getpid(), &tids, &n), 0);
	assert_true(n >= 2);
	assert_true(contains(tids, n, getpid()));
	assert_true(contains(tids, n, w.tid));
	free(tids);
	worker_stop(&w);

	/* A single-threaded child: itself only. */
	pid_t pid = spawn_child("tp-child");
	assert_int_equal(procfs_tasks(pid, &tids, &n), 0);
	assert_int_equal(n, 1);
	assert_int_equal(tids[0], pid);
	free(tids);

	pid_t *pids;
	assert_int_equal(procfs_pids(&pids, &n), 0);
	assert_true(contains(pids, n, getpid()));
	assert_true(contains(pids, n, pid));
	assert_true(contains(pids, n, 1));
	assert_false(contains(pids, n, w.tid)); /* threads are not listed */
	free(pids);

	reap_child(pid);
	assert_int_equal(procfs_tasks(pid, &tids, &n), -ESRCH);
	assert_null(tids);
	assert_int_equal(n, 0);
}

static void test_ns_pid(void **state)
{
	struct worker w = {0};
	pid_t ns = 0;
	(void)state;
	/* In our own namespace, as /proc shows it, ids are ours. */
	assert_int_equal(procfs_ns_pid(getpid(), 0, &ns), 0);
	assert_int_equal(ns, getpid());
	worker_start(&w);
	assert_int_equal(procfs_ns_pid(getpid(), w.tid, &ns), 0);
	assert_int_equal(ns, w.tid);
	worker_stop(&w);

	pid_t pid = spawn_child("tp-child");
	assert_int_equal(procfs_ns_pid(pid, 0, &ns), 0);
	assert_int_equal(ns, pid);
	assert_int_equal(procfs_ns_pid(pid, pid, &ns), 0);
	assert_int_equal(ns, pid);
	reap_child(pid);
	ns = 7;
	assert_int_equal(procfs_ns_pid(pid, 0, &ns), -ESRCH);
	assert_int_equal(ns, 7);
}

/* A process in a new pid namespace is pid 1 there. Needs CAP_SYS_ADMIN. */
static void test_ns_pid_in_namespace(void **state)
{
	int fds[2];
	pid_t inner = 0, ns = 0;
	(void)state;
	assert_int_equal(pipe(fds), 0);
	pid_t outer = fork();
	assert_true(outer >= 0);
	if (!outer) {
		/* Only children made after unshare() join the namespace. */
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		close(fds[0]);
		pid_t c;
		if (unshare(CLONE_NEWPID))
			c = -errno;
		else if ((c = fork()) < 0)
			c = -errno;
		if (!c) {
			prctl(PR_SET_PDEATHSIG, SIGKILL);
			for (;;)
				pause();
		}
		if (write(fds[1], &c, sizeof(c)) != sizeof(c))
			_exit(1);
		if (c > 0)
			waitpid(c, NULL, 0);
		_exit(0);
	}
	close(fds[1]);
	assert_int_equal(read(fds[0], &inner, sizeof(inner)), sizeof(inner));
	close(fds[0]);
	if (inner < 0) {
		assert_int_equal(waitpid(outer, NULL, 0), outer);
		print_message("skipping: cannot make a pid namespace: %s\n", strerror(-inner));
		skip();
	}
	pid_t ns2 = 0;
	int r1 = procfs_ns_pid(inner, 0, &ns);
	int r2 = procfs_ns_pid(inner, inner, &ns2);
	kill(inner, SIGKILL);
	assert_int_equal(waitpid(outer, NULL, 0), outer);
	assert_int_equal(r1, 0);
	assert_int_equal(ns, 1);
	assert_int_equal(r2, 0);
	assert_int_equal(ns2, 1);
}

static void test_parse_nspid(void **state)
{
	pid_t p = 0;
	(void)state;
	assert_int_equal(procfs_parse_nspid("Name:\tpython3\nTgid:\t4242\nNSpid:\t4242\t17\t1\n"
					    "NSsid:\t1\n",
					    &p),
			 0);
	assert_int_equal(p, 1);
	assert_int_equal(procfs_parse_nspid("NSpid:\t4242", &p), 0);
	assert_int_equal(p, 4242);
	/* Before kernel 4.1: no NSpid line. NStgid is another line. */
	p = 9;
	assert_int_equal(procfs_parse_nspid("Name:\tx\nNStgid:\t5\t6\n", &p), -ENOENT);
	assert_int_equal(procfs_parse_nspid("", &p), -ENOENT);
	/* An empty NSpid never reads the next line's number. */
	assert_int_equal(procfs_parse_nspid("NSpid:\t\n7\n", &p), -EINVAL);
	assert_int_equal(procfs_parse_nspid("NSpid:\t99999999999999999999\n", &p), -EINVAL);
	assert_int_equal(p, 9);
	/* Not at the start of a line: not the field. */
	assert_int_equal(procfs_parse_nspid("Name:\tNSpid: 3\n", &p), -ENOENT);
}

static void test_parse_status(void **state)
{
	struct procfs_status st;
	(void)state;
	assert_int_equal(procfs_parse_status("Name:\tpython3\nState:\tS (sleeping)\nTgid:\t4242\n"
					     "Ngid:\t0\nPid:\t4250\nPPid:\t1\n",
					     &st),
			 0);
	assert_int_equal(st.tgid, 4242);
	assert_int_equal(st.ppid, 1);
	assert_int_equal(st.state, 'S');
	assert_int_equal(procfs_parse_status("State:\tZ (zombie)\nTgid:\t7\nPPid:\t0\n", &st), 0);
	assert_int_equal(st.state, 'Z');
	assert_int_equal(st.ppid, 0);
	/* Missing or empty fields, and a number that runs into letters. */
	assert_int_equal(procfs_parse_status("State:\tR\nTgid:\t7\n", &st), -EINVAL);
	assert_int_equal(procfs_parse_status("State:\t\nTgid:\t7\nPPid:\t1\n", &st), -EINVAL);
	assert_int_equal(procfs_parse_status("State:\tR\nTgid:\t\n7\nPPid:\t1\n", &st), -EINVAL);
	assert_int_equal(procfs_parse_status("State:\tR\nTgid:\t7x\nPPid:\t1\n", &st), -EINVAL);
	assert_int_equal(st.tgid, 0);
	/* Not at the start of a line: not the field. */
	assert_int_equal(procfs_parse_status("Name:\tTgid: 3\nState:\tR\nPPid:\t1\n", &st),
			 -EINVAL);
}

/* A thread that sends its id on fds[1] and waits for EOF on fds[2]. */
static void *park(void *arg)
{
	int *fds = arg;
	pid_t tid = (pid_t)syscall(SYS_gettid);
	char c;
	if (write(fds[1], &tid, sizeof(tid)) != sizeof(tid) || read(fds[2], &c, 1) < 0)
		return NULL;
	return NULL;
}

/* A thread id answers with its process; an exited child not yet reaped is
 * a zombie. */
static void test_status_of_thread_and_zombie(void **state)
{
	struct procfs_status st;
	int fds[4];
	pthread_t th;
	pid_t tid = 0;
	(void)state;
	assert_int_equal(pipe(fds), 0);
	assert_int_equal(pipe(fds + 2), 0);
	assert_int_equal(pthread_create(&th, NULL, park, fds), 0);
	assert_int_equal(read(fds[0], &tid, sizeof(tid)), sizeof(tid));
	int ret = procfs_status(tid, &st);
	close(fds[3]); /* park() reads EOF and returns */
	pthread_join(th, NULL);
	close(fds[0]);
	close(fds[1]);
	close(fds[2]);
	assert_int_equal(ret, 0);
	assert_int_not_equal(tid, getpid());
	assert_int_equal(st.tgid, getpid());
	assert_int_equal(st.ppid, getppid());

	pid_t child = fork();
	if (child == 0)
		_exit(0);
	assert_true(child > 0);
	siginfo_t si;
	/* WNOWAIT: exited, and still a zombie. */
	assert_int_equal(waitid(P_PID, (id_t)child, &si, WEXITED | WNOWAIT), 0);
	assert_int_equal(procfs_status(child, &st), 0);
	assert_int_equal(st.state, 'Z');
	assert_int_equal(st.tgid, child);
	assert_int_equal(waitpid(child, NULL, 0), child);
	assert_int_equal(procfs_status(child, &st), -ESRCH);
}

/* s into out of len bytes, cut as procfs cuts a long path. */
static void cut(char *out, size_t len, const char *s)
{
	size_t n = strlen(s);
	if (n > len - 1)
		n = len - 1;
	memcpy(out, s, n);
	out[n] = 0;
}

/* What /proc/self/cgroup says our cgroup is: the v2 path, or when that is
 * "/" (v2 unused), the first v1 path that is not "/". */
static void expected_cgroup(char *out, size_t len)
{
	char line[1024], v1[1024] = "";
	out[0] = 0;
	FILE *f = fopen("/proc/self/cgroup", "re");
	assert_non_null(f);
	while (fgets(line, sizeof(line), f)) {
		line[strcspn(line, "\n")] = 0;
		char *c = strchr(line, ':');
		c = c ? strchr(c + 1, ':') : NULL;
		if (!c)
			continue;
		if (!strncmp(line, "0::", 3))
			cut(out, len, c + 1);
		else if (!v1[0] && c[1] && strcmp(c + 1, "/"))
			cut(v1, sizeof(v1), c + 1);
	}
	fclose(f);
	if ((!out[0] || !strcmp(out, "/")) && v1[0])
		cut(out, len, v1);
}

static void test_cgroup(void **state)
{
	struct procfs_cgroup cg, child;
	char want[PROCFS_CGROUP_LEN];
	(void)state;
	expected_cgroup(want, sizeof(want));
	assert_int_equal(procfs_cgroup(getpid(), &cg), 0);
	assert_string_equal(cg.path, want);
	assert_true(cg.path[0] == '/');

	/* A child is born in its parent's cgroup. */
	pid_t pid = spawn_child("tp-child");
	assert_int_equal(procfs_cgroup(pid, &child), 0);
	assert_string_equal(child.path, cg.path);
	assert_string_equal(child.container, cg.container);
	reap_child(pid);
	assert_int_equal(procfs_cgroup(pid, &child), -ESRCH);
	assert_string_equal(child.path, "");
	assert_string_equal(child.container, "");
}

static void test_parse_cgroup(void **state)
{
	struct procfs_cgroup cg;
	char longer[600];
	(void)state;

	/* cgroup v2, as docker and podman name the scope. */
	procfs_parse_cgroup("0::/system.slice/docker-" HEX64 ".scope\n", &cg);
	assert_string_equal(cg.path, "/system.slice/docker-" HEX64 ".scope");
	assert_string_equal(cg.container, HEX64);

	/* cgroup v1 (v2 present but unused): the first v1 path that is not
	 * the root. */
	procfs_parse_cgroup("12:pids:/\n11:cpu,cpuacct:/docker/" HEX64 "\n10:memory:/other\n0::/\n",
			    &cg);
	assert_string_equal(cg.path, "/docker/" HEX64);
	assert_string_equal(cg.container, HEX64);

	/* Kubernetes: the id after a pod's uid. No final newline. */
	procfs_parse_cgroup("0::/kubepods/besteffort/pod1234abcd-ef56/cri-containerd-" HEX64, &cg);
	assert_string_equal(cg.container, HEX64);

	/* Only runs of exactly 64 lowercase hex digits are ids. */
	procfs_parse_cgroup("0::/docker/" HEX64 "a\n", &cg);
	assert_string_equal(cg.container, "");
	procfs_parse_cgroup("0::/docker/123456789abcdef0123456789abcdef0123456789abcdef0123456789"
			    "abcdef\n",
			    &cg);
	assert_string_equal(cg.container, ""); /* 63 digits */
	procfs_parse_cgroup("0::/docker/0123456789ABCDEF0123456789abcdef0123456789abcdef0123456789"
			    "abcdef\n",
			    &cg);
	assert_string_equal(cg.container, "");
	/* The first id wins; ids in the controller names do not count. */
	procfs_parse_cgroup("3:" HEX64 ":/a\n0::/x/" HEX64 "\n", &cg);
	assert_string_equal(cg.path, "/x/" HEX64);
	assert_string_equal(cg.container, HEX64);

	/* The host: the root everywhere. */
	procfs_parse_cgroup("0::/\n", &cg);
	assert_string_equal(cg.path, "/");
	assert_string_equal(cg.container, "");
	procfs_parse_cgroup("0::/user.slice/session-2.scope\n", &cg);
	assert_string_equal(cg.path, "/user.slice/session-2.scope");

	/* Lines without two colons are skipped; empty text gives nothing. */
	procfs_parse_cgroup("garbage\n1:cpu\n\n0::/ok\n", &cg);
	assert_string_equal(cg.path, "/ok");
	procfs_parse_cgroup("", &cg);
	assert_string_equal(cg.path, "");
	assert_string_equal(cg.container, "");

	/* A long path is cut to the buffer. */
	memcpy(longer, "0::/", 4);
	memset(longer + 4, 'p', sizeof(longer) - 5);
	longer[sizeof(longer) - 1] = 0;
	procfs_parse_cgroup(longer, &cg);
	assert_int_equal(strlen(cg.path), PROCFS_CGROUP_LEN - 1);
	assert_int_equal(cg.path[0], '/');
}

/* --cgroup PATH holds PATH and what is below it, whole components only. */
static void test_cgroup_within(void **state)
{
	(void)state;
	assert_true(procfs_cgroup_within("/user.slice/user-1", "/user.slice/user-1"));
	assert_true(
	    procfs_cgroup_within("/user.slice/user-1/session-3.scope", "/user.slice/user-1"));
	assert_true(procfs_cgroup_within("/user.slice/user-1/x", "/user.slice/user-1/"));
	assert_true(procfs_cgroup_within("/user.slice/user-1", "/user.slice/user-1//"));
	/* The prefix of a name is not the cgroup. */
	assert_false(procfs_cgroup_within("/user.slice/user-1001.slice", "/user.slice/user-1"));
	assert_false(procfs_cgroup_within("/user.slice/user-10/x", "/user.slice/user-1"));
	assert_false(
	    procfs_cgroup_within("/system.slice/app.service2", "/system.slice/app.service"));
	/* Nor is a parent. */
	assert_false(procfs_cgroup_within("/user.slice", "/user.slice/user-1"));
	/* The root holds every path, and "" (no cgroup known) is in none. */
	assert_true(procfs_cgroup_within("/", "/"));
	assert_true(procfs_cgroup_within("/a/b", "/"));
	assert_true(procfs_cgroup_within("/a/b", "//"));
	assert_false(procfs_cgroup_within("", "/"));
	assert_false(procfs_cgroup_within("", "/a"));
	/* A relative PATH names no cgroup. */
	assert_false(procfs_cgroup_within("/a", ""));
	assert_false(procfs_cgroup_within("/a/b", "a"));
}

static void test_read_file(void **state)
{
	char path[] = "/tmp/test_procfs.XXXXXX", *text = (void *)1;
	size_t len = 7, big = 300000;
	(void)state;
	int fd = mkstemp(path);
	assert_true(fd >= 0);
	/* Empty: "" and no bytes. */
	assert_int_equal(procfs_read_file(path, 16, &text, &len), 0);
	assert_string_equal(text, "");
	assert_int_equal(len, 0);
	free(text);
	/* Far larger than the first buffer: it grows. */
	char *want = malloc(big);
	assert_non_null(want);
	for (size_t i = 0; i < big; i++)
		want[i] = (char)('a' + i % 26);
	assert_int_equal(write(fd, want, big), (ssize_t)big);
	close(fd);
	assert_int_equal(procfs_read_file(path, 16, &text, &len), 0);
	assert_int_equal(len, big);
	assert_memory_equal(text, want, big);
	assert_int_equal(text[big], 0);
	free(text);
	free(want);
	unlink(path);
	assert_int_equal(procfs_read_file(path, 16, &text, &len), -ENOENT);
	assert_null(text);
	assert_int_equal(len, 0);

	/* A process's file: gone is -ESRCH. */
	assert_int_equal(procfs_read(getpid(), 0, "status", 64, &text, &len), 0);
	assert_non_null(strstr(text, "\nNSpid:"));
	assert_int_equal(strlen(text), len);
	free(text);
	assert_int_equal(procfs_read(INT_MAX, 0, "status", 64, &text, &len), -ESRCH);
	assert_null(text);
}

static void test_paths(void **state)
{
	char buf[64], tiny[8];
	(void)state;
	assert_int_equal(procfs_map_file_path(42, 0x7f00, 0x7f10, buf, sizeof(buf)), 0);
	assert_string_equal(buf, "/proc/42/map_files/7f00-7f10");
	assert_int_equal(procfs_root_path(42, "/usr/lib/x.so", buf, sizeof(buf)), 0);
	assert_string_equal(buf, "/proc/42/root/usr/lib/x.so");
	assert_int_equal(procfs_exe_path(42, buf, sizeof(buf)), 0);
	assert_string_equal(buf, "/proc/42/exe");
	assert_int_equal(procfs_map_file_path(42, 0x7f00, 0x7f10, tiny, sizeof(tiny)),
			 -ENAMETOOLONG);
	assert_int_equal(procfs_root_path(42, "/usr/lib/x.so", tiny, sizeof(tiny)), -ENAMETOOLONG);
	assert_int_equal(procfs_exe_path(42, tiny, sizeof(tiny)), -ENAMETOOLONG);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_age),
	    cmocka_unit_test(test_parse_starttime),
	    cmocka_unit_test(test_comm),
	    cmocka_unit_test(test_thread_names),
	    cmocka_unit_test(test_tasks),
	    cmocka_unit_test(test_ns_pid),
	    cmocka_unit_test(test_ns_pid_in_namespace),
	    cmocka_unit_test(test_parse_nspid),
	    cmocka_unit_test(test_parse_status),
	    cmocka_unit_test(test_status_of_thread_and_zombie),
	    cmocka_unit_test(test_cgroup),
	    cmocka_unit_test(test_parse_cgroup),
	    cmocka_unit_test(test_cgroup_within),
	    cmocka_unit_test(test_read_file),
	    cmocka_unit_test(test_paths),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
