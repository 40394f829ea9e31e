/* The memory limit under the timeline scheduler: the byte curves of the tasks
 * and the Lagrangian bound over blocks of rotations (docs/simulator.md). */
#include "limit.h"

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

typedef struct gmx_limit_gap {
	int64_t start, len; /* on the unit's cycle of solo work, start in [0, U) */
	uint64_t bytes;
} gap_t;

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
#define COUNTS(op) ((op)->kind == GMX_OP_KERNEL && dur[(op) - w->ops] > 0)
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
	uint32_t *seg_base = calloc((size_t)nb + 1, sizeof(uint32_t)), *nbnd = calloc((size_t)nb + 1, sizeof(uint32_t));
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
		int gpu = op->kind == GMX_OP_KERNEL || op->kind == GMX_OP_COPY_H2D || op->kind == GMX_OP_COPY_D2H ||
			  op->kind == GMX_OP_MEMSET || op->kind == GMX_OP_COPY_D2D;
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

/* max over 0 <= W <= wmax of c W - mu D(W), from above: D is non-decreasing, so on
 * (W_i, W_i+1] it is at least D[i]. */
static double best_gain(const gmx_limit_task_t *t, double c, double mu, double wmax)
{
	if (c <= 0 || wmax <= 0)
		return 0;
	double best = 0, U = t->unit_ns;
	for (int i = 0; i < GMX_LIMIT_GRID; i++) {
		double wi = U * i / GMX_LIMIT_GRID;
		if (wi >= wmax)
			break;
		double hi = U * (i + 1) / GMX_LIMIT_GRID;
		double v = c * (hi < wmax ? hi : wmax) - mu * t->D[i];
		if (v > best)
			best = v;
	}
	if (wmax > U) {
		double v = c * wmax - mu * t->unit_bytes;
		if (v > best)
			best = v;
	}
	return best;
}

typedef struct block {
	const gmx_limit_task_t *t;
	const double *w; /* weights in use */
	uint32_t n;
	double K, rmin, capacity, link;
} block_t;

/* The dual of one block of K rotations at (lambda, mu): an upper bound on its objective per ns. */
static double dual(const block_t *b, double lambda, double mu)
{
	double h = 0;
	for (uint32_t i = 0; i < b->n; i++)
		h += best_gain(&b->t[i], b->w[i] - lambda / b->t[i].streams, mu, b->K * b->t[i].turn_cap);
	return lambda + mu * b->link + (mu * b->capacity + h) / b->rmin;
}

/* The least value of f(ctx, x, y) found over x in [0, hi] by ternary search, the ends included
 * (f is convex in x; any value found is a bound all the same). */
static double least(double (*f)(const void *, double, double), const void *ctx, double y, double hi, int iters)
{
	double lo = 0, top = hi;
	for (int it = 0; it < iters; it++) {
		double m1 = lo + (hi - lo) / 3, m2 = hi - (hi - lo) / 3;
		if (f(ctx, m1, y) <= f(ctx, m2, y))
			hi = m2;
		else
			lo = m1;
	}
	return fmin(f(ctx, lo, y), fmin(f(ctx, top, y), f(ctx, 0, y)));
}

static double block_dual(const void *b, double lambda, double mu)
{
	return dual(b, lambda, mu);
}

static double block_inner(const void *b, double mu, double lhi)
{
	return least(block_dual, b, mu, lhi, 60); /* the least over lambda */
}

/* rho_K: the least dual value found (any point of the dual bounds the block). */
static double block_rate(const block_t *b, double lhi)
{
	return least(block_inner, b, lhi, lhi / (b->link > 1e-3 ? b->link : 1e-3), 60);
}

/* The reuse bound (docs/simulator.md): every reuse of a byte costs the smaller of keeping it
 * resident through the gap (space-time, at most capacity x window in all) and loading it again
 * (link, at most link x window plus what was resident at the start). With mu the price of
 * space-time and r = mu_link / mu the gap beyond which a reload is the cheaper, a gap of wall
 * length g costs mu * min(g, r). A gap of solo work d lasts at least d / streams, and one that
 * crosses a turn boundary of its task at least G more (the other steady tasks' turns). */
#define RG 25 /* thresholds r */
#define WG 32 /* turn-work grid */

typedef struct reuse_tab {
	double r[RG];
	double c2[WG + 1][RG]; /* least extra cost / mu of a turn with work cap*j/WG: first uses after a boundary */
	double Q[RG];	       /* cost / mu of one cycle's reuses at their solo gaps */
} reuse_tab_t;

