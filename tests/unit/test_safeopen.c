/* test_safeopen.c - unit tests for opening files other users control
 * (safeopen.c): only regular files are opened for reading, and never by an
 * open that could block or run a driver; a path inside a root resolves
 * inside it, however its symlinks point; the reader's permission bits are
 * respected. Needs no privileges: the roots are temporary directories. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "proc/safeopen.h"

struct dirs {
	char root[64];	  /* the "container" root */
	char outside[64]; /* a directory beside it: the host */
};

static void write_file(const char *path, const char *text, mode_t mode)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, text, strlen(text)), (ssize_t)strlen(text));
	close(fd);
	assert_int_equal(chmod(path, mode), 0);
}

/* What the descriptor reads: the first line of the file. */
static char *read_all(int fd)
{
	static char buf[256];
	ssize_t n = pread(fd, buf, sizeof(buf) - 1, 0);
	assert_true(n >= 0);
	buf[n] = 0;
	return buf;
}

static int setup(void **state)
{
	struct dirs *d = calloc(1, sizeof(*d));
	char p[PATH_MAX];
	snprintf(d->root, sizeof(d->root), "/tmp/taipan-safeopen-root-XXXXXX");
	snprintf(d->outside, sizeof(d->outside), "/tmp/taipan-safeopen-host-XXXXXX");
	assert_non_null(mkdtemp(d->root));
	assert_non_null(mkdtemp(d->outside));
	/* The host's secret, and a file of the same absolute path inside the
	 * root: a symlink to the path must find the inner one. */
	snprintf(p, sizeof(p), "%s/secret", d->outside);
	write_file(p, "host secret\n", 0644);
	/* The root's own /tmp/taipan-safeopen-host-…/ */
	snprintf(p, sizeof(p), "%s/tmp", d->root);
	assert_int_equal(mkdir(p, 0755), 0);
	snprintf(p, sizeof(p), "%s%s", d->root, d->outside);
	assert_int_equal(mkdir(p, 0755), 0);
	snprintf(p, sizeof(p), "%s%s/secret", d->root, d->outside);
	write_file(p, "inner file\n", 0644);
	snprintf(p, sizeof(p), "%s/plain", d->root);
	write_file(p, "plain\n", 0644);
	*state = d;
	return 0;
}

static int teardown(void **state)
{
	struct dirs *d = *state;
	char cmd[256];
	snprintf(cmd, sizeof(cmd), "rm -rf --one-file-system '%s' '%s'", d->root, d->outside);
	assert_int_equal(system(cmd), 0);
	free(d);
	return 0;
}

static void test_regular_only(void **state)
{
	struct dirs *d = *state;
	char p[PATH_MAX];
	snprintf(p, sizeof(p), "%s/plain", d->root);
	int fd = safe_open(p);
	assert_true(fd >= 0);
	assert_string_equal(read_all(fd), "plain\n");
	/* Read-only, close-on-exec, non-blocking. */
	int fl = fcntl(fd, F_GETFL);
	assert_int_equal(fl & O_ACCMODE, O_RDONLY);
	assert_true(fl & O_NONBLOCK);
	assert_true(fcntl(fd, F_GETFD) & FD_CLOEXEC);
	close(fd);
	assert_int_equal(safe_open(d->root), -ENOEXEC);
	assert_int_equal(safe_open("/dev/null"), -ENOEXEC);
	assert_int_equal(safe_open("/dev/zero"), -ENOEXEC);
	assert_int_equal(safe_open("/nonexistent/taipan"), -ENOENT);
}

/* A FIFO with no writer: opening it for reading without O_NONBLOCK would
 * block forever; it is refused at once, never opened. */
static void test_fifo_refused_without_blocking(void **state)
{
	struct dirs *d = *state;
	char p[PATH_MAX];
	snprintf(p, sizeof(p), "%s/fifo", d->root);
	assert_int_equal(mkfifo(p, 0644), 0);
	struct timespec t0, t1;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	assert_int_equal(safe_open(p), -ENOEXEC);
	assert_int_equal(safe_open_in(d->root, "/fifo", NULL), -ENOEXEC);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	assert_true(t1.tv_sec - t0.tv_sec < 2);
	unlink(p);
}

static void test_absolute_symlink_stays_inside(void **state)
{
	struct dirs *d = *state;
	char p[PATH_MAX], target[PATH_MAX];
	/* root/link -> /tmp/taipan-safeopen-host-…/secret: the host's file by
	 * the path, the inner one by the root. */
	snprintf(target, sizeof(target), "%s/secret", d->outside);
	snprintf(p, sizeof(p), "%s/link", d->root);
	assert_int_equal(symlink(target, p), 0);
	int fd = safe_open_in(d->root, "/link", NULL);
	assert_true(fd >= 0);
	assert_string_equal(read_all(fd), "inner file\n");
	close(fd);
	/* The same path through a plain open reaches the host: what an
	 * open of "/proc/PID/root/link" did before. */
	fd = safe_open(p);
	assert_true(fd >= 0);
	assert_string_equal(read_all(fd), "host secret\n");
	close(fd);
	unlink(p);
}

