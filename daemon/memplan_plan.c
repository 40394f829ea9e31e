/*
 * One switch of gpumuxd's memory planner (gmxd_mem_plan, memplan.h). A plan numbers only the
 * chunks it looks at: the resident ones, and the first slice's missing ones (as many as the
 * device could take). Later slices matter only through the resident chunks they need, so
 * their walk skips non-resident chunks a bitmap word at a time. Every chunk and word looked
 * at counts against the plan's budget. Core's gmx_mplan_switch ranks the numbered chunks by
 * the timeline; its eviction order and load list become merged orders.
 */
#include "memplan_internal.h"

#include "gpumux/combined.h"
#include "gpumux/mplan.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

/* The plan's numbering of the chunks it looks at: an open-addressing table from
 * (task, allocation index, chunk) to a unit, and each unit's chunk. */
typedef struct {
	uint64_t *key; /* 0 empty, else packed key + 1 */
	uint32_t *val;
	uint32_t cap; /* a power of two */
	uint32_t n;
	struct uinfo {
		uint32_t task, idx, chunk;
	} * info; /* unit -> its chunk */
	uint32_t cap_u;
} units_t;

static uint64_t ukey(uint32_t task, uint32_t idx, uint32_t c)
{
	return (((uint64_t)task << 58) | ((uint64_t)idx << 40) | c) + 1;
}

static size_t uhash(uint64_t k, uint32_t cap)
{
	return (size_t)((k * 0x9E3779B97F4A7C15ull) >> 32) & (cap - 1);
}

static int units_grow(units_t *u)
{
	uint32_t nc = u->cap ? u->cap * 2 : 1024;
	uint64_t *nk = calloc(nc, sizeof *nk);
	uint32_t *nv = malloc((size_t)nc * sizeof *nv);
	if (!nk || !nv) {
		free(nk);
		free(nv);
		return -ENOMEM;
	}
	for (uint32_t i = 0; i < u->cap; i++)
		if (u->key[i]) {
			size_t h = uhash(u->key[i], nc);
			while (nk[h])
				h = (h + 1) & (nc - 1);
			nk[h] = u->key[i];
			nv[h] = u->val[i];
		}
	free(u->key);
	free(u->val);
	u->key = nk;
	u->val = nv;
	u->cap = nc;
	return 0;
}

/* The unit of (task, idx, c): found, or numbered now when add is set (then *added is set).
 * Returns the unit, or UINT32_MAX when absent (add unset) or out of memory (*oom set). */
static uint32_t unit_of(units_t *u, uint32_t task, uint32_t idx, uint32_t c, int add, int *added, int *oom)
{
	uint64_t k = ukey(task, idx, c);
	if (u->cap) {
		for (size_t h = uhash(k, u->cap);; h = (h + 1) & (u->cap - 1)) {
			if (u->key[h] == k)
				return u->val[h];
			if (!u->key[h])
				break;
		}
	}
	if (!add)
		return UINT32_MAX;
	if ((u->n + 1) * 2 > u->cap && units_grow(u)) {
		*oom = 1;
		return UINT32_MAX;
	}
	if (gmxd__mem_grow((void **)&u->info, u->n, &u->cap_u, sizeof *u->info, 1024)) {
		*oom = 1;
		return UINT32_MAX;
	}
	size_t h = uhash(k, u->cap);
	while (u->key[h])
		h = (h + 1) & (u->cap - 1);
	u->key[h] = k;
	u->val[h] = u->n;
	u->info[u->n] = (struct uinfo){task, idx, c};
	*added = 1;
	return u->n++;
}

static void units_free(units_t *u)
{
	free(u->key);
	free(u->val);
	free(u->info);
}

typedef struct {
	uint32_t *v;
	uint32_t n, cap;
} ulist_t;

static int ulist_push(ulist_t *l, uint32_t x)
{
	if (gmxd__mem_grow((void **)&l->v, l->n, &l->cap, sizeof *l->v, 256))
		return -ENOMEM;
	l->v[l->n++] = x;
	return 0;
}

/* The walk that lists a slice's units: resident chunks always, missing ones (the first slice
 * only) while what it collected could still fit on the device. */
