/* Proactive memory scheduling on the simulated device. See msched.h and
 * docs/msched.md.
 *
 * Residency is the memspace's (4 KB pages in 2 MB chunks, capacity in whole
 * chunks, eviction from the head of its list), as the driver keeps it: the
 * planner does what MSched's madvise calls do, reordering that list by the
 * timeline so that the driver's own eviction takes the right victims. */
#include "msched.h"
#include "msched_internal.h"
#include "msched_predict.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "gpumux/combined.h"
#include "gpumux/mplan.h"

/* Tunables, with their sources. */
/* Ordering the eviction list costs one madvise round per task: 10-50 us each,
 * under 1 ms for tens of tasks (MSched paper, Fig. 11; brief/msched.md). */
#define MSCHED_MADVISE_NS_PER_TASK 20000LL

/* ---- prediction ------------------------------------------------------------ */

static int push_range(ptask_t *p, uint64_t page, uint32_t n)
{
	if (!n)
		return 0;
	if (p->n_r > p->op_floor && p->rp[p->n_r - 1] + p->rn[p->n_r - 1] == page) {
		p->rn[p->n_r - 1] += n; /* adjacent within the op: one range */
		return 0;
	}
	if (p->n_r == p->cap_r) {
		uint32_t ncap = p->cap_r ? 2 * p->cap_r : 1024;
		uint64_t *a = realloc(p->rp, ncap * sizeof(*a));
		if (!a)
			return -ENOMEM;
		p->rp = a;
		uint32_t *b = realloc(p->rn, ncap * sizeof(*b));
		if (!b)
			return -ENOMEM;
		p->rn = b;
		p->cap_r = ncap;
	}
	p->rp[p->n_r] = page;
	p->rn[p->n_r++] = n;
	return 0;
}

typedef struct emit_ctx {
	ptask_t *p;
	const gmx_memspace_t *m;
	uint32_t task;
} emit_ctx_t;

static int emit_pages(void *vctx, uint32_t buf, uint64_t off, uint64_t len)
{
	emit_ctx_t *c = vctx;
	uint64_t first = gmx_memspace_page(c->m, c->task, buf, off);
	uint64_t last = gmx_memspace_page(c->m, c->task, buf, off + len - 1);
	return push_range(c->p, first, (uint32_t)(last - first + 1));
}

/* ---- set-up -------------------------------------------------------------------- */

static int build_task(gmx_msched_t *ms, uint32_t i, const gmx_sim_task_t *task, const gmx_tpl_set_t *profile,
		      uint64_t *touched, uint64_t *predicted, uint64_t *hit)
{
	ptask_t *p = &ms->t[i];
	const gmx_workload_t *w = task->workload;
	p->w = w;
	p->runnable = 1;
	p->priority = task->priority;
	p->op_first = calloc(w->n_ops + 1, sizeof(uint32_t));
	p->op_n = calloc(w->n_ops + 1, sizeof(uint32_t));
	p->op_ns = calloc(w->n_ops + 1, sizeof(int64_t));
	if (!p->op_first || !p->op_n || !p->op_ns)
		return -ENOMEM;
	gmx_tpl_set_t own = {0};
	const gmx_tpl_set_t *set = profile;
	int rc = 0;
	if (!set) {
		rc = gmx_msched_learn(w, &own);
		set = &own;
	}
	emit_ctx_t ec = {p, ms->m, i};
	for (uint32_t k = 0; k < w->n_ops && !rc; k++) {
		const gmx_op_t *op = &w->ops[k];
		p->op_first[k] = p->op_floor = p->n_r;
		if (op->kind == GMX_OP_KERNEL || op->kind == GMX_OP_MEMSET)
			p->op_ns[k] = (int64_t)op->duration_ns + ms->dev->kernel_gap_ns;
		if (op->kind == GMX_OP_SYNC || op->kind == GMX_OP_ALLOC || op->kind == GMX_OP_FREE || !op->region_count)
			continue;
		int kind = gmx_msched__predict_op(set, w, op, ms->variant == GMX_MSCHED_WHOLEALLOC, emit_pages, &ec);
		if (kind < 0)
			rc = kind;
		p->op_n[k] = p->n_r - p->op_first[k];
	}
	if (!rc)
		rc = gmx_msched__accuracy_add(set, w, ms->variant == GMX_MSCHED_WHOLEALLOC, touched, predicted, hit,
				  ms->st.launches);
	gmx_tpl_set_free(&own);
	return rc;
}

