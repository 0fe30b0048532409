/* test_safefile.c - unit tests for opening the files a root daemon is told
 * to use (src/util/safefile.c): what is refused, and what each refusal
 * says. Needs no privileges: the files are the test user's own. */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "util/safefile.h"

struct dir {
	char path[64];
};

static int setup(void **state)
{
	struct dir *d = calloc(1, sizeof(*d));
	if (!d)
		return -1;
	strcpy(d->path, "/tmp/taipan-safefile-XXXXXX");
	if (!mkdtemp(d->path)) {
		free(d);
		return -1;
	}
	*state = d;
	return 0;
}

static int teardown(void **state)
{
	struct dir *d = *state;
	char cmd[128];
	snprintf(cmd, sizeof(cmd), "rm -rf %s", d->path);
	if (system(cmd))
		return -1;
	free(d);
	return 0;
}

static void put(const char *path, const char *text, mode_t mode)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, mode);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, text, strlen(text)), (ssize_t)strlen(text));
	close(fd);
	assert_int_equal(chmod(path, mode), 0);
}

static void test_secret(void **state)
{
	struct dir *d = *state;
	char path[128], link[128], err[512], buf[64];
	size_t n = 0;
	snprintf(path, sizeof(path), "%s/token", d->path);
	snprintf(link, sizeof(link), "%s/link", d->path);

	put(path, "0123456789abcdef\n", 0600);
	assert_int_equal(safefile_read_secret(path, buf, sizeof(buf), &n, err, sizeof(err)), 0);
	assert_int_equal(n, 17);
	assert_memory_equal(buf, "0123456789abcdef\n", 17);
	/* At most cap bytes. */
	assert_int_equal(safefile_read_secret(path, buf, 4, &n, err, sizeof(err)), 0);
	assert_int_equal(n, 4);

	for (mode_t m = 0601; m <= 0640; m += 037) {
		assert_int_equal(chmod(path, m), 0);
		assert_int_equal(safefile_read_secret(path, buf, sizeof(buf), &n, err, sizeof(err)),
				 -EPERM);
		assert_non_null(strstr(err, "by its group or by others"));
		assert_non_null(strstr(err, "chmod 600 "));
	}
	assert_int_equal(chmod(path, 0400), 0);
	assert_int_equal(safefile_read_secret(path, buf, sizeof(buf), &n, err, sizeof(err)), 0);

	assert_int_equal(symlink(path, link), 0);
	assert_int_equal(safefile_read_secret(link, buf, sizeof(buf), &n, err, sizeof(err)),
			 -ELOOP);
	assert_non_null(strstr(err, "is a symbolic link"));
	assert_int_equal(unlink(link), 0);

	/* A FIFO with no writer: refused at once, not waited on. */
	assert_int_equal(mkfifo(link, 0600), 0);
	assert_int_equal(safefile_read_secret(link, buf, sizeof(buf), &n, err, sizeof(err)),
			 -EINVAL);
	assert_non_null(strstr(err, "is a FIFO: give a regular file"));
	assert_int_equal(unlink(link), 0);

	assert_int_equal(safefile_read_secret(d->path, buf, sizeof(buf), &n, err, sizeof(err)),
			 -EINVAL);
	assert_non_null(strstr(err, "is a directory"));
	assert_int_equal(safefile_read_secret(link, buf, sizeof(buf), &n, err, sizeof(err)),
			 -ENOENT);
	assert_non_null(strstr(err, "cannot open"));
}

static void test_log(void **state)
{
	struct dir *d = *state;
	char path[128], other[128], err[512];
	struct stat st;
	snprintf(path, sizeof(path), "%s/agent.log", d->path);
	snprintf(other, sizeof(other), "%s/other", d->path);

	int fd = safefile_open(path, O_WRONLY | O_APPEND | O_CREAT, 0640, SAFEFILE_LOG, err,
			       sizeof(err));
	assert_true(fd >= 0);
	/* Blocking again for the writes; close-on-exec. */
	assert_false(fcntl(fd, F_GETFL) & O_NONBLOCK);
	assert_true(fcntl(fd, F_GETFD) & FD_CLOEXEC);
	close(fd);
	assert_int_equal(stat(path, &st), 0);
	assert_true(S_ISREG(st.st_mode));
	/* A log may be read by its group. */
	fd = safefile_open(path, O_WRONLY | O_APPEND | O_CREAT, 0640, SAFEFILE_LOG, err,
			   sizeof(err));
	assert_true(fd >= 0);
	close(fd);

	assert_int_equal(link(path, other), 0);
	assert_int_equal(safefile_open(path, O_WRONLY | O_APPEND | O_CREAT, 0640, SAFEFILE_LOG, err,
				       sizeof(err)),
			 -EPERM);
	assert_non_null(strstr(err, "has 2 hard links"));
	assert_int_equal(unlink(other), 0);

	/* A dangling link is not created through either. */
	assert_int_equal(unlink(path), 0);
	assert_int_equal(symlink(other, path), 0);
	assert_int_equal(safefile_open(path, O_WRONLY | O_APPEND | O_CREAT, 0640, SAFEFILE_LOG, err,
				       sizeof(err)),
			 -ELOOP);
	assert_int_equal(access(other, F_OK), -1);

	/* A FIFO to write to, no reader: refused at once. */
	assert_int_equal(unlink(path), 0);
	assert_int_equal(mkfifo(path, 0600), 0);
	assert_true(safefile_open(path, O_WRONLY | O_APPEND | O_CREAT, 0640, SAFEFILE_LOG, err,
				  sizeof(err)) < 0);
	assert_non_null(strstr(err, "FIFO"));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_secret, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_log, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
