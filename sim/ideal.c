/* Belady's rule at 64 KB granularity with a lazy max-heap per task. */
#include "ideal.h"
#include "maxheap.h"

#include "gpumux/devalloc.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#define NEVER INT64_MAX

/* key: absolute task-time of next use; id: the big page. */
typedef gmx_heap_entry_t heap_entry_t;

typedef struct task_index {
	const gmx_workload_t *w;
	uint32_t first_big, n_bigs;
	uint64_t *buf_addr; /* byte address of each buffer (the memspace's layout) */
	uint8_t *buf_unit;  /* big pages per residency unit of each buffer (1..32) */
	uint32_t *use_off;  /* CSR: uses of local big b are use_op[use_off[b] .. use_off[b+1]) */
	uint32_t *use_op;
	int64_t *cum;       /* cum[i] = solo GPU ns before op i; cum[n_ops] = unit length */
	gmx_maxheap_t heap;
	uint32_t live;
} task_index_t;

struct gmx_ideal {
	uint32_t n_tasks;
	task_index_t t[GMX_MAX_TASKS];
	uint32_t n_bigs;
	uint64_t *resident;   /* bitmap over all big pages */
	int64_t *key;         /* next-use key of each resident big page */
	uint64_t *stamp;      /* op that last pinned it */
	uint8_t *ubigs;       /* at a unit's first big page: big pages in the unit; else 0 */
	uint64_t capacity, used, stamp_now;
	int64_t *stamp_end;   /* per access (stamp): when its op ends; 0 = not yet known */
	uint64_t stamp_cap;
	int64_t free_at;      /* of the running access's victims */
	uint64_t in_bytes, out_bytes;
	heap_entry_t *pending; /* keys of the running op's pages, pushed after its evictions */
	int has_tl;            /* gmx_ideal_timeline was called */
	int64_t tl_wait[GMX_MAX_TASKS], tl_left[GMX_MAX_TASKS], tl_slice, tl_others;
	uint32_t pending_n, pending_cap;
	/* The switch constraint: units the running turn has touched (by turn
	 * generation), their bytes, and the bytes of the previous turn's last op. */
	uint64_t *turn_pages, *op_pages; /* bitmaps over 4 KB pages: touched this turn, by this op */
	uint64_t (*marked)[2];           /* page ranges set in turn_pages, to clear at the next turn */
	uint32_t n_marked, cap_marked;
	int turn_task;
	uint64_t capacity_bytes, turn_bytes, last_op_bytes, prev_last_op_bytes;
};

static int is_gpu_op(uint8_t k)
{
	return k == GMX_OP_KERNEL || k == GMX_OP_COPY_H2D || k == GMX_OP_COPY_D2H || k == GMX_OP_MEMSET;
}

/* Global big page of byte `offset` of buffer b. */
static uint64_t big_of(const task_index_t *ti, uint32_t b, uint64_t offset)
{
	return (ti->buf_addr[b] + offset) >> GMX_BIG_SHIFT;
}

/* Runs body with `big` set to the first big page of each residency unit the
 * op touches (global numbering). A buffer's units are the largest power-of-two
 * run of big pages, up to a 2 MB chunk, that every region touching the buffer
 * covers whole: whole-buffer touches move in 2 MB units at 1/32 of the cost of
 * 64 KB pages, with exactly the same bytes moved. */
#define FOR_EACH_UNIT(ti, w, op, body)                                                                       \
	for (uint32_t r_ = 0; r_ < (op)->region_count; r_++) {                                               \
		const gmx_region_t *g_ = &(w)->regions[(op)->region_first + r_];                             \
		uint64_t base_ = (ti)->buf_addr[g_->buffer], u_ = (ti)->buf_unit[g_->buffer];                \
		uint64_t lo_ = ((base_ + g_->offset) >> GMX_BIG_SHIFT) & ~(u_ - 1);                          \
		uint64_t hi_ = (base_ + g_->offset + g_->length - 1) >> GMX_BIG_SHIFT;                       \
		for (uint64_t big = lo_; big <= hi_; big += u_) {                                            \
			body                                                                                 \
		}                                                                                            \
	}