int gmx_msched_create(gmx_memspace_t *m, const gmx_preset_t *dev, const gmx_sim_task_t *tasks, uint32_t n,
		      gmx_msched_variant_t variant, int64_t slice_ns, const gmx_tpl_set_t *profile,
		      gmx_msched_t **out)
{
	gmx_msched_t *ms = calloc(1, sizeof(*ms));
	if (!ms)
		return -ENOMEM;
	ms->m = m;
	ms->dev = dev;
	ms->variant = variant;
	ms->slice_ns = slice_ns;
	ms->n = n;
	ms->cur = -1;
	uint32_t nc = m->n_chunks + 1;
	ms->ready = calloc(nc, sizeof(int64_t));
	ms->mask = calloc(nc, sizeof(*ms->mask));
	ms->seen = calloc(nc, sizeof(uint32_t));
	ms->resident = calloc(nc, sizeof(uint32_t));
	ms->evict = calloc(nc, sizeof(uint32_t));
	ms->load = calloc(nc, sizeof(uint32_t));
	ms->is_res = calloc(nc, 1);
	int rc = (!ms->ready || !ms->mask || !ms->seen || !ms->resident || !ms->evict || !ms->load || !ms->is_res)
			 ? -ENOMEM
			 : gmx_mplan_create(m->n_chunks, &ms->plan);
	uint64_t touched = 0, predicted = 0, hit = 0;
	for (uint32_t i = 0; i < n && !rc; i++) {
		rc = build_task(ms, i, &tasks[i], profile, &touched, &predicted, &hit);
		ms->t[i].target_ns = (int64_t)(tasks[i].latency_target_s * 1e9);
	}
	if (rc) {
		gmx_msched_destroy(ms);
		return rc;
	}
	gmx_msched__accuracy_pct(touched, predicted, hit, &ms->st);
	ms->st.valid = 1;
	if (variant == GMX_MSCHED_FULL) {
		rc = gmx_msched__belady_create(ms);
		if (rc) {
			gmx_msched_destroy(ms);
			return rc;
		}
	}
	if (variant == GMX_MSCHED_PRIO) {
		m->protect = 1;
		m->prio_worst = 0;
		ms->hp = GMX_PRIORITY_LEVELS;
		for (uint32_t i = 0; i < n; i++) {
			m->prio[i] = tasks[i].priority;
			if (tasks[i].priority > m->prio_worst)
				m->prio_worst = tasks[i].priority;
			if (tasks[i].priority < ms->hp)
				ms->hp = tasks[i].priority;
		}
		for (uint32_t i = 0; i < n; i++)
			ms->lp_exists |= tasks[i].priority > ms->hp;
		ms->piece_ns = gmx_comb_link_ns(GMX_COMB_PIECE_BYTES_DEFAULT, dev->link_in_gbps);
		/* Only what a task's ops are predicted to touch is its working set: memory it
		 * holds and never touches (an allocator's pool) is not protected. */
		ms->ws = calloc((size_t)m->n_chunks + 1, 1);
		ms->mgen = calloc((size_t)m->n_chunks + 1, sizeof(uint32_t));
		if (!ms->ws || !ms->mgen) {
			gmx_msched_destroy(ms);
			return -ENOMEM;
		}
		for (uint32_t i = 0; i < n; i++)
			for (uint32_t r = 0; r < ms->t[i].n_r; r++)
				for (uint64_t c = ms->t[i].rp[r] >> 9; c <= (ms->t[i].rp[r] + ms->t[i].rn[r] - 1) >> 9; c++)
					ms->ws[c] = 1;
		m->ws = ms->ws;
	}
	*out = ms;
	return 0;
}

void gmx_msched_destroy(gmx_msched_t *ms)
{
	if (!ms)
		return;
	for (uint32_t i = 0; i < ms->n; i++) {
		free(ms->t[i].op_first);
		free(ms->t[i].op_n);
		free(ms->t[i].op_ns);
		free(ms->t[i].rp);
		free(ms->t[i].rn);
	}
	gmx_msched__belady_destroy(ms);
	gmx_mplan_destroy(ms->plan);
	free(ms->ready);
	free(ms->mask);
	free(ms->seen);
	free(ms->resident);
	free(ms->evict);
	free(ms->load);
	free(ms->is_res);
	free(ms->need);
	if (ms->ws && ms->m->ws == ms->ws)
		ms->m->ws = NULL;
	free(ms->ws);
	free(ms->mgen);
	free(ms);
}