static void test_dotdot_stays_inside(void **state)
{
	struct dirs *d = *state;
	char p[PATH_MAX], target[PATH_MAX];
	snprintf(target, sizeof(target), "../../../../../../..%s/secret", d->outside);
	snprintf(p, sizeof(p), "%s/up", d->root);
	assert_int_equal(symlink(target, p), 0);
	int fd = safe_open_in(d->root, "up", NULL);
	assert_true(fd >= 0);
	assert_string_equal(read_all(fd), "inner file\n");
	close(fd);
	/* ".." in the path itself, too. */
	snprintf(target, sizeof(target), "/../../..%s/secret", d->outside);
	fd = safe_open_in(d->root, target, NULL);
	assert_true(fd >= 0);
	assert_string_equal(read_all(fd), "inner file\n");
	close(fd);
	unlink(p);
}

/* /proc's magic links (/proc/self/root, /proc/PID/fd/N) jump to another
 * root by design: refused on the way (ELOOP, as RESOLVE_NO_MAGICLINKS
 * says), never followed to the host. */
static void test_magic_link_refused(void **state)
{
	struct dirs *d = *state;
	char p[PATH_MAX], q[PATH_MAX + 64];
	/* root/proc -> the real /proc, so that the walk meets a magic link. */
	snprintf(p, sizeof(p), "%s/proc", d->root);
	assert_int_equal(mkdir(p, 0755), 0);
	snprintf(q, sizeof(q), "mount --bind /proc '%s' 2>/dev/null", p);
	if (geteuid() != 0 || system(q) != 0) {
		rmdir(p);
		skip();
	}
	snprintf(q, sizeof(q), "/proc/self/root%s/secret", d->outside);
	int fd = safe_open_in(d->root, q, NULL);
	char um[PATH_MAX + 64];
	snprintf(um, sizeof(um), "umount '%s'", p);
	int umounted = system(um);
	rmdir(p);
	assert_int_equal(umounted, 0);
	assert_int_equal(fd, -ELOOP);
}

/* A file the reader's mode bits do not let it read is not read for it. */
static void test_reader_permissions(void **state)
{
	struct dirs *d = *state;
	char p[PATH_MAX];
	struct stat st;
	struct safe_reader user = {.uid = 64123, .gid = 64123};
	snprintf(p, sizeof(p), "%s/private", d->root);
	write_file(p, "private\n", 0600);
	assert_int_equal(stat(p, &st), 0);
	int fd = safe_open_in(d->root, "/private", NULL);
	assert_true(fd >= 0);
	close(fd);
	if (st.st_uid == user.uid)
		skip();
	assert_int_equal(safe_open_in(d->root, "/private", &user), -EACCES);
	/* Readable by others: read for anyone. */
	assert_int_equal(chmod(p, 0644), 0);
	fd = safe_open_in(d->root, "/private", &user);
	assert_true(fd >= 0);
	close(fd);
	/* The owner's bits for the owner, the group's for the group. */
	assert_int_equal(chmod(p, 0640), 0);
	struct safe_reader owner = {.uid = st.st_uid, .gid = 64123};
	struct safe_reader group = {.uid = 64123, .gid = st.st_gid};
	fd = safe_open_in(d->root, "/private", &owner);
	assert_true(fd >= 0);
	close(fd);
	fd = safe_open_in(d->root, "/private", &group);
	assert_true(fd >= 0);
	close(fd);
	assert_int_equal(safe_open_in(d->root, "/private", &user), -EACCES);
	/* uid 0 reads anything. */
	struct safe_reader root = {0, 0};
	assert_int_equal(chmod(p, 0600), 0);
	fd = safe_open_in(d->root, "/private", &root);
	assert_true(fd >= 0);
	close(fd);
	unlink(p);
}

static void test_reader_of_self(void **state)
{
	(void)state;
	struct safe_reader r;
	assert_int_equal(safe_reader_of(getpid(), &r), 0);
	assert_int_equal(r.uid, geteuid());
	assert_int_equal(r.gid, getegid());
	assert_int_equal(safe_reader_of(0x7ffffff0, &r), -ESRCH);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_regular_only),
	    cmocka_unit_test(test_fifo_refused_without_blocking),
	    cmocka_unit_test(test_absolute_symlink_stays_inside),
	    cmocka_unit_test(test_dotdot_stays_inside),
	    cmocka_unit_test(test_magic_link_refused),
	    cmocka_unit_test(test_reader_permissions),
	    cmocka_unit_test(test_reader_of_self),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
