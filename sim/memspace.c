/* Residency bookkeeping: chunk bitmaps and the population-order list. */
#include "memspace.h"

#include "gpumux/combined.h"
#include "gpumux/devalloc.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The task lists of priority eviction: unlink c from its task's list, or append it. */
static void task_list_remove(gmx_memspace_t *m, uint32_t c)
{
	gmx_chunk_t *k = &m->chunks[c];
	if (k->tprev != GMX_NO_CHUNK)
		m->chunks[k->tprev].tnext = k->tnext;
	else
		m->thead[k->task] = k->tnext;
	if (k->tnext != GMX_NO_CHUNK)
		m->chunks[k->tnext].tprev = k->tprev;
	else
		m->ttail[k->task] = k->tprev;
	k->tprev = k->tnext = GMX_NO_CHUNK;
}

static void task_list_append(gmx_memspace_t *m, uint32_t c)
{
	gmx_chunk_t *k = &m->chunks[c];
	uint32_t t = k->task;
	k->pop = m->pops++;
	k->tprev = m->ttail[t];
	k->tnext = GMX_NO_CHUNK;
	if (m->ttail[t] != GMX_NO_CHUNK)
		m->chunks[m->ttail[t]].tnext = c;
	else
		m->thead[t] = c;
	m->ttail[t] = c;
}

static void list_remove(gmx_memspace_t *m, uint32_t c)
{
	gmx_chunk_t *k = &m->chunks[c];
	if (m->prio_evict)
		task_list_remove(m, c);
	if (k->prev != GMX_NO_CHUNK)
		m->chunks[k->prev].next = k->next;
	else
		m->head = k->next;
	if (k->next != GMX_NO_CHUNK)
		m->chunks[k->next].prev = k->prev;
	else
		m->tail = k->prev;
	k->prev = k->next = GMX_NO_CHUNK;
}

static void list_append(gmx_memspace_t *m, uint32_t c)
{
	gmx_chunk_t *k = &m->chunks[c];
	if (m->prio_evict)
		task_list_append(m, c);
	k->prev = m->tail;
	k->next = GMX_NO_CHUNK;
	if (m->tail != GMX_NO_CHUNK)
		m->chunks[m->tail].next = c;
	else
		m->head = c;
	m->tail = c;
}

uint64_t gmx_memspace_layout(const gmx_workload_t *w, uint64_t *addr)
{
	gmx_devalloc_pack_t p = {0};
	for (uint32_t b = 0; b < w->n_buffers; b++)
		addr[b] = gmx_devalloc_pack_next(&p, w->buffers[b].size);
	return p.chunks;
}

int gmx_memspace_init(gmx_memspace_t *m, const gmx_workload_t *const *w, uint32_t n, uint64_t capacity)
{
	memset(m, 0, sizeof(*m));
	m->head = m->tail = GMX_NO_CHUNK;
	if (n > GMX_MAX_TASKS)
		return -E2BIG;
	m->n_tasks = n;
	/* Workload files bound a buffer only by the address space: one larger than the chunk
	 * space is refused before it sizes anything (so no chunk count below can wrap). */
	for (uint32_t t = 0; t < n; t++)
		for (uint32_t b = 0; b < w[t]->n_buffers; b++)
			if (w[t]->buffers[b].size > ((uint64_t)GMX_NO_CHUNK << GMX_CHUNK_SHIFT))
				return -E2BIG;
	uint64_t total = 0;
	for (uint32_t t = 0; t < n; t++) {
		m->buf_addr[t] = calloc(w[t]->n_buffers ? w[t]->n_buffers : 1, sizeof(uint64_t));
		if (!m->buf_addr[t]) {
			gmx_memspace_free(m);
			return -ENOMEM;
		}
		uint64_t base = total << GMX_CHUNK_SHIFT;
		total += gmx_memspace_layout(w[t], m->buf_addr[t]);
		for (uint32_t b = 0; b < w[t]->n_buffers; b++)
			m->buf_addr[t][b] += base;
		if (total >= GMX_NO_CHUNK) {
			gmx_memspace_free(m);
			return -E2BIG;
		}
		m->task_chunk[t + 1] = (uint32_t)total;
	}
	m->chunks = calloc(total ? total : 1, sizeof(*m->chunks));
	if (!m->chunks) {
		gmx_memspace_free(m);
		return -ENOMEM;
	}
	m->n_chunks = (uint32_t)total;
	for (uint32_t t = 0; t < n; t++) {
		for (uint32_t c = m->task_chunk[t]; c < m->task_chunk[t + 1]; c++) {
			gmx_chunk_t *k = &m->chunks[c];
			k->task = t;
			k->prev = k->next = GMX_NO_CHUNK;
			k->evicted_at = -1;
		}
		/* A chunk's pages exist up to the end of the last buffer in it. */
		for (uint32_t b = 0; b < w[t]->n_buffers; b++) {
			uint64_t lo = m->buf_addr[t][b], end = lo + w[t]->buffers[b].size;
			for (uint64_t c = lo >> GMX_CHUNK_SHIFT; (c << GMX_CHUNK_SHIFT) < end; c++) {
				uint64_t left = end - (c << GMX_CHUNK_SHIFT);
				uint64_t pages = (left + GMX_PAGE_SIZE - 1) >> GMX_PAGE_SHIFT;
				uint16_t v =
				    (uint16_t)(pages > GMX_PAGES_PER_CHUNK ? GMX_PAGES_PER_CHUNK : pages);
				if (v > m->chunks[c].valid)
					m->chunks[c].valid = v;
			}
		}
	}
	m->capacity_chunks = capacity >> GMX_CHUNK_SHIFT;
	return 0;
}