void gmx_msched_task_done(gmx_msched_t *ms, uint32_t task)
{
	if (task < ms->n)
		ms->t[task].runnable = 0;
	ms->hp = GMX_PRIORITY_LEVELS;
	for (uint32_t i = 0; i < ms->n; i++)
		if (ms->t[i].runnable && ms->t[i].priority < ms->hp)
			ms->hp = ms->t[i].priority;
	ms->lp_exists = 0;
	for (uint32_t i = 0; i < ms->n; i++)
		ms->lp_exists |= ms->t[i].runnable && ms->t[i].priority > ms->hp;
}

void gmx_msched_stats(const gmx_msched_t *ms, gmx_sim_msched_stats_t *out)
{
	*out = ms->st;
	out->slice_auto = ms->rule;
	if (ms->slices) {
		out->slice_mean_ms = ms->slice_sum / (double)ms->slices / 1e6;
		out->slice_min_ms = (double)ms->slice_lo / 1e6;
		out->slice_max_ms = (double)ms->slice_hi / 1e6;
	}
}

/* ---- the switch ---------------------------------------------------------------- */

int gmx_msched__need_push(gmx_msched_t *ms, uint32_t c)
{
	if (ms->n_need == ms->cap_need) {
		uint32_t ncap = ms->cap_need ? 2 * ms->cap_need : 4096;
		uint32_t *p = realloc(ms->need, ncap * sizeof(*p));
		if (!p)
			return -ENOMEM;
		ms->need = p;
		ms->cap_need = ncap;
	}
	ms->need[ms->n_need++] = c;
	return 0;
}

void gmx_msched__set_bits(uint64_t mask[8], uint32_t lo, uint32_t hi)
{
	for (uint32_t b = lo; b < hi;) {
		uint32_t w = b >> 6, s = b & 63, e = (hi - (w << 6)) < 64 ? hi - (w << 6) : 64;
		uint64_t bits = (e - s == 64) ? ~0ull : (((1ull << (e - s)) - 1) << s);
		mask[w] |= bits;
		b = (w << 6) + e;
	}
}

int gmx_msched__slice_needs(gmx_msched_t *ms, uint32_t t, int want_mask)
{
	ptask_t *p = &ms->t[t];
	const gmx_workload_t *w = p->w;
	if (++ms->gen == 0) {
		memset(ms->seen, 0, ((size_t)ms->m->n_chunks + 1) * sizeof(uint32_t));
		ms->gen = 1;
	}
	int64_t acc = 0;
	for (uint32_t s = 0; s < w->n_ops && acc < ms->slice_ns; s++) {
		uint32_t k = (p->next_op + s) % w->n_ops;
		acc += p->op_ns[k];
		for (uint32_t r = p->op_first[k]; r < p->op_first[k] + p->op_n[k]; r++) {
			uint64_t pg = p->rp[r], end = pg + p->rn[r];
			while (pg < end) {
				uint32_t c = (uint32_t)(pg >> 9);
				uint64_t cend = ((uint64_t)c + 1) << 9;
				uint64_t stop = end < cend ? end : cend;
				if (ms->seen[c] != ms->gen) {
					ms->seen[c] = ms->gen;
					if (gmx_msched__need_push(ms, c))
						return -ENOMEM;
					if (want_mask)
						memset(ms->mask[c], 0, sizeof(ms->mask[c]));
				}
				if (want_mask)
					gmx_msched__set_bits(ms->mask[c], (uint32_t)(pg & 511), (uint32_t)(stop - ((uint64_t)c << 9)));
				pg = stop;
			}
		}
	}
	return 0;
}

uint32_t gmx_msched__chunk_part(uint64_t pg, uint64_t end, uint64_t mk[8], uint64_t *stop)
{
	uint32_t c = (uint32_t)(pg >> 9);
	uint64_t cend = ((uint64_t)c + 1) << 9;
	*stop = end < cend ? end : cend;
	memset(mk, 0, 8 * sizeof(*mk));
	gmx_msched__set_bits(mk, (uint32_t)(pg & 511), (uint32_t)(*stop - ((uint64_t)c << 9)));
	return c;
}

