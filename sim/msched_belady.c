/* msched's memory planner: Belady's rule on the predicted timeline, applied
 * continuously. See msched_internal.h and docs/msched.md#timeline-and-planner.
 *
 * Every resident chunk has a key: the task time (its owner's predicted GPU
 * time) of its next predicted use. The timeline turns a key into a predicted
 * wall-clock time: the running task reaches it within its turn, or at one of
 * its later turns after every other runnable task's slice; another task at
 * its place in the rotation. The chunk to evict is the one whose next use lies
 * furthest ahead on that clock. At each kernel the op's missing pages are
 * loaded first; then the pages the timeline needs next (the rest of this
 * turn, then the following turns in order) stream in on the link, each only
 * into room a chunk used later than it can give up, and only while the link
 * is free within a short horizon (a load cannot be taken back). As the running
 * task finishes with its chunks for this turn, their keys move to its next
 * turn and they become the victims the next task's pages replace. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "gpumux/sched.h"
#include "msched_internal.h"

/* How far ahead of the kernel being started the stream commits the link: a
 * load cannot be cancelled, so committing far ahead makes a later, more urgent
 * load wait; the next kernel (a few ms at most) tops the queue up again. */
#define STREAM_AHEAD_NS 2000000LL

/* ---- heaps ------------------------------------------------------------------ */

static int entry_valid(const gmx_msched_t *ms, const bentry_t *e)
{
	return ms->m->chunks[e->id].resident && ms->bkey[e->id] == e->key;
}

/* An entry leaves the heap: when it was the chunk's own (its key, the chunk
 * evicted since), the chunk has none left, so that loading it again with the
 * same key pushes a new one (set_key skips a key that stands). */
static void forget(gmx_msched_t *ms, const bentry_t *e)
{
	if (!ms->m->chunks[e->id].resident && ms->bkey[e->id] == e->key)
		ms->bkey[e->id] = INT64_MIN;
}

/* Drops stale entries (and duplicates) when they dominate the heap. */
static void heap_compact(gmx_msched_t *ms, bindex_t *b)
{
	if (b->heap.n <= 2 * b->n + 4096)
		return;
	if (++ms->bgen == 0) {
		memset(ms->bmark, 0, ((size_t)ms->m->n_chunks + 1) * sizeof(uint32_t));
		ms->bgen = 1;
	}
	uint32_t k = 0, n = b->heap.n;
	for (uint32_t i = 0; i < n; i++) {
		bentry_t e = b->heap.e[i];
		if (entry_valid(ms, &e) && ms->bmark[e.id] != ms->bgen) {
			ms->bmark[e.id] = ms->bgen;
			b->heap.e[k++] = e;
		} else {
			forget(ms, &e);
		}
	}
	/* Rebuild in place: push the kept entries one by one (the heap only shrank). */
	b->heap.n = 0;
	for (uint32_t i = 0; i < k; i++)
		(void)gmx_maxheap_push(&b->heap, b->heap.e[i].key, b->heap.e[i].id);
}

static int set_key(gmx_msched_t *ms, uint32_t c, int64_t key)
{
	bindex_t *b = &ms->b[ms->m->chunks[c].task];
	if (ms->bkey[c] == key && key != INT64_MIN)
		return 0; /* its entry stands */
	ms->bkey[c] = key;
	int rc = gmx_maxheap_push(&b->heap, key, c);
	heap_compact(ms, b);
	return rc;
}

/* ---- next use ----------------------------------------------------------------- */

static int64_t unit_ns(const gmx_msched_t *ms, uint32_t t)
{
	return ms->b[t].cum[ms->t[t].w->n_ops];
}

/* Task time of position (unit, op) of task t. */
static int64_t task_time(const gmx_msched_t *ms, uint32_t t, uint64_t unit, uint32_t op)
{
	return (int64_t)unit * unit_ns(ms, t) + ms->b[t].cum[op];
}

/* Task time of the first predicted use of chunk c (of task t) at op `op` of
 * `unit` or later; MSCHED_NEVER when no op touches it. */
