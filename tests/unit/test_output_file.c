/* test_output_file.c - unit tests for output_write_file and
 * output_file_open/commit/free: the safety rules of writing a file
 * (symbolic links, other users' files, device nodes and FIFOs, stale
 * temporaries), the rescue to $TMPDIR, format selection by name and
 * extension, and each encoder and a whole file write under allocation
 * failures.
 */
#include <dirent.h>
#include <errno.h>
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <unistd.h>
#include <cmocka.h>

#include "output_fixture.h"

/* Allocation failures on demand: see alloc_inject.h. */
#include "alloc_inject.h"

/* --- output_write_file ------------------------------------------------------- */

static char *read_file(const char *path, size_t *len)
{
	FILE *f = fopen(path, "rb");
	assert_non_null(f);
	char *buf = NULL;
	size_t cap = 0, n = 0, r;
	do {
		if (n == cap) {
			cap = cap ? cap * 2 : 4096;
			buf = realloc(buf, cap + 1);
			assert_non_null(buf);
		}
		r = fread(buf + n, 1, cap - n, f);
		n += r;
	} while (r > 0);
	fclose(f);
	buf[n] = '\0';
	*len = n;
	return buf;
}

static void write_text(const char *path, const char *text)
{
	FILE *f = fopen(path, "w");
	assert_non_null(f);
	fputs(text, f);
	assert_int_equal(fclose(f), 0);
}

static int dir_entries(const char *dir)
{
	DIR *d = opendir(dir);
	assert_non_null(d);
	int n = 0;
	struct dirent *de;
	while ((de = readdir(d)))
		if (strcmp(de->d_name, ".") && strcmp(de->d_name, ".."))
			n++;
	closedir(d);
	return n;
}

static void rm_rf(const char *dir)
{
	char cmd[512];
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	assert_int_equal(system(cmd), 0);
}

static void test_write_file(void **state)
{
	(void)state;
	char dir[] = "/tmp/taipan-test-output-XXXXXX";
	assert_non_null(mkdtemp(dir));
	struct ids id;
	struct profile *p = build_profile(&id);
	char path[256];
	size_t len;

	snprintf(path, sizeof(path), "%s/out.pb.gz", dir);
	assert_int_equal(output_write_file(p, path, FMT("pprof"), NULL), 0);
	char *data = read_file(path, &len);
	Perftools__Profiles__Profile *prof = unpack_gz((const uint8_t *)data, len);
	assert_int_equal(prof->n_sample, 3);
	perftools__profiles__profile__free_unpacked(prof, NULL);
	free(data);
	struct stat st;
	assert_int_equal(stat(path, &st), 0);
	assert_int_equal(st.st_uid, geteuid());
	/* A profile names what its processes run (every user's, with -a). */
	assert_int_equal(st.st_mode & 07777, 0600);

	/* Replacing a file of our own is the normal case. */
	snprintf(path, sizeof(path), "%s/out.folded", dir);
	write_text(path, "old contents\n");
	struct output_opts o = {.folded_lines = true};
	assert_int_equal(output_write_file(p, path, FMT("folded"), &o), 0);
	data = read_file(path, &len);
	assert_string_equal(
	    data,
	    "<module> (app.py:10);main (app.py:20);Worker.run (lib/work.py:42) 6\n"
	    "[truncated];weird\\x3bname\\x0ax (odd.py:3);PyObject_Call_[n];do_syscall_64_[k] 2\n");
	free(data);
	/* No temporary file is left behind; the new file is 0600 too. */
	assert_int_equal(dir_entries(dir), 2);
	assert_int_equal(stat(path, &st), 0);
	assert_int_equal(st.st_mode & 07777, 0600);

	/* A relative path works from the current directory. */
	char cwd[4096];
	assert_non_null(getcwd(cwd, sizeof(cwd)));
	assert_int_equal(chdir(dir), 0);
	assert_int_equal(output_write_file(p, "rel.txt", FMT("folded"), NULL), 0);
	assert_int_equal(chdir(cwd), 0);
	assert_int_equal(dir_entries(dir), 3);

	assert_int_equal(output_write_file(p, path, NULL, NULL), -EINVAL);
	profile_free(p);
	rm_rf(dir);
}