uint64_t gmx_msched__missing_pages(const gmx_chunk_t *k, const uint64_t mask[8])
{
	uint64_t n = 0;
	for (int i = 0; i < 8; i++)
		n += (uint64_t)__builtin_popcountll(mask[i] & ~k->bits[i]);
	return n;
}

/* Non-zero when chunk k holds all its 512 pages. */
static int chunk_full(const gmx_chunk_t *k)
{
	uint64_t all = ~0ull;
	for (int i = 0; i < 8; i++)
		all &= k->bits[i];
	return all == ~0ull;
}

int gmx_msched__has_pages(const gmx_chunk_t *k, const uint64_t mask[8])
{
	for (int i = 0; i < 8; i++)
		if (mask[i] & ~k->bits[i])
			return 0;
	return 1;
}

/* Rewrites the memspace's population-order list: evict[0] at the head. */
static void relink(gmx_memspace_t *m, const uint32_t *order, uint32_t n)
{
	m->head = m->tail = GMX_NO_CHUNK;
	for (uint32_t i = 0; i < n; i++) {
		gmx_chunk_t *k = &m->chunks[order[i]];
		k->prev = m->tail;
		k->next = GMX_NO_CHUNK;
		if (m->tail != GMX_NO_CHUNK)
			m->chunks[m->tail].next = order[i];
		else
			m->head = order[i];
		m->tail = order[i];
	}
}

int64_t gmx_msched__migrate(gmx_msched_t *ms, uint32_t c, const uint64_t mask[8], int64_t at, uint64_t pre_out,
			    uint64_t *in_total)
{
	uint64_t in = 0, out = pre_out;
	int64_t rc = gmx_memspace_populate(ms->m, c, mask, ms->stamp, at, &in, &out);
	if (rc < 0)
		return rc;
	const gmx_preset_t *d = ms->dev;
	int64_t done;
	if (ms->variant == GMX_MSCHED_SERIAL) {
		/* The stock path: unmap and copy out, then copy in and map, one at a time. */
		int64_t b = at > ms->h2d_free ? at : ms->h2d_free;
		done = b + (int64_t)((double)(in + out) / d->link_serial_gbps);
		ms->h2d_free = ms->d2h_free = done;
	} else if (gmx_msched__is_hp(ms, ms->t[ms->m->chunks[c].task].priority)) {
		/* HP pages: after the piece of LP migration in flight only; the LP
		 * backlog behind it moves back by as long (gmx_comb_migration_start). */
		int64_t piece_end = at + ms->piece_ns < ms->h2d_free ? at + ms->piece_ns : ms->h2d_free;
		int64_t b = gmx_comb_migration_start(ms->hp, ms->hp, at, piece_end, ms->h2d_free);
		int64_t ev = gmx_comb_migration_start(ms->hp, ms->hp, at,
						      at + ms->piece_ns < ms->d2h_free ? at + ms->piece_ns : ms->d2h_free,
						      ms->d2h_free);
		int64_t out_ns = gmx_comb_link_ns(out, d->link_out_gbps), in_ns = gmx_comb_link_ns(in, d->link_in_gbps);
		if (out && ev + out_ns > b)
			b = ev + out_ns;
		done = b + in_ns;
		if (in && ms->h2d_free > at)
			ms->h2d_free += in_ns;
		else if (in)
			ms->h2d_free = done;
		if (out && ms->d2h_free > at)
			ms->d2h_free += out_ns;
		else if (out)
			ms->d2h_free = ev + out_ns;
	} else {
		/* Pipelined: evictions on one copy engine, loads on the other; a load
		 * waits for the eviction that makes its room. */
		int64_t ev = at > ms->d2h_free ? at : ms->d2h_free;
		if (out)
			ms->d2h_free = ev + (int64_t)((double)out / d->link_out_gbps);
		int64_t b = at > ms->h2d_free ? at : ms->h2d_free;
		if (out && ms->d2h_free > b)
			b = ms->d2h_free;
		done = b + (int64_t)((double)in / d->link_in_gbps);
		if (in)
			ms->h2d_free = done;
	}
	if (in && done > ms->ready[c])
		ms->ready[c] = done;
	*in_total += in;
	return 0;
}