void gmx_memspace_prio_evict(gmx_memspace_t *m, const int *priority)
{
	m->prio_evict = 1;
	for (uint32_t t = 0; t < GMX_MAX_TASKS; t++) {
		m->rank[t] = (int8_t)(t < m->n_tasks ? priority[t] : 0);
		m->thead[t] = m->ttail[t] = GMX_NO_CHUNK;
	}
	for (uint32_t c = 0; c < m->n_chunks; c++)
		m->chunks[c].tprev = m->chunks[c].tnext = GMX_NO_CHUNK;
}

/* Priority eviction's victim: the earliest populated chunk not stamped `stamp` among the
 * tasks of the worst level that has one; GMX_NO_CHUNK when none. O(tasks) but for stamped
 * chunks skipped. */
static uint32_t prio_victim(const gmx_memspace_t *m, uint64_t stamp)
{
	for (int level = GMX_PRIORITY_LEVELS - 1; level >= 0; level--) {
		uint32_t best = GMX_NO_CHUNK;
		for (uint32_t t = 0; t < m->n_tasks; t++) {
			if (m->rank[t] != level)
				continue;
			uint32_t v = m->thead[t];
			while (v != GMX_NO_CHUNK && m->chunks[v].stamp == stamp)
				v = m->chunks[v].tnext;
			if (v != GMX_NO_CHUNK &&
			    (best == GMX_NO_CHUNK || m->chunks[v].pop < m->chunks[best].pop))
				best = v;
		}
		if (best != GMX_NO_CHUNK)
			return best;
	}
	return GMX_NO_CHUNK;
}

void gmx_memspace_free(gmx_memspace_t *m)
{
	free(m->chunks);
	for (uint32_t t = 0; t < GMX_MAX_TASKS; t++)
		free(m->buf_addr[t]);
	memset(m, 0, sizeof(*m));
}

uint64_t gmx_memspace_next_missing(const gmx_memspace_t *m, uint64_t from, uint64_t to)
{
	uint64_t p = from;
	while (p < to) {
		const gmx_chunk_t *k = &m->chunks[p >> 9];
		if (k->resident == k->valid) {
			p = ((p >> 9) + 1) << 9;
			continue;
		}
		uint32_t i = (uint32_t)(p & 511);
		uint64_t word = ~k->bits[i >> 6] >> (i & 63);
		if (word) {
			p += (uint64_t)__builtin_ctzll(word);
			if ((p & 511) >= k->valid)
				p = ((p >> 9) + 1) << 9;
			else
				return p < to ? p : to;
		} else {
			p += 64 - (i & 63);
		}
	}
	return to;
}

uint64_t gmx_memspace_evict(gmx_memspace_t *m, uint32_t c, int64_t now)
{
	gmx_chunk_t *k = &m->chunks[c];
	if (!k->resident)
		return 0;
	uint64_t bytes = (uint64_t)k->resident << GMX_PAGE_SHIFT;
	m->resident_pages -= k->resident;
	memset(k->bits, 0, sizeof(k->bits));
	k->resident = 0;
	k->evicted_at = now;
	list_remove(m, c);
	m->used_chunks--;
	m->d2h_bytes += bytes;
	m->task_d2h[k->task] += bytes;
	if (m->note)
		m->note(m->note_ctx, k->task, 1, bytes, now);
	return bytes;
}