/* Big pages per unit of each buffer: halve from a 2 MB chunk until every
 * region touching the buffer starts and ends on a unit boundary (or at the
 * buffer's end). One pass over the regions. A buffer that shares its chunk
 * (gmx_devalloc_shares) may share its first and last big pages with its
 * neighbours: its units are single big pages. */
static void units_of(const gmx_workload_t *w, uint8_t *unit)
{
	for (uint32_t b = 0; b < w->n_buffers; b++)
		unit[b] = gmx_devalloc_shares(w->buffers[b].size) ? 1 : GMX_BIGS_PER_CHUNK;
	for (uint32_t r = 0; r < w->n_regions; r++) {
		const gmx_region_t *g = &w->regions[r];
		uint64_t u = (uint64_t)unit[g->buffer] << GMX_BIG_SHIFT, end = g->offset + g->length;
		while (u > GMX_BIG_SIZE && (g->offset % u || (end % u && end != w->buffers[g->buffer].size)))
			u /= 2;
		unit[g->buffer] = (uint8_t)(u >> GMX_BIG_SHIFT);
	}
}

static int build_index(gmx_ideal_t *id, const gmx_memspace_t *m, uint32_t task, const gmx_workload_t *w)
{
	task_index_t *ti = &id->t[task];
	ti->w = w;
	ti->first_big = m->task_chunk[task] * GMX_BIGS_PER_CHUNK;
	ti->n_bigs = (m->task_chunk[task + 1] - m->task_chunk[task]) * GMX_BIGS_PER_CHUNK;
	ti->buf_addr = m->buf_addr[task];
	ti->buf_unit = calloc(w->n_buffers ? w->n_buffers : 1, 1);
	if (!ti->buf_unit)
		return -ENOMEM;
	units_of(w, ti->buf_unit);
	for (uint32_t b = 0; b < w->n_buffers; b++) {
		uint64_t lo = big_of(ti, b, 0), end = big_of(ti, b, w->buffers[b].size - 1) + 1;
		for (uint64_t big = lo; big < end; big += ti->buf_unit[b])
			id->ubigs[big] = (uint8_t)(end - big < ti->buf_unit[b] ? end - big : ti->buf_unit[b]);
	}
	ti->use_off = calloc((size_t)ti->n_bigs + 1, sizeof(uint32_t));
	ti->cum = calloc((size_t)w->n_ops + 1, sizeof(int64_t));
	if (!ti->use_off || !ti->cum)
		return -ENOMEM;
	for (uint32_t i = 0; i < w->n_ops; i++)
		ti->cum[i + 1] = ti->cum[i] + (is_gpu_op(w->ops[i].kind) ? (int64_t)w->ops[i].duration_ns : 0);
	/* Count, then fill; consecutive regions of one op on the same page count once. */
	uint32_t *last_op = malloc((size_t)ti->n_bigs * sizeof(uint32_t) + 1);
	if (!last_op)
		return -ENOMEM;
	memset(last_op, 0xff, (size_t)ti->n_bigs * sizeof(uint32_t));
	uint64_t total = 0;
	for (uint32_t i = 0; i < w->n_ops; i++) {
		const gmx_op_t *op = &w->ops[i];
		FOR_EACH_UNIT(ti, w, op, {
			uint32_t lb = (uint32_t)(big - ti->first_big);
			if (last_op[lb] != i) {
				last_op[lb] = i;
				ti->use_off[lb + 1]++;
				total++;
			}
		})
	}
	if (total >= UINT32_MAX) {
		free(last_op);
		return -E2BIG;
	}
	for (uint32_t b = 0; b < ti->n_bigs; b++)
		ti->use_off[b + 1] += ti->use_off[b];
	ti->use_op = malloc((size_t)(total ? total : 1) * sizeof(uint32_t));
	uint32_t *fill = malloc((size_t)ti->n_bigs * sizeof(uint32_t) + 1);
	if (!ti->use_op || !fill) {
		free(last_op);
		free(fill);
		return -ENOMEM;
	}
	memcpy(fill, ti->use_off, (size_t)ti->n_bigs * sizeof(uint32_t));
	memset(last_op, 0xff, (size_t)ti->n_bigs * sizeof(uint32_t));
	for (uint32_t i = 0; i < w->n_ops; i++) {
		const gmx_op_t *op = &w->ops[i];
		FOR_EACH_UNIT(ti, w, op, {
			uint32_t lb = (uint32_t)(big - ti->first_big);
			if (last_op[lb] != i) {
				last_op[lb] = i;
				ti->use_op[fill[lb]++] = i;
			}
		})
	}
	free(last_op);
	free(fill);
	return 0;
}

