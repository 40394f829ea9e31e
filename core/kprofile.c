/* Kernel identity and per-task kernel profiles. Pure: no I/O, no clock. */
#include "gpumux/kprofile.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

/* An ID's duration or gap "varies" when its longest exceeds its shortest by
 * this factor plus this slack; only then are per-context entries kept. The
 * extremes, not inner quantiles: a gap that is long once per request (the
 * wait for the next one) is exactly what the context must tell apart. The
 * slack ignores the jitter of launch overheads. */
#define VARY_FACTOR 1.25
#define VARY_SLACK_NS 5000

static uint64_t fnv(uint64_t h, const void *data, size_t n)
{
	const unsigned char *b = data;
	for (size_t i = 0; i < n; i++) {
		h ^= b[i];
		h *= 0x100000001b3ull;
	}
	return h;
}

uint64_t gmx_kernel_id(const char *name, const uint32_t grid[3], const uint32_t block[3], uint32_t shared_mem)
{
	uint64_t h = 0xcbf29ce484222325ull;
	if (name)
		h = fnv(h, name, strlen(name) + 1); /* the terminator separates name and numbers */
	unsigned char geo[28];
	for (int i = 0; i < 3; i++) {
		for (int k = 0; k < 4; k++) {
			geo[4 * i + k] = (unsigned char)(grid[i] >> (8 * k));
			geo[12 + 4 * i + k] = (unsigned char)(block[i] >> (8 * k));
		}
	}
	for (int k = 0; k < 4; k++)
		geo[24 + k] = (unsigned char)(shared_mem >> (8 * k));
	h = fnv(h, geo, sizeof(geo)); /* byte by byte: the same ID on every host */
	return h ? h : 1;
}

int gmx_kprof_init(gmx_kprof_t *p, const char *task)
{
	memset(p, 0, sizeof(*p));
	p->task = strdup(task ? task : "");
	return p->task ? 0 : -ENOMEM;
}

void gmx_kprof_free(gmx_kprof_t *p)
{
	for (uint32_t i = 0; i < p->n; i++) {
		free(p->e[i].name);
		free(p->e[i].dur_s);
		free(p->e[i].gap_s);
	}
	free(p->e);
	free(p->slot);
	free(p->task);
	memset(p, 0, sizeof(*p));
}

static uint32_t key_hash(uint64_t id, uint64_t prev)
{
	uint64_t h = id * 0x9e3779b97f4a7c15ull ^ (prev + 0x632be59bd9b4e019ull) * 0xbf58476d1ce4e5b9ull;
	return (uint32_t)(h ^ (h >> 32));
}

static int64_t find_index(const gmx_kprof_t *p, uint64_t id, uint64_t prev)
{
	uint32_t m = p->memo[prev != 0];
	if (m && m <= p->n && p->e[m - 1].id == id && p->e[m - 1].prev == prev)
		return m - 1;
	if (!p->cap)
		return -1;
	for (uint32_t s = key_hash(id, prev) & (p->cap - 1);; s = (s + 1) & (p->cap - 1)) {
		uint32_t v = p->slot[s];
		if (!v)
			return -1;
		if (p->e[v - 1].id == id && p->e[v - 1].prev == prev)
			return v - 1;
	}
}

static void slot_insert(uint32_t *slot, uint32_t cap, uint32_t h, uint32_t value)
{
	uint32_t s = h & (cap - 1);
	while (slot[s])
		s = (s + 1) & (cap - 1);
	slot[s] = value;
}

/* Appends a zeroed entry for (id, prev); its index in *out. */
static int add_entry(gmx_kprof_t *p, uint64_t id, uint64_t prev, uint32_t *out)
{
	if (p->max_entries && p->n >= p->max_entries)
		return -ENOSPC;
	if (p->n == p->cap_e) {
		uint32_t nc = p->cap_e ? 2 * p->cap_e : 64;
		gmx_kprof_entry_t *ne = realloc(p->e, nc * sizeof(*ne));
		if (!ne)
			return -ENOMEM;
		p->e = ne;
		p->cap_e = nc;
	}
	if (2 * (p->n + 1) > p->cap) { /* keep the table at most half full */
		uint32_t nc = p->cap ? 2 * p->cap : 128;
		uint32_t *ns = calloc(nc, sizeof(*ns));
		if (!ns)
			return -ENOMEM;
		for (uint32_t i = 0; i < p->n; i++)
			slot_insert(ns, nc, key_hash(p->e[i].id, p->e[i].prev), i + 1);
		free(p->slot);
		p->slot = ns;
		p->cap = nc;
	}
	gmx_kprof_entry_t *e = &p->e[p->n];
	memset(e, 0, sizeof(*e));
	e->id = id;
	e->prev = prev;
	slot_insert(p->slot, p->cap, key_hash(id, prev), p->n + 1);
	*out = p->n++;
	return 0;
}