static void test_write_file_refuses_symlink(void **state)
{
	(void)state;
	char dir[] = "/tmp/taipan-test-output-XXXXXX";
	assert_non_null(mkdtemp(dir));
	struct ids id;
	struct profile *p = build_profile(&id);
	char real[256], link[256], dangling[256], missing[256];
	size_t len;

	snprintf(real, sizeof(real), "%s/real.txt", dir);
	snprintf(link, sizeof(link), "%s/link.folded", dir);
	write_text(real, "keep\n");
	assert_int_equal(symlink(real, link), 0);
	assert_int_equal(output_write_file(p, link, FMT("folded"), NULL), -EPERM);
	char *data = read_file(real, &len);
	assert_string_equal(data, "keep\n");
	free(data);
	struct stat st;
	assert_int_equal(lstat(link, &st), 0);
	assert_true(S_ISLNK(st.st_mode));

	/* A dangling link must not create its target either. */
	snprintf(dangling, sizeof(dangling), "%s/dangling.pb.gz", dir);
	snprintf(missing, sizeof(missing), "%s/target", dir);
	assert_int_equal(symlink(missing, dangling), 0);
	assert_int_equal(output_write_file(p, dangling, FMT("pprof"), NULL), -EPERM);
	assert_int_equal(access(missing, F_OK), -1);

	/* Refused writes leave no temporary file. */
	assert_int_equal(dir_entries(dir), 3);
	profile_free(p);
	rm_rf(dir);
}

/* output_file_open into a fresh temporary directory's path rel: its
 * return, with the error text in err. */
static int open_in(const char *dir, const char *rel, char *err, size_t errlen)
{
	char path[512];
	struct output_file *of;
	snprintf(path, sizeof(path), "%s/%s", dir, rel);
	err[0] = '\0';
	int ret = output_file_open(path, FMT("folded"), &of, err, errlen);
	output_file_free(of);
	return ret;
}

/* -o's directory is reached through a symbolic link only where nobody else
 * could have made or changed it: a link of ours (or root's) in a directory
 * of ours that no one else can write. */