/* Absolute task-time of the first use of local big `lb` after op `op` of `unit`. */
static int64_t next_use(const task_index_t *ti, uint32_t lb, uint64_t unit, int64_t op)
{
	uint32_t lo = ti->use_off[lb], hi = ti->use_off[lb + 1];
	if (lo == hi)
		return NEVER;
	int64_t U = ti->cum[ti->w->n_ops];
	/* Pages used once per unit (most of a model's weights): the next use is
	 * the same op one unit later, no search needed. */
	if (hi - lo == 1)
		return (int64_t)(ti->use_op[lo] > op ? unit : unit + 1) * U + ti->cum[ti->use_op[lo]];
	uint32_t a = lo, b = hi;
	while (a < b) { /* first use with op index > op */
		uint32_t mid = a + (b - a) / 2;
		if ((int64_t)ti->use_op[mid] > op)
			b = mid;
		else
			a = mid + 1;
	}
	if (a < hi)
		return (int64_t)unit * U + ti->cum[ti->use_op[a]];
	return (int64_t)(unit + 1) * U + ti->cum[ti->use_op[lo]];
}

static int owner(const gmx_ideal_t *id, uint32_t big)
{
	for (uint32_t t = 0; t < id->n_tasks; t++)
		if (big >= id->t[t].first_big && big - id->t[t].first_big < id->t[t].n_bigs)
			return (int)t;
	return -1;
}

static int set_resident(gmx_ideal_t *id, uint32_t big, int64_t key)
{
	id->resident[big >> 6] |= 1ull << (big & 63);
	id->key[big] = key;
	int t = owner(id, big);
	id->t[t].live++;
	return gmx_maxheap_push(&id->t[t].heap, key, big);
}

/* Records a key to push once the running op's evictions are done: until then
 * the page has no valid heap entry, so it cannot be chosen as a victim. */
static int defer_key(gmx_ideal_t *id, uint32_t big, int64_t key)
{
	if (id->pending_n == id->pending_cap) {
		uint32_t ncap = id->pending_cap ? id->pending_cap * 2 : 1024;
		heap_entry_t *p = realloc(id->pending, ncap * sizeof(*p));
		if (!p)
			return -ENOMEM;
		id->pending = p;
		id->pending_cap = ncap;
	}
	id->key[big] = key;
	id->pending[id->pending_n++] = (heap_entry_t){key, big};
	return 0;
}