static int64_t next_use(const gmx_msched_t *ms, uint32_t t, uint32_t c, uint64_t unit, uint32_t op)
{
	const bindex_t *b = &ms->b[t];
	uint32_t lc = c - b->first, lo = b->off[lc], hi = b->off[lc + 1];
	if (lo == hi)
		return MSCHED_NEVER;
	uint32_t a = lo, z = hi;
	while (a < z) { /* first use with op index >= op */
		uint32_t mid = a + (z - a) / 2;
		if (b->ops[mid] >= op)
			z = mid;
		else
			a = mid + 1;
	}
	if (a < hi)
		return task_time(ms, t, unit, b->ops[a]);
	return task_time(ms, t, unit + 1, b->ops[lo]);
}

/* The running task's task time left in its turn, from its op's start: the
 * slice's rest, or less when its host leaves the device after the op (the
 * turn ends there). */
static int64_t turn_rest(const gmx_msched_t *ms, int64_t now)
{
	int64_t rem = ms->turn_end > now ? ms->turn_end - now : 0;
	if (ms->n_order) {
		uint32_t t = ms->order[0];
		const bindex_t *b = &ms->b[t];
		if (b->started && b->tail[b->op] >= 0 && ms->t[t].op_ns[b->op] < rem)
			rem = ms->t[t].op_ns[b->op];
	}
	return rem;
}

/* Predicted wall-clock time at which task t reaches task time `key`, on the
 * timeline of the last switch (see the file comment). */
static int64_t wall(const gmx_msched_t *ms, uint32_t t, int64_t key, int64_t now)
{
	if (key == MSCHED_NEVER || ms->slot_of[t] == UINT32_MAX)
		return INT64_MAX;
	const bindex_t *b = &ms->b[t];
	int64_t d = key - task_time(ms, t, b->unit, b->op);
	if (d < 0)
		d = 0;
	int64_t S = ms->slice_ns > 0 ? ms->slice_ns : 1, others = (int64_t)(ms->n_order - 1) * S, base;
	if (ms->slot_of[t] == 0) {
		int64_t rem = ms->forgo ? 0 : turn_rest(ms, now);
		if (d < rem)
			return now + d;
		d -= rem;
		base = ms->turn_end + others;
	} else {
		base = ms->turn_end + (int64_t)(ms->slot_of[t] - 1) * S;
	}
	if (d / S > (INT64_MAX / 4) / (others + S))
		return INT64_MAX / 2;
	return base + d + (d / S) * others;
}

/* The resident chunk whose next use lies furthest ahead, never one the running
 * op holds (stamped) or one still loading; *w its wall-clock next use.
 * GMX_NO_CHUNK when the heaps hold none (chunks the fault path brought in
 * have no key: the memspace's own order takes those), or with ms->oom set when
 * it ran out of memory. */
static uint32_t pick_victim(gmx_msched_t *ms, int64_t now, int64_t *w)
{
	uint32_t best = GMX_NO_CHUNK;
	int64_t best_w = INT64_MIN;
	ms->stash_n = 0;
	for (uint32_t t = 0; t < ms->n; t++) {
		bindex_t *b = &ms->b[t];
		while (b->heap.n) {
			bentry_t e = b->heap.e[0];
			if (!entry_valid(ms, &e)) {
				gmx_maxheap_pop(&b->heap);
				forget(ms, &e);
				continue;
			}
			int64_t pos = task_time(ms, t, b->unit, b->op);
			if (e.key != MSCHED_NEVER && e.key < pos) {
				/* Its predicted use has passed: key it by the next one. */
				gmx_maxheap_pop(&b->heap);
				ms->bkey[e.id] = next_use(ms, t, e.id, b->unit, b->op);
				if (gmx_maxheap_push(&b->heap, ms->bkey[e.id], e.id)) {
					ms->oom = 1; /* load() reports it */
					return GMX_NO_CHUNK;
				}
				continue;
			}
			if (ms->m->chunks[e.id].stamp == ms->stamp || ms->ready[e.id] > now) {
				gmx_maxheap_pop(&b->heap);
				if (ms->stash_n == ms->stash_cap) {
					uint32_t ncap = ms->stash_cap ? 2 * ms->stash_cap : 256;
					bentry_t *p = realloc(ms->stash, ncap * sizeof(*p));
					if (!p) {
						ms->oom = 1;
						return GMX_NO_CHUNK;
					}
					ms->stash = p;
					ms->stash_cap = ncap;
				}
				ms->stash[ms->stash_n++] = e;
				continue;
			}
			int64_t wt = wall(ms, t, e.key, now);
			if (best == GMX_NO_CHUNK || wt > best_w) {
				best = e.id;
				best_w = wt;
			}
			break;
		}
	}
	for (uint32_t i = 0; i < ms->stash_n; i++)
		(void)gmx_maxheap_push(&ms->b[ms->m->chunks[ms->stash[i].id].task].heap, ms->stash[i].key, ms->stash[i].id);
	*w = best_w;
	return best;
}

