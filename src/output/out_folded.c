/* out_folded.c - the folded ("collapsed") stack format of flamegraph.pl and
 * inferno: one "root;...;leaf count" line per distinct stack.
 *
 * Labels other than the optional thread roots are not part of a line, so
 * samples that differ only in labels produce the same line; those are merged
 * here, because the consumers expect each stack once. Lines are sorted so
 * that the same profile always gives the same bytes (diffable, testable).
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "output/output.h"
#include "util/strutil.h"

struct folded_line {
	char *stack;
	uint64_t count;
};

/* s escaped (str_escape) for a folded line, in a new string; s is freed.
 * ';' separates frames and '\n' ends a line, so neither may survive inside a
 * frame, and no byte a target chose may act on the terminal the lines are
 * printed to: both become "\xHH", which says what was there. Spaces stay
 * (the count is after the last one). NULL when out of memory. */
static char *escape(char *s)
{
	char *e = str_escape_dup(s, ";");
	free(s);
	return e;
}

/* The text of one frame, newly allocated and escaped, or NULL when out of
 * memory. "_[k]" is the suffix flamegraph.pl and inferno colour as kernel
 * code; "_[n]" marks native code the same way, so the two stay apart even
 * where a viewer does not colour it. A Python line of 0 (unknown) is left out
 * rather than printed as ":0". */
static char *frame_text(const struct prof_frame *f, bool lines)
{
	const char *name = f->name && *f->name ? f->name : NULL;
	char *s = NULL;
	int rc;

	switch (f->kind) {
	case PROF_FRAME_INTERP:
		if (!name)
			name = "[unknown]";
		if (f->file && *f->file && lines && f->line > 0)
			rc = asprintf(&s, "%s (%s:%d)", name, f->file, f->line);
		else if (f->file && *f->file)
			rc = asprintf(&s, "%s (%s)", name, f->file);
		else
			rc = asprintf(&s, "%s", name);
		break;
	case PROF_FRAME_KERNEL:
	case PROF_FRAME_NATIVE: {
		const char *sfx = f->kind == PROF_FRAME_KERNEL ? "_[k]" : "_[n]";
		/* An unsymbolized address still separates different code. */
		if (name)
			rc = asprintf(&s, "%s%s", name, sfx);
		else
			rc = asprintf(&s, "0x%" PRIx64 "%s", f->addr, sfx);
		break;
	}
	case PROF_FRAME_MARKER:
	default:
		rc = asprintf(&s, "%s", name ? name : "[unknown]");
		break;
	}
	if (rc < 0)
		return NULL;
	return escape(s);
}

/* "comm [pid N]" or, without a name, "[pid N]". */
static char *thread_root(const char *name, const char *what, uint32_t id)
{
	char *s;
	int rc;
	if (name && *name)
		rc = asprintf(&s, "%s [%s %" PRIu32 "]", name, what, id);
	else
		rc = asprintf(&s, "[%s %" PRIu32 "]", what, id);
	if (rc < 0)
		return NULL;
	return escape(s);
}

/* Appends part at w, after a ';' unless it is the first (*k counts parts);
 * returns the new end. */
static char *put_part(char *w, size_t *k, const char *part)
{
	size_t len = strlen(part);
	if ((*k)++)
		*w++ = ';';
	memcpy(w, part, len);
	return w + len;
}

/* Joins the optional roots and the frame texts of s with ';'. */
static char *stack_text(const struct prof_sample *s, char *const *texts, const char *proot,
			const char *troot)
{
	size_t len = 0, nparts = 0;
	if (proot) {
		len += strlen(proot) + strlen(troot);
		nparts += 2;
	}
	for (uint32_t i = 0; i < s->nframes; i++)
		len += strlen(texts[s->frames[i]]);
	nparts += s->nframes;
	const char *unknown = "[unknown]";
	if (nparts == 0) {
		len += strlen(unknown);
		nparts = 1;
	}
	len += nparts - 1; /* separators */

	char *out = malloc(len + 1);
	if (!out)
		return NULL;
	char *w = out;
	size_t k = 0;
	if (proot) {
		w = put_part(w, &k, proot);
		w = put_part(w, &k, troot);
	}
	for (uint32_t i = 0; i < s->nframes; i++)
		w = put_part(w, &k, texts[s->frames[i]]);
	if (k == 0)
		w = put_part(w, &k, unknown);
	*w = '\0';
	return out;
}

static int cmp_line(const void *a, const void *b)
{
	/* strcmp compares as unsigned char: the same order on every libc. */
	return strcmp(((const struct folded_line *)a)->stack,
		      ((const struct folded_line *)b)->stack);
}

int output_write_folded(const struct profile *p, FILE *out, const struct output_opts *o)
{
	static const struct output_opts defaults;
	if (!p || !out)
		return -EINVAL;
	if (!o)
		o = &defaults;

	uint32_t nframes = profile_frame_count(p);
	size_t nsamples = profile_sample_count(p);
	size_t nlines = 0;
	int err = 0;
	bool weighted = profile_weighted(p);
	char **texts = calloc(nframes ? nframes : 1, sizeof(*texts));
	struct folded_line *lines = calloc(nsamples ? nsamples : 1, sizeof(*lines));
	if (!texts || !lines) {
		err = -ENOMEM;
		goto cleanup;
	}

	for (uint32_t i = 0; i < nframes; i++) {
		texts[i] = frame_text(profile_frame(p, i), o->folded_lines);
		if (!texts[i]) {
			err = -ENOMEM;
			goto cleanup;
		}
	}

	for (size_t i = 0; i < nsamples; i++) {
		const struct prof_sample *s = profile_sample(p, i);
		char *proot = NULL, *troot = NULL;
		if (!s->count || !prof_value(p, s))
			continue;
		if (o->folded_threads) {
			proot = thread_root(s->labels.comm, "pid", s->labels.pid);
			troot = thread_root(s->labels.thread_name, "tid", s->labels.tid);
			if (!proot || !troot) {
				free(proot);
				free(troot);
				err = -ENOMEM;
				goto cleanup;
			}
		}
		/* A frameless sample under thread roots is time spent in that
		 * thread at an unknown place: the roots alone say that. */
		lines[nlines].stack = stack_text(s, texts, proot, troot);
		free(proot);
		free(troot);
		if (!lines[nlines].stack) {
			err = -ENOMEM;
			goto cleanup;
		}
		lines[nlines++].count = prof_value(p, s);
	}

	qsort(lines, nlines, sizeof(*lines), cmp_line);
	for (size_t i = 0; i < nlines;) {
		uint64_t count = lines[i].count;
		size_t j = i + 1;
		while (j < nlines && strcmp(lines[j].stack, lines[i].stack) == 0)
			count += lines[j++].count;
		/* Wall-clock and off-CPU time in microseconds, as offcputime's
		 * folded output has it: nanoseconds would only add digits. */
		if (weighted)
			count = prof_ns_to_us(count);
		errno = 0;
		if (count && fprintf(out, "%s %" PRIu64 "\n", lines[i].stack, count) < 0) {
			err = errno ? -errno : -EIO;
			goto cleanup;
		}
		i = j;
	}
	if (ferror(out))
		err = -EIO;

cleanup:
	if (texts)
		for (uint32_t i = 0; i < nframes; i++)
			free(texts[i]);
	free(texts);
	if (lines)
		for (size_t i = 0; i < nlines; i++)
			free(lines[i].stack);
	free(lines);
	return err;
}
