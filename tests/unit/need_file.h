/* need_file.h - the unit tests' real files (interpreters, libraries) are on
 * dev machines and CI: elsewhere a missing one skips the test; under
 * CI=true it fails, so that a broken image cannot turn the suite green by
 * skipping. Include after <cmocka.h>. */
#ifndef TAIPAN_TEST_NEED_FILE_H
#define TAIPAN_TEST_NEED_FILE_H

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static inline void need_file(const char *path)
{
	const char *ci = getenv("CI");

	if (access(path, R_OK) == 0)
		return;
	if (ci && !strcmp(ci, "true"))
		fail_msg("%s: missing (CI=true, so this is a failure)", path);
	print_message("skipping: %s not found\n", path);
	skip();
}

#endif /* TAIPAN_TEST_NEED_FILE_H */