typedef struct rev {
	int64_t at;
	uint32_t gap;
	int32_t sign;
} rev_t;

/* Sorts ev[0..n) by at, stably (events at the same time keep the order they were made in, which
 * fixes the order of the floating-point sums over them): LSD radix, 11 bits a pass, through tmp
 * (as large). Returns the array that holds the sorted events (ev or tmp). */
static rev_t *sort_rev(rev_t *ev, rev_t *tmp, uint64_t n)
{
	if (n < 2)
		return ev;
	int64_t lo = ev[0].at;
	int64_t hi = lo;
	for (uint64_t i = 1; i < n; i++) {
		lo = ev[i].at < lo ? ev[i].at : lo;
		hi = ev[i].at > hi ? ev[i].at : hi;
	}
	uint64_t span = (uint64_t)hi - (uint64_t)lo;
	for (unsigned shift = 0; shift < 64 && (shift == 0 || span >> shift); shift += 11) {
		uint64_t cnt[2049] = {0};
		for (uint64_t i = 0; i < n; i++)
			cnt[((((uint64_t)ev[i].at - (uint64_t)lo) >> shift) & 2047) + 1]++;
		for (int d = 0; d < 2048; d++)
			cnt[d + 1] += cnt[d];
		for (uint64_t i = 0; i < n; i++)
			tmp[cnt[(((uint64_t)ev[i].at - (uint64_t)lo) >> shift) & 2047]++] = ev[i];
		rev_t *x = ev;
		ev = tmp;
		tmp = x;
	}
	return ev;
}

static double solo_gap(const gmx_limit_task_t *t, const gap_t *g)
{
	return t->streams > 1 ? 0 : (double)g->len; /* several streams: ops may overlap the uses */
}

/* Fills tab for task t whose boundary-crossing reuses last G ns more. 0 or -ENOMEM. */
static int reuse_table(const gmx_limit_task_t *t, double G, const double *r, reuse_tab_t *tab)
{
	memset(tab, 0, sizeof(*tab));
	memcpy(tab->r, r, sizeof(tab->r));
	int64_t U = (int64_t)t->unit_ns;
	if (U <= 0 || !t->n_gaps)
		return 0;
	for (int k = 0; k < RG; k++)
		for (uint64_t i = 0; i < t->n_gaps; i++) {
			double d = solo_gap(t, &t->gaps[i]);
			tab->Q[k] += (double)t->gaps[i].bytes * (d < r[k] ? d : r[k]);
		}
	/* The cost of each gap at each threshold, gap by gap (one sweep serves every threshold). */
	uint64_t ng = t->n_gaps;
	rev_t *ev = malloc((4 * ng + 1) * sizeof(*ev)), *tmp = malloc((4 * ng + 1) * sizeof(*tmp));
	double *e = malloc((ng * RG + 1) * sizeof(double));
	if (!ev || !tmp || !e) {
		free(ev);
		free(tmp);
		free(e);
		return -ENOMEM;
	}
	for (uint64_t i = 0; i < ng; i++) {
		double d = solo_gap(t, &t->gaps[i]);
		for (int k = 0; k < RG; k++) {
			double hi = d + G < r[k] ? d + G : r[k], lo = d < r[k] ? d : r[k];
			e[i * RG + k] = (double)t->gaps[i].bytes * (hi - lo);
		}
	}
	for (int j = 1; j <= WG; j++) {
		int64_t w = (int64_t)(t->turn_cap * j / WG);
		uint64_t n = 0;
		for (uint64_t i = 0; i < ng; i++) {
			const gap_t *g = &t->gaps[i];
			int64_t ge = g->start + g->len;      /* the next use starts here */
			int64_t lo = ge - w + 1 > g->start ? ge - w + 1 : g->start; /* runs from tau reach it */
			if (lo > ge)
				continue;
			/* tau in [lo, ge], modulo U (the interval is shorter than the cycle) */
			int64_t a = lo % U, b = a + (ge - lo);
			if (a < 0)
				a += U, b += U;
			if (b < U) {
				ev[n++] = (rev_t){a, (uint32_t)i, 1};
				ev[n++] = (rev_t){b + 1, (uint32_t)i, -1};
			} else {
				ev[n++] = (rev_t){a, (uint32_t)i, 1};
				ev[n++] = (rev_t){U, (uint32_t)i, -1};
				ev[n++] = (rev_t){0, (uint32_t)i, 1};
				ev[n++] = (rev_t){b - U + 1, (uint32_t)i, -1};
			}
		}
		const rev_t *sv = sort_rev(ev, tmp, n);
		/* The least over tau of the bytes' extra cost, for every threshold at once: each
		 * threshold's sum runs over the events in the same order. */
		double cur[RG], best[RG];
		for (int k = 0; k < RG; k++)
			cur[k] = 0, best[k] = INFINITY;
		int64_t prev = 0;
		for (uint64_t i = 0; i < n;) {
			int64_t x = sv[i].at;
			if (x > prev && prev < U)
				for (int k = 0; k < RG; k++)
					best[k] = cur[k] < best[k] ? cur[k] : best[k];
			for (; i < n && sv[i].at == x; i++) {
				const double *ei = e + (uint64_t)sv[i].gap * RG;
				double sign = sv[i].sign;
				for (int k = 0; k < RG; k++)
					cur[k] += sign * ei[k];
			}
			prev = x;
		}
		for (int k = 0; k < RG; k++) {
			if (prev < U)
				best[k] = cur[k] < best[k] ? cur[k] : best[k];
			tab->c2[j][k] = best[k] < 0 || !isfinite(best[k]) ? 0 : best[k];
		}
	}
	free(ev);
	free(tmp);
	free(e);
	return 0;
}