static void test_open_follows_only_trusted_links(void **state)
{
	(void)state;
	char dir[] = "/tmp/taipan-test-output-XXXXXX";
	assert_non_null(mkdtemp(dir));
	char p[512], q[512], err[1024];
	struct profile *pr;
	struct ids id;

	snprintf(p, sizeof(p), "%s/real", dir);
	assert_int_equal(mkdir(p, 0755), 0);
	/* Ours, in a directory of ours (0700): followed, relative or absolute,
	 * through a chain of them too. */
	snprintf(q, sizeof(q), "%s/rel", dir);
	assert_int_equal(symlink("real", q), 0);
	snprintf(q, sizeof(q), "%s/abs", dir);
	assert_int_equal(symlink(p, q), 0);
	snprintf(p, sizeof(p), "%s/chain", dir);
	assert_int_equal(symlink(q, p), 0);
	pr = build_profile(&id);
	snprintf(p, sizeof(p), "%s/rel/a.folded", dir);
	assert_int_equal(output_write_file(pr, p, FMT("folded"), NULL), 0);
	snprintf(p, sizeof(p), "%s/chain/./b.folded", dir);
	assert_int_equal(output_write_file(pr, p, FMT("folded"), NULL), 0);
	snprintf(p, sizeof(p), "%s/real", dir);
	assert_int_equal(dir_entries(p), 2);
	profile_free(pr);

	/* Ours, but in a directory every user can write: another user could
	 * have put it there. Sticky does not help: a hard link to a link is a
	 * link of its owner's. */
	snprintf(p, sizeof(p), "%s/open", dir);
	assert_int_equal(mkdir(p, 0755), 0);
	assert_int_equal(chmod(p, 01777), 0);
	snprintf(q, sizeof(q), "%s/open/l", dir);
	assert_int_equal(symlink("../real", q), 0);
	assert_int_equal(open_in(dir, "open/l/c.folded", err, sizeof(err)), -EPERM);
	if (!strstr(err, "open/l is a symbolic link in a directory that every user can write "
			 "(mode 1777)"))
		fail_msg("%s", err);
	/* The same through a link that is trusted. */
	snprintf(q, sizeof(q), "%s/to-open", dir);
	assert_int_equal(symlink("open", q), 0);
	assert_int_equal(open_in(dir, "to-open/l/c.folded", err, sizeof(err)), -EPERM);
	/* Group-writable is refused as well. */
	assert_int_equal(chmod(p, 0775), 0);
	assert_int_equal(open_in(dir, "open/l/c.folded", err, sizeof(err)), -EPERM);
	assert_non_null(strstr(err, "its group can write (mode 0775)"));
	/* The directory itself, writable or not, is fine when no link is met. */
	assert_int_equal(open_in(dir, "open/c.folded", err, sizeof(err)), 0);

	/* A link loop ends. */
	snprintf(q, sizeof(q), "%s/loop", dir);
	assert_int_equal(symlink("loop", q), 0);
	assert_int_equal(open_in(dir, "loop/d.folded", err, sizeof(err)), -ELOOP);

	if (geteuid() == 0) {
		/* Another user's link, in a directory of root's. */
		snprintf(q, sizeof(q), "%s/theirs", dir);
		assert_int_equal(symlink("real", q), 0);
		assert_int_equal(lchown(q, 65534, 65534), 0);
		assert_int_equal(open_in(dir, "theirs/e.folded", err, sizeof(err)), -EPERM);
		assert_non_null(strstr(err, "theirs is a symbolic link owned by uid 65534"));
	}
	snprintf(p, sizeof(p), "%s/real", dir);
	assert_int_equal(dir_entries(p), 2); /* nothing more written */
	rm_rf(dir);
}

static void test_write_file_foreign_owner(void **state)
{
	(void)state;
	if (geteuid() != 0) {
		print_message("skipping: only root can give a file to another user\n");
		skip();
	}
	char dir[] = "/tmp/taipan-test-output-XXXXXX";
	assert_non_null(mkdtemp(dir));
	struct ids id;
	struct profile *p = build_profile(&id);
	char path[256];
	size_t len;
	snprintf(path, sizeof(path), "%s/theirs.folded", dir);
	write_text(path, "theirs\n");
	assert_int_equal(chown(path, 65534, 65534), 0);
	assert_int_equal(output_write_file(p, path, FMT("folded"), NULL), -EPERM);
	char *data = read_file(path, &len);
	assert_string_equal(data, "theirs\n");
	free(data);
	assert_int_equal(dir_entries(dir), 1);
	profile_free(p);
	rm_rf(dir);
}

static void test_write_file_errors(void **state)
{
	(void)state;
	char dir[] = "/tmp/taipan-test-output-XXXXXX";
	assert_non_null(mkdtemp(dir));
	struct ids id;
	struct profile *p = build_profile(&id);
	char path[256];

	snprintf(path, sizeof(path), "%s/no/such/dir/out.folded", dir);
	assert_int_equal(output_write_file(p, path, FMT("folded"), NULL), -ENOENT);
	/* A directory is not a file name. */
	snprintf(path, sizeof(path), "%s/", dir);
	assert_int_equal(output_write_file(p, path, FMT("folded"), NULL), -EISDIR);
	snprintf(path, sizeof(path), "%s/sub.folded", dir);
	assert_int_equal(mkdir(path, 0755), 0);
	assert_int_equal(output_write_file(p, path, FMT("folded"), NULL), -EISDIR);
	assert_int_equal(dir_entries(dir), 1);

	profile_free(p);
	rm_rf(dir);
}

