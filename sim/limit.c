/* The memory limit under the timeline scheduler, part two: the Lagrangian bound over blocks
 * of rotations, from the tasks' byte curves of limit_curve.c (docs/simulator.md). */
#include "limit_internal.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

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
static double least(double (*f)(const void *, double, double), const void *ctx, double y, double hi,
		    int iters)
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
	double c2[WG + 1]
		 [RG]; /* least extra cost / mu of a turn with work cap*j/WG: first uses after a boundary */
	double Q[RG];  /* cost / mu of one cycle's reuses at their solo gaps */
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
			int64_t ge = g->start + g->len; /* the next use starts here */
			int64_t lo =
			    ge - w + 1 > g->start ? ge - w + 1 : g->start; /* runs from tau reach it */
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
	const double
	    *capped; /* work a task left out of the relaxation does in the window at most (0: kept in) */
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
	double v = lambda * (c->window + c->inflight) +
		   mu * (c->capacity * c->window + r * (c->link * c->window + c->capacity));
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
			g[i][j] =
			    0; /* a task without units gains nothing from any turn (the edges read it) */
		if (t->unit_ns <= 0)
			continue;
		double q = tb->Q[c->k];
		double lin = c->w[i] - lambda / t->streams - mu * q / t->unit_ns;
		off[i] = lin > 0;
		step[i] = t->turn_cap / WG / t->streams; /* wall time per grid step at least */
		int first = 0;				 /* the first j whose turn outlasts a slice */
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
		best =
		    fmin(best, least(reuse_inner, c, lhi, lhi / (c->capacity > 1e6 ? c->capacity : 1e6), 50));
	return best / c->window;
}

void gmx_limit_bound(const gmx_limit_task_t *t, uint32_t n, double slice_ns, double inflight, double capacity,
		     double link, double window_ns, gmx_limit_result_t *out)
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
		inflight_all +=
		    (t[i].inflight < t[i].turn_cap ? t[i].inflight : t[i].turn_cap) / t[i].streams;
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
			reuse_ctx_t c = {t,
					 tab,
					 w,
					 cw,
					 n,
					 0,
					 floor(window_ns / (n_steady * slice_ns)) + 1,
					 window_ns,
					 capacity,
					 link,
					 inflight_all,
					 slice_ns};
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
				double inflight_work =
				    t[i].inflight < t[i].turn_cap ? t[i].inflight : t[i].turn_cap;
				edge +=
				    (over > 0 ? over * (K + 1) * t[i].turn_cap : 0) + w[i] * inflight_work;
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