typedef struct reuse_ctx {
	const gmx_limit_task_t *t;
	const reuse_tab_t *tab;
	const double *w;
	const double *capped; /* work a task left out of the relaxation does in the window at most (0: kept in) */
	uint32_t n;
	int k;
	double turns, window, capacity, link, inflight, slice;
} reuse_ctx_t;

/* The reuse bound's Lagrangian at (lambda, mu): an upper bound on the window's objective.
 * Each turn gains at most h (its task's best turn); a steady task's whole turns inside the
 * window last a slice each, so with theta the price of a slice's wall time they gain at most
 * max(0, h - theta S) each against theta T in all; only the two turns cut by the window's
 * edges escape that, at most the best h each. */
/* The larger of a and b (fmax without its call, in the dual's inner loops). */
static inline double mx(double a, double b)
{
	return a > b ? a : b;
}

static double reuse_dual(const reuse_ctx_t *c, double lambda, double mu)
{
	double r = c->tab[0].r[c->k];
	double v = lambda * (c->window + c->inflight) + mu * (c->capacity * c->window + r * (c->link * c->window + c->capacity));
	/* Per task: g[j] the gain of a turn with work step[i] * (j + off[i]); a steady turn lasts
	 * max(S, work / P), any other at least work / P: g0 is the best gain of the turns j < j0
	 * that last no longer than a slice (none for a task that is not steady). */
	double h[64], g[64][WG], g0[64], step[64];
	int j0[64], off[64];
	for (uint32_t i = 0; i < c->n; i++) {
		const gmx_limit_task_t *t = &c->t[i];
		const reuse_tab_t *tb = &c->tab[i];
		h[i] = g0[i] = step[i] = 0;
		j0[i] = WG;
		off[i] = 0;
		for (int j = 0; j < WG; j++)
			g[i][j] = 0; /* a task without units gains nothing from any turn (the edges read it) */
		if (t->unit_ns <= 0)
			continue;
		double q = tb->Q[c->k];
		double lin = c->w[i] - lambda / t->streams - mu * q / t->unit_ns;
		off[i] = lin > 0;
		step[i] = t->turn_cap / WG / t->streams; /* wall time per grid step at least */
		int first = 0; /* the first j whose turn outlasts a slice */
		if (t->steady) {
			double f = floor(c->slice / step[i]) - off[i] + 1;
			first = f < 0 ? 0 : f > WG ? WG : (int)f;
		}
		double hi_ = 0, lo_ = 0, a = lin * t->turn_cap / WG;
		for (int j = 0; j < WG; j++) {
			double x = a * (j + off[i]) - mu * tb->c2[j][c->k];
			g[i][j] = x;
			hi_ = mx(hi_, x);
			if (j < first)
				lo_ = hi_;
		}
		h[i] = hi_;
		g0[i] = lo_;
		j0[i] = first;
		v += mu * q;
	}
#define WALL(i, j) (c->t[i].steady ? mx(0, step[i] * ((j) + off[i]) - c->slice) : step[i] * ((j) + off[i]))
	/* theta, the price of wall time in the window: every whole turn of a steady task lasts
	 * max(S, its work / P), every other turn at least its work / P, a task left out at its
	 * cap computes that work too. Any theta >= 0 bounds; tried: 0, the breakpoints h_i / S of
	 * the steady tasks, and where the steady turns' sum of gains crosses 0 (a rotation neither
	 * gains nor loses), found by bisection: the sum decreases with theta. */
	double best = INFINITY, th_hi = 0;
	for (uint32_t i = 0; i < c->n; i++)
		if (c->t[i].steady)
			th_hi = mx(th_hi, h[i] / c->slice);
	/* Newton's method from theta = 0: the sum is convex and decreasing, so each step's tangent
	 * meets 0 at or before the root and the steps rise to it (a few, it is piecewise linear). */
	double hi = 0;
	for (int it = 0; it < 8 && th_hi > 0; it++) {
		double sum = 0, slope = 0;
		for (uint32_t i = 0; i < c->n; i++) {
			if (!c->t[i].steady)
				continue;
			double x = g0[i], wx = 0;
			for (int j = j0[i]; j < WG; j++) {
				double y = g[i][j] - hi * WALL(i, j);
				if (y > x) {
					x = y;
					wx = WALL(i, j);
				}
			}
			sum += x - hi * c->slice;
			slope += wx + c->slice;
		}
		if (sum <= 0 || slope <= 0)
			break;
		double next = hi + sum / slope;
		if (next <= hi * (1 + 1e-9))
			break;
		hi = next;
	}
	for (int cand = 0; cand < 2; cand++) {
		double theta = cand ? hi : 0, u = theta * c->window;
		/* Round robin: the whole turns of two steady tasks in the window differ in number by
		 * at most one (between two turns of one, the other takes one), so they take N or N + 1
		 * each, N <= turns, and a turn lasts a slice whatever its work: a steady task whose turn
		 * gains x < 0 at this theta still pays it N times. The sum is linear in N: N = 0,
		 * turns - 1 or turns. */
		double sum_x = 0, sum_pos = 0;
		for (uint32_t i = 0; i < c->n; i++) {
			const gmx_limit_task_t *t = &c->t[i];
			double left = t->weight - (lambda + theta) / t->streams;
			u += left > 0 ? left * c->capped[i] : 0;
			double x = g0[i];
			for (int j = j0[i]; j < WG; j++)
				x = mx(x, g[i][j] - theta * WALL(i, j));
			if (t->steady) {
				x -= theta * c->slice;
				sum_x += x;
				sum_pos += x > 0 ? x : 0;
			} else {
				u += c->turns * (x > 0 ? x : 0);
			}
		}
		u += mx(sum_pos, mx((c->turns - 1) * sum_x + sum_pos, c->turns * sum_x));
		if (u >= best)
			continue; /* the edges only add */
		/* The two turns the window's edges cut (one at each; a task that is not steady has
		 * its cut turns among c->turns already): not a slice each, but at least their work
		 * in the window. */
		double edge = 0;
		for (uint32_t i = 0; i < c->n; i++)
			for (int j = 0; c->t[i].steady && j < WG; j++)
				edge = mx(edge, g[i][j] - theta * step[i] * (j + off[i]));
		u += 2 * edge;
		best = u < best ? u : best;
	}
#undef WALL
	return v + best;
}

