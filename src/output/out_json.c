/* out_json.c - JSON strings for the encoders: names escaped as text, in
 * string literals that may sit inside an HTML <script>.
 *
 * The content of each string is escaped as folded stacks are (str_escape):
 * JSON's own escapes only carry a control character or a bidi override to
 * whoever reads the string, and speedscope, the flame graph page and `jq -r`
 * then show it. The escaped text is always valid UTF-8, which jansson
 * requires: a byte that is not becomes "\xHH" with the rest.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "output/out_json.h"
#include "util/strutil.h"

json_t *out_json_string(const char *s)
{
	char buf[256];
	size_t n = str_escape(buf, sizeof(buf), s, NULL);
	if (n < sizeof(buf))
		return json_string(buf);
	char *all = malloc(n + 1);
	if (!all)
		return NULL;
	str_escape(all, n + 1, s, NULL);
	json_t *j = json_string(all);
	free(all);
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