int gmx_ideal_create(const gmx_memspace_t *m, const gmx_workload_t *const *w, uint32_t n, uint64_t capacity,
		     gmx_ideal_t **out)
{
	gmx_ideal_t *id = calloc(1, sizeof(*id));
	if (!id)
		return -ENOMEM;
	id->n_tasks = n;
	id->n_bigs = m->n_chunks * GMX_BIGS_PER_CHUNK;
	id->capacity = capacity >> GMX_BIG_SHIFT;
	id->resident = calloc((id->n_bigs + 63) / 64 + 1, sizeof(uint64_t));
	id->key = calloc((size_t)id->n_bigs + 1, sizeof(int64_t));
	id->stamp = calloc((size_t)id->n_bigs + 1, sizeof(uint64_t));
	id->ubigs = calloc((size_t)id->n_bigs + 1, 1);
	id->turn_pages = calloc((size_t)id->n_bigs / 4 + 1, sizeof(uint64_t)); /* 16 pages per big page */
	id->op_pages = calloc((size_t)id->n_bigs / 4 + 1, sizeof(uint64_t));
	id->capacity_bytes = capacity;
	id->turn_task = -1;
	int rc = (!id->resident || !id->key || !id->stamp || !id->ubigs || !id->turn_pages || !id->op_pages) ? -ENOMEM : 0;
	for (uint32_t t = 0; !rc && t < n; t++)
		rc = build_index(id, m, t, w[t]);
	if (rc) {
		gmx_ideal_destroy(id);
		return rc;
	}
	/* Warm start as the other modes: memory filled in task then buffer order. */
	for (uint32_t t = 0; t < n; t++) {
		task_index_t *ti = &id->t[t];
		for (uint32_t b = 0; b < w[t]->n_buffers; b++) {
			uint64_t end = big_of(ti, b, w[t]->buffers[b].size - 1) + 1;
			for (uint64_t i = big_of(ti, b, 0); i < end; i += ti->buf_unit[b]) {
				uint32_t big = (uint32_t)i;
				if ((id->resident[big >> 6] >> (big & 63)) & 1)
					continue; /* shared with the buffer before */
				if (id->used + id->ubigs[big] > id->capacity)
					break;
				if (set_resident(id, big, next_use(ti, big - ti->first_big, 0, -1))) {
					gmx_ideal_destroy(id);
					return -ENOMEM;
				}
				id->used += id->ubigs[big];
			}
		}
	}
	*out = id;
	return 0;
}

void gmx_ideal_destroy(gmx_ideal_t *id)
{
	if (!id)
		return;
	for (uint32_t t = 0; t < id->n_tasks; t++) {
		free(id->t[t].buf_unit);
		free(id->t[t].use_off);
		free(id->t[t].use_op);
		free(id->t[t].cum);
		free(id->t[t].heap.e);
	}
	free(id->pending);
	free(id->stamp_end);
	free(id->ubigs);
	free(id->turn_pages);
	free(id->op_pages);
	free(id->marked);
	free(id->resident);
	free(id->key);
	free(id->stamp);
	free(id);
}

void gmx_ideal_timeline(gmx_ideal_t *id, const int64_t *wait, const int64_t *left, int64_t slice, int64_t others)
{
	id->has_tl = 1;
	for (uint32_t t = 0; t < id->n_tasks; t++) {
		id->tl_wait[t] = wait[t];
		id->tl_left[t] = left[t];
	}
	id->tl_slice = slice;
	id->tl_others = others;
}

int64_t gmx_ideal_task_time(const gmx_ideal_t *id, uint32_t task, uint64_t unit, uint32_t op)
{
	const task_index_t *ti = &id->t[task];
	return (int64_t)unit * ti->cum[ti->w->n_ops] + ti->cum[op];
}

static int entry_valid(const gmx_ideal_t *id, const heap_entry_t *e)
{
	return ((id->resident[e->id >> 6] >> (e->id & 63)) & 1) && id->key[e->id] == e->key;
}

/* Evicts the resident page whose next use lies furthest ahead in its owner's
 * time; never one pinned by the current op. 0 or -ENOSPC. */
static int evict_one(gmx_ideal_t *id, const int64_t *progress)
{
	int best = -1;
	int64_t best_score = INT64_MIN;
	for (uint32_t t = 0; t < id->n_tasks; t++) {
		task_index_t *ti = &id->t[t];
		while (ti->heap.n) {
			heap_entry_t *e = &ti->heap.e[0];
			if (!entry_valid(id, e)) {
				gmx_maxheap_pop(&ti->heap);
			} else {
				break;
			}
		}
		if (!ti->heap.n)
			continue;
		int64_t k = ti->heap.e[0].key;
		int64_t score = k == NEVER ? INT64_MAX : k - progress[t];
		if (id->has_tl && k != NEVER) {
			/* Owner's GPU time to wall-clock time on the slice timeline. */
			int64_t d = score, w = id->tl_wait[t] + d;
			if (d >= id->tl_left[t] && id->tl_slice > 0)
				w += id->tl_others * (1 + (d - id->tl_left[t]) / id->tl_slice);
			score = w;
		}
		if (score > best_score) {
			best_score = score;
			best = (int)t;
		}
	}
	int rc = best < 0 ? -ENOSPC : 0;
	if (best >= 0) {
		task_index_t *ti = &id->t[best];
		uint32_t big = ti->heap.e[0].id;
		gmx_maxheap_pop(&ti->heap);
		id->resident[big >> 6] &= ~(1ull << (big & 63));
		ti->live--;
		id->used -= id->ubigs[big];
		id->out_bytes += (uint64_t)id->ubigs[big] << GMX_BIG_SHIFT;
		uint64_t st = id->stamp[big];
		if (st && st < id->stamp_cap && id->stamp_end[st] > id->free_at)
			id->free_at = id->stamp_end[st];
	}
	return rc;
}

