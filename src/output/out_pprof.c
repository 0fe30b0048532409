/* out_pprof.c - the pprof format: a gzipped perftools.profiles.Profile
 * protobuf, as read by go tool pprof, Pyroscope, Parca and Grafana.
 *
 * The dictionary (dict.c) decides the locations, functions, mappings and
 * strings; this file writes them, and the samples with their labels, as
 * pprof's messages.
 */
#define ZLIB_CONST
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <zlib.h>

#include "output/dict.h"
#include "output/output.h"
#include "profile.pb-c.h"

/* At most this many labels per sample: pid, tid, ns_pid, thread_name, comm,
 * runtime, runtime_version and its alias (python_version), cgroup,
 * container_id, state, the lock (gil), the asyncio task. */
#define MAX_LABELS 13
/* Values per sample: samples/count and cpu/nanoseconds; with off-CPU time
 * (--mode wall, off-cpu), wall/nanoseconds too. */
#define MAX_VALUES 3

/* Adds the label key = str to s, using the next slot of storage; nothing
 * when str is 0 (the value was NULL or empty). key and str may be the negative errno
 * of a failed str_index, which is returned. */
static int add_label(Perftools__Profiles__Sample *s, Perftools__Profiles__Label *storage,
		     int64_t key, int64_t str)
{
	if (key < 0)
		return (int)key; /* a key that could not be interned */
	if (str <= 0)
		return (int)str;
	Perftools__Profiles__Label *l = &storage[s->n_label];
	perftools__profiles__label__init(l);
	l->key = key;
	l->str = str;
	s->label[s->n_label++] = l;
	return 0;
}

static int64_t sat_i64(uint64_t v)
{
	return v > (uint64_t)INT64_MAX ? INT64_MAX : (int64_t)v;
}

static int cmp_mapping(const void *a, const void *b)
{
	uint64_t x = ((const Perftools__Profiles__Mapping *)a)->id;
	uint64_t y = ((const Perftools__Profiles__Mapping *)b)->id;
	return x < y ? -1 : x > y;
}

/* A ProtobufCBuffer that gzips whatever protobuf-c appends straight into a
 * FILE, so the packed profile never has to exist in memory whole. */
struct gz_sink {
	ProtobufCBuffer base; /* first: protobuf-c hands back a pointer to it */
	z_stream zs;
	FILE *out;
	int err;
	unsigned char buf[64 * 1024];
};

/* Runs deflate with flush over whatever is in zs.next_in, writing each full
 * output buffer. Errors stick in g->err. */
static void gz_pump(struct gz_sink *g, int flush)
{
	for (;;) {
		g->zs.next_out = g->buf;
		g->zs.avail_out = sizeof(g->buf);
		int rc = deflate(&g->zs, flush);
		if (rc == Z_STREAM_ERROR) {
			g->err = -EIO;
			return;
		}
		size_t have = sizeof(g->buf) - g->zs.avail_out;
		if (have && fwrite(g->buf, 1, have, g->out) != have) {
			g->err = errno ? -errno : -EIO;
			return;
		}
		if (flush == Z_FINISH ? rc == Z_STREAM_END : g->zs.avail_out != 0)
			return;
	}
}

static void gz_append(ProtobufCBuffer *buffer, size_t len, const uint8_t *data)
{
	struct gz_sink *g = (struct gz_sink *)buffer;
	while (len && !g->err) {
		uInt chunk = len > UINT_MAX ? UINT_MAX : (uInt)len;
		g->zs.next_in = data;
		g->zs.avail_in = chunk;
		gz_pump(g, Z_NO_FLUSH);
		data += chunk;
		len -= chunk;
	}
}

