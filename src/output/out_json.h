/* out_json.h - JSON helpers shared by the encoders that write JSON (speedscope,
 * the HTML flame graph's embedded data). */
#ifndef TAIPAN_OUT_JSON_H
#define TAIPAN_OUT_JSON_H

#include <jansson.h>
#include <stdio.h>

/* A jansson string for s escaped (str_escape): names come from target
 * memory, and the target chose them, control characters and bidi overrides
 * included; each such character, and each byte that does not start a valid
 * UTF-8 sequence, is written as its escape, so the result is always valid
 * JSON and reads as the text it is. NULL is taken as "". Returns a new
 * reference, or NULL when out of memory. */
json_t *out_json_string(const char *s);

/* Writes s to out as a JSON string literal that is also safe inside an HTML
 * <script> element: everything non-ASCII is a \u escape (the page does not
 * depend on its charset), and '<', '>' and '&' are \u escapes too, so no
 * "</script>" or "<!--" can appear. Returns 0 or a negative errno. */
int out_json_put_html_string(FILE *out, const char *s);

#endif /* TAIPAN_OUT_JSON_H */