/* Loads the pages of mk of chunk c (the use at task time `key`); when c needs
 * room, first evicts the victim, but only one used after `limit` (wall
 * clock; INT64_MIN: any). 1 when loaded, 0 when no such victim, <0 error. */
static int load(gmx_msched_t *ms, uint32_t c, const uint64_t mk[8], int64_t key, int64_t limit, int64_t now,
		int64_t at, uint64_t *counter)
{
	gmx_memspace_t *m = ms->m;
	uint64_t out = 0;
	if (!m->chunks[c].resident && m->used_chunks >= m->capacity_chunks) {
		int64_t vw;
		uint32_t v = pick_victim(ms, now, &vw);
		if (ms->oom)
			return -ENOMEM;
		if (v == GMX_NO_CHUNK && limit != INT64_MIN)
			return 0;
		if (v != GMX_NO_CHUNK) {
			if (limit != INT64_MIN && vw <= limit)
				return 0;
			out = gmx_memspace_evict(m, v, at);
		}
	}
	int keyed = m->chunks[c].resident && ms->bkey[c] != INT64_MIN;
	int64_t rc = gmx_msched__migrate(ms, c, mk, at, out, counter);
	if (rc < 0)
		return (int)rc;
	if ((!keyed || key < ms->bkey[c]) && set_key(ms, c, key))
		return -ENOMEM;
	return 1;
}

/* ---- set-up -------------------------------------------------------------------- */

/* How long after op k of w ends its task's next kernel can start at the
 * earliest, when the host waits in between: the copies that follow it (at the
 * serial rate unless recorded), and once a sync is passed, the host's time
 * before each op up to that kernel. 0 when the next kernel is queued behind it.
 * *copies gets the part of it before the host's first wait (the copies queued
 * behind the op), *host the host's own time (the queue empty). */
static int64_t idle_after(const gmx_workload_t *w, uint32_t k, double serial_gbps, int64_t *copies, int64_t *host)
{
	int synced = 0;
	int64_t gap = 0;
	*copies = *host = 0;
	for (uint32_t s = 1; s <= w->n_ops; s++) {
		const gmx_op_t *o = &w->ops[(k + s) % w->n_ops];
		if (synced) {
			gap += (int64_t)o->think_ns;
			*host += (int64_t)o->think_ns;
		}
		if (o->kind == GMX_OP_KERNEL || o->kind == GMX_OP_MEMSET)
			break;
		if (o->kind == GMX_OP_COPY_H2D || o->kind == GMX_OP_COPY_D2H) {
			gap += o->duration_ns ? (int64_t)o->duration_ns : (int64_t)((double)o->bytes / serial_gbps);
			if (!synced)
				*copies = gap;
		}
		synced |= o->kind == GMX_OP_SYNC;
	}
	return gap;
}

