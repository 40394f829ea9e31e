/*
 * gpumuxd's memory planner (see memplan.h). Allocations are kept sorted by address per task,
 * so a predicted range finds its allocations by binary search; each keeps a bitmap of its
 * resident chunks. A list of the resident chunks (compacted at each plan) lets a plan start
 * from what the device holds without walking what was merely declared.
 *
 * A plan numbers only the chunks it looks at: the resident ones, and the first slice's
 * missing ones (as many as the device could take). Later slices matter only through the
 * resident chunks they need, so their walk skips non-resident chunks a bitmap word at a
 * time. Every chunk and word looked at counts against the plan's budget. Core's
 * gmx_mplan_switch ranks the numbered chunks by the timeline; its eviction order and load
 * list become merged orders.
 */
#include "memplan.h"

#include "gmx_proto.h"
#include "gpumux/combined.h"
#include "gpumux/mplan.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CHUNK GMX_MIG_CHUNK

typedef struct {
	uint64_t ptr, size;
	uint32_t n_chunks, n_res;
	uint64_t *bits; /* resident chunks */
} malloc_rec_t;

typedef struct {
	malloc_rec_t *a;
	uint32_t n, cap;
	uint64_t bytes, resident;
	uint64_t chunks; /* 2 MiB-aligned chunks the allocations cover, each counted once */
} task_mem_t;

/* A chunk loaded by a plan; stale once evicted or freed, dropped at the next plan. */
typedef struct {
	uint64_t aptr;
	uint32_t task, chunk;
} rchunk_t;

struct gmxd_mem {
	uint64_t cap, resident, task_limit, budget;
	uint64_t piece; /* most bytes per order; 0: no limit */
	int protect;	/* priorities in every plan (gmxd_mem_set_protect) */
	int prio[GMX_MAX_TASKS];
	task_mem_t t[GMX_MAX_TASKS];
	rchunk_t *rl;
	uint32_t n_rl, cap_rl;
};

int gmxd_mem_create(uint64_t cap, gmxd_mem_t **out)
{
	if (cap == 0)
		return -EINVAL;
	gmxd_mem_t *m = calloc(1, sizeof *m);
	if (!m)
		return -ENOMEM;
	m->cap = cap;
	m->task_limit = GMXD_MEM_TASK_BYTES_MAX;
	uint64_t units = cap / CHUNK < (1ull << 32) ? cap / CHUNK : (1ull << 32);
	m->budget = GMXD_MEM_BUDGET_BASE + 2 * units;
	*out = m;
	return 0;
}

void gmxd_mem_destroy(gmxd_mem_t *m)
{
	if (!m)
		return;
	for (uint32_t t = 0; t < GMX_MAX_TASKS; t++)
		gmxd_mem_drop(m, t);
	free(m->rl);
	free(m);
}

void gmxd_mem_set_task_limit(gmxd_mem_t *m, uint64_t bytes)
{
	m->task_limit = bytes < GMXD_MEM_TASK_BYTES_MAX ? bytes : GMXD_MEM_TASK_BYTES_MAX;
}

uint64_t gmxd_mem_task_limit(const gmxd_mem_t *m)
{
	return m->task_limit;
}

uint64_t gmxd_mem_budget(const gmxd_mem_t *m)
{
	return m->budget;
}

void gmxd_mem_set_protect(gmxd_mem_t *m, int on)
{
	m->protect = on;
}

void gmxd_mem_set_priority(gmxd_mem_t *m, uint32_t task, int prio)
{
	if (task < GMX_MAX_TASKS)
		m->prio[task] = prio;
}

void gmxd_mem_set_piece(gmxd_mem_t *m, uint64_t bytes)
{
	m->piece = bytes && bytes < CHUNK ? CHUNK : bytes / CHUNK * CHUNK;
}

/* Makes room for one more element in *v (n used of *cap): doubles, from `first`. 0 or
 * -ENOMEM. */