typedef struct {
	walk_t w;
	units_t *u;
	ulist_t *need;
	uint64_t missing_bytes, missing_cap;
	int oom;
} collect_t;

static int collect(walk_t *w, uint32_t task, uint32_t idx, const malloc_rec_t *a, uint32_t c)
{
	collect_t *x = (collect_t *)w;
	int res = gmxd__mem_bit(a, c);
	if (!res && x->missing_bytes >= x->missing_cap) {
		/* Nothing more could be loaded: the rest of the slice counts only for what it
		 * keeps resident; its missing chunks are skipped (and counted) a word at a time. */
		w->all = 0;
		w->skipped_missing += gmxd__mem_chunk_len(a, c);
		return 0;
	}
	int added = 0;
	uint32_t id = unit_of(x->u, task, idx, c, !res, &added, &x->oom);
	if (x->oom)
		return -ENOMEM;
	if (id == UINT32_MAX)
		return 0; /* resident but not listed: cannot happen after compaction */
	if (added)
		x->missing_bytes += gmxd__mem_chunk_len(a, c);
	return ulist_push(x->need, id) ? -ENOMEM : 0;
}

/* The walk that counts each slice's chunks no earlier slice reached (fresh) and, of those, the
 * ones not resident. */
typedef struct {
	walk_t w;
	units_t u;
	uint64_t fresh, missing;
	int oom;
} fresh_walk_t;

static int count_fresh(walk_t *w, uint32_t task, uint32_t idx, const malloc_rec_t *a, uint32_t c)
{
	fresh_walk_t *x = (fresh_walk_t *)w;
	int added = 0;
	unit_of(&x->u, task, idx, c, 1, &added, &x->oom);
	if (x->oom)
		return -ENOMEM;
	if (added) {
		x->fresh += gmxd__mem_chunk_len(a, c);
		x->missing += gmxd__mem_bit(a, c) ? 0 : gmxd__mem_chunk_len(a, c);
	}
	return 0;
}

int gmxd_mem_fresh(const gmxd_mem_t *m, const gmxd_mem_slice_t *s, uint32_t n, uint64_t *fresh,
		   uint64_t *missing)
{
	fresh_walk_t x = {.w = {.left = m->budget, .fn = count_fresh, .all = 1}};
	uint32_t done = 0;
	int rc = 0;
	memset(fresh, 0, (size_t)n * sizeof *fresh);
	memset(missing, 0, (size_t)n * sizeof *missing);
	for (; done < n; done++) {
		x.fresh = x.missing = 0;
		int r = gmxd__mem_walk_slice(m, &s[done], &x.w);
		if (r < 0) {
			rc = r;
			break;
		}
		if (r == WALK_BUDGET)
			break; /* this slice and the rest count 0 */
		fresh[done] = x.fresh;
		missing[done] = x.missing;
	}
	units_free(&x.u);
	return rc ? rc : (int)done;
}

/* Drops the resident list's stale entries (evicted or freed since): afterwards it lists every
 * resident chunk exactly once. */
static void compact(gmxd_mem_t *m)
{
	uint32_t k = 0;
	for (uint32_t i = 0; i < m->n_rl; i++) {
		rchunk_t e = m->rl[i];
		const malloc_rec_t *a = gmxd__mem_find(&m->t[e.task], e.aptr, NULL);
		if (a && e.chunk < a->n_chunks && gmxd__mem_bit(a, e.chunk))
			m->rl[k++] = e;
	}
	m->n_rl = k;
}

/* Merges chunks of one allocation that follow each other (either way) into one order. */
typedef struct {
	gmxd_mem_emit_fn emit;
	void *ctx;
	uint32_t task;
	int dir, open;
	uint64_t ptr, len;
	uint64_t piece; /* most bytes per order; 0: no limit */
} merger_t;

static void merge_flush(merger_t *g)
{
	if (g->open)
		g->emit(g->ctx, g->task, g->dir, g->ptr, g->len);
	g->open = 0;
}