static int build_index(gmx_msched_t *ms, uint32_t t)
{
	const ptask_t *p = &ms->t[t];
	const gmx_workload_t *w = p->w;
	const gmx_memspace_t *m = ms->m;
	bindex_t *b = &ms->b[t];
	b->first = m->task_chunk[t];
	b->n = m->task_chunk[t + 1] - m->task_chunk[t];
	b->off = calloc((size_t)b->n + 2, sizeof(uint32_t));
	b->cum = calloc((size_t)w->n_ops + 1, sizeof(int64_t));
	uint32_t *last = malloc(((size_t)b->n + 1) * sizeof(uint32_t));
	if (!b->off || !b->cum || !last) {
		free(last);
		return -ENOMEM;
	}
	for (uint32_t k = 0; k < w->n_ops; k++)
		b->cum[k + 1] = b->cum[k] + p->op_ns[k];
	b->idle = calloc((size_t)w->n_ops + 1, sizeof(int64_t));
	b->tail = calloc((size_t)w->n_ops + 1, sizeof(int64_t));
	if (!b->idle || !b->tail) {
		free(last);
		return -ENOMEM;
	}
	for (uint32_t k = 0; k < w->n_ops; k++) {
		int64_t copies, host;
		b->idle[k] = idle_after(w, k, ms->dev->link_serial_gbps, &copies, &host);
		/* A host gap (the queue empty) past the scheduler's grace ends the
		 * turn once the copies queued behind the op are done (F2b,
		 * docs/simulator.md); copies keep the queue busy. */
		b->tail[k] = host > GMX_TIMELINE_GRACE_NS ? copies + GMX_TIMELINE_GRACE_NS : -1;
	}
	uint64_t total = 0;
	for (int pass = 0; pass < 2; pass++) {
		memset(last, 0xff, ((size_t)b->n + 1) * sizeof(uint32_t));
		for (uint32_t k = 0; k < w->n_ops; k++)
			for (uint32_t r = p->op_first[k]; r < p->op_first[k] + p->op_n[k]; r++)
				for (uint64_t c = p->rp[r] >> 9; c <= (p->rp[r] + p->rn[r] - 1) >> 9; c++) {
					uint32_t lc = (uint32_t)c - b->first;
					if (last[lc] == k)
						continue;
					last[lc] = k;
					if (pass == 0) {
						b->off[lc + 1]++;
						total++;
					} else {
						b->ops[b->off[lc]++] = k;
					}
				}
		if (pass == 0) {
			if (total >= UINT32_MAX) {
				free(last);
				return -E2BIG;
			}
			for (uint32_t i = 0; i < b->n; i++)
				b->off[i + 1] += b->off[i];
			b->ops = malloc((size_t)(total ? total : 1) * sizeof(uint32_t));
			if (!b->ops) {
				free(last);
				return -ENOMEM;
			}
		}
	}
	/* The fill advanced off[lc] to the next chunk's start: shift back. */
	for (uint32_t i = b->n; i > 0; i--)
		b->off[i] = b->off[i - 1];
	b->off[0] = 0;
	free(last);
	return 0;
}

int gmx_msched__belady_create(gmx_msched_t *ms)
{
	gmx_memspace_t *m = ms->m;
	ms->belady = 1;
	ms->bkey = malloc(((size_t)m->n_chunks + 1) * sizeof(int64_t));
	ms->bmark = calloc((size_t)m->n_chunks + 1, sizeof(uint32_t));
	if (!ms->bkey || !ms->bmark)
		return -ENOMEM;
	for (uint32_t c = 0; c <= m->n_chunks; c++)
		ms->bkey[c] = INT64_MIN;
	for (uint32_t t = 0; t < ms->n; t++) {
		int rc = build_index(ms, t);
		if (rc)
			return rc;
		ms->slot_of[t] = t; /* until the first switch: every task in index order */
	}
	ms->n_order = ms->n;
	for (uint32_t c = m->head; c != GMX_NO_CHUNK; c = m->chunks[c].next)
		if (set_key(ms, c, next_use(ms, m->chunks[c].task, c, 0, 0)))
			return -ENOMEM;
	return 0;
}