static int grow(void **v, uint32_t n, uint32_t *cap, size_t elem, uint32_t first)
{
	if (n < *cap)
		return 0;
	uint32_t nc = *cap ? *cap * 2 : first;
	void *nv = realloc(*v, (size_t)nc * elem);
	if (!nv)
		return -ENOMEM;
	*v = nv;
	*cap = nc;
	return 0;
}

static int bit(const malloc_rec_t *a, uint32_t c)
{
	return (int)((a->bits[c >> 6] >> (c & 63)) & 1);
}

static uint64_t chunk_len(const malloc_rec_t *a, uint32_t c)
{
	uint64_t off = (uint64_t)c * CHUNK;
	return a->size - off < CHUNK ? a->size - off : CHUNK;
}

/* Resident bytes of an allocation: whole chunks, the last one perhaps shorter. */
static uint64_t rec_resident(const malloc_rec_t *a)
{
	uint64_t b = (uint64_t)a->n_res * CHUNK;
	if (a->n_res && bit(a, a->n_chunks - 1))
		b -= CHUNK - chunk_len(a, a->n_chunks - 1);
	return b;
}

/* The 2 MiB-aligned chunks of ptr..ptr+size that neither neighbour covers. The driver packs
 * small allocations into shared 2 MiB blocks (include/gpumux/devalloc.h), so their addresses
 * share a chunk; allocations never overlap, so only the neighbours in address order can
 * share the first or the last chunk. */
static uint64_t unshared_chunks(uint64_t ptr, uint64_t size, const malloc_rec_t *prev,
				const malloc_rec_t *next)
{
	uint64_t first = ptr / CHUNK, last = (ptr + size - 1) / CHUNK;
	int lo = prev && (prev->ptr + prev->size - 1) / CHUNK == first;
	int hi = next && next->ptr / CHUNK == last;
	if (first == last)
		return lo || hi ? 0 : 1;
	return last - first + 1 - (uint64_t)lo - (uint64_t)hi;
}

/* Chunks allocation i of tm holds alone. */
static uint64_t own_chunks(const task_mem_t *tm, uint32_t i)
{
	return unshared_chunks(tm->a[i].ptr, tm->a[i].size, i ? &tm->a[i - 1] : NULL,
			       i + 1 < tm->n ? &tm->a[i + 1] : NULL);
}

