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

/* A profile file being written: checked and opened before recording starts,
 * written when it ends. */
struct output_file;

/* Gets path ready for a profile in format f, before there is one: checks
 * that it may be written (its directory exists; it is absent or a regular
 * file of ours, not a symlink, a directory, a device node, a FIFO or another
 * user's file), removes the temporary files that dead taipan processes left
 * in its directory, and creates a temporary file there. "-" is standard
 * output: fd 1 is then kept for the profile alone and pointed at stderr, and
 * pprof (binary) is refused when it is a terminal. On success *of is set;
 * otherwise a negative errno is returned and err names the reason ("out.txt
 * is a symbolic link", "owned by uid 1000"). */
int output_file_open(const char *path, enum output_format f, struct output_file **of, char *err,
		     size_t errlen);

/* Writes p into of's temporary file and renames it over the destination,
 * after checking the destination again, so a reader never sees half a
 * profile; or writes it to standard output. Once only. Returns 0, or a
 * negative errno with the reason in err (the temporary file is then gone). */
int output_file_commit(struct output_file *of, const struct profile *p, const struct output_opts *o,
		       char *err, size_t errlen);

/* Closes of and removes its temporary file if it is still there. NULL is
 * fine. */
void output_file_free(struct output_file *of);

/* Writes p to a new file in $TMPDIR (/tmp when unset or relative), named
 * taipan-rescued-PID-RANDOM.EXT and readable by its owner only, for a
 * profile that could not be written where asked. Returns 0 with the file's
 * path in path, or a negative errno. */
int output_write_rescue(const struct profile *p, enum output_format f, const struct output_opts *o,
			char *path, size_t pathlen);

/* output_file_open, _commit and _free in one: path must be a file name.
 * Returns 0 or a negative errno: -EPERM for what it will not replace,
 * -EISDIR for a directory, -ENOENT when the directory is missing. */
int output_write_file(const struct profile *p, const char *path, enum output_format f,
		      const struct output_opts *o);

#endif /* TAIPAN_OUTPUT_H */
