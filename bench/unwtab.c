/* unwtab.c - bench: rows, bytes and build time of native unwind tables.
 *
 *   build/bench/unwtab FILE...            one table per file, and the total
 *   build/bench/unwtab --python PYTHON [MODULES]
 *                                         every file with an executable mapping
 *                                         in a running PYTHON that imported
 *                                         MODULES (default: ten extension
 *                                         modules; "torch, numpy" for PyTorch)
 *
 * Bytes are what BPF holds: the packed rows and page index (4 bytes a
 * row), and the rules they share, each once over all the files (8 bytes a
 * rule); "12-byte rows" is what the same tables took before rows were
 * packed (a 12-byte struct tp_urow per row and per page).
 *
 * Each build is timed three times; the fastest is printed (the files are in
 * the page cache after the first). Figures only, nothing asserted.
 */
#include <errno.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "proc/unwtab.h"

#define MAX_FILES 1024

static double now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

/* Builds each file's table; prints a line per file and the totals. */
static int bench(char **files, int n)
{
	double total_ms = 0;
	size_t rows = 0, bytes = 0, before = 0;
	struct unwtab_rules rules = {0};
	int failed = 0;

	printf("%-60s %8s %10s %6s %8s\n", "file", "rows", "bytes", "rules", "ms");
	for (int i = 0; i < n; i++) {
		double best = 1e9;
		struct unwtab t;
		uint32_t had = rules.n, *w = NULL;
		int err = 0;

		for (int round = 0; round < 3; round++) {
			double t0 = now_ms();

			err = unwtab_build(files[i], &t);
			if (!err && !(w = unwtab_pack(&t, &rules)))
				err = -errno;
			if (now_ms() - t0 < best)
				best = now_ms() - t0;
			if (err)
				break;
			if (round < 2) {
				free(w);
				unwtab_free(&t);
			}
		}
		if (err) {
			printf("%-60s %s\n", files[i], strerror(-err));
			failed += err != -ENODATA;
			continue;
		}
		printf("%-60s %8u %10zu %6u %8.2f\n", files[i], t.nrows, unwtab_bytes(&t),
		       rules.n - had, best);
		rows += t.nrows;
		bytes += unwtab_bytes(&t);
		before += (size_t)(t.nrows + t.npages) * sizeof(struct tp_urow);
		total_ms += best;
		free(w);
		unwtab_free(&t);
	}
	printf("%-60s %8zu %10zu %6u %8.2f\n", "total", rows, bytes, rules.n, total_ms);
	printf("with the rules: %.1f MiB, %.2f bytes a row; 12-byte rows: %.1f MiB, %.2f bytes a "
	       "row\n",
	       (bytes + rules.n * sizeof(struct tp_urule)) / 1048576.0,
	       rows ? (double)(bytes + rules.n * sizeof(struct tp_urule)) / rows : 0,
	       before / 1048576.0, rows ? (double)before / rows : 0);
	unwtab_rules_free(&rules);
	return failed ? 1 : 0;
}

/* Starts python importing ten extension modules, waits for its "ready"
 * line, and benches the files of its executable mappings. */
static int bench_python(const char *python, const char *modules)
{
	char code[1024];
	char maps[64], line[4096], *files[MAX_FILES], buf[8];
	int to_child[2], from_child[2], n = 0, rc;
	FILE *f;
	pid_t pid;

	snprintf(
	    code, sizeof(code), "import %s, sys\nprint('ready', flush=True)\nsys.stdin.read()\n",
	    modules ? modules
		    : "_decimal, _pickle, _datetime, _json, _socket, _ssl, _ctypes, zlib, math, "
		      "array");
	if (pipe(to_child) || pipe(from_child))
		return perror("pipe"), 1;
	fflush(stdout);
	pid = fork();
	if (pid < 0)
		return perror("fork"), 1;
	if (pid == 0) {
		/* Only the ends it uses: a write end of its own stdin left
		 * open would keep it from ever seeing EOF. */
		dup2(to_child[0], 0);
		dup2(from_child[1], 1);
		close(to_child[0]);
		close(to_child[1]);
		close(from_child[0]);
		close(from_child[1]);
		execl(python, python, "-c", code, (char *)NULL);
		_exit(127);
	}
	close(to_child[0]);
	close(from_child[1]);
	/* Its imports are done once it says so. */
	if (read(from_child[0], buf, sizeof(buf)) < 5 || memcmp(buf, "ready", 5)) {
		fprintf(stderr, "%s: did not start (its modules must import)\n", python);
		kill(pid, SIGKILL);
		waitpid(pid, NULL, 0);
		return 1;
	}
	snprintf(maps, sizeof(maps), "/proc/%d/maps", (int)pid);
	f = fopen(maps, "r");
	while (f && fgets(line, sizeof(line), f) && n < MAX_FILES) {
		char perms[8], *path = strchr(line, '/');
		bool seen = false;

		if (!path || sscanf(line, "%*s %7s", perms) != 1 || perms[2] != 'x')
			continue;
		path[strcspn(path, "\n")] = '\0';
		for (int i = 0; i < n; i++)
			seen |= !strcmp(files[i], path);
		if (!seen && !(files[n] = strdup(path)))
			break;
		n += !seen;
	}
	if (f)
		fclose(f);
	close(to_child[1]); /* stdin's EOF ends it */
	waitpid(pid, NULL, 0);
	printf("%s: %d files with executable mappings\n", python, n);
	rc = bench(files, n);
	for (int i = 0; i < n; i++)
		free(files[i]);
	return rc;
}

int main(int argc, char **argv)
{
	if ((argc == 3 || argc == 4) && !strcmp(argv[1], "--python"))
		return bench_python(argv[2], argc == 4 ? argv[3] : NULL);
	if (argc < 2 || argv[1][0] == '-') {
		fprintf(stderr, "usage: %s FILE... | --python PYTHON [MODULES]\n", argv[0]);
		return 2;
	}
	return bench(argv + 1, argc - 1);
}