void gmx_msched__belady_destroy(gmx_msched_t *ms)
{
	for (uint32_t t = 0; t < ms->n; t++) {
		free(ms->b[t].off);
		free(ms->b[t].ops);
		free(ms->b[t].cum);
		free(ms->b[t].idle);
		free(ms->b[t].tail);
		free(ms->b[t].heap.e);
	}
	free(ms->bkey);
	free(ms->bmark);
	free(ms->stash);
}

/* ---- the switch ---------------------------------------------------------------- */

typedef struct wkey {
	int64_t w;
	uint32_t c;
} wkey_t;

static int cmp_wkey(const void *a, const void *b)
{
	const wkey_t *x = a, *y = b;
	if (x->w != y->w)
		return x->w < y->w ? 1 : -1; /* furthest first */
	return (x->c > y->c) - (x->c < y->c);
}

int gmx_msched__belady_switch(gmx_msched_t *ms, uint32_t task, int64_t now)
{
	gmx_memspace_t *m = ms->m;
	int prio[GMX_MAX_TASKS];
	uint8_t run[GMX_MAX_TASKS];
	for (uint32_t i = 0; i < ms->n; i++) {
		prio[i] = ms->t[i].priority;
		run[i] = ms->t[i].runnable;
		ms->slot_of[i] = UINT32_MAX;
	}
	ms->n_order = gmx_timeline_order(prio, run, ms->n, task, ms->order);
	for (uint32_t s = 0; s < ms->n_order; s++)
		ms->slot_of[ms->order[s]] = s;
	ms->turn_end = now + ms->slice_ns;
	ms->cur_at = (bcursor_t){0};
	ms->forgo = 0;
	/* The eviction list (what the fault path evicts from, and what MSched's
	 * madvise calls order): furthest predicted use first. */
	uint32_t nr = 0;
	wkey_t *tmp = malloc(((size_t)m->used_chunks + 1) * sizeof(*tmp));
	if (!tmp)
		return -ENOMEM;
	for (uint32_t c = m->head; c != GMX_NO_CHUNK; c = m->chunks[c].next) {
		int64_t key = ms->bkey[c];
		uint32_t t = m->chunks[c].task;
		tmp[nr++] = (wkey_t){key == INT64_MIN ? INT64_MAX : wall(ms, t, key, now), c};
	}
	qsort(tmp, nr, sizeof(*tmp), cmp_wkey);
	m->head = m->tail = GMX_NO_CHUNK;
	for (uint32_t i = 0; i < nr; i++) {
		gmx_chunk_t *ck = &m->chunks[tmp[i].c];
		ck->prev = m->tail;
		ck->next = GMX_NO_CHUNK;
		if (m->tail != GMX_NO_CHUNK)
			m->chunks[m->tail].next = tmp[i].c;
		else
			m->head = tmp[i].c;
		m->tail = tmp[i].c;
	}
	free(tmp);
	return 0;
}

/* ---- the kernel and the stream -------------------------------------------------- */

/* The next part of the timeline the stream has not looked at: chunk, pages,
 * owner and task time of the use. 0 when the timeline is exhausted. */