/* Keeps a deterministic uniform sample: the n-th observation replaces a
 * pseudo-random slot with probability SAMPLES / n. */
static int sample(gmx_kprof_entry_t *e, int64_t dur, int64_t gap)
{
	if (!e->dur_s) {
		e->dur_s = malloc(GMX_KPROF_SAMPLES * sizeof(int64_t));
		e->gap_s = malloc(GMX_KPROF_SAMPLES * sizeof(int64_t));
		if (!e->dur_s || !e->gap_s)
			return -ENOMEM;
	}
	e->n++;
	if (e->n_s < GMX_KPROF_SAMPLES) {
		e->dur_s[e->n_s] = dur;
		e->gap_s[e->n_s] = gap;
		e->n_s++;
		return 0;
	}
	uint64_t z = e->n * 0x9e3779b97f4a7c15ull ^ e->id;
	z = (z ^ (z >> 31)) * 0xbf58476d1ce4e5b9ull;
	uint64_t r = (z ^ (z >> 29)) % e->n;
	if (r < GMX_KPROF_SAMPLES) {
		e->dur_s[r] = dur;
		e->gap_s[r] = gap;
	}
	return 0;
}

static int observe_key(gmx_kprof_t *p, uint64_t id, uint64_t prev, int64_t dur, int64_t gap, const char *name)
{
	int64_t i = find_index(p, id, prev);
	if (i < 0) {
		uint32_t k;
		int rc = add_entry(p, id, prev, &k);
		if (rc)
			return rc;
		i = k;
		if (name && prev == 0) {
			size_t len = strnlen(name, GMX_KPROF_NAME_MAX - 1);
			p->e[i].name = malloc(len + 1);
			if (!p->e[i].name)
				return -ENOMEM;
			memcpy(p->e[i].name, name, len);
			p->e[i].name[len] = 0;
		}
	}
	p->memo[prev != 0] = (uint32_t)i + 1;
	return sample(&p->e[i], dur, gap);
}

int gmx_kprof_observe(gmx_kprof_t *p, uint64_t id, uint64_t prev, int64_t dur_ns, int64_t gap_ns,
		      const char *name)
{
	if (!id || dur_ns < 0 || gap_ns < 0)
		return -EINVAL;
	int rc = observe_key(p, id, 0, dur_ns, gap_ns, name);
	if (!rc && prev)
		rc = observe_key(p, id, prev, dur_ns, gap_ns, NULL);
	return rc;
}

static int cmp_i64(const void *a, const void *b)
{
	int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
	return (x > y) - (x < y);
}

/* Quantile points of n sorted samples, interpolated linearly. */
static void summarise(int64_t *v, uint32_t n, gmx_kdist_t *d)
{
	qsort(v, n, sizeof(*v), cmp_i64);
	for (int i = 0; i < GMX_KPROF_QPTS; i++) {
		double pos = (double)i / (GMX_KPROF_QPTS - 1) * (double)(n - 1);
		uint32_t lo = (uint32_t)pos;
		uint32_t hi = lo + 1 < n ? lo + 1 : lo;
		double f = pos - lo;
		d->q[i] = (int64_t)((double)v[lo] + f * (double)(v[hi] - v[lo]) + 0.5);
	}
}

static int varies(const gmx_kdist_t *d)
{
	return (double)d->q[GMX_KPROF_QPTS - 1] > VARY_FACTOR * (double)d->q[0] + VARY_SLACK_NS;
}

void gmx_kprof_finish(gmx_kprof_t *p)
{
	for (uint32_t i = 0; i < p->n; i++) {
		gmx_kprof_entry_t *e = &p->e[i];
		if (e->n_s) {
			summarise(e->dur_s, e->n_s, &e->dur);
			summarise(e->gap_s, e->n_s, &e->gap);
		}
	}
	/* Drop context entries of IDs that are predictable without context: mark
	 * first (lookups need the table as it is), then compact. */
	for (uint32_t i = 0; i < p->n; i++) {
		gmx_kprof_entry_t *e = &p->e[i];
		if (e->prev) {
			int64_t b = find_index(p, e->id, 0);
			if (b >= 0 && !varies(&p->e[b].dur) && !varies(&p->e[b].gap))
				e->n = 0; /* marked: no entry of a profile has n == 0 */
		}
	}
	uint32_t w = 0;
	for (uint32_t i = 0; i < p->n; i++) {
		gmx_kprof_entry_t *e = &p->e[i];
		if (e->n)
			p->e[w++] = *e;
		else {
			free(e->name);
			free(e->dur_s);
			free(e->gap_s);
		}
	}
	p->n = w;
	if (p->cap) {
		memset(p->slot, 0, p->cap * sizeof(*p->slot));
		for (uint32_t i = 0; i < p->n; i++)
			slot_insert(p->slot, p->cap, key_hash(p->e[i].id, p->e[i].prev), i + 1);
	}
}

