/* out_json.c - JSON strings for the encoders: repairing text that is not
 * UTF-8, and string literals that may sit inside an HTML <script>.
 *
 * jansson refuses a string that is not valid UTF-8, and what taipan reads
 * out of a target is whatever bytes were there. Dropping such a frame would
 * lose samples, so the bad bytes are replaced instead.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "output/out_json.h"
#include "util/strutil.h"

json_t *out_json_string(const char *s)
{
	if (!s)
		s = "";
	json_t *j = json_string(s);
	if (j)
		return j;
	/* json_string fails on invalid UTF-8 or on allocation: repair and try
	 * once more; a second failure can only be memory. */
	char *fixed = utf8_repair(s);
	if (!fixed)
		return NULL;
	j = json_string(fixed);
	free(fixed);
	return j;
}

int out_json_put_html_string(FILE *out, const char *s)
{
	json_t *j = out_json_string(s);
	if (!j)
		return -ENOMEM;
	char *text = json_dumps(j, JSON_ENCODE_ANY | JSON_ENSURE_ASCII | JSON_COMPACT);
	json_decref(j);
	if (!text)
		return -ENOMEM;

	/* JSON_ENSURE_ASCII left only ASCII; of that, '<' '>' '&' can only be
	 * inside the string itself, where a \u escape means the same. */
	int err = 0;
	errno = 0;
	for (const char *c = text; *c; c++) {
		int rc;
		if (*c == '<' || *c == '>' || *c == '&')
			rc = fprintf(out, "\\u%04x", (unsigned int)*c);
		else
			rc = putc(*c, out);
		if (rc < 0) {
			err = errno ? -errno : -EIO;
			break;
		}
	}
	free(text);
	return err;
}
