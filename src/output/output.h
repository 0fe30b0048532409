/* output.h - writing a profile in each file format. */
#ifndef TAIPAN_OUTPUT_H
#define TAIPAN_OUTPUT_H

#include <stdbool.h>
#include <stdio.h>

#include "profile/profile.h"

enum output_format {
	OUTPUT_UNKNOWN = 0,
	OUTPUT_FOLDED,	   /* .folded .txt: "root;…;leaf count" lines */
	OUTPUT_PPROF,	   /* .pb.gz .pprof: gzipped pprof protobuf */
	OUTPUT_HTML,	   /* .html .htm: a self-contained interactive flame graph */
	OUTPUT_SPEEDSCOPE, /* .json: speedscope's file format, a profile per thread */
};

struct output_opts {
	bool folded_lines;   /* folded: "name (file:line)" instead of "name (file)" */
	bool folded_threads; /* folded: root frames "comm [pid N]" and "thread [tid N]" */
};

/* The format for a file name by its extension, or OUTPUT_UNKNOWN. */
enum output_format output_format_from_path(const char *path);
/* The format for a --format name ("folded", "pprof", "html", "speedscope"),
 * or OUTPUT_UNKNOWN. */
enum output_format output_format_from_name(const char *name);
const char *output_format_name(enum output_format f);

/* Encoders. Each returns 0 or a negative errno. */
int output_write_folded(const struct profile *p, FILE *out, const struct output_opts *o);
int output_write_pprof(const struct profile *p, FILE *out);
int output_write_html(const struct profile *p, FILE *out);
int output_write_speedscope(const struct profile *p, FILE *out);

/* Writes p to path in format f: into a new temporary file beside path, then
 * renamed over it, so a reader never sees half a profile. Refuses (-EPERM) to
 * replace a symlink or a file owned by another user. Returns 0 or a negative
 * errno. */
int output_write_file(const struct profile *p, const char *path, enum output_format f,
		      const struct output_opts *o);

#endif /* TAIPAN_OUTPUT_H */