static int stream_next(gmx_msched_t *ms, int64_t now, uint32_t *c, uint64_t mk[8], uint32_t *t, int64_t *key)
{
	bcursor_t *q = &ms->cur_at;
	for (;;) {
		if (q->slot == 0 && ms->forgo) {
			q->slot = 1;
			q->valid = 0;
		}
		if (q->slot >= ms->n_order)
			return 0;
		uint32_t task = ms->order[q->slot];
		ptask_t *p = &ms->t[task];
		bindex_t *b = &ms->b[task];
		int64_t pos = task_time(ms, task, b->unit, b->op);
		if (!q->valid || (q->slot == 0 && task_time(ms, task, q->unit, q->op) < pos)) {
			/* Start the slot (or catch up with the running task) at the task's op. */
			q->unit = b->unit;
			q->op = b->op;
			q->r = p->op_first[q->op];
			q->pg = q->r < p->op_first[q->op] + p->op_n[q->op] ? p->rp[q->r] : 0;
			if (!q->valid) {
				q->start = pos;
				q->steps = 0;
			}
			q->valid = 1;
		}
		int64_t at = task_time(ms, task, q->unit, q->op);
		/* The slot's end: the running turn's remaining time, another turn's slice. */
		int64_t span = q->slot == 0 ? turn_rest(ms, now) : ms->slice_ns;
		int64_t from = q->slot == 0 ? pos : q->start;
		if (at - from >= span || q->steps > p->w->n_ops) {
			q->slot++;
			q->valid = 0;
			continue;
		}
		uint32_t r_end = p->op_first[q->op] + p->op_n[q->op];
		if (q->r >= r_end) {
			q->steps++;
			if (++q->op == p->w->n_ops) {
				q->op = 0;
				q->unit++;
			}
			q->r = p->op_first[q->op];
			q->pg = q->r < p->op_first[q->op] + p->op_n[q->op] ? p->rp[q->r] : 0;
			continue;
		}
		uint64_t end = p->rp[q->r] + p->rn[q->r], stop;
		if (q->pg < p->rp[q->r] || q->pg >= end)
			q->pg = p->rp[q->r];
		*c = gmx_msched__chunk_part(q->pg, end, mk, &stop);
		*t = task;
		*key = at;
		q->pg = stop;
		if (stop >= end) {
			q->r++;
			q->pg = q->r < r_end ? p->rp[q->r] : 0;
		}
		return 1;
	}
}

/* The stream: the timeline's coming pages, in order, loaded on the link from
 * `at` while the link's queue ends before `horizon`, each only into room a
 * chunk used later than it gives up. 0 or <0 error. */
static int stream(gmx_msched_t *ms, int64_t now, int64_t at, int64_t horizon)
{
	gmx_memspace_t *m = ms->m;
	for (;;) {
		int64_t lf = ms->h2d_free > now ? ms->h2d_free : now;
		if (lf >= horizon)
			break;
		uint32_t c, t;
		uint64_t mk[8];
		int64_t key;
		bcursor_t save = ms->cur_at;
		if (!stream_next(ms, now, &c, mk, &t, &key))
			break;
		if (gmx_msched__has_pages(&m->chunks[c], mk))
			continue;
		int64_t wk = wall(ms, t, key, now);
		uint64_t bytes = 0;
		for (int i = 0; i < 8; i++)
			bytes += (uint64_t)__builtin_popcountll(mk[i] & ~m->chunks[c].bits[i]) << GMX_PAGE_SHIFT;
		if (ms->slot_of[t] == 0 &&
		    lf + (int64_t)((double)bytes / ms->dev->link_in_gbps) >= ms->turn_end) {
			/* It would arrive after this turn: the running task's rest waits for its next. */
			ms->cur_at.slot = 1;
			ms->cur_at.valid = 0;
			continue;
		}
		int rc = load(ms, c, mk, key, wk, now, at,
			      ms->slot_of[t] == 0 ? &ms->st.planned_in_bytes : &ms->st.prefetch_in_bytes);
		if (rc < 0 && rc != -ENOSPC)
			return rc;
		if (rc <= 0) {
			ms->cur_at = save; /* no room yet: try again at the next kernel */
			break;
		}
	}
	return 0;
}

/* Keys the resident chunks of op `op` of `unit` of task t by their next
 * predicted use after it. 0 or -ENOMEM. */
static int rekey_after(gmx_msched_t *ms, uint32_t t, uint64_t unit, uint32_t op)
{
	const ptask_t *p = &ms->t[t];
	uint32_t n_ops = p->w->n_ops;
	for (uint32_t r = p->op_first[op]; r < p->op_first[op] + p->op_n[op]; r++)
		for (uint64_t c = p->rp[r] >> 9; c <= (p->rp[r] + p->rn[r] - 1) >> 9; c++) {
			if (!ms->m->chunks[c].resident)
				continue;
			int64_t nk = op + 1 < n_ops ? next_use(ms, t, (uint32_t)c, unit, op + 1)
						    : next_use(ms, t, (uint32_t)c, unit + 1, 0);
			if (set_key(ms, (uint32_t)c, nk))
				return -ENOMEM;
		}
	return 0;
}