static double reuse_dual_v(const void *c, double lambda, double mu)
{
	return reuse_dual(c, lambda, mu);
}

static double reuse_inner(const void *c, double mu, double lhi)
{
	return least(reuse_dual_v, c, mu, lhi, 50); /* the least over lambda */
}

static double reuse_bound(reuse_ctx_t *c, double lhi)
{
	double best = INFINITY;
	for (c->k = 0; c->k < RG; c->k++)
		best = fmin(best, least(reuse_inner, c, lhi, lhi / (c->capacity > 1e6 ? c->capacity : 1e6), 50));
	return best / c->window;
}

void gmx_limit_bound(const gmx_limit_task_t *t, uint32_t n, double slice_ns, double inflight,
		     double capacity, double link, double window_ns, gmx_limit_result_t *out)
{
	(void)inflight;
	uint32_t n_steady = 0;
	for (uint32_t i = 0; i < n; i++)
		n_steady += t[i].steady != 0;
	memset(out, 0, sizeof(*out));
	out->bound = out->rotation_bound = out->reuse_bound = INFINITY;
	/* The reuse tables (they do not depend on the weights). */
	reuse_tab_t *tab = n_steady ? calloc(n, sizeof(*tab)) : NULL;
	double r[RG], inflight_all = 0;
	for (int k = 0; k < RG; k++)
		r[k] = n_steady * slice_ns * pow(2.0, (k - 12) / 1.5);
	for (uint32_t i = 0; tab && i < n; i++) {
		double G = (double)(n_steady - (t[i].steady != 0)) * slice_ns;
		if (reuse_table(&t[i], G, r, &tab[i])) {
			free(tab);
			tab = NULL;
		}
		inflight_all += (t[i].inflight < t[i].turn_cap ? t[i].inflight : t[i].turn_cap) / t[i].streams;
	}
	/* Each task capped by its host either keeps its weight in the blocks or leaves them,
	 * counted at its cap: both are bounds; the least is kept. */
	uint32_t capped[32], n_capped = 0;
	for (uint32_t i = 0; i < n && n_capped < 16; i++)
		if (t[i].window_cap >= 0 && t[i].weight > 0)
			capped[n_capped++] = i;
	for (uint32_t mask = 0; mask < (1u << n_capped); mask++) {
		double w[64], cw[64], fixed = 0, lhi = 0;
		for (uint32_t i = 0; i < n; i++) {
			w[i] = t[i].weight;
			cw[i] = 0;
		}
		for (uint32_t j = 0; j < n_capped; j++)
			if (mask & (1u << j)) {
				fixed += w[capped[j]] * t[capped[j]].window_cap;
				cw[capped[j]] = t[capped[j]].window_cap;
				w[capped[j]] = 0;
			}
		for (uint32_t i = 0; i < n; i++)
			if (w[i] * t[i].streams > lhi)
				lhi = w[i] * t[i].streams;
		/* Compute only (no block structure): every ns of the window at the best rate. */
		double best = lhi * window_ns + fixed;
		if (best / window_ns < out->bound) {
			out->bound = best / window_ns;
			out->rotations = 0;
			out->block_rate = lhi;
			out->edges = fixed / window_ns;
		}
		if (!n_steady || lhi <= 0)
			continue;
		if (tab) {
			reuse_ctx_t c = {t,	    tab,      w,    cw,		  n, 0, floor(window_ns / (n_steady * slice_ns)) + 1,
					 window_ns, capacity, link, inflight_all, slice_ns};
			double rb = reuse_bound(&c, lhi);
			if (rb < out->reuse_bound)
				out->reuse_bound = rb;
			if (rb < out->bound) {
				out->bound = rb;
				out->rotations = 0;
				out->block_rate = 0;
				out->edges = fixed / window_ns;
			}
		}
		for (uint32_t Kn = 1; Kn <= 4096; Kn = Kn < 4 ? Kn + 1 : (uint32_t)ceil(Kn * 1.5)) {
			double K = (double)Kn;
			block_t b = {t, w, n, K, K * n_steady * slice_ns, capacity, link};
			double rho = block_rate(&b, lhi);
			/* The window's edges (a partial rotation at each end, fewer than K rotations
			 * left over) gain at most what their turns do beyond rho for their time, and the
			 * ops in flight at the window's start at most their whole work. */
			double edge = 0;
			for (uint32_t i = 0; i < n; i++) {
				double over = w[i] - rho / t[i].streams;
				double inflight_work = t[i].inflight < t[i].turn_cap ? t[i].inflight : t[i].turn_cap;
				edge += (over > 0 ? over * (K + 1) * t[i].turn_cap : 0) + w[i] * inflight_work;
			}
			double total = rho * window_ns + edge + fixed;
			if (total / window_ns < out->rotation_bound)
				out->rotation_bound = total / window_ns;
			if (total / window_ns < out->bound) {
				out->bound = total / window_ns;
				out->rotations = (uint32_t)K;
				out->block_rate = rho;
				out->edges = (edge + fixed) / window_ns;
			}
			if ((K + 1) * slice_ns * n_steady > window_ns)
				break;
		}
	}
	free(tab);
}

double gmx_limit_stream_work(const gmx_workload_t *w, const int64_t *dur, int64_t gap_ns, double budget_ns)
{
	uint32_t m = 0;
	for (uint32_t k = 0; k < w->n_ops; k++)
		m += dur[k] > 0;
	if (!m || budget_ns <= 0)
		return 0;
	/* Prefix sums of work and of cost (work plus the gap before it) over the GPU ops, twice round. */
	double *pw = malloc((2 * (size_t)m + 1) * sizeof(double)), *pc = malloc((2 * (size_t)m + 1) * sizeof(double));
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