/* Sets (on) or clears bits lo..hi of bm; returns how many changed. */
static uint64_t mark_pages(uint64_t *bm, uint64_t lo, uint64_t hi, int on)
{
	uint64_t changed = 0;
	for (uint64_t b = lo; b <= hi;) {
		uint64_t wi = b >> 6, sh = b & 63, e = hi - (wi << 6) < 63 ? hi - (wi << 6) : 63;
		uint64_t bits = (e - sh == 63) ? ~0ull : (((1ull << (e - sh + 1)) - 1) << sh);
		uint64_t old = bm[wi];
		bm[wi] = on ? old | bits : old & ~bits;
		changed += (uint64_t)__builtin_popcountll(on ? bits & ~old : bits & old);
		b = (wi << 6) + e + 1;
	}
	return changed;
}

/* The switch constraint's counts at 4 KB pages, what any policy must hold:
 * the bytes op o touches (last_op_bytes) and those its turn has touched so far
 * (turn_bytes). 0 or -ENOMEM. */
static int count_pages(gmx_ideal_t *id, const task_index_t *ti, const gmx_workload_t *w, const gmx_op_t *o)
{
	uint64_t op_bytes = 0;
	for (int on = 1; on >= 0; on--)
		for (uint32_t r = 0; r < o->region_count; r++) {
			const gmx_region_t *g = &w->regions[o->region_first + r];
			if (!g->length)
				continue;
			uint64_t base = ti->buf_addr[g->buffer];
			uint64_t lo = (base + g->offset) >> 12, hi = (base + g->offset + g->length - 1) >> 12;
			uint64_t n = mark_pages(id->op_pages, lo, hi, on);
			if (!on)
				continue;
			op_bytes += n << 12;
			uint64_t fresh = mark_pages(id->turn_pages, lo, hi, 1);
			if (!fresh)
				continue;
			id->turn_bytes += fresh << 12;
			if (id->n_marked == id->cap_marked) {
				uint32_t ncap = id->cap_marked ? 2 * id->cap_marked : 256;
				uint64_t(*p)[2] = realloc(id->marked, ncap * sizeof(*p));
				if (!p)
					return -ENOMEM;
				id->marked = p;
				id->cap_marked = ncap;
			}
			id->marked[id->n_marked][0] = lo;
			id->marked[id->n_marked++][1] = hi;
		}
	id->last_op_bytes = op_bytes;
	return 0;
}

