/* Imported allocations as the caching allocator packs them (include/gpumux/devalloc.h):
 * a trace's tensors become blocks of the allocator's segments, and the workload's
 * buffers become those segments (one cudaMalloc each), as the cnn generator lays
 * out its tensors. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpumux/devalloc.h"
#include "trace_internal.h"

void gmx_trace__live_at_start(const gmx_workload_t *w, uint8_t *live)
{
	uint8_t *seen = live; /* bit 1: seen; bit 0: live */
	memset(live, 0, w->n_buffers);
	for (uint32_t i = 0; i < w->n_ops; i++) {
		const gmx_op_t *o = &w->ops[i];
		if ((o->kind == GMX_OP_ALLOC || o->kind == GMX_OP_FREE) && o->buffer < w->n_buffers &&
		    !(seen[o->buffer] & 2))
			seen[o->buffer] = (uint8_t)(2 | (o->kind == GMX_OP_FREE));
	}
	for (uint32_t b = 0; b < w->n_buffers; b++)
		live[b] = !(seen[b] & 2) || (seen[b] & 1);
}

/* Where each buffer sits while the workload's ALLOC and FREE ops are replayed. */
typedef struct placer {
	gmx_devalloc_t a;
	uint32_t *seg;
	uint64_t *off;
	uint8_t *in;	 /* placed and not released */
	uint8_t *placed; /* placed at least once: seg/off hold its latest block */
	uint32_t *first; /* per segment: the buffer whose block opened it */
	uint32_t cap_first;
} placer_t;

static void placer_free(placer_t *p)
{
	gmx_devalloc_free(&p->a);
	free(p->seg);
	free(p->off);
	free(p->in);
	free(p->placed);
	free(p->first);
}

static int place(placer_t *p, const gmx_workload_t *w, uint32_t b)
{
	uint32_t before = p->a.n_seg;
	int rc = gmx_devalloc_alloc(&p->a, w->buffers[b].size, &p->seg[b], &p->off[b]);
	if (rc)
		return rc;
	p->in[b] = p->placed[b] = 1;
	if (p->a.n_seg > before) {
		if (p->a.n_seg > p->cap_first) {
			uint32_t nc = 2 * p->a.n_seg + 16;
			uint32_t *q = realloc(p->first, nc * sizeof(*q));
			if (!q)
				return -ENOMEM;
			p->first = q;
			p->cap_first = nc;
		}
		p->first[p->a.n_seg - 1] = b;
	}
	return 0;
}

/* Places the buffers live from the start, in index order. 0 or -ENOMEM. */
static int placer_init(placer_t *p, const gmx_workload_t *w)
{
	memset(p, 0, sizeof(*p));
	gmx_devalloc_init(&p->a);
	size_t n = (size_t)w->n_buffers + 1;
	p->seg = malloc(n * sizeof(*p->seg));
	p->off = malloc(n * sizeof(*p->off));
	p->in = calloc(n, 1);
	p->placed = calloc(n, 1);
	if (!p->seg || !p->off || !p->in || !p->placed) {
		placer_free(p);
		return -ENOMEM;
	}
	gmx_trace__live_at_start(w, p->in);
	int rc = 0;
	for (uint32_t b = 0; !rc && b < w->n_buffers; b++) {
		uint8_t live = p->in[b];
		p->in[b] = 0;
		if (live)
			rc = place(p, w, b);
	}
	if (rc)
		placer_free(p);
	return rc;
}

/* Applies an ALLOC or FREE op (an ALLOC of a placed buffer and a FREE of one
 * not placed change nothing). 0 or -ENOMEM. */
static int placer_op(placer_t *p, const gmx_workload_t *w, const gmx_op_t *o)
{
	uint32_t b = o->buffer;
	if (b >= w->n_buffers)
		return 0;
	if (o->kind == GMX_OP_ALLOC && !p->in[b])
		return place(p, w, b);
	if (o->kind == GMX_OP_FREE && p->in[b]) {
		gmx_devalloc_release(&p->a, p->seg[b], p->off[b]);
		p->in[b] = 0;
	}
	return 0;
}

