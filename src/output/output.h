/* output.h - writing a profile in each file format. */
#ifndef TAIPAN_OUTPUT_H
#define TAIPAN_OUTPUT_H

#include <stdbool.h>
#include <stdio.h>

#include "profile/profile.h"

struct output_opts {
	bool folded_lines;   /* folded: "name (file:line)" instead of "name (file)" */
	bool folded_threads; /* folded: root frames "comm [pid N]" and "thread [tid N]" */
	const char *service; /* otlp: service.name of every process; NULL: each one's comm */
};

/* An encoder: writes p to out. o may be NULL (the defaults); a format
 * without options ignores it. Returns 0 or a negative errno. */
typedef int (*output_write_fn)(const struct profile *p, FILE *out, const struct output_opts *o);

#define OUTPUT_MAX_EXTENSIONS 3

/* One file format: a row of output_formats[]. Adding a format is a row
 * there and the file of its encoder; record's options, messages and --help
 * read the rows. */
struct output_format_desc {
	const char *name; /* what --format takes: "pprof" */
	/* The extensions that pick it, the usual one first: a file taipan names
	 * itself gets that one. NULL-terminated. */
	const char *extensions[OUTPUT_MAX_EXTENSIONS + 1];
	/* How many of them, from the first, an error message suggests; the
	 * others are taken as well (--help lists them all). */
	unsigned int suggested;
	const char *help; /* what it is, after its extensions in --help: "flame graph" */
	/* NULL: text. Else what its bytes are ("gzip"): not written to a
	 * terminal. */
	const char *binary;
	/* The unit of a time profile's values (--mode wall, off-cpu) where the
	 * file does not say it ("microseconds"), for record's summary; or NULL. */
	const char *time_unit;
	/* Its samples carry the times of their events: a profile for it keeps
	 * them (profile_keep_events). */
	bool timed;
	output_write_fn write;
};

/* Every format, in the order --help and messages list them; the last row
 * is all zeros. */
extern const struct output_format_desc output_formats[];

/* The format for a file name by its extension (the longest that matches),
 * or NULL. */
const struct output_format_desc *output_format_from_path(const char *path);
/* The format for a --format name ("folded", "pprof", ...), or NULL. */
const struct output_format_desc *output_format_from_name(const char *name);

/* Lists of the formats, for messages and --help, into buf (cut to fit,
 * always terminated): the names, "html, speedscope, pprof or folded"; the
 * suggested extensions, ".html, .json, .pb.gz, .pprof, .folded or .txt";
 * and what each extension is, ".html/.htm flame graph, .json speedscope,
 * ...". Each returns buf. */
const char *output_format_names(char *buf, size_t len);
const char *output_format_extensions(char *buf, size_t len);
const char *output_format_summary(char *buf, size_t len);

/* Encoders, one per file out_*.c. */
int output_write_folded(const struct profile *p, FILE *out, const struct output_opts *o);
int output_write_pprof(const struct profile *p, FILE *out, const struct output_opts *o);
int output_write_html(const struct profile *p, FILE *out, const struct output_opts *o);
int output_write_speedscope(const struct profile *p, FILE *out, const struct output_opts *o);
int output_write_otlp(const struct profile *p, FILE *out, const struct output_opts *o);

/* p encoded by write into memory: *out (from malloc, the caller frees it)
 * and *len. Returns 0 or a negative errno. */
int output_encode_memory(const struct profile *p, output_write_fn write,
			 const struct output_opts *o, char **out, size_t *len);

/* A profile file being written: checked and opened before recording starts,
 * written when it ends. */
struct output_file;

/* Gets path ready for a profile in format f, before there is one: checks
 * that it may be written (its directory exists; it is absent or a regular
 * file of ours, not a symlink, a directory, a device node, a FIFO or another
 * user's file), removes the temporary files that dead taipan processes left
 * in its directory, and creates a temporary file there. "-" is standard
 * output: fd 1 is then kept for the profile alone and pointed at stderr, and
 * a binary format (pprof) is refused when it is a terminal. On success *of is set;
 * otherwise a negative errno is returned and err names the reason ("out.txt
 * is a symbolic link", "owned by uid 1000"). */
int output_file_open(const char *path, const struct output_format_desc *f, struct output_file **of,
		     char *err, size_t errlen);

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
int output_write_rescue(const struct profile *p, const struct output_format_desc *f,
			const struct output_opts *o, char *path, size_t pathlen);

/* output_file_open, _commit and _free in one: path must be a file name.
 * Returns 0 or a negative errno: -EPERM for what it will not replace,
 * -EISDIR for a directory, -ENOENT when the directory is missing. */
int output_write_file(const struct profile *p, const char *path, const struct output_format_desc *f,
		      const struct output_opts *o);

#endif /* TAIPAN_OUTPUT_H */