/* Packs msg into out as one gzip member. */
static int write_gzip(const ProtobufCMessage *msg, FILE *out)
{
	struct gz_sink *g = calloc(1, sizeof(*g));
	if (!g)
		return -ENOMEM;
	g->base.append = gz_append;
	g->out = out;
	/* 15 + 16: the largest window, with a gzip header and trailer. */
	int rc =
	    deflateInit2(&g->zs, Z_DEFAULT_COMPRESSION, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY);
	if (rc != Z_OK) {
		free(g);
		return rc == Z_MEM_ERROR ? -ENOMEM : -EINVAL;
	}
	errno = 0;
	protobuf_c_message_pack_to_buffer(msg, &g->base);
	if (!g->err) {
		g->zs.next_in = NULL;
		g->zs.avail_in = 0;
		gz_pump(g, Z_FINISH);
	}
	int err = g->err;
	deflateEnd(&g->zs);
	free(g);
	return err;
}

int output_write_pprof(const struct profile *p, FILE *out, const struct output_opts *o)
{
	(void)o; /* no options */
	if (!p || !out)
		return -EINVAL;

	struct dict d;
	size_t nsamples = profile_sample_count(p);
	size_t nlocids = 0;
	int err = dict_build(&d, p);

	Perftools__Profiles__Sample *samples = NULL, **sample_ptrs = NULL;
	Perftools__Profiles__Label *labels = NULL, **label_ptrs = NULL;
	Perftools__Profiles__Function *fns = NULL, **fn_ptrs = NULL;
	Perftools__Profiles__Mapping *maps = NULL, **map_ptrs = NULL;
	Perftools__Profiles__Location *locs = NULL, **loc_ptrs = NULL;
	Perftools__Profiles__Line *lines = NULL, **line_ptrs = NULL;
	uint64_t *locids = NULL;
	int64_t *values = NULL;
	if (err)
		goto cleanup;

	for (size_t i = 0; i < nsamples; i++) {
		uint32_t n = profile_sample(p, i)->nframes;
		nlocids += n ? n : 1;
	}
	samples = calloc(nsamples ? nsamples : 1, sizeof(*samples));
	sample_ptrs = calloc(nsamples ? nsamples : 1, sizeof(*sample_ptrs));
	labels = calloc((nsamples ? nsamples : 1) * MAX_LABELS, sizeof(*labels));
	label_ptrs = calloc((nsamples ? nsamples : 1) * MAX_LABELS, sizeof(*label_ptrs));
	locids = calloc(nlocids ? nlocids : 1, sizeof(*locids));
	values = calloc((nsamples ? nsamples : 1) * MAX_VALUES, sizeof(*values));
	if (!samples || !sample_ptrs || !labels || !label_ptrs || !locids || !values) {
		err = -ENOMEM;
		goto cleanup;
	}

	uint64_t period = profile_period_ns(p);
	bool wall = profile_weighted(p);
	size_t nvalues = wall ? 3 : 2;
	size_t ns = 0, nid = 0;
	for (size_t i = 0; i < nsamples; i++) {
		const struct prof_sample *ps = profile_sample(p, i);
		if (!ps->count || !prof_value(p, ps))
			continue;
		Perftools__Profiles__Sample *s = &samples[ns];
		perftools__profiles__sample__init(s);
		sample_ptrs[ns++] = s;

		s->location_id = &locids[nid];
		if (ps->nframes == 0) {
			int64_t unk = dict_unknown_location(&d);
			if (unk < 0) {
				err = (int)unk;
				goto cleanup;
			}
			locids[nid++] = (uint64_t)unk;
			s->n_location_id = 1;
		} else {
			/* The profile is root first; pprof wants the leaf first. */
			for (uint32_t k = ps->nframes; k-- > 0;)
				locids[nid++] = (uint64_t)ps->frames[k] + 1;
			s->n_location_id = ps->nframes;
		}

		s->value = &values[MAX_VALUES * (ns - 1)];
		s->n_value = nvalues;
		s->value[0] = sat_i64(ps->count);
		s->value[1] = sat_i64(prof_sample_cpu_ns(p, ps));
		if (wall)
			s->value[2] = sat_i64(prof_sample_wall_ns(p, ps));

		/* Labels: MAX_LABELS slots per sample; empty values are left out. */
		const struct prof_labels *pl = &ps->labels;
		Perftools__Profiles__Label *ls = &labels[(ns - 1) * MAX_LABELS];
		s->label = &label_ptrs[(ns - 1) * MAX_LABELS];
		err = add_label(s, ls, DICT_S_PID, dict_str_u32(&d, pl->pid));
		if (!err)
			err = add_label(s, ls, DICT_S_TID, dict_str_u32(&d, pl->tid));
		if (!err && pl->ns_pid)
			err = add_label(s, ls, DICT_S_NSPID, dict_str_u32(&d, pl->ns_pid));
		if (!err)
			err = add_label(s, ls, DICT_S_TNAME, dict_str_opt(&d, pl->thread_name));
		if (!err)
			err = add_label(s, ls, DICT_S_COMM, dict_str_opt(&d, pl->comm));
		if (!err)
			err = add_label(s, ls, DICT_S_RUNTIME, dict_str_opt(&d, pl->runtime));
		if (!err)
			err = add_label(s, ls, DICT_S_RTVER, dict_str_opt(&d, pl->runtime_version));
		if (!err && pl->version_alias)
			err = add_label(s, ls, dict_str_opt(&d, pl->version_alias),
					dict_str_opt(&d, pl->runtime_version));
		if (!err && pl->cgroup && *pl->cgroup)
			err = add_label(s, ls, DICT_S_CGROUP, dict_str_opt(&d, pl->cgroup));
		if (!err && pl->container_id && *pl->container_id)
			err =
			    add_label(s, ls, DICT_S_CONTAINER, dict_str_opt(&d, pl->container_id));
		if (!err && pl->task && *pl->task)
			err = add_label(s, ls, DICT_S_TASK, dict_str_opt(&d, pl->task));
		if (!err && prof_state_name(pl->state))
			err = add_label(s, ls, DICT_S_STATE,
					dict_str_opt(&d, prof_state_name(pl->state)));
		if (!err && pl->lock_name && prof_lock_name(pl->lock))
			err = add_label(s, ls, dict_str_opt(&d, pl->lock_name),
					dict_str_opt(&d, prof_lock_name(pl->lock)));
		if (err)
			goto cleanup;
	}

	/* The dictionary in pprof's messages. */
	fns = calloc(d.nfns ? d.nfns : 1, sizeof(*fns));
	fn_ptrs = calloc(d.nfns ? d.nfns : 1, sizeof(*fn_ptrs));
	maps = calloc(d.nmaps ? d.nmaps : 1, sizeof(*maps));
	map_ptrs = calloc(d.nmaps ? d.nmaps : 1, sizeof(*map_ptrs));
	locs = calloc(d.nlocs ? d.nlocs : 1, sizeof(*locs));
	loc_ptrs = calloc(d.nlocs ? d.nlocs : 1, sizeof(*loc_ptrs));
	lines = calloc(d.nlocs ? d.nlocs : 1, sizeof(*lines));
	line_ptrs = calloc(d.nlocs ? d.nlocs : 1, sizeof(*line_ptrs));
	if (!fns || !fn_ptrs || !maps || !map_ptrs || !locs || !loc_ptrs || !lines || !line_ptrs) {
		err = -ENOMEM;
		goto cleanup;
	}
	for (size_t i = 0; i < d.nfns; i++) {
		const struct dict_function *df = &d.fns[i];
		perftools__profiles__function__init(&fns[i]);
		fns[i].id = df->id;
		fns[i].name = df->name;
		fns[i].system_name = df->system_name;
		fns[i].filename = df->filename;
		fns[i].start_line = df->start_line;
		fn_ptrs[i] = &fns[i];
	}
	for (size_t i = 0; i < d.nmaps; i++) {
		const struct dict_mapping *dm = &d.maps[i];
		perftools__profiles__mapping__init(&maps[i]);
		maps[i].id = dm->id;
		maps[i].memory_start = dm->memory_start;
		maps[i].memory_limit = dm->memory_limit;
		maps[i].file_offset = dm->file_offset;
		maps[i].filename = dm->filename;
		maps[i].build_id = dm->build_id;
		maps[i].has_functions = dm->has_functions;
		maps[i].has_filenames = dm->has_filenames;
		maps[i].has_line_numbers = dm->has_line_numbers;
	}
	/* pprof names the profile after the first mapping: by id, that is
	 * [python] whenever there is Python code. */
	qsort(maps, d.nmaps, sizeof(*maps), cmp_mapping);
	for (size_t i = 0; i < d.nmaps; i++)
		map_ptrs[i] = &maps[i];
	for (size_t i = 0; i < d.nlocs; i++) {
		const struct dict_location *dl = &d.locs[i];
		perftools__profiles__location__init(&locs[i]);
		locs[i].id = dl->id;
		locs[i].mapping_id = dl->mapping_id;
		locs[i].address = dl->address;
		if (dl->function_id) {
			perftools__profiles__line__init(&lines[i]);
			lines[i].function_id = dl->function_id;
			lines[i].line = dl->line;
			line_ptrs[i] = &lines[i];
			locs[i].n_line = 1;
			locs[i].line = &line_ptrs[i];
		}
		loc_ptrs[i] = &locs[i];
	}

	Perftools__Profiles__ValueType st_samples = PERFTOOLS__PROFILES__VALUE_TYPE__INIT;
	Perftools__Profiles__ValueType st_cpu = PERFTOOLS__PROFILES__VALUE_TYPE__INIT;
	Perftools__Profiles__ValueType period_type = PERFTOOLS__PROFILES__VALUE_TYPE__INIT;
	st_samples.type = DICT_S_SAMPLES;
	st_samples.unit = DICT_S_COUNT;
	st_cpu.type = DICT_S_CPU;
	st_cpu.unit = DICT_S_NS;
	Perftools__Profiles__ValueType st_wall = PERFTOOLS__PROFILES__VALUE_TYPE__INIT;
	st_wall.type = DICT_S_WALL;
	st_wall.unit = DICT_S_NS;
	period_type.type = DICT_S_CPU;
	period_type.unit = DICT_S_NS;
	Perftools__Profiles__ValueType *sample_types[] = {&st_samples, &st_cpu, &st_wall};

	Perftools__Profiles__Profile prof = PERFTOOLS__PROFILES__PROFILE__INIT;
	prof.n_sample_type = nvalues;
	prof.sample_type = sample_types;
	prof.n_sample = ns;
	prof.sample = sample_ptrs;
	prof.n_mapping = d.nmaps;
	prof.mapping = map_ptrs;
	prof.n_location = d.nlocs;
	prof.location = loc_ptrs;
	prof.n_function = d.nfns;
	prof.function = fn_ptrs;
	prof.n_string_table = d.nstrings;
	prof.string_table = d.strings;
	prof.time_nanos = sat_i64(profile_start_ns(p));
	prof.duration_nanos = sat_i64(profile_duration_ns(p));
	prof.period_type = &period_type;
	prof.period = sat_i64(period);
	/* A string index, not a sample_type index. pprof would pick the last
	 * type (cpu) anyway; saying so keeps that true if types are added. */
	prof.default_sample_type = wall ? DICT_S_WALL : DICT_S_CPU;

	err = write_gzip(&prof.base, out);

cleanup:
	dict_free(&d);
	free(samples);
	free(sample_ptrs);
	free(labels);
	free(label_ptrs);
	free(locids);
	free(values);
	free(fns);
	free(fn_ptrs);
	free(maps);
	free(map_ptrs);
	free(locs);
	free(loc_ptrs);
	free(lines);
	free(line_ptrs);
	return err;
}