/* Index of the first allocation that ends after addr. */
static uint32_t first_after(const task_mem_t *tm, uint64_t addr)
{
	uint32_t lo = 0, hi = tm->n;
	while (lo < hi) {
		uint32_t mid = lo + (hi - lo) / 2;
		if (tm->a[mid].ptr + tm->a[mid].size <= addr)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

/* The allocation of tm starting at ptr, or NULL. */
static malloc_rec_t *find_rec(const task_mem_t *tm, uint64_t ptr, uint32_t *idx)
{
	uint32_t i = first_after(tm, ptr);
	if (i >= tm->n || tm->a[i].ptr != ptr)
		return NULL;
	if (idx)
		*idx = i;
	return &tm->a[i];
}

int gmxd_mem_alloc(gmxd_mem_t *m, uint32_t task, uint64_t ptr, uint64_t size)
{
	if (task >= GMX_MAX_TASKS || size == 0 || ptr + size < ptr)
		return -EINVAL;
	task_mem_t *tm = &m->t[task];
	/* Overflow-checked: bytes <= task_limit always holds. */
	if (size > m->task_limit - tm->bytes || tm->n >= GMXD_MEM_ALLOCS_MAX)
		return -E2BIG;
	uint32_t i = first_after(tm, ptr);
	if (i < tm->n && tm->a[i].ptr < ptr + size)
		return -EINVAL; /* overlaps an allocation of the task */
	/* What the device holds for it: whole 2 MiB chunks, one shared by small allocations
	 * counted once (include/gpumux/devalloc.h). */
	uint64_t own = unshared_chunks(ptr, size, i ? &tm->a[i - 1] : NULL, i < tm->n ? &tm->a[i] : NULL);
	uint64_t limit_ch = m->task_limit / CHUNK;
	if (tm->chunks > limit_ch || own > limit_ch - tm->chunks)
		return -E2BIG;
	if (grow((void **)&tm->a, tm->n, &tm->cap, sizeof *tm->a, 16))
		return -ENOMEM;
	uint64_t nch = (size + CHUNK - 1) / CHUNK; /* < 2^29: size <= GMXD_MEM_TASK_BYTES_MAX */
	uint64_t *bits = calloc((size_t)((nch + 63) / 64), sizeof *bits);
	if (!bits)
		return -ENOMEM;
	memmove(&tm->a[i + 1], &tm->a[i], (size_t)(tm->n - i) * sizeof *tm->a);
	tm->a[i] = (malloc_rec_t){.ptr = ptr, .size = size, .n_chunks = (uint32_t)nch, .bits = bits};
	tm->n++;
	tm->bytes += size;
	tm->chunks += own;
	return 0;
}

static void forget(gmxd_mem_t *m, task_mem_t *tm, uint32_t i)
{
	malloc_rec_t *a = &tm->a[i];
	uint64_t r = rec_resident(a);
	tm->resident -= r;
	m->resident -= r;
	tm->bytes -= a->size;
	free(a->bits);
}

int gmxd_mem_free(gmxd_mem_t *m, uint32_t task, uint64_t ptr)
{
	if (task >= GMX_MAX_TASKS)
		return -ENOENT;
	task_mem_t *tm = &m->t[task];
	uint32_t i;
	if (!find_rec(tm, ptr, &i))
		return -ENOENT;
	tm->chunks -= own_chunks(tm, i);
	forget(m, tm, i);
	memmove(&tm->a[i], &tm->a[i + 1], (size_t)(tm->n - i - 1) * sizeof *tm->a);
	tm->n--;
	return 0;
}

void gmxd_mem_drop(gmxd_mem_t *m, uint32_t task)
{
	if (task >= GMX_MAX_TASKS)
		return;
	task_mem_t *tm = &m->t[task];
	for (uint32_t i = 0; i < tm->n; i++)
		forget(m, tm, i);
	free(tm->a);
	memset(tm, 0, sizeof *tm);
}

uint64_t gmxd_mem_bytes(const gmxd_mem_t *m, uint32_t task)
{
	return task < GMX_MAX_TASKS ? m->t[task].bytes : 0;
}

uint64_t gmxd_mem_resident(const gmxd_mem_t *m, uint32_t task)
{
	return task < GMX_MAX_TASKS ? m->t[task].resident : m->resident;
}

uint64_t gmxd_mem_footprint(const gmxd_mem_t *m, uint32_t task)
{
	return task < GMX_MAX_TASKS ? m->t[task].chunks * CHUNK : 0;
}

/* ---- walking what a slice needs, within a budget ---- */

enum { WALK_DONE = 0, WALK_BUDGET = 1, WALK_MISSING = 2 };

typedef struct walk {
	uint64_t left; /* budget left */
	/* called for each chunk reached (resident only, unless all), in access order; nonzero
	 * stops the walk with that value. NULL: resident chunks are skipped too. */
	int (*fn)(struct walk *w, uint32_t task, uint32_t idx, const malloc_rec_t *a, uint32_t c);
	int all;		  /* hand missing chunks to fn too (else skipped a word at a time) */
	int stop_on_missing;	  /* stop (WALK_MISSING) at the first missing chunk skipped */
	uint64_t skipped_missing; /* bytes of missing chunks skipped */
} walk_t;

/* Walks chunks [c0, c1) of allocation idx of task. */
static int walk_chunks(walk_t *w, uint32_t task, uint32_t idx, const malloc_rec_t *a, uint64_t c0,
		       uint64_t c1)
{
	for (uint64_t c = c0; c < c1;) {
		if (w->left == 0)
			return WALK_BUDGET;
		w->left--;
		if (w->all) {
			int r = w->fn(w, task, idx, a, (uint32_t)c);
			if (r)
				return r;
			c++;
			continue;
		}
		/* The rest of this bitmap word within [c, c1): hand its resident chunks over, count
		 * its missing bytes. */
		uint64_t end = (c | 63) + 1 < c1 ? (c | 63) + 1 : c1;
		uint64_t span = end - c;
		uint64_t mask = (span == 64 ? ~0ull : ((1ull << span) - 1)) << (c & 63);
		uint64_t res = a->bits[c >> 6] & mask;
		uint64_t missing = (uint64_t)__builtin_popcountll(mask & ~res);
		uint64_t mb = missing * CHUNK;
		if (end == a->n_chunks && !bit(a, a->n_chunks - 1))
			mb -= CHUNK - chunk_len(a, a->n_chunks - 1);
		w->skipped_missing += mb;
		if (mb && w->stop_on_missing)
			return WALK_MISSING;
		while (w->fn && res) {
			uint32_t k = (uint32_t)((c & ~63ull) + (uint64_t)__builtin_ctzll(res));
			res &= res - 1;
			if (w->left == 0)
				return WALK_BUDGET;
			w->left--;
			int r = w->fn(w, task, idx, a, k);
			if (r)
				return r;
		}
		c = end;
	}
	return WALK_DONE;
}

/* Walks what slice s needs, in access order (repeats possible). */
static int walk_slice(const gmxd_mem_t *m, const gmxd_mem_slice_t *s, walk_t *w)
{
	if (s->task >= GMX_MAX_TASKS)
		return WALK_DONE;
	const task_mem_t *tm = &m->t[s->task];
	if (s->whole) {
		for (uint32_t i = 0; i < tm->n; i++) {
			int r = walk_chunks(w, s->task, i, &tm->a[i], 0, tm->a[i].n_chunks);
			if (r)
				return r;
		}
		return WALK_DONE;
	}
	for (uint32_t k = 0; k < s->n; k++) {
		uint64_t lo = s->r[k].addr, hi = lo + s->r[k].length;
		if (hi < lo)
			hi = UINT64_MAX;
		for (uint32_t i = first_after(tm, lo); i < tm->n && tm->a[i].ptr < hi; i++) {
			const malloc_rec_t *a = &tm->a[i];
			uint64_t from = lo > a->ptr ? lo - a->ptr : 0;
			uint64_t to = hi - a->ptr < a->size ? hi - a->ptr : a->size;
			int r = walk_chunks(w, s->task, i, a, from / CHUNK, (to + CHUNK - 1) / CHUNK);
			if (r)
				return r;
		}
	}
	return WALK_DONE;
}

int gmxd_mem_ready(const gmxd_mem_t *m, const gmxd_mem_slice_t *s)
{
	if (s->task >= GMX_MAX_TASKS)
		return 1;
	if (s->whole)
		return m->t[s->task].resident == m->t[s->task].bytes;
	walk_t w = {.left = m->budget, .stop_on_missing = 1};
	return walk_slice(m, s, &w) == WALK_DONE;
}

/* (a chunk two ranges reach counts twice: an upper bound) */
uint64_t gmxd_mem_missing(const gmxd_mem_t *m, const gmxd_mem_slice_t *s)
{
	if (s->task >= GMX_MAX_TASKS)
		return 0;
	if (s->whole)
		return m->t[s->task].bytes - m->t[s->task].resident;
	walk_t w = {.left = m->budget};
	walk_slice(m, s, &w);
	return w.skipped_missing;
}

/* ---- one plan ---- */

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
	if (grow((void **)&u->info, u->n, &u->cap_u, sizeof *u->info, 1024)) {
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
	if (grow((void **)&l->v, l->n, &l->cap, sizeof *l->v, 256))
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
	int res = bit(a, c);
	if (!res && x->missing_bytes >= x->missing_cap) {
		/* Nothing more could be loaded: the rest of the slice counts only for what it
		 * keeps resident; its missing chunks are skipped (and counted) a word at a time. */
		w->all = 0;
		w->skipped_missing += chunk_len(a, c);
		return 0;
	}
	int added = 0;
	uint32_t id = unit_of(x->u, task, idx, c, !res, &added, &x->oom);
	if (x->oom)
		return -ENOMEM;
	if (id == UINT32_MAX)
		return 0; /* resident but not listed: cannot happen after compaction */
	if (added)
		x->missing_bytes += chunk_len(a, c);
	return ulist_push(x->need, id) ? -ENOMEM : 0;
}

/* Drops the resident list's stale entries (evicted or freed since): afterwards it lists every
 * resident chunk exactly once. */
static void compact(gmxd_mem_t *m)
{
	uint32_t k = 0;
	for (uint32_t i = 0; i < m->n_rl; i++) {
		rchunk_t e = m->rl[i];
		const malloc_rec_t *a = find_rec(&m->t[e.task], e.aptr, NULL);
		if (a && e.chunk < a->n_chunks && bit(a, e.chunk))
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
		if (find_rec(&m->t[e->task], e->aptr, &idx))
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
		int r = walk_slice(m, &slice[s], &x.w);
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
		want += chunk_len(a, u.info[load[i]].chunk);
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
		uint64_t len = chunk_len(a, c);
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
		uint64_t len = chunk_len(a, c);
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

int gmxd_mem_check(const gmxd_mem_t *m, char *err, size_t err_len)
{
	uint64_t all = 0, listed = 0;
	for (uint32_t t = 0; t < GMX_MAX_TASKS; t++) {
		const task_mem_t *tm = &m->t[t];
		uint64_t bytes = 0, res = 0, chunks = 0, last = UINT64_MAX;
		for (uint32_t i = 0; i < tm->n; i++) {
			const malloc_rec_t *a = &tm->a[i];
			if (i && tm->a[i - 1].ptr + tm->a[i - 1].size > a->ptr) {
				snprintf(err, err_len,
					 "task %u: allocations %u and %u overlap or are unsorted", t, i - 1,
					 i);
				return -EFAULT;
			}
			uint32_t pop = 0;
			for (uint32_t w = 0; w < (a->n_chunks + 63) / 64; w++)
				pop += (uint32_t)__builtin_popcountll(a->bits[w]);
			if (pop != a->n_res || a->n_chunks != (a->size + CHUNK - 1) / CHUNK) {
				snprintf(err, err_len,
					 "task %u allocation %u: %u chunks resident, %u counted", t, i, pop,
					 a->n_res);
				return -EFAULT;
			}
			bytes += a->size;
			res += rec_resident(a);
			uint64_t c0 = a->ptr / CHUNK, c1 = (a->ptr + a->size - 1) / CHUNK;
			chunks += c1 - c0 + 1 - (c0 == last);
			last = c1;
		}
		if (bytes != tm->bytes || res != tm->resident || bytes > m->task_limit ||
		    chunks != tm->chunks) {
			snprintf(err, err_len,
				 "task %u: %llu bytes (%llu counted), %llu resident (%llu counted), %llu "
				 "chunks (%llu counted)",
				 t, (unsigned long long)bytes, (unsigned long long)tm->bytes,
				 (unsigned long long)res, (unsigned long long)tm->resident,
				 (unsigned long long)chunks, (unsigned long long)tm->chunks);
			return -EFAULT;
		}
		all += res;
		for (uint32_t i = 0; i < tm->n; i++)
			listed += tm->a[i].n_res;
	}
	if (all != m->resident || m->resident > m->cap) {
		snprintf(err, err_len, "%llu bytes resident, %llu counted, device %llu",
			 (unsigned long long)all, (unsigned long long)m->resident,
			 (unsigned long long)m->cap);
		return -EFAULT;
	}
	/* Every resident chunk has an entry in the resident list (stale ones may remain). */
	uint64_t valid = 0;
	for (uint32_t i = 0; i < m->n_rl; i++) {
		const rchunk_t *e = &m->rl[i];
		const malloc_rec_t *a =
		    e->task < GMX_MAX_TASKS ? find_rec(&m->t[e->task], e->aptr, NULL) : NULL;
		if (a && e->chunk < a->n_chunks && bit(a, e->chunk))
			valid++;
	}
	if (valid < listed) {
		snprintf(err, err_len, "%llu resident chunks, %llu in the resident list",
			 (unsigned long long)listed, (unsigned long long)valid);
		return -EFAULT;
	}
	return 0;
}