static int plan_switch(gmx_msched_t *ms, uint32_t task, int64_t now)
{
	uint32_t order[GMX_MAX_TASKS];
	int prio[GMX_MAX_TASKS];
	uint8_t run[GMX_MAX_TASKS];
	for (uint32_t i = 0; i < ms->n; i++) {
		prio[i] = ms->t[i].priority;
		run[i] = ms->t[i].runnable;
	}
	uint32_t ns = gmx_timeline_order(prio, run, ms->n, task, order);
	ms->n_need = 0;
	for (uint32_t s = 0; s < ns; s++) {
		ms->first[s] = ms->n_need;
		if (gmx_msched__slice_needs(ms, order[s], s <= 1))
			return -ENOMEM;
	}
	ms->first[ns] = ms->n_need;
	return gmx_msched__apply_plan(ms, ns, now, ns, NULL);
}

int gmx_msched__apply_plan(gmx_msched_t *ms, uint32_t ns, int64_t now, uint32_t madvise_tasks,
			   const hp_slices_t *deep)
{
	gmx_memspace_t *m = ms->m;
	uint32_t nr = 0;
	for (uint32_t c = m->head; c != GMX_NO_CHUNK; c = m->chunks[c].next)
		ms->resident[nr++] = c;
	for (uint32_t i = ms->first[0]; i < ms->first[1]; i++) {
		uint32_t c = ms->need[i];
		ms->is_res[c] = (uint8_t)gmx_msched__has_pages(&m->chunks[c], ms->mask[c]);
	}
	gmx_mplan_timeline_t tl = {ns, ms->first, ms->need};
	uint32_t n_load, n_keep;
	int rc = gmx_mplan_switch(ms->plan, &tl, ms->resident, nr, ms->is_res, ms->evict, ms->load, &n_load, &n_keep);
	if (rc)
		return rc;
	if (ms->variant != GMX_MSCHED_FIFO)
		relink(m, ms->evict, nr);
	int64_t at = now + MSCHED_MADVISE_NS_PER_TASK * (int64_t)madvise_tasks;
	ms->stamp = MSCHED_STAMP_BIT | (ms->stamp + 1);
	/* Load in access order while room can be made without evicting what the
	 * next slice itself needs; the rest is loaded just before its kernel. */
	uint64_t budget = m->capacity_chunks > n_keep ? m->capacity_chunks - n_keep : 0, fresh = 0;
	for (uint32_t i = 0; i < n_load; i++) {
		uint32_t c = ms->load[i];
		if (!m->chunks[c].resident && fresh++ >= budget)
			break;
		if (gmx_msched__migrate(ms, c, ms->mask[c], at, 0, &ms->st.planned_in_bytes))
			break;
	}
	/* Then the slice after it, on the link behind those loads, while the turn
	 * runs: only into room that no chunk of these two slices holds (free, or
	 * a victim that a later slice needs first, or none does), and only while
	 * the link would finish within the coming turn (no backlog that later
	 * loads would queue behind). Not without the pipeline (msched-serial):
	 * the stock path moves nothing behind compute. */
	if (deep)
		gmx_msched__prio_prefetch(ms, deep->task, ns, deep, at);
	else if (ns > 1 && ms->variant != GMX_MSCHED_FIFO && ms->variant != GMX_MSCHED_SERIAL)
		for (uint32_t i = ms->first[1]; i < ms->first[2]; i++) {
			uint32_t c = ms->need[i];
			if (ms->h2d_free > at + ms->slice_ns)
				break;
			if (gmx_msched__has_pages(&m->chunks[c], ms->mask[c]))
				continue;
			if (!m->chunks[c].resident && m->used_chunks >= m->capacity_chunks) {
				uint32_t v = m->head;
				while (v != GMX_NO_CHUNK && m->chunks[v].stamp == ms->stamp)
					v = m->chunks[v].next;
				uint32_t r = v == GMX_NO_CHUNK ? 0 : gmx_mplan_rank(ms->plan, v);
				if (r <= 1)
					break;
			}
			m->chunks[c].stamp = ms->stamp; /* not a victim of the prefetch that follows */
			if (gmx_msched__migrate(ms, c, ms->mask[c], at, 0, &ms->st.prefetch_in_bytes))
				break;
		}
	ms->st.switches++;
	return 0;
}

void gmx_msched_slice_rule(gmx_msched_t *ms, int on)
{
	ms->rule = on;
}

void gmx_msched_forgo_turns(gmx_msched_t *ms, int on)
{
	ms->forgo_on = on;
}

/* Seconds to move in the pages task t's coming slice (of ms->slice_ns) needs
 * and does not have: the switch's migration, pipelined (loads and evictions
 * at once, each direction at its rate). */