/* ---- forgoing a turn ------------------------------------------------------------ */

/* Predicted compute of task t's coming turn of length S (ns from its start):
 * its predicted pages not resident (each counted once) arrive in access order
 * on the link from `from` (ns after the turn starts; negative: before it), and
 * each op starts once its pages are in and the op before it is done. Beyond one
 * unit nothing more is missing (units repeat). *link_end gets when the link
 * is done with the pages of the ops the turn reaches. */
static int64_t turn_work(gmx_msched_t *ms, uint32_t t, int64_t from, int64_t S, int64_t *link_end)
{
	const ptask_t *p = &ms->t[t];
	const bindex_t *b = &ms->b[t];
	const gmx_memspace_t *m = ms->m;
	if (++ms->gen == 0) {
		memset(ms->seen, 0, ((size_t)m->n_chunks + 1) * sizeof(uint32_t));
		ms->gen = 1;
	}
	double ns_per_byte = 1.0 / ms->dev->link_in_gbps;
	int64_t dev = 0, work = 0, lk = from;
	uint32_t op = b->started ? b->op : p->next_op;
	*link_end = from;
	for (uint32_t s = 0;; s++, op = (op + 1) % p->w->n_ops) {
		if (s == p->w->n_ops) { /* a whole unit walked: compute alone from here */
			work += S - dev;
			break;
		}
		uint64_t pages = gmx_msched__op_missing(ms, t, op, 1);
		lk += (int64_t)((double)(pages << GMX_PAGE_SHIFT) * ns_per_byte);
		int64_t start = lk > dev ? lk : dev;
		if (start >= S)
			break;
		*link_end = lk;
		dev = start + p->op_ns[op];
		if (dev >= S) {
			work += S - start;
			break;
		}
		work += p->op_ns[op];
	}
	return work;
}

/* Whether the turn task starts at `at` is forgone: its pages wait behind the
 * next turn's. The running task holds its own pages through its turn, so the
 * link can feed only the next turn's room, and which of the two it serves
 * decides what both compute: served, this turn computes as its pages arrive
 * and the next turn gets the link after them; forgone, the next turn gets the
 * link for this whole turn. The turn is forgone when the next turn is
 * predicted to gain more from that than this turn is predicted to compute.
 * The caller serves a task forgone at its last turn, so that none starves,
 * and the turn a forgone one fed. */
static int forgo_turn(gmx_msched_t *ms, uint32_t task, int64_t at)
{
	if (ms->n_order < 2 || ms->slice_ns <= 0)
		return 0;
	int64_t S = ms->slice_ns;
	int64_t backlog = ms->h2d_free > at ? ms->h2d_free - at : 0;
	int64_t own_link, next_link;
	int64_t own = turn_work(ms, task, backlog, S, &own_link);
	if (own >= S - backlog)
		return 0; /* the link does not hold it up */
	uint32_t nx = ms->order[1];
	int64_t served = turn_work(ms, nx, (own_link < S ? own_link : S) - S, S, &next_link);
	int64_t forgone = turn_work(ms, nx, backlog - S, S, &next_link);
	return forgone - served > own;
}