/* output_file_open's refusal of path: err, which must contain want. */
static void assert_refused(const char *path, int want_rc, const char *want)
{
	struct output_file *of = (struct output_file *)1;
	char err[512] = "";
	assert_int_equal(output_file_open(path, FMT("folded"), &of, err, sizeof(err)), want_rc);
	assert_null(of);
	if (!strstr(err, want)) {
		print_error("%s: \"%s\" does not say \"%s\"\n", path, err, want);
		fail();
	}
}

/* Device nodes and FIFOs stay what they are; each refusal says why. */
static void test_open_refuses_what_is_not_a_file(void **state)
{
	(void)state;
	char dir[] = "/tmp/taipan-test-output-XXXXXX";
	assert_non_null(mkdtemp(dir));
	char path[256];
	struct stat st;

	snprintf(path, sizeof(path), "%s/fifo.folded", dir);
	assert_int_equal(mkfifo(path, 0644), 0);
	assert_refused(path, -EPERM, "is a FIFO");
	assert_int_equal(lstat(path, &st), 0);
	assert_true(S_ISFIFO(st.st_mode));
	if (geteuid() == 0) {
		snprintf(path, sizeof(path), "%s/fakenull", dir);
		assert_int_equal(mknod(path, S_IFCHR | 0666, makedev(1, 3)), 0);
		assert_refused(path, -EPERM, "is a character device");
		assert_int_equal(lstat(path, &st), 0);
		assert_true(S_ISCHR(st.st_mode));
		snprintf(path, sizeof(path), "%s/theirs.folded", dir);
		write_text(path, "theirs\n");
		assert_int_equal(chown(path, 65534, 65534), 0);
		assert_refused(path, -EPERM, "owned by uid 65534");
	}
	snprintf(path, sizeof(path), "%s/link.folded", dir);
	assert_int_equal(symlink("/etc/passwd", path), 0);
	assert_refused(path, -EPERM, "is a symbolic link");
	snprintf(path, sizeof(path), "%s/no/out.folded", dir);
	assert_refused(path, -ENOENT, "does not exist");
	snprintf(path, sizeof(path), "%s", dir);
	assert_refused(path, -EISDIR, "is a directory");
	/* Nothing was created beside them. */
	assert_int_equal(dir_entries(dir), geteuid() == 0 ? 4 : 2);
	rm_rf(dir);
}

/* The temporary file is there from open to commit, and gone after either a
 * commit or a free. */
static void test_open_then_commit(void **state)
{
	(void)state;
	char dir[] = "/tmp/taipan-test-output-XXXXXX";
	assert_non_null(mkdtemp(dir));
	struct ids id;
	struct profile *p = build_profile(&id);
	struct output_file *of;
	char path[256], err[512];
	size_t len;

	snprintf(path, sizeof(path), "%s/out.folded", dir);
	assert_int_equal(output_file_open(path, FMT("folded"), &of, err, sizeof(err)), 0);
	assert_int_equal(dir_entries(dir), 1);
	assert_int_equal(access(path, F_OK), -1);
	assert_int_equal(output_file_commit(of, p, NULL, err, sizeof(err)), 0);
	output_file_free(of);
	assert_int_equal(dir_entries(dir), 1);
	char *data = read_file(path, &len);
	assert_non_null(strstr(data, "Worker.run (lib/work.py) 6\n"));
	free(data);

	/* Given up before the end: nothing left. */
	assert_int_equal(output_file_open(path, FMT("folded"), &of, err, sizeof(err)), 0);
	assert_int_equal(dir_entries(dir), 2);
	output_file_free(of);
	assert_int_equal(dir_entries(dir), 1);

	/* The destination turned into a symlink while recording. */
	assert_int_equal(output_file_open(path, FMT("folded"), &of, err, sizeof(err)), 0);
	assert_int_equal(unlink(path), 0);
	assert_int_equal(symlink("/etc/passwd", path), 0);
	assert_int_equal(output_file_commit(of, p, NULL, err, sizeof(err)), -EPERM);
	assert_non_null(strstr(err, "is a symbolic link"));
	output_file_free(of);
	assert_int_equal(dir_entries(dir), 1);
	profile_free(p);
	rm_rf(dir);
}