int gmx_ideal_access(gmx_ideal_t *id, uint32_t task, uint64_t unit, uint32_t op, const int64_t *progress,
		     gmx_ideal_moves_t *out)
{
	task_index_t *ti = &id->t[task];
	const gmx_workload_t *w = ti->w;
	const gmx_op_t *o = &w->ops[op];
	uint64_t in0 = id->in_bytes, out0 = id->out_bytes;
	id->stamp_now++;
	if (id->stamp_now >= id->stamp_cap) {
		uint64_t ncap = id->stamp_cap ? 2 * id->stamp_cap : 4096;
		int64_t *p = realloc(id->stamp_end, ncap * sizeof(*p));
		if (!p)
			return -ENOMEM;
		memset(p + id->stamp_cap, 0, (ncap - id->stamp_cap) * sizeof(*p));
		id->stamp_end = p;
		id->stamp_cap = ncap;
	}
	id->free_at = INT64_MIN;
	int new_turn = id->turn_task != (int)task;
	if (new_turn) {
		id->turn_task = (int)task;
		id->prev_last_op_bytes = id->last_op_bytes;
		id->turn_bytes = 0;
		for (uint32_t i = 0; i < id->n_marked; i++)
			(void)mark_pages(id->turn_pages, id->marked[i][0], id->marked[i][1], 0);
		id->n_marked = 0;
	}
	if (count_pages(id, ti, w, o))
		return -ENOMEM;
	/* Pass 0 pins and re-keys what is already resident, so that pass 1's
	 * evictions can never take a page this op needs. */
	for (int pass = 0; pass < 2; pass++) {
		for (uint32_t r = 0; r < o->region_count; r++) {
			const gmx_region_t *g = &w->regions[o->region_first + r];
			uint64_t u = ti->buf_unit[g->buffer];
			uint64_t lo = big_of(ti, g->buffer, g->offset) & ~(u - 1);
			uint64_t hi = big_of(ti, g->buffer, g->offset + g->length - 1);
			for (uint64_t b = lo; b <= hi; b += u) {
				uint32_t big = (uint32_t)b;
				if (id->stamp[big] == id->stamp_now)
					continue;
				int here = (id->resident[big >> 6] >> (big & 63)) & 1;
				if (here != (pass == 0))
					continue;
				int64_t key = next_use(ti, big - ti->first_big, unit, op);
				if (!here) {
					while (id->used + id->ubigs[big] > id->capacity)
						if (evict_one(id, progress))
							return -ENOSPC;
					id->resident[big >> 6] |= 1ull << (big & 63);
					ti->live++;
					id->used += id->ubigs[big];
					id->in_bytes += (uint64_t)id->ubigs[big] << GMX_BIG_SHIFT;
				}
				if (defer_key(id, big, key))
					return -ENOMEM;
				id->stamp[big] = id->stamp_now;
			}
		}
	}
	for (uint32_t i = 0; i < id->pending_n; i++)
		if (gmx_maxheap_push(&ti->heap, id->pending[i].key, id->pending[i].id))
			return -ENOMEM;
	id->pending_n = 0;
	out->in_bytes = id->in_bytes - in0;
	out->out_bytes = id->out_bytes - out0;
	out->free_at = id->free_at;
	out->new_turn = new_turn;
	out->turn_bytes = id->turn_bytes;
	uint64_t room = id->capacity_bytes > id->prev_last_op_bytes ? id->capacity_bytes - id->prev_last_op_bytes : 0;
	out->after_switch_bytes = id->turn_bytes > room ? id->turn_bytes - room : 0;
	/* Stale heap entries pile up as keys change; rebuild when they dominate. */
	if (ti->heap.n > 4 * ti->live + 4096) {
		uint32_t k = 0;
		for (uint32_t i = 0; i < ti->heap.n; i++)
			if (entry_valid(id, &ti->heap.e[i]))
				ti->heap.e[k++] = ti->heap.e[i];
		heap_entry_t *copy = malloc((size_t)k * sizeof(*copy) + 1);
		if (copy) {
			memcpy(copy, ti->heap.e, (size_t)k * sizeof(*copy));
			ti->heap.n = 0;
			for (uint32_t i = 0; i < k; i++)
				(void)gmx_maxheap_push(&ti->heap, copy[i].key, copy[i].id); /* fits: the heap only shrank */
			free(copy);
		}
	}
	return 0;
}

void gmx_ideal_used_until(gmx_ideal_t *id, int64_t end)
{
	if (id->stamp_now < id->stamp_cap)
		id->stamp_end[id->stamp_now] = end;
}

void gmx_ideal_totals(const gmx_ideal_t *id, uint64_t *in_bytes, uint64_t *out_bytes)
{
	*in_bytes = id->in_bytes;
	*out_bytes = id->out_bytes;
}

int gmx_ideal_check(const gmx_ideal_t *id)
{
	return id->used <= id->capacity ? 0 : -1;
}