static void merge_add(merger_t *g, uint32_t task, int dir, uint64_t ptr, uint64_t len)
{
	if (g->open && g->piece && g->len + len > g->piece)
		merge_flush(g); /* a piece is full: the next chunk starts another order */
	if (g->open && g->task == task && g->dir == dir && g->ptr + g->len == ptr) {
		g->len += len;
		return;
	}
	if (g->open && g->task == task && g->dir == dir && ptr + len == g->ptr) {
		g->ptr = ptr; /* the chunk below: evictions of one rank come last chunk first */
		g->len += len;
		return;
	}
	merge_flush(g);
	*g = (merger_t){g->emit, g->ctx, task, dir, 1, ptr, len, g->piece};
}

/* The victims (in, n: the timeline's eviction order) a plan for priority fp may take, into out:
 * worse priorities first, then fp's own level, each in the timeline's order (a better priority's
 * are never taken: gmx_comb_may_evict). Returns how many. */
static uint32_t by_priority(const gmxd_mem_t *m, const units_t *u, const uint32_t *in, uint32_t n, int fp,
			    uint32_t *out)
{
	uint32_t k = 0;
	if (n == 0 || !u->info)
		return 0; /* no units, so no victims to order */
	for (uint64_t level = 0; level <= 10; level++)
		for (uint32_t i = 0; i < n; i++) {
			int vp = m->prio[u->info[in[i]].task];
			if (gmx_comb_may_evict(vp, fp) && gmx_comb_evict_key(vp, fp, 0) >> 32 == level)
				out[k++] = in[i];
		}
	return k;
}