static double missing_s(gmx_msched_t *ms, uint32_t t)
{
	ms->n_need = 0;
	if (gmx_msched__slice_needs(ms, t, 1)) {
		ms->oom = 1;
		return 0;
	}
	uint64_t pages = 0;
	for (uint32_t i = 0; i < ms->n_need; i++) {
		const gmx_chunk_t *k = &ms->m->chunks[ms->need[i]];
		for (int j = 0; j < 8; j++)
			pages += (uint64_t)__builtin_popcountll(ms->mask[ms->need[i]][j] & ~k->bits[j]);
	}
	double gbps = ms->variant == GMX_MSCHED_SERIAL ? ms->dev->link_serial_gbps / 2 : ms->dev->link_in_gbps;
	return (double)(pages * GMX_PAGE_SIZE) / gbps / 1e9;
}

/* The rule's migration estimate: task's missing pages over a turn of horizon_ns. */
typedef struct {
	gmx_msched_t *ms;
	uint32_t task;
} slice_ctx_t;

static double slice_migration_s(void *ctx, int64_t horizon_ns)
{
	slice_ctx_t *x = ctx;
	x->ms->slice_ns = horizon_ns;
	return missing_s(x->ms, x->task);
}

int64_t gmx_msched_slice(gmx_msched_t *ms, uint32_t task)
{
	if (!ms->rule || task >= ms->n)
		return ms->slice_ns;
	int64_t cap = GMX_MSCHED_SLICE_NS_MAX;
	uint32_t runnable = 0;
	for (uint32_t i = 0; i < ms->n; i++)
		runnable += ms->t[i].runnable;
	for (uint32_t i = 0; i < ms->n; i++)
		if (ms->t[i].runnable && ms->t[i].target_ns > 0 && ms->t[i].target_ns / (runnable ? runnable : 1) < cap)
			cap = ms->t[i].target_ns / (runnable ? runnable : 1);
	slice_ctx_t x = {ms, task};
	int64_t sl = gmx_comb_slice_rule(cap, slice_migration_s, &x);
	ms->slice_ns = sl;
	ms->slice_sum += (double)sl;
	if (!ms->slices || sl < ms->slice_lo)
		ms->slice_lo = sl;
	if (!ms->slices || sl > ms->slice_hi)
		ms->slice_hi = sl;
	ms->slices++;
	return sl;
}

int gmx_msched_kernel(gmx_msched_t *ms, uint32_t task, uint32_t op, int64_t now, int64_t *ready)
{
	ptask_t *p = &ms->t[task];
	const gmx_workload_t *w = p->w;
	if (ms->oom)
		return -ENOMEM;
	if (ms->belady) {
		p->next_op = (op + 1) % w->n_ops;
		return gmx_msched__belady_kernel(ms, task, op, now, ready);
	}
	p->next_op = op;
	/* PRIO: an HP turn is an interruption of the LP timeline, not a switch of
	 * it: the HP working set stays resident (protected), so the LP plan stands
	 * and the HP kernel only tops up what it misses. An LP task's plan is refreshed
	 * within its turn (gmx_msched__prio_refresh, msched_prio.c), with HP beside it or not. */
	int interrupt = gmx_msched__is_hp(ms, p->priority);
	int refresh = ms->variant == GMX_MSCHED_PRIO && !interrupt;
	if (ms->cur != (int)task && !interrupt) {
		int rc = plan_switch(ms, task, now);
		if (rc)
			return rc;
		ms->cur = (int)task;
		p->refresh_in = 0;
	} else if (refresh && (p->refresh_in == 0 || --p->refresh_in == 0)) {
		int rc = gmx_msched__prio_refresh(ms, task, now);
		if (rc)
			return rc;
	}
	p->next_op = (op + 1) % w->n_ops;
	/* The op's own predicted pages must be in before it starts: load what the
	 * slice plan did not cover (or what was evicted since). */
	gmx_memspace_t *m = ms->m;
	ms->stamp = MSCHED_STAMP_BIT | (ms->stamp + 1);
	int64_t start = now;
	for (uint32_t r = p->op_first[op]; r < p->op_first[op] + p->op_n[op]; r++) {
		uint64_t pg = p->rp[r], end = pg + p->rn[r];
		while (pg < end) {
			if (!(pg & 511) && end - pg >= 512) {
				/* A whole chunk (whole allocations): when all of it is in, no mask to build. */
				gmx_chunk_t *k = &m->chunks[pg >> 9];
				k->stamp = ms->stamp;
				if (chunk_full(k)) {
					if (ms->ready[pg >> 9] > start)
						start = ms->ready[pg >> 9];
					pg += 512;
					continue;
				}
			}
			uint64_t mk[8], stop;
			uint32_t c = gmx_msched__chunk_part(pg, end, mk, &stop);
			m->chunks[c].stamp = ms->stamp; /* never evicted to make room for its own kernel */
			if (!gmx_msched__has_pages(&m->chunks[c], mk)) {
				if (gmx_msched__migrate(ms, c, mk, now, 0, &ms->st.topup_in_bytes) == 0)
					m->chunks[c].stamp = ms->stamp;
				ms->st.predicted_missing += gmx_msched__missing_pages(&m->chunks[c], mk);
			}
			if (ms->ready[c] > start)
				start = ms->ready[c];
			pg = stop;
		}
	}
	*ready = gmx_msched__inflight_wait(ms, task, op, start);
	return 0;
}

