/* wire.c - packed samples: see wire.h. */
#include <string.h>

#include "core/wire.h"

/* The arrays of a sample in wire order, with the bytes each holds. */
struct part {
	size_t off, len;
};

static int parts(const struct tp_sample *s, struct part p[5])
{
	if (s->nkstack > TP_KSTACK_MAX || s->nustack > TP_USTACK_MAX || s->nframes > TP_MAX_FRAMES)
		return -1;
	p[0] = (struct part){offsetof(struct tp_sample, kstack), (size_t)s->nkstack * 8};
	p[1] = (struct part){offsetof(struct tp_sample, anchored), TP_UWORDS(s->nustack) * 8u};
	p[2] = (struct part){offsetof(struct tp_sample, exact), TP_UWORDS(s->nustack) * 8u};
	p[3] = (struct part){offsetof(struct tp_sample, ustack), (size_t)s->nustack * 8};
	p[4] = (struct part){offsetof(struct tp_sample, frames),
			     (size_t)s->nframes * sizeof(struct tp_frame)};
	return 0;
}

size_t wire_pack(const struct tp_sample *s, void *out)
{
	struct part p[5];
	size_t at = TP_SAMPLE_HDR;

	if (parts(s, p))
		return 0;
	memcpy(out, s, TP_SAMPLE_HDR);
	for (int i = 0; i < 5; i++) {
		memcpy((char *)out + at, (const char *)s + p[i].off, p[i].len);
		at += p[i].len;
	}
	return at;
}

int wire_unpack(const void *wire, size_t len, struct tp_sample *out)
{
	struct part p[5];
	size_t at = TP_SAMPLE_HDR;

	if (len < TP_SAMPLE_HDR)
		return -1;
	memcpy(out, wire, TP_SAMPLE_HDR);
	if (parts(out, p) || len != tp_sample_wire_bytes(out))
		return -1;
	for (int i = 0; i < 5; i++) {
		memcpy((char *)out + p[i].off, (const char *)wire + at, p[i].len);
		at += p[i].len;
	}
	return 0;
}