int gmx_trace__packed_reserved(const gmx_workload_t *w, uint64_t *out)
{
	*out = 0;
	placer_t p;
	int rc = placer_init(&p, w);
	if (rc)
		return rc;
	for (uint32_t i = 0; !rc && i < w->n_ops; i++)
		rc = placer_op(&p, w, &w->ops[i]);
	if (!rc)
		*out = gmx_devalloc_reserved(&p.a);
	placer_free(&p);
	return rc;
}

/* Names segment s after what its first block held: the memory held before the
 * trace keeps its name; otherwise the pool. */
static void seg_name(char *name, size_t len, uint32_t s, uint64_t size, const char *first)
{
	if (first && !strcmp(first, "held-before-trace"))
		snprintf(name, len, "held-before-trace");
	else
		snprintf(name, len, "%s_seg%u", size == GMX_DEVALLOC_SMALL_SEG ? "small" : "large", s);
}

int gmx_trace_pack(gmx_workload_t *w, char *err, size_t err_len)
{
	if (!w->n_buffers)
		return 0;
	placer_t p;
	int rc = placer_init(&p, w);
	if (rc) {
		snprintf(err, err_len, "packing allocations: out of memory");
		return rc;
	}
	for (uint32_t i = 0; !rc && i < w->n_ops; i++) {
		gmx_op_t *o = &w->ops[i];
		if (o->kind == GMX_OP_ALLOC || o->kind == GMX_OP_FREE) {
			rc = placer_op(&p, w, o);
			continue;
		}
		/* a buffer touched before it was ever placed takes a block now */
		if (o->buffer < w->n_buffers && !p.placed[o->buffer])
			rc = place(&p, w, o->buffer);
		if (!rc && o->buffer < w->n_buffers)
			o->buffer = p.seg[o->buffer];
		for (uint32_t r = 0; !rc && r < o->region_count; r++) {
			gmx_region_t *g = &w->regions[o->region_first + r];
			if (!p.placed[g->buffer] && (rc = place(&p, w, g->buffer)))
				break;
			g->offset += p.off[g->buffer];
			g->buffer = p.seg[g->buffer];
		}
	}
	if (rc) {
		/* regions may be half rewritten: the caller frees the workload */
		snprintf(err, err_len, "packing allocations: out of memory");
		placer_free(&p);
		return rc;
	}
	/* The ops without ALLOC and FREE: their host time goes to the next op, and
	 * what is left after the last op to a final sync (the unit's end waits for
	 * the device anyway, so it changes nothing but keeps the host's time). */
	uint32_t n = 0;
	uint64_t carry = 0;
	for (uint32_t i = 0; i < w->n_ops; i++) {
		gmx_op_t o = w->ops[i];
		if (o.kind == GMX_OP_ALLOC || o.kind == GMX_OP_FREE) {
			carry += o.think_ns;
			continue;
		}
		o.think_ns += carry;
		carry = 0;
		w->ops[n++] = o;
	}
	w->n_ops = n;
	/* The segments replace the buffers, in creation order (a region's buffer is its segment). */
	char **names = malloc((w->n_buffers + 1) * sizeof(*names));
	if (!names) {
		snprintf(err, err_len, "packing allocations: out of memory");
		placer_free(&p);
		return -ENOMEM;
	}
	uint32_t old_n = w->n_buffers;
	for (uint32_t b = 0; b < old_n; b++)
		names[b] = w->buffers[b].name;
	w->n_buffers = 0;
	for (uint32_t s = 0; !rc && s < p.a.n_seg; s++) {
		char name[64];
		seg_name(name, sizeof(name), s, p.a.seg_size[s], names[p.first[s]]);
		rc = gmx_workload_add_buffer(w, 0, p.a.seg_size[s], name, NULL);
	}
	for (uint32_t b = 0; b < old_n; b++)
		free(names[b]);
	free(names);
	if (!rc && carry) {
		gmx_op_t sync = {.kind = GMX_OP_SYNC, .stream = -1, .think_ns = carry, .buffer = UINT32_MAX};
		rc = gmx_workload_add_op(w, &sync, NULL);
	}
	placer_free(&p);
	if (rc)
		snprintf(err, err_len, "packing allocations: out of memory");
	return rc;
}