int64_t gmx_msched__inflight_wait(const gmx_msched_t *ms, uint32_t task, uint32_t op, int64_t start)
{
	const gmx_workload_t *w = ms->t[task].w;
	const gmx_memspace_t *m = ms->m;
	for (uint32_t r = 0; r < w->ops[op].region_count; r++) {
		const gmx_region_t *g = &w->regions[w->ops[op].region_first + r];
		uint64_t lo = gmx_memspace_page(m, task, g->buffer, g->offset) >> 9;
		uint64_t hi = gmx_memspace_page(m, task, g->buffer, g->offset + g->length - 1) >> 9;
		for (uint64_t c = lo; c <= hi; c++)
			if (m->chunks[c].resident && ms->ready[c] > start)
				start = ms->ready[c];
	}
	/* Without the pipeline (msched-serial) there is no early start: the stock
	 * driver swaps the working set serially and the kernels stall until all of
	 * it has moved (MSched paper section 6.3, Fig. 5), so a kernel waits for every
	 * migration issued so far. */
	if (ms->variant == GMX_MSCHED_SERIAL && ms->h2d_free > start)
		start = ms->h2d_free;
	return start;
}

uint64_t gmx_msched__op_missing(gmx_msched_t *ms, uint32_t t, uint32_t op, int once)
{
	const ptask_t *p = &ms->t[t];
	uint64_t pages = 0;
	for (uint32_t r = p->op_first[op]; r < p->op_first[op] + p->op_n[op]; r++) {
		uint64_t pg = p->rp[r], end = pg + p->rn[r];
		while (pg < end) {
			uint64_t mk[8], stop;
			uint32_t c = gmx_msched__chunk_part(pg, end, mk, &stop);
			if (!once) {
				pages += gmx_msched__missing_pages(&ms->m->chunks[c], mk);
			} else {
				if (ms->seen[c] != ms->gen) {
					ms->seen[c] = ms->gen;
					memset(ms->mask[c], 0, sizeof(ms->mask[c]));
				}
				for (int i = 0; i < 8; i++) {
					pages += (uint64_t)__builtin_popcountll(mk[i] & ~ms->mask[c][i] &
										~ms->m->chunks[c].bits[i]);
					ms->mask[c][i] |= mk[i];
				}
			}
			pg = stop;
		}
	}
	return pages;
}

int64_t gmx_msched_load_ns(gmx_msched_t *ms, uint32_t task, uint32_t op, int64_t now)
{
	if (task >= ms->n)
		return 0;
	uint64_t pages = gmx_msched__op_missing(ms, task, op, 0);
	if (!pages)
		return 0;
	int64_t free_at = ms->h2d_free > now ? ms->h2d_free : now;
	if (gmx_msched__is_hp(ms, ms->t[task].priority) && free_at > now + ms->piece_ns)
		free_at = now + ms->piece_ns;
	return free_at - now + gmx_comb_link_ns(pages * GMX_PAGE_SIZE, ms->dev->link_in_gbps);
}

int gmx_msched_op_end(gmx_msched_t *ms, uint32_t task, uint32_t op, int64_t now)
{
	if (!ms->belady || task >= ms->n || op >= ms->t[task].w->n_ops)
		return 0;
	int rc = gmx_msched__belady_op_end(ms, task, op, now);
	return rc == -ENOSPC ? 0 : rc;
}