/* A pid that is certainly dead: a child's, reaped. */
static pid_t dead_pid(void)
{
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0)
		_exit(0);
	assert_int_equal(waitpid(pid, NULL, 0), pid);
	return pid;
}

/* Leftovers of killed taipans go; anything else stays. */
static void test_open_removes_stale_temps(void **state)
{
	(void)state;
	char dir[] = "/tmp/taipan-test-output-XXXXXX";
	assert_non_null(mkdtemp(dir));
	char path[512], name[128];
	struct output_file *of;
	pid_t dead = dead_pid();
	static const char *const keep_fmt[] = {
	    ".taipan-%d-0123456789abcdeg.tmp",	/* not hex */
	    ".taipan-%d-0123456789abcde.tmp",	/* 15 digits */
	    ".taipan-%d-0123456789ABCDEF.tmp",	/* not as taipan writes them */
	    ".taipan-%d-0123456789abcdef.tmp~", /* something else's */
	    "taipan-%d-0123456789abcdef.tmp",	"x.taipan-%d-0123456789abcdef.tmp",
	};
	for (size_t i = 0; i < sizeof(keep_fmt) / sizeof(keep_fmt[0]); i++) {
		snprintf(name, sizeof(name), keep_fmt[i], (int)dead);
		snprintf(path, sizeof(path), "%s/%s", dir, name);
		write_text(path, "x");
	}
	/* A live process's (ours is skipped; our parent is alive). */
	snprintf(path, sizeof(path), "%s/.taipan-%d-0123456789abcdef.tmp", dir, (int)getppid());
	write_text(path, "x");
	/* A symlink of the pattern is not a file taipan wrote. */
	snprintf(path, sizeof(path), "%s/.taipan-%d-00000000000000ff.tmp", dir, (int)dead);
	assert_int_equal(symlink("/etc/passwd", path), 0);
	int kept = dir_entries(dir);
	/* The stale one. */
	snprintf(path, sizeof(path), "%s/.taipan-%d-0123456789abcdef.tmp", dir, (int)dead);
	write_text(path, "stale");

	snprintf(path, sizeof(path), "%s/out.folded", dir);
	char err[512];
	assert_int_equal(output_file_open(path, FMT("folded"), &of, err, sizeof(err)), 0);
	output_file_free(of);
	assert_int_equal(dir_entries(dir), kept);
	snprintf(path, sizeof(path), "%s/.taipan-%d-0123456789abcdef.tmp", dir, (int)dead);
	assert_int_equal(access(path, F_OK), -1);
	rm_rf(dir);
}

/* A profile that could not go where asked goes to $TMPDIR, for its owner. */
static void test_rescue(void **state)
{
	(void)state;
	char dir[] = "/tmp/taipan-test-output-XXXXXX";
	assert_non_null(mkdtemp(dir));
	struct ids id;
	struct profile *p = build_profile(&id);
	char path[512], want[512];
	const char *old = getenv("TMPDIR");
	char *saved = old ? strdup(old) : NULL;
	size_t len;
	struct stat st;

	assert_int_equal(setenv("TMPDIR", dir, 1), 0);
	assert_int_equal(output_write_rescue(p, FMT("folded"), NULL, path, sizeof(path)), 0);
	snprintf(want, sizeof(want), "%s/taipan-rescued-%d-", dir, (int)getpid());
	assert_true(strncmp(path, want, strlen(want)) == 0);
	assert_string_equal(path + strlen(path) - strlen(".folded"), ".folded");
	assert_int_equal(stat(path, &st), 0);
	assert_int_equal(st.st_mode & 0777, 0600);
	char *data = read_file(path, &len);
	assert_non_null(strstr(data, "Worker.run (lib/work.py) 6\n"));
	free(data);
	/* A missing directory is an error, not a crash. */
	snprintf(want, sizeof(want), "%s/missing", dir);
	assert_int_equal(setenv("TMPDIR", want, 1), 0);
	assert_int_equal(output_write_rescue(p, FMT("pprof"), NULL, path, sizeof(path)), -ENOENT);

	if (saved)
		setenv("TMPDIR", saved, 1);
	else
		unsetenv("TMPDIR");
	free(saved);
	profile_free(p);
	rm_rf(dir);
}

