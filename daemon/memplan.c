/*
 * gpumuxd's memory planner (see memplan.h). Allocations are kept sorted by address per task,
 * so a predicted range finds its allocations by binary search. A plan numbers every chunk
 * of every allocation as one unit of core's planner, walks the coming slices backwards
 * (gmx_mplan_switch) and turns its eviction order and load list into merged orders.
 */
#include "memplan.h"

#include "gmx_proto.h"
#include "gpumux/mplan.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#define CHUNK GMX_MIG_CHUNK

typedef struct {
	uint64_t ptr, size;
	uint32_t n_chunks, base; /* base: first unit of this allocation in the current plan */
	uint8_t *res;		 /* per chunk: resident */
} malloc_rec_t;

typedef struct {
	malloc_rec_t *a;
	uint32_t n, cap;
	uint64_t bytes, resident;
} task_mem_t;

struct gmxd_mem {
	uint64_t cap, resident;
	task_mem_t t[GMX_MAX_TASKS];
};

int gmxd_mem_create(uint64_t cap, gmxd_mem_t **out)
{
	gmxd_mem_t *m = calloc(1, sizeof *m);
	if (!m)
		return -ENOMEM;
	m->cap = cap;
	*out = m;
	return 0;
}

void gmxd_mem_destroy(gmxd_mem_t *m)
{
	if (!m)
		return;
	for (uint32_t t = 0; t < GMX_MAX_TASKS; t++)
		gmxd_mem_drop(m, t);
	free(m);
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

static uint64_t chunk_len(const malloc_rec_t *a, uint32_t c)
{
	uint64_t off = (uint64_t)c * CHUNK;
	return a->size - off < CHUNK ? a->size - off : CHUNK;
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

int gmxd_mem_alloc(gmxd_mem_t *m, uint32_t task, uint64_t ptr, uint64_t size)
{
	if (task >= GMX_MAX_TASKS || size == 0 || ptr + size < ptr)
		return -EINVAL;
	task_mem_t *tm = &m->t[task];
	uint32_t i = first_after(tm, ptr);
	if (i < tm->n && tm->a[i].ptr < ptr + size)
		return -EINVAL; /* overlaps an allocation of the task */
	if (grow((void **)&tm->a, tm->n, &tm->cap, sizeof *tm->a, 16))
		return -ENOMEM;
	uint64_t nch = (size + CHUNK - 1) / CHUNK;
	if (nch > UINT32_MAX / 2)
		return -EINVAL;
	uint8_t *res = calloc(nch, 1);
	if (!res)
		return -ENOMEM;
	memmove(&tm->a[i + 1], &tm->a[i], (size_t)(tm->n - i) * sizeof *tm->a);
	tm->a[i] = (malloc_rec_t){.ptr = ptr, .size = size, .n_chunks = (uint32_t)nch, .res = res};
	tm->n++;
	tm->bytes += size;
	return 0;
}

static void forget(gmxd_mem_t *m, task_mem_t *tm, uint32_t i)
{
	malloc_rec_t *a = &tm->a[i];
	for (uint32_t c = 0; c < a->n_chunks; c++)
		if (a->res[c]) {
			tm->resident -= chunk_len(a, c);
			m->resident -= chunk_len(a, c);
		}
	tm->bytes -= a->size;
	free(a->res);
}

int gmxd_mem_free(gmxd_mem_t *m, uint32_t task, uint64_t ptr)
{
	if (task >= GMX_MAX_TASKS)
		return -ENOENT;
	task_mem_t *tm = &m->t[task];
	uint32_t i = first_after(tm, ptr);
	if (i >= tm->n || tm->a[i].ptr != ptr)
		return -ENOENT;
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

/* Calls fn(arg, allocation, chunk) for every chunk slice s needs, in access order (repeats
 * possible). Returns fn's first nonzero result, else 0. */
static int each_chunk(const gmxd_mem_t *m, const gmxd_mem_slice_t *s,
		      int (*fn)(void *arg, const malloc_rec_t *a, uint32_t c), void *arg)
{
	if (s->task >= GMX_MAX_TASKS)
		return 0;
	const task_mem_t *tm = &m->t[s->task];
	if (s->whole) {
		for (uint32_t i = 0; i < tm->n; i++)
			for (uint32_t c = 0; c < tm->a[i].n_chunks; c++) {
				int r = fn(arg, &tm->a[i], c);
				if (r)
					return r;
			}
		return 0;
	}
	for (uint32_t k = 0; k < s->n; k++) {
		uint64_t lo = s->r[k].addr, hi = lo + s->r[k].length;
		if (hi < lo)
			hi = UINT64_MAX;
		for (uint32_t i = first_after(tm, lo); i < tm->n && tm->a[i].ptr < hi; i++) {
			const malloc_rec_t *a = &tm->a[i];
			uint64_t from = lo > a->ptr ? lo - a->ptr : 0;
			uint64_t to = hi - a->ptr < a->size ? hi - a->ptr : a->size;
			for (uint64_t c = from / CHUNK; c < (to + CHUNK - 1) / CHUNK; c++) {
				int r = fn(arg, a, (uint32_t)c);
				if (r)
					return r;
			}
		}
	}
	return 0;
}

static int missing(void *arg, const malloc_rec_t *a, uint32_t c)
{
	(void)arg;
	return !a->res[c];
}

int gmxd_mem_ready(const gmxd_mem_t *m, const gmxd_mem_slice_t *s)
{
	return !each_chunk(m, s, missing, NULL);
}

typedef struct {
	uint32_t *v;
	uint32_t n, cap;
} ulist_t;

static int push_unit(void *arg, const malloc_rec_t *a, uint32_t c)
{
	ulist_t *l = arg;
	if (grow((void **)&l->v, l->n, &l->cap, sizeof *l->v, 256))
		return -ENOMEM;
	l->v[l->n++] = a->base + c;
	return 0;
}

/* Merges chunks of one allocation that follow each other (either way) into one order. */
typedef struct {
	gmxd_mem_emit_fn emit;
	void *ctx;
	uint32_t task;
	int dir, open;
	uint64_t ptr, len;
} merger_t;

static void merge_flush(merger_t *g)
{
	if (g->open)
		g->emit(g->ctx, g->task, g->dir, g->ptr, g->len);
	g->open = 0;
}

static void merge_add(merger_t *g, uint32_t task, int dir, uint64_t ptr, uint64_t len)
{
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
	*g = (merger_t){g->emit, g->ctx, task, dir, 1, ptr, len};
}

int gmxd_mem_plan(gmxd_mem_t *m, const gmxd_mem_slice_t *slice, uint32_t n_slices, uint32_t n_protected,
		  gmxd_mem_emit_fn emit, void *ctx, gmxd_mem_stats_t *st)
{
	memset(st, 0, sizeof *st);
	if (n_slices == 0 || n_protected > n_slices)
		return -EINVAL;
	if (gmxd_mem_ready(m, &slice[0]))
		return 0;
	/* Number the units. */
	uint32_t n_units = 0;
	for (uint32_t t = 0; t < GMX_MAX_TASKS; t++)
		for (uint32_t i = 0; i < m->t[t].n; i++) {
			m->t[t].a[i].base = n_units;
			n_units += m->t[t].a[i].n_chunks;
		}
	int rc = -ENOMEM;
	uint32_t *first = malloc(((size_t)n_slices + 1) * sizeof *first);
	uint16_t *u_task = malloc((size_t)n_units * sizeof *u_task + 1);
	uint32_t *u_alloc = malloc((size_t)n_units * sizeof *u_alloc + 1);
	uint8_t *is_res = calloc((size_t)n_units + 1, 1);
	uint32_t *res_list = malloc((size_t)n_units * sizeof *res_list + 1);
	uint32_t *evict = malloc((size_t)n_units * sizeof *evict + 1);
	uint32_t *load = NULL;
	ulist_t need = {0};
	gmx_mplan_t *p = NULL;
	if (!first || !u_task || !u_alloc || !is_res || !res_list || !evict)
		goto out;
	uint32_t n_res = 0;
	for (uint32_t t = 0; t < GMX_MAX_TASKS; t++)
		for (uint32_t i = 0; i < m->t[t].n; i++) {
			const malloc_rec_t *a = &m->t[t].a[i];
			for (uint32_t c = 0; c < a->n_chunks; c++) {
				u_task[a->base + c] = (uint16_t)t;
				u_alloc[a->base + c] = i;
				if (a->res[c]) {
					is_res[a->base + c] = 1;
					res_list[n_res++] = a->base + c;
				}
			}
		}
	for (uint32_t s = 0; s < n_slices; s++) {
		first[s] = need.n;
		if (each_chunk(m, &slice[s], push_unit, &need))
			goto out;
	}
	first[n_slices] = need.n;
	load = malloc(((size_t)first[1] - first[0]) * sizeof *load + 1);
	if (!load || gmx_mplan_create(n_units, &p))
		goto out;
	gmx_mplan_timeline_t tl = {n_slices, first, need.v ? need.v : first};
	uint32_t n_load = 0, n_keep = 0;
	rc = gmx_mplan_switch(p, &tl, res_list, n_res, is_res, evict, load, &n_load, &n_keep);
	if (rc)
		goto out;
	uint64_t want = 0;
	for (uint32_t i = 0; i < n_load; i++) {
		const malloc_rec_t *a = &m->t[u_task[load[i]]].a[u_alloc[load[i]]];
		want += chunk_len(a, load[i] - a->base);
	}
	uint64_t room = m->cap > m->resident ? m->cap - m->resident : 0;
	merger_t g = {.emit = emit, .ctx = ctx};
	for (uint32_t i = 0; i + n_keep < n_res && room < want; i++) {
		uint32_t u = evict[i];
		if (gmx_mplan_rank(p, u) < n_protected)
			break; /* the order is by rank, furthest first: the rest is protected too */
		task_mem_t *tm = &m->t[u_task[u]];
		malloc_rec_t *a = &tm->a[u_alloc[u]];
		uint32_t c = u - a->base;
		uint64_t len = chunk_len(a, c);
		a->res[c] = 0;
		tm->resident -= len;
		m->resident -= len;
		room += len;
		st->evict_bytes += len;
		merge_add(&g, u_task[u], 0, a->ptr + (uint64_t)c * CHUNK, len);
	}
	merge_flush(&g);
	for (uint32_t i = 0; i < n_load; i++) {
		uint32_t u = load[i];
		task_mem_t *tm = &m->t[u_task[u]];
		malloc_rec_t *a = &tm->a[u_alloc[u]];
		uint32_t c = u - a->base;
		uint64_t len = chunk_len(a, c);
		if (len > room) {
			st->short_bytes += len; /* the first slice alone exceeds the device */
			continue;
		}
		a->res[c] = 1;
		tm->resident += len;
		m->resident += len;
		room -= len;
		st->load_bytes += len;
		merge_add(&g, u_task[u], 1, a->ptr + (uint64_t)c * CHUNK, len);
	}
	merge_flush(&g);
	rc = 0;
out:
	gmx_mplan_destroy(p);
	free(first);
	free(u_task);
	free(u_alloc);
	free(is_res);
	free(res_list);
	free(evict);
	free(load);
	free(need.v);
	return rc;
}