int gmx_kprof_snapshot(const gmx_kprof_t *src, gmx_kprof_t *dst)
{
	int rc = gmx_kprof_init(dst, src->task ? src->task : "");
	if (rc)
		return rc;
	dst->units = src->units;
	int64_t *tmp = NULL;
	uint32_t tmp_cap = 0;
	for (uint32_t i = 0; i < src->n && rc == 0; i++) {
		const gmx_kprof_entry_t *e = &src->e[i];
		gmx_kprof_entry_t c = *e;
		c.dur_s = c.gap_s = NULL;
		c.n_s = 0;
		if (e->n_s) {
			/* summarise() sorts: work on a copy so src's reservoir is untouched. */
			if (e->n_s > tmp_cap) {
				int64_t *t = realloc(tmp, (size_t)e->n_s * sizeof(*t));
				if (!t) {
					rc = -ENOMEM;
					break;
				}
				tmp = t;
				tmp_cap = e->n_s;
			}
			memcpy(tmp, e->dur_s, (size_t)e->n_s * sizeof(*tmp));
			summarise(tmp, e->n_s, &c.dur);
			memcpy(tmp, e->gap_s, (size_t)e->n_s * sizeof(*tmp));
			summarise(tmp, e->n_s, &c.gap);
		}
		rc = gmx_kprof_put(dst, &c);
	}
	free(tmp);
	if (rc) {
		gmx_kprof_free(dst);
		return rc;
	}
	gmx_kprof_finish(dst);
	return 0;
}

static int dist_ok(const gmx_kdist_t *d)
{
	for (int i = 0; i < GMX_KPROF_QPTS; i++)
		if (d->q[i] < 0 || (i && d->q[i] < d->q[i - 1]))
			return 0;
	return 1;
}

int gmx_kprof_put(gmx_kprof_t *p, const gmx_kprof_entry_t *src)
{
	if (!src->id || !src->n || !dist_ok(&src->dur) || !dist_ok(&src->gap))
		return -EINVAL;
	if (find_index(p, src->id, src->prev) >= 0)
		return -EEXIST;
	char *name = NULL;
	if (src->name && !(name = strdup(src->name)))
		return -ENOMEM;
	uint32_t k;
	int rc = add_entry(p, src->id, src->prev, &k);
	if (rc) {
		free(name);
		return rc;
	}
	gmx_kprof_entry_t *e = &p->e[k];
	e->n = src->n;
	e->dur = src->dur;
	e->gap = src->gap;
	e->name = name;
	return 0;
}

const gmx_kprof_entry_t *gmx_kprof_find(const gmx_kprof_t *p, uint64_t id, uint64_t prev)
{
	int64_t i = find_index(p, id, prev);
	return i < 0 ? NULL : &p->e[i];
}

const gmx_kprof_entry_t *gmx_kprof_lookup(const gmx_kprof_t *p, uint64_t id, uint64_t prev)
{
	const gmx_kprof_entry_t *e = prev ? gmx_kprof_find(p, id, prev) : NULL;
	return e ? e : gmx_kprof_find(p, id, 0);
}

int64_t gmx_kdist_quantile(const gmx_kdist_t *d, double q)
{
	if (q <= 0)
		return d->q[0];
	if (q >= 1)
		return d->q[GMX_KPROF_QPTS - 1];
	double pos = q * (GMX_KPROF_QPTS - 1);
	int lo = (int)pos;
	double f = pos - lo;
	return (int64_t)((double)d->q[lo] + f * (double)(d->q[lo + 1] - d->q[lo]) + 0.5);
}

/* The distribution function at x: the fraction of the gap below x, reading
 * the quantile points as a piecewise-linear inverse. */
static double cdf(const gmx_kdist_t *d, int64_t x)
{
	if (x < d->q[0])
		return 0;
	if (x >= d->q[GMX_KPROF_QPTS - 1])
		return 1;
	int i = 0;
	while (d->q[i + 1] <= x) /* q[last] > x: stops in range */
		i++;
	double span = (double)(d->q[i + 1] - d->q[i]);
	double f = span > 0 ? (double)(x - d->q[i]) / span : 0;
	return (i + f) / (GMX_KPROF_QPTS - 1);
}

int64_t gmx_kdist_remaining(const gmx_kdist_t *d, int64_t elapsed_ns, double q)
{
	if (elapsed_ns <= 0)
		return gmx_kdist_quantile(d, q);
	if (elapsed_ns >= d->q[GMX_KPROF_QPTS - 1])
		return 0;
	double f = cdf(d, elapsed_ns);
	int64_t v = gmx_kdist_quantile(d, f + q * (1 - f));
	return v > elapsed_ns ? v - elapsed_ns : 0;
}

void gmx_kprof_each(const gmx_kprof_t *p, void (*fn)(const gmx_kprof_entry_t *e, void *arg), void *arg)
{
	for (uint32_t i = 0; i < p->n; i++)
		fn(&p->e[i], arg);
}
