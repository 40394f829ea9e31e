/*
 * Walking what a slice of the memory planner's timeline needs, within a budget: every chunk
 * and bitmap word looked at counts against it; non-resident chunks are skipped a bitmap word
 * at a time unless the walker asks for them (memplan_internal.h).
 */
#include "memplan_internal.h"

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
		if (end == a->n_chunks && !gmxd__mem_bit(a, a->n_chunks - 1))
			mb -= CHUNK - gmxd__mem_chunk_len(a, a->n_chunks - 1);
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
int gmxd__mem_walk_slice(const gmxd_mem_t *m, const gmxd_mem_slice_t *s, walk_t *w)
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
		for (uint32_t i = gmxd__mem_first_after(tm, lo); i < tm->n && tm->a[i].ptr < hi; i++) {
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
	return gmxd__mem_walk_slice(m, s, &w) == WALK_DONE;
}

/* (a chunk two ranges reach counts twice: an upper bound) */
uint64_t gmxd_mem_missing(const gmxd_mem_t *m, const gmxd_mem_slice_t *s)
{
	if (s->task >= GMX_MAX_TASKS)
		return 0;
	if (s->whole)
		return m->t[s->task].bytes - m->t[s->task].resident;
	walk_t w = {.left = m->budget};
	gmxd__mem_walk_slice(m, s, &w);
	return w.skipped_missing;
}