static void test_format_selection(void **state)
{
	(void)state;
	assert_ptr_equal(output_format_from_path("a.folded"), FMT("folded"));
	assert_ptr_equal(output_format_from_path("dir/a.txt"), FMT("folded"));
	assert_ptr_equal(output_format_from_path("/x/profile.pb.gz"), FMT("pprof"));
	assert_ptr_equal(output_format_from_path("cpu.pprof"), FMT("pprof"));
	assert_ptr_equal(output_format_from_path("CPU.PB.GZ"), FMT("pprof"));
	assert_ptr_equal(output_format_from_path("a.gz"), NULL);
	assert_ptr_equal(output_format_from_path("a.folded.bak"), NULL);
	assert_ptr_equal(output_format_from_path("noext"), NULL);
	assert_ptr_equal(output_format_from_path(".txt"), NULL);
	assert_ptr_equal(output_format_from_path("dir/.pprof"), NULL);
	assert_ptr_equal(output_format_from_path(""), NULL);
	assert_string_equal(output_format_from_name("folded")->name, "folded");
	assert_string_equal(output_format_from_name("pprof")->name, "pprof");
	assert_ptr_equal(output_format_from_name("html?"), NULL);
	assert_ptr_equal(output_format_from_name(NULL), NULL);
	size_t n = 0;
	for (const struct output_format_desc *f = output_formats; f->name; f++, n++) {
		assert_ptr_equal(output_format_from_name(f->name), f);
		/* Each extension picks its own format. */
		for (const char *const *e = f->extensions; *e; e++) {
			char path[64];
			snprintf(path, sizeof(path), "dir/x%s", *e);
			assert_ptr_equal(output_format_from_path(path), f);
		}
		assert_non_null(f->extensions[0]);
		assert_true(f->suggested >= 1 && f->write && f->help);
	}
	assert_true(n >= 4);

	/* The lists record's messages and --help give. */
	char buf[512];
	assert_string_equal(output_format_names(buf, sizeof(buf)),
			    "html, speedscope, pprof, otlp or folded");
	assert_string_equal(output_format_extensions(buf, sizeof(buf)),
			    ".html, .json, .pb.gz, .pprof, .otlp, .folded or .txt");
	assert_string_equal(output_format_summary(buf, sizeof(buf)),
			    ".html/.htm flame graph, .json speedscope, .pb.gz/.pprof pprof, "
			    ".otlp OpenTelemetry profiles, .folded/.txt folded stacks");
	/* Cut to fit, terminated. */
	assert_string_equal(output_format_names(buf, 9), "html, sp");
	assert_string_equal(output_format_summary(buf, 12), ".html/.htm ");
}

#ifdef INJECT_ALLOC_FAILURES
/* The contents of the open file f, to free; *len is its length. */
static char *contents(FILE *f, size_t *len)
{
	struct stat st;
	assert_int_equal(fflush(f), 0);
	assert_int_equal(fstat(fileno(f), &st), 0);
	char *buf = malloc((size_t)st.st_size + 1);
	assert_non_null(buf);
	assert_int_equal(pread(fileno(f), buf, (size_t)st.st_size, 0), st.st_size);
	*len = (size_t)st.st_size;
	return buf;
}

