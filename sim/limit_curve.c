/* The memory limit under the timeline scheduler, part one: each task's byte curve (how many
 * bytes a window of its solo work can leave untouched), its host gaps and its stream's work in
 * a slice (docs/simulator.md). The bound over the tasks' curves is in limit.c. */
#include "limit_internal.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return (x > y) - (x < y);
}

/* First index of v[0..n) not below x (v sorted). */
static uint32_t lower(const uint64_t *v, uint32_t n, uint64_t x)
{
	uint32_t lo = 0, hi = n;
	while (lo < hi) {
		uint32_t mid = lo + (hi - lo) / 2;
		if (v[mid] < x)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

/* A gap's key in one of the sweep's orders. */
typedef struct keyed {
	int64_t key;
	uint64_t gap;
} keyed_t;

static int cmp_keyed(const void *a, const void *b)
{
	const keyed_t *x = a, *y = b;
	if (x->key != y->key)
		return x->key < y->key ? -1 : 1;
	return (x->gap > y->gap) - (x->gap < y->gap);
}

/* The gaps in the two orders every window's sweep walks (sorted once per curve), and scratch
 * for the parts that wrap past the cycle's end. */
typedef struct sweep {
	keyed_t *by_start; /* key: start */
	keyed_t *by_end;   /* key: start + len (the next use) */
	keyed_t *wrap;	   /* scratch: key, where a wrapped part stops covering tau */
} sweep_t;

/* The most bytes a window [tau, tau + W) of the cycle can avoid touching: the bytes whose
 * every use lies outside it, maximised over tau. A gap at least W long avoids the window for
 * tau in [start, start + len - W]: on the cycle [start, min(that, U - 1)] and, when it wraps,
 * [0, min(that - U, start - 1)]. The most bytes covering one tau is reached at a tau where some
 * interval begins: the bytes of the intervals begun at or before it less those ended before it
 * (integer sums: the same figure in any order). */
static uint64_t most_avoided(const gap_t *g, uint64_t n, int64_t U, int64_t W, const sweep_t *sw)
{
	uint64_t nw = 0;
	int64_t cur = 0, best = 0;
	for (uint64_t i = 0; i < n; i++) {
		if (g[i].len < W)
			continue;
		int64_t hi = g[i].start + g[i].len - W;
		if (hi >= U) { /* the gap wraps past the cycle's end: its part from 0 */
			int64_t e = hi - U < g[i].start - 1 ? hi - U : g[i].start - 1;
			sw->wrap[nw++] = (keyed_t){e + 1, i};
			cur += (int64_t)g[i].bytes;
		}
	}
	qsort(sw->wrap, nw, sizeof(*sw->wrap), cmp_keyed);
	uint64_t i = 0, j = 0, k = 0;
	int64_t x = 0; /* tau: 0, then each start of a gap at least W long */
	for (;;) {
		for (; j < n && (sw->by_end[j].key - W + 1 < U ? sw->by_end[j].key - W + 1 : U) < x; j++)
			if (g[sw->by_end[j].gap].len >= W)
				cur -= (int64_t)g[sw->by_end[j].gap].bytes;
		for (; k < nw && sw->wrap[k].key < x; k++)
			cur -= (int64_t)g[sw->wrap[k].gap].bytes;
		for (; i < n && sw->by_start[i].key <= x; i++)
			if (g[sw->by_start[i].gap].len >= W)
				cur += (int64_t)g[sw->by_start[i].gap].bytes;
		if (cur > best)
			best = cur;
		while (i < n && g[sw->by_start[i].gap].len < W)
			i++;
		if (i == n)
			break;
		x = sw->by_start[i].key;
	}
	return (uint64_t)best;
}

int gmx_limit_curve(const gmx_workload_t *w, const int64_t *dur, gmx_limit_task_t *t)
{
	int rc = -ENOMEM;
	uint32_t nb = w->n_buffers;
	int64_t *cum = calloc((size_t)w->n_ops + 1, sizeof(int64_t));
	uint32_t *bnd_off = calloc((size_t)nb + 2, sizeof(uint32_t));
	uint64_t *bnd = NULL, *use_off = NULL;
	uint32_t *use_op = NULL, *last = NULL, *fill = NULL;
	gap_t *gaps = NULL;
	sweep_t sw = {NULL, NULL, NULL};
	int32_t streams[64];
	uint32_t n_streams = 0;
	if (!cum || !bnd_off)
		goto out;
	for (uint32_t i = 0; i < w->n_ops; i++) {
		cum[i + 1] = cum[i] + dur[i];
		if (dur[i] > 0) {
			uint32_t s = 0;
			while (s < n_streams && streams[s] != w->ops[i].stream)
				s++;
			if (s == n_streams && n_streams < 64)
				streams[n_streams++] = w->ops[i].stream;
		}
	}
	int64_t U = cum[w->n_ops];
	t->unit_ns = (double)U;
	t->streams = n_streams ? n_streams : 1;
	t->unit_bytes = 0;
	for (int i = 0; i <= GMX_LIMIT_GRID; i++)
		t->D[i] = 0;
		/* Kernels with solo work: what every policy must make resident while they run. */
#define COUNTS(op) ((op)->kind == GMX_OP_KERNEL && dur[(op)-w->ops] > 0)
	for (uint32_t i = 0; i < w->n_ops; i++)
		if (COUNTS(&w->ops[i]))
			for (uint32_t r = 0; r < w->ops[i].region_count; r++)
				bnd_off[w->regions[w->ops[i].region_first + r].buffer + 2] += 2;
	for (uint32_t b = 0; b < nb; b++)
		bnd_off[b + 2] += bnd_off[b + 1];
	uint32_t total_bnd = bnd_off[nb + 1];
	bnd = malloc(((size_t)total_bnd + 1) * sizeof(uint64_t));
	if (!bnd)
		goto out;
	for (uint32_t i = 0; i < w->n_ops; i++)
		if (COUNTS(&w->ops[i]))
			for (uint32_t r = 0; r < w->ops[i].region_count; r++) {
				const gmx_region_t *g = &w->regions[w->ops[i].region_first + r];
				bnd[bnd_off[g->buffer + 1]++] = g->offset;
				bnd[bnd_off[g->buffer + 1]++] = g->offset + g->length;
			}
	/* bnd_off[b] .. bnd_off[b + 1] now hold buffer b's boundaries: sort, dedupe in place. */
	uint32_t *seg_base = calloc((size_t)nb + 1, sizeof(uint32_t)),
		 *nbnd = calloc((size_t)nb + 1, sizeof(uint32_t));
	if (!seg_base || !nbnd) {
		free(seg_base);
		free(nbnd);
		goto out;
	}
	uint32_t n_seg = 0;
	for (uint32_t b = 0; b < nb; b++) {
		uint64_t *v = bnd + bnd_off[b];
		uint32_t k = bnd_off[b + 1] - bnd_off[b], u = 0;
		qsort(v, k, sizeof(*v), cmp_u64);
		for (uint32_t i = 0; i < k; i++)
			if (!u || v[u - 1] != v[i])
				v[u++] = v[i];
		nbnd[b] = u;
		seg_base[b] = n_seg;
		n_seg += u ? u - 1 : 0;
	}
	/* Uses of each elementary segment (a byte range every region covers whole or not at all). */
	use_off = calloc((size_t)n_seg + 2, sizeof(uint64_t));
	last = malloc(((size_t)n_seg + 1) * sizeof(uint32_t));
	if (!use_off || !last) {
		free(seg_base);
		free(nbnd);
		goto out;
	}
	for (int pass = 0; pass < 2; pass++) {
		memset(last, 0xff, ((size_t)n_seg + 1) * sizeof(uint32_t));
		for (uint32_t i = 0; i < w->n_ops; i++) {
			if (!COUNTS(&w->ops[i]))
				continue;
			for (uint32_t r = 0; r < w->ops[i].region_count; r++) {
				const gmx_region_t *g = &w->regions[w->ops[i].region_first + r];
				const uint64_t *v = bnd + bnd_off[g->buffer];
				uint32_t a = lower(v, nbnd[g->buffer], g->offset);
				uint32_t e = lower(v, nbnd[g->buffer], g->offset + g->length);
				for (uint32_t s = seg_base[g->buffer] + a; s < seg_base[g->buffer] + e; s++) {
					if (last[s] == i)
						continue;
					last[s] = i;
					if (pass == 0)
						use_off[s + 2]++;
					else
						use_op[use_off[s + 1]++] = i;
				}
			}
		}
		if (pass == 0) {
			for (uint32_t s = 0; s < n_seg; s++)
				use_off[s + 2] += use_off[s + 1];
			use_op = malloc((use_off[n_seg + 1] + 1) * sizeof(uint32_t));
			if (!use_op) {
				free(seg_base);
				free(nbnd);
				goto out;
			}
		}
	}
	/* Gaps: the stretches of the cycle in which a segment is not used. */
	uint64_t n_uses = use_off[n_seg], n_gaps = 0;
	gaps = malloc((n_uses + 1) * sizeof(gap_t));
	sw.by_start = malloc((n_uses + 1) * sizeof(keyed_t));
	sw.by_end = malloc((n_uses + 1) * sizeof(keyed_t));
	sw.wrap = malloc((n_uses + 1) * sizeof(keyed_t));
	if (!gaps || !sw.by_start || !sw.by_end || !sw.wrap) {
		free(seg_base);
		free(nbnd);
		goto out;
	}
	uint64_t F = 0;
	for (uint32_t b = 0; b < nb; b++)
		for (uint32_t k = 0; k + 1 < nbnd[b]; k++) {
			uint32_t s = seg_base[b] + k;
			uint64_t lo = use_off[s], hi = use_off[s + 1];
			if (lo == hi)
				continue;
			const uint64_t *v = bnd + bnd_off[b];
			uint64_t bytes = v[k + 1] - v[k];
			F += bytes;
			for (uint64_t j = lo; j < hi; j++) {
				uint32_t op = use_op[j];
				int64_t end = cum[op + 1];
				int64_t next = j + 1 < hi ? cum[use_op[j + 1]] : cum[use_op[lo]] + U;
				if (next > end)
					gaps[n_gaps++] = (gap_t){end % U, next - end, bytes};
			}
		}
	free(seg_base);
	free(nbnd);
	t->unit_bytes = (double)F;
	t->D[GMX_LIMIT_GRID] = (double)F;
	t->gaps = gaps;
	t->n_gaps = n_gaps;
	for (uint64_t i = 0; i < n_gaps; i++) {
		sw.by_start[i] = (keyed_t){gaps[i].start, i};
		sw.by_end[i] = (keyed_t){gaps[i].start + gaps[i].len, i};
	}
	qsort(sw.by_start, n_gaps, sizeof(keyed_t), cmp_keyed);
	qsort(sw.by_end, n_gaps, sizeof(keyed_t), cmp_keyed);
	for (int i = 1; i < GMX_LIMIT_GRID && U > 0; i++) {
		int64_t W = (int64_t)((double)U * i / GMX_LIMIT_GRID);
		if (W < 1)
			W = 1;
		t->D[i] = (double)(F - most_avoided(gaps, n_gaps, U, W, &sw));
	}
	gaps = NULL; /* kept in t */
	rc = 0;
#undef COUNTS
out:
	free(cum);
	free(bnd_off);
	free(bnd);
	free(use_off);
	free(use_op);
	free(last);
	free(fill);
	free(gaps);
	free(sw.by_start);
	free(sw.by_end);
	free(sw.wrap);
	return rc;
}

void gmx_limit_task_free(gmx_limit_task_t *t)
{
	free(t->gaps);
	t->gaps = NULL;
	t->n_gaps = 0;
}

int64_t gmx_limit_host_gap(const gmx_workload_t *w)
{
	int64_t worst = 0, run = 0;
	int seen = 0;
	/* Two passes over the cycle so that a gap across the unit's end is summed whole. */
	for (uint32_t k = 0; k < 2 * w->n_ops; k++) {
		const gmx_op_t *op = &w->ops[k % w->n_ops];
		run += (int64_t)op->think_ns;
		int gpu = op->kind == GMX_OP_KERNEL || op->kind == GMX_OP_COPY_H2D ||
			  op->kind == GMX_OP_COPY_D2H || op->kind == GMX_OP_MEMSET ||
			  op->kind == GMX_OP_COPY_D2D;
		if (gpu) {
			if (seen && run > worst)
				worst = run;
			seen = 1;
			run = 0;
		}
	}
	return seen ? worst : INT64_MAX;
}

double gmx_limit_burst(const gmx_workload_t *w, const int64_t *dur, int64_t grace_ns)
{
	double best = 0, cur = 0;
	int synced = 1, seen_gap = 0; /* the unit's end waits for everything, as a sync does */
	int64_t think = 0;
	int32_t stream = -2;
	int one_stream = 1;
	for (uint32_t k = 0; k < w->n_ops; k++)
		if (dur[k] > 0) {
			one_stream &= stream == -2 || stream == w->ops[k].stream;
			stream = w->ops[k].stream;
		}
	for (uint32_t k = 0; k < 2 * w->n_ops; k++) {
		uint32_t i = k % w->n_ops;
		const gmx_op_t *op = &w->ops[i];
		if (i == 0) { /* a new unit: the host waited for the last one's work */
			synced = 1;
			think = 0;
		}
		if (synced)
			think += (int64_t)op->think_ns;
		if (op->kind == GMX_OP_SYNC && (op->stream < 0 || one_stream)) {
			synced = 1;
			think = 0;
		}
		if (dur[i] <= 0)
			continue;
		if (synced && think > grace_ns) { /* the device sat idle past the grace: the turn ended */
			seen_gap = 1;
			cur = 0;
		}
		synced = 0;
		think = 0;
		cur += (double)dur[i];
		if (k >= w->n_ops && cur > best)
			best = cur;
	}
	return seen_gap ? best : INFINITY;
}

double gmx_limit_stream_work(const gmx_workload_t *w, const int64_t *dur, int64_t gap_ns, double budget_ns)
{
	uint32_t m = 0;
	for (uint32_t k = 0; k < w->n_ops; k++)
		m += dur[k] > 0;
	if (!m || budget_ns <= 0)
		return 0;
	/* Prefix sums of work and of cost (work plus the gap before it) over the GPU ops, twice round. */
	double *pw = malloc((2 * (size_t)m + 1) * sizeof(double)),
	       *pc = malloc((2 * (size_t)m + 1) * sizeof(double));
	if (!pw || !pc) {
		free(pw);
		free(pc);
		return -1;
	}
	pw[0] = pc[0] = 0;
	for (uint32_t j = 0, k = 0; j < 2 * m; k = (k + 1) % w->n_ops) {
		if (dur[k] <= 0)
			continue;
		pw[j + 1] = pw[j] + (double)dur[k];
		pc[j + 1] = pc[j] + (double)dur[k] + (double)gap_ns;
		j++;
	}
	double U = pw[m], Uc = pc[m], best = 0;
	for (uint32_t j = 0; j < m; j++) {
		double b = budget_ns + (double)gap_ns; /* the run's first op waits for no gap of its own */
		double q = floor(b / Uc), rem = b - q * Uc;
		uint32_t lo = 0, hi = m; /* the most ops e < m from j whose cost fits in rem */
		while (lo < hi) {
			uint32_t mid = lo + (hi - lo + 1) / 2;
			if (pc[j + mid] - pc[j] <= rem)
				lo = mid;
			else
				hi = mid - 1;
		}
		double work = q * U + pw[j + lo] - pw[j];
		if (work > best)
			best = work;
	}
	free(pw);
	free(pc);
	return best < budget_ns ? best : budget_ns;
}