/* The victim for task `for_task` under priority protection: the first chunk in list order of
 * a worse priority, else the first of the same priority; never one stamped `stamp`. */
static uint32_t protected_victim(const gmx_memspace_t *m, uint32_t for_task, uint64_t stamp)
{
	int fp = m->prio[for_task];
	uint32_t same = GMX_NO_CHUNK;
	for (uint32_t v = m->head; v != GMX_NO_CHUNK; v = m->chunks[v].next) {
		const gmx_chunk_t *c = &m->chunks[v];
		if (c->stamp == stamp || ((!m->ws || m->ws[v]) && !gmx_comb_may_evict(m->prio[c->task], fp)))
			continue;
		if (gmx_comb_evict_key(m->prio[c->task], fp, 0) < gmx_comb_evict_key(fp, fp, 0))
			return v; /* a worse priority's: first */
		if (same == GMX_NO_CHUNK)
			same = v;
		if (fp >= m->prio_worst)
			return same; /* nothing worse exists */
	}
	return same;
}

uint32_t gmx_memspace_victim(const gmx_memspace_t *m, uint32_t for_task, uint64_t stamp)
{
	uint32_t v = m->protect	     ? protected_victim(m, for_task, stamp)
		     : m->prio_evict ? prio_victim(m, stamp)
				     : m->head;
	while (!m->protect && v != GMX_NO_CHUNK && m->chunks[v].stamp == stamp)
		v = m->chunks[v].next;
	return v;
}

int64_t gmx_memspace_populate(gmx_memspace_t *m, uint32_t c, const uint64_t mask[8], uint64_t stamp,
			      int64_t now, uint64_t *in_bytes, uint64_t *out_bytes)
{
	gmx_chunk_t *k = &m->chunks[c];
	k->stamp = stamp;
	if (!k->resident) {
		while (m->used_chunks >= m->capacity_chunks) {
			uint32_t v = gmx_memspace_victim(m, k->task, stamp);
			if (v == GMX_NO_CHUNK)
				return -ENOSPC;
			*out_bytes += gmx_memspace_evict(m, v, now);
		}
		m->used_chunks++;
		list_append(m, c);
	}
	int64_t added = 0;
	for (uint32_t w = 0; w < GMX_PAGES_PER_CHUNK / 64; w++) {
		uint64_t valid_mask = ~0ull;
		uint32_t lo = w * 64;
		if (lo >= k->valid)
			valid_mask = 0;
		else if (k->valid - lo < 64)
			valid_mask = (1ull << (k->valid - lo)) - 1;
		uint64_t add = mask[w] & ~k->bits[w] & valid_mask;
		if (add) {
			k->bits[w] |= add;
			added += __builtin_popcountll(add);
		}
	}
	k->resident = (uint16_t)(k->resident + added);
	m->resident_pages += (uint64_t)added;
	uint64_t bytes = (uint64_t)added << GMX_PAGE_SHIFT;
	m->h2d_bytes += bytes;
	m->task_h2d[k->task] += bytes;
	if (m->note && bytes)
		m->note(m->note_ctx, k->task, 0, bytes, now);
	*in_bytes += bytes;
	return added;
}

void gmx_memspace_warm(gmx_memspace_t *m)
{
	uint64_t all[8];
	memset(all, 0xff, sizeof(all));
	for (uint32_t c = 0; c < m->n_chunks && m->used_chunks < m->capacity_chunks; c++) {
		uint64_t in = 0, out = 0;
		gmx_memspace_populate(m, c, all, 0, 0, &in, &out);
	}
	m->h2d_bytes = 0;
	memset(m->task_h2d, 0, sizeof(m->task_h2d));
	m->initial_pages = m->resident_pages;
}

int gmx_memspace_check(const gmx_memspace_t *m, char *err, size_t len)
{
	if (m->used_chunks > m->capacity_chunks) {
		snprintf(err, len, "resident chunks %llu exceed capacity %llu",
			 (unsigned long long)m->used_chunks, (unsigned long long)m->capacity_chunks);
		return -1;
	}
	uint64_t moved_in = m->h2d_bytes >> GMX_PAGE_SHIFT, moved_out = m->d2h_bytes >> GMX_PAGE_SHIFT;
	if (m->initial_pages + moved_in - moved_out != m->resident_pages) {
		snprintf(err, len,
			 "bytes not conserved: initial %llu + in %llu - out %llu != resident %llu pages",
			 (unsigned long long)m->initial_pages, (unsigned long long)moved_in,
			 (unsigned long long)moved_out, (unsigned long long)m->resident_pages);
		return -1;
	}
	return 0;
}