int gmxd_mem_plan(gmxd_mem_t *m, const gmxd_mem_slice_t *slice, uint32_t n_slices, uint32_t n_protected,
		  gmxd_mem_emit_fn emit, void *ctx, gmxd_mem_stats_t *st)
{
	memset(st, 0, sizeof *st);
	if (n_slices == 0 || n_protected > n_slices)
		return -EINVAL;
	if (gmxd_mem_ready(m, &slice[0]))
		return 0;
	compact(m);
	int rc = -ENOMEM;
	units_t u = {0};
	ulist_t need = {0};
	uint32_t *first = malloc(((size_t)n_slices + 1) * sizeof *first);
	uint8_t *is_res = NULL;
	uint32_t *res_list = NULL, *evict = NULL, *load = NULL;
	gmx_mplan_t *p = NULL;
	int oom = 0;
	if (!first)
		goto out;
	/* Units 0 .. R-1: the resident chunks. */
	for (uint32_t i = 0; i < m->n_rl && !oom; i++) {
		uint32_t idx;
		const rchunk_t *e = &m->rl[i];
		int added;
		if (gmxd__mem_find(&m->t[e->task], e->aptr, &idx))
			unit_of(&u, e->task, idx, e->chunk, 1, &added, &oom);
	}
	if (oom)
		goto out;
	uint32_t n_res = u.n;
	/* The slices' units: the first slice's missing chunks up to what the device could take,
	 * then every slice's resident chunks, within the budget. */
	collect_t x = {
	    .w = {.left = m->budget, .fn = collect}, .u = &u, .need = &need, .missing_cap = m->cap};
	int complete = 1; /* every protected slice was walked to its end */
	uint32_t s;
	for (s = 0; s < n_slices; s++) {
		first[s] = need.n;
		x.w.all = s == 0;
		uint64_t skipped = x.w.skipped_missing;
		int r = gmxd__mem_walk_slice(m, &slice[s], &x.w);
		if (s > 0)
			x.w.skipped_missing = skipped; /* only the first slice's count as demand-paged */
		if (r < 0)
			goto out;
		if (r == WALK_BUDGET) {
			st->truncated = 1;
			complete = s >= n_protected;
			s++;
			break;
		}
	}
	for (; s <= n_slices; s++)
		first[s] = need.n; /* slices past the budget: empty */
	st->visits = m->budget - x.w.left;
	uint32_t n_units = u.n;
	is_res = calloc((size_t)n_units + 1, 1);
	res_list = malloc(((size_t)n_res + 1) * sizeof *res_list);
	evict = malloc(((size_t)n_res + 1) * sizeof *evict);
	load = malloc(((size_t)first[1] - first[0] + 1) * sizeof *load);
	/* Loads append to the resident list: room for them now, so nothing fails half-way. */
	if (!is_res || !res_list || !evict || !load || gmx_mplan_create(n_units, &p))
		goto out;
	if (m->n_rl + (first[1] - first[0]) > m->cap_rl) {
		uint32_t nc = m->n_rl + (first[1] - first[0]) + 64;
		rchunk_t *nr = realloc(m->rl, (size_t)nc * sizeof *nr);
		if (!nr)
			goto out;
		m->rl = nr;
		m->cap_rl = nc;
	}
	for (uint32_t i = 0; i < n_res; i++) {
		is_res[i] = 1;
		res_list[i] = i;
	}
	gmx_mplan_timeline_t tl = {n_slices, first, need.v ? need.v : first};
	uint32_t n_load = 0, n_keep = 0;
	rc = gmx_mplan_switch(p, &tl, res_list, n_res, is_res, evict, load, &n_load, &n_keep);
	if (rc)
		goto out;
	if (n_load > n_units || (n_load > 0 && !u.info)) {
		rc = -EINVAL; /* the planner names only units of the table; never index past it */
		goto out;
	}
	uint64_t want = 0;
	for (uint32_t i = 0; i < n_load; i++) {
		const malloc_rec_t *a = &m->t[u.info[load[i]].task].a[u.info[load[i]].idx];
		want += gmxd__mem_chunk_len(a, u.info[load[i]].chunk);
	}
	uint64_t room = m->cap > m->resident ? m->cap - m->resident : 0;
	merger_t g = {.emit = emit, .ctx = ctx, .piece = m->piece};
	uint32_t n_vict = n_res - n_keep, *vict = evict;
	if (m->protect && slice[0].task < GMX_MAX_TASKS) { /* res_list is free again: the new order */
		n_vict = by_priority(m, &u, evict, n_vict, m->prio[slice[0].task], res_list);
		vict = res_list;
	}
	for (uint32_t i = 0; complete && i < n_vict && room < want; i++) {
		uint32_t v = vict[i];
		if (gmx_mplan_rank(p, v) < n_protected) {
			if (m->protect)
				continue; /* a level further down may still have victims */
			break; /* the order is by rank, furthest first: the rest is protected too */
		}
		task_mem_t *tm = &m->t[u.info[v].task];
		malloc_rec_t *a = &tm->a[u.info[v].idx];
		uint32_t c = u.info[v].chunk;
		uint64_t len = gmxd__mem_chunk_len(a, c);
		a->bits[c >> 6] &= ~(1ull << (c & 63));
		a->n_res--;
		tm->resident -= len;
		m->resident -= len;
		room += len;
		st->evict_bytes += len;
		merge_add(&g, u.info[v].task, 0, a->ptr + (uint64_t)c * CHUNK, len);
	}
	merge_flush(&g);
	for (uint32_t i = 0; i < n_load; i++) {
		uint32_t v = load[i];
		task_mem_t *tm = &m->t[u.info[v].task];
		malloc_rec_t *a = &tm->a[u.info[v].idx];
		uint32_t c = u.info[v].chunk;
		uint64_t len = gmxd__mem_chunk_len(a, c);
		if (len > room) {
			st->short_bytes += len; /* the first slice alone exceeds the device */
			continue;
		}
		a->bits[c >> 6] |= 1ull << (c & 63);
		a->n_res++;
		tm->resident += len;
		m->resident += len;
		room -= len;
		st->load_bytes += len;
		m->rl[m->n_rl++] = (rchunk_t){a->ptr, u.info[v].task, c};
		merge_add(&g, u.info[v].task, 1, a->ptr + (uint64_t)c * CHUNK, len);
	}
	merge_flush(&g);
	if (slice[0].whole && slice[0].task < GMX_MAX_TASKS) /* exact, even when the walk was cut */
		st->short_bytes = m->t[slice[0].task].bytes - m->t[slice[0].task].resident;
	else
		st->short_bytes += x.w.skipped_missing;
	rc = 0;
out:
	gmx_mplan_destroy(p);
	units_free(&u);
	free(first);
	free(is_res);
	free(res_list);
	free(evict);
	free(load);
	free(need.v);
	return rc;
}