/* Runs encoder `which` (folded, pprof, whole file, OTLP) into f or path. */
static int encode_one(int which, const struct profile *p, FILE *f, const char *path)
{
	static const struct output_opts o = {.folded_lines = true, .folded_threads = true};
	assert_int_equal(ftruncate(fileno(f), 0), 0);
	rewind(f);
	if (which == 0)
		return output_write_folded(p, f, &o);
	if (which == 1)
		return output_write_pprof(p, f, NULL);
	if (which == 3)
		return output_write_otlp(p, f, NULL);
	return output_write_file(p, path, FMT("pprof"), NULL);
}

#endif

/* Fails each allocation in turn, for each encoder and for a whole file
 * write. Each must then return -ENOMEM, or succeed with the complete output
 * when the failure was absorbed (glibc's asprintf falls back to its first
 * buffer); never crash, never leave a temporary file. LSan or valgrind over
 * this test finds what the error paths leak. */
static void test_alloc_failures(void **state)
{
	(void)state;
#ifndef INJECT_ALLOC_FAILURES
	print_message("skipping: allocation failures cannot be injected under ASan\n");
	skip();
#else
	char dir[] = "/tmp/taipan-test-output-XXXXXX";
	assert_non_null(mkdtemp(dir));
	char path[256];
	snprintf(path, sizeof(path), "%s/out.pb.gz", dir);
	struct ids id;
	struct profile *p = build_profile(&id);
	FILE *f = tmpfile();
	assert_non_null(f);
	setvbuf(f, NULL, _IONBF, 0); /* stdio must not allocate a buffer */

	for (int which = 0; which < 4; which++) {
		size_t want_len, got_len;
		assert_int_equal(encode_one(which, p, f, path), 0);
		char *want = which == 2 ? read_file(path, &want_len) : contents(f, &want_len);
		unlink(path);

		long n;
		for (n = 0; n < 100000; n++) {
			alloc_failed = 0;
			alloc_live = 0;
			alloc_countdown = n;
			alloc_counting = true;
			int rc = encode_one(which, p, f, path);
			alloc_counting = false;
			alloc_countdown = -1;
			long live = alloc_live;
			if (which == 0 && n == 0 && !alloc_failed) {
				print_message("skipping: malloc is not ours to replace here "
					      "(valgrind?)\n");
				fclose(f);
				free(want);
				profile_free(p);
				rm_rf(dir);
				skip();
			}
			if (live != 0)
				print_error(
				    "encoder %d, allocation %ld failed: %ld blocks leaked\n", which,
				    n, live);
			assert_int_equal(live, 0);
			if (rc != 0 && rc != -ENOMEM)
				print_error("encoder %d, allocation %ld failed: rc %d\n", which, n,
					    rc);
			assert_true(rc == 0 || rc == -ENOMEM);
			if (rc == 0) {
				char *got =
				    which == 2 ? read_file(path, &got_len) : contents(f, &got_len);
				assert_int_equal(got_len, want_len);
				assert_memory_equal(got, want, want_len);
				free(got);
				unlink(path);
			}
			assert_int_equal(dir_entries(dir), 0);
			if (!alloc_failed)
				break;
		}
		/* The failures did reach the encoder. (Under valgrind only its own
		 * calls do: libc's internal ones go to valgrind's malloc.) */
		assert_true(n >= 2);
		free(want);
	}
	fclose(f);
	profile_free(p);
	rm_rf(dir);
#endif
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_alloc_failures),
	    cmocka_unit_test(test_write_file),
	    cmocka_unit_test(test_write_file_refuses_symlink),
	    cmocka_unit_test(test_write_file_foreign_owner),
	    cmocka_unit_test(test_open_follows_only_trusted_links),
	    cmocka_unit_test(test_write_file_errors),
	    cmocka_unit_test(test_open_refuses_what_is_not_a_file),
	    cmocka_unit_test(test_open_then_commit),
	    cmocka_unit_test(test_open_removes_stale_temps),
	    cmocka_unit_test(test_rescue),
	    cmocka_unit_test(test_format_selection),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