int gmx_msched__belady_kernel(gmx_msched_t *ms, uint32_t task, uint32_t op, int64_t now, int64_t *ready)
{
	gmx_memspace_t *m = ms->m;
	ptask_t *p = &ms->t[task];
	bindex_t *b = &ms->b[task];
	/* The op it ran before is over: its chunks are keyed by their next use. */
	if (b->started && rekey_after(ms, task, b->unit, b->op))
		return -ENOMEM;
	if (b->started && op < b->op)
		b->unit++;
	b->op = op;
	b->started = 1;
	int64_t at = now;
	if (ms->cur != (int)task) {
		int rc = gmx_msched__belady_switch(ms, task, now);
		if (rc)
			return rc;
		ms->cur = (int)task;
		ms->st.switches++;
		at = now + 20000LL * (int64_t)ms->n_order; /* the madvise round, as msched.c */
		ms->forgo = ms->forgo_on && !ms->forgo_last && !b->forgone && forgo_turn(ms, task, at);
		ms->forgo_last = ms->forgo;
		b->forgone = ms->forgo;
		if (ms->forgo)
			ms->st.forgone_turns++;
	}
	if (ms->forgo) {
		/* The coming turns' pages first, through this turn; the op's own behind them. */
		int rc = stream(ms, now, at, ms->turn_end);
		if (rc)
			return rc;
	}
	ms->stamp = MSCHED_STAMP_BIT | (ms->stamp + 1);
	/* The op's own pages: held, then loaded when missing. */
	for (int pass = 0; pass < 2; pass++)
		for (uint32_t r = p->op_first[op]; r < p->op_first[op] + p->op_n[op]; r++) {
			uint64_t pg = p->rp[r], end = pg + p->rn[r];
			while (pg < end) {
				uint64_t mk[8], stop;
				uint32_t c = gmx_msched__chunk_part(pg, end, mk, &stop);
				if (pass == 0) {
					m->chunks[c].stamp = ms->stamp;
				} else if (!gmx_msched__has_pages(&m->chunks[c], mk)) {
					int rc = load(ms, c, mk, task_time(ms, task, b->unit, op), INT64_MIN, now, at,
						      &ms->st.topup_in_bytes);
					if (rc < 0 && rc != -ENOSPC)
						return rc;
					m->chunks[c].stamp = ms->stamp;
					for (int i = 0; i < 8; i++)
						ms->st.predicted_missing +=
						    (uint64_t)__builtin_popcountll(mk[i] & ~m->chunks[c].bits[i]);
				}
				pg = stop;
			}
		}
	int64_t start = now;
	for (uint32_t r = p->op_first[op]; r < p->op_first[op] + p->op_n[op]; r++) {
		uint64_t pg = p->rp[r], end = pg + p->rn[r];
		while (pg < end) {
			uint64_t mk[8], stop;
			uint32_t c = gmx_msched__chunk_part(pg, end, mk, &stop);
			if (ms->ready[c] > start)
				start = ms->ready[c];
			/* In use from now until the op ends: keyed at the op (a preempted
			 * op needs them again when its task resumes); when the task
			 * starts its next op, rekey_after keys them by their next use. */
			if (m->chunks[c].resident && set_key(ms, c, task_time(ms, task, b->unit, op)))
				return -ENOMEM;
			pg = stop;
		}
	}
	/* The stream: the timeline's coming pages, while the link is free. When
	 * the host leaves the device after this op (a copy back, work after a
	 * sync), no kernel calls the planner until its next kernel or the next
	 * turn's first: the link is committed through that gap, and the turn is
	 * predicted to end there (Rodinia nn's readback ends its turn); the op's
	 * end streams again (gmx_msched__belady_op_end), once its chunks are free. */
	int64_t ahead = b->idle[op] > STREAM_AHEAD_NS ? b->idle[op] : STREAM_AHEAD_NS;
	int64_t horizon = (start > now ? start : now) + p->op_ns[op] + ahead;
	if (b->tail[op] >= 0 && start + p->op_ns[op] + b->tail[op] < ms->turn_end)
		ms->turn_end = start + p->op_ns[op] + b->tail[op];
	int rc = stream(ms, now, at, horizon);
	if (rc)
		return rc;
	*ready = gmx_msched__inflight_wait(ms, task, op, start);
	return 0;
}

int gmx_msched__belady_op_end(gmx_msched_t *ms, uint32_t task, uint32_t op, int64_t now)
{
	bindex_t *b = &ms->b[task];
	if (ms->cur != (int)task || !b->started || b->op != op || b->tail[op] < 0)
		return 0;
	/* Its chunks are free: keyed by their next use, which is in its next turn. */
	if (rekey_after(ms, task, b->unit, op))
		return -ENOMEM;
	ms->stamp = MSCHED_STAMP_BIT | (ms->stamp + 1);
	if (now + b->tail[op] < ms->turn_end)
		ms->turn_end = now + b->tail[op];
	return stream(ms, now, now, now + b->idle[op]);
}
