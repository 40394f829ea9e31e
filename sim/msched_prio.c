/* The combined policy's LP planning in the simulator (--mem gpumux, GMX_MSCHED_PRIO): an LP
 * task's plan refreshed within its turn, window by window round its unit with the HP tasks'
 * slices between, and the coming windows prefetched as far ahead as the link has time for.
 * The switch, the migrations and the HP side are msched.c's. See docs/combined.md. */
#include "msched_internal.h"

#include <errno.h>
#include <string.h>

#include "gpumux/combined.h"
#include "gpumux/mplan.h"

/* PRIO, LP (a refresh within the task's turn): prefetches the coming windows of its plan, slices
 * 1..ns-1 but HP's, in access order and as far ahead as room allows: a chunk is loaded only
 * into room whose victim (the chunk the memspace would evict: never HP's working set) no slice
 * up to the chunk's own needs, while the link's queue ends within the turn. It stops at the
 * first chunk it cannot load, so the link's queue stays in access order and whatever the next
 * refresh finds missing comes next on it. */
void gmx_msched__prio_prefetch(gmx_msched_t *ms, uint32_t task, uint32_t ns, const hp_slices_t *hp,
			       int64_t at)
{
	gmx_memspace_t *m = ms->m;
	/* When the link, loading the windows' missing bytes in order, must start window s at the
	 * latest for every window from s on to be in by its start (Forestall's rule): windows
	 * after the next one are prefetched only while that time falls within the current window's
	 * GPU time (two refreshes: a later one can still start the rest in time), while the link
	 * is free before the window starts (a link already behind brings nothing in time by loading
	 * more), and only when the link has time to spare over the windows: the bytes they must
	 * move at the least (their chunks beyond the room HP leaves) take less than half their GPU
	 * time on the link. Loading early evicts chunks needed sooner than a load on time would and
	 * adds bytes (a fifth more per request on testcase I's inference BE, whose least bytes take
	 * 69% of its GPU time: 0.6% slower there); where the link has no such margin it only slows
	 * the task (gmx_comb_prefetch_ahead). */
	int64_t due[GMX_MAX_TASKS + 1], latest = INT64_MAX;
	uint64_t chunks = ms->first[1] - ms->first[0]; /* the distinct chunks of every window */
	for (uint32_t s = ns; s-- > 1;) {
		due[s] = latest;
		if (s >= hp->lo && s < hp->hi)
			continue;
		uint64_t pages = 0;
		for (uint32_t i = ms->first[s]; i < ms->first[s + 1]; i++)
			if (gmx_mplan_rank(ms->plan, ms->need[i]) == s) {
				pages += gmx_msched__missing_pages(&m->chunks[ms->need[i]], ms->mask[ms->need[i]]);
				chunks++;
			}
		int64_t by = at + hp->start_ns[s], load = gmx_comb_link_ns(pages * GMX_PAGE_SIZE, ms->dev->link_in_gbps);
		latest = (latest < by ? latest : by) - load;
		due[s] = latest;
	}
	int64_t lead = at + hp->start_ns[1];
	int spare = gmx_comb_prefetch_ahead((chunks > hp->room ? chunks - hp->room : 0) * GMX_CHUNK_SIZE,
					    hp->start_ns[ns], ms->dev->link_in_gbps);
	for (uint32_t s = 1; s < ns; s++) {
		if (s >= hp->lo && s < hp->hi)
			continue;
		if (s > 1 && (!spare || due[s] > lead))
			return; /* the rest can wait for a coming refresh, or the link has no time to spare */
		for (uint32_t i = ms->first[s]; i < ms->first[s + 1]; i++) {
			uint32_t c = ms->need[i];
			if (ms->h2d_free > at + ms->slice_ns)
				return; /* as gmx_msched__apply_plan's prefetch: within the coming turn */
			if (s > 1 && ms->h2d_free > at + hp->start_ns[s])
				return; /* the link is behind: what it loads early is not in time either */
			if (gmx_msched__has_pages(&m->chunks[c], ms->mask[c]))
				continue;
			if (!m->chunks[c].resident && m->used_chunks >= m->capacity_chunks) {
				uint32_t v = gmx_memspace_victim(m, task, ms->stamp);
				if (v == GMX_NO_CHUNK || gmx_mplan_rank(ms->plan, v) <= s)
					return;
			}
			m->chunks[c].stamp = ms->stamp; /* not a victim of the prefetch that follows */
			uint64_t before = ms->st.prefetch_in_bytes;
			int64_t rc =
			    gmx_msched__migrate(ms, c, ms->mask[c], at, 0, &ms->st.prefetch_in_bytes);
			if (s > 1)
				ms->st.ahead_in_bytes += ms->st.prefetch_in_bytes - before;
			if (rc)
				return;
		}
	}
}

/* PRIO: appends the chunks of task t's ops from op `from` on, in access order, until their
 * pages reach max_pages or the unit wraps back to `stop`; with want_mask, the pages per chunk
 * too: a chunk's mask starts afresh unless a window of generation mask_floor or later listed
 * it (want_mask 1: this window only; 2: also the one before; 3: since mask_floor, and then it
 * holds the pages of the first window since that listed it, so that windows after the first
 * two leave those two's masks as they were). *run_ns gets
 * the ops' predicted GPU time. Returns the op after the window, or -1 when out of memory. */
static int64_t window_needs(gmx_msched_t *ms, uint32_t t, uint32_t from, uint32_t stop, uint64_t max_pages,
			    int want_mask, uint32_t mask_floor, uint32_t *ops, int64_t *run_ns)
{
	ptask_t *p = &ms->t[t];
	uint32_t n = p->w->n_ops;
	if (++ms->gen == 0) {
		memset(ms->seen, 0, ((size_t)ms->m->n_chunks + 1) * sizeof(uint32_t));
		ms->gen = 1;
	}
	uint32_t floor = want_mask == 1 ? ms->gen : want_mask == 2 ? ms->gen - 1 : mask_floor;
	if (floor > ms->gen)
		floor = ms->gen; /* the generations wrapped since mask_floor */
	uint64_t pages = 0;
	uint32_t k = from, done = 0;
	int64_t run = 0;
	while (pages < max_pages && done < n && (done == 0 || k != stop)) {
		for (uint32_t r = p->op_first[k]; r < p->op_first[k] + p->op_n[k]; r++) {
			uint64_t pg = p->rp[r], end = pg + p->rn[r];
			pages += p->rn[r];
			while (pg < end) {
				uint32_t c = (uint32_t)(pg >> 9);
				uint64_t cend = ((uint64_t)c + 1) << 9, e = end < cend ? end : cend;
				if (ms->seen[c] != ms->gen) {
					if (want_mask && ms->seen[c] < floor) {
						memset(ms->mask[c], 0, sizeof(ms->mask[c]));
						if (want_mask == 3)
							ms->mgen[c] = ms->gen;
					}
					ms->seen[c] = ms->gen;
					if (gmx_msched__need_push(ms, c))
						return -1;
				}
				if (want_mask == 1 || want_mask == 2 || (want_mask == 3 && ms->mgen[c] == ms->gen))
					gmx_msched__set_bits(ms->mask[c], (uint32_t)(pg & 511), (uint32_t)(e - ((uint64_t)c << 9)));
				pg = e;
			}
		}
		run += p->op_ns[k];
		k = (k + 1) % n;
		done++;
	}
	if (ops)
		*ops = done;
	if (run_ns)
		*run_ns = run;
	return k;
}

/* PRIO: the LP task's plan within its turn. Its unit is cut into windows of a quarter of the
 * room HP leaves it; the timeline is its next window, then the HP tasks' slices, then its
 * following windows round the unit: Belady's order at window granularity, so that a task
 * cycling through more memory than it has keeps a fixed part resident and moves only the rest,
 * and the next window's pages load while the current one computes. */
int gmx_msched__prio_refresh(gmx_msched_t *ms, uint32_t task, int64_t now)
{
	gmx_memspace_t *m = ms->m;
	ptask_t *p = &ms->t[task];
	uint64_t hp_chunks = 0;
	for (uint32_t c = m->head; c != GMX_NO_CHUNK; c = m->chunks[c].next)
		hp_chunks += gmx_msched__is_hp(ms, ms->t[m->chunks[c].task].priority) && ms->ws[c];
	uint64_t room = m->capacity_chunks > hp_chunks ? m->capacity_chunks - hp_chunks : 1;
	uint64_t win = room * GMX_PAGES_PER_CHUNK / 4;
	ms->n_need = 0;
	uint32_t ns = 0, ops = 0;
	hp_slices_t deep = {.task = task, .room = room};
	int64_t run = 0;
	ms->first[ns++] = 0;
	uint32_t gen0 = ms->gen + 1; /* the first window's generation: masks add up from it */
	int64_t next = window_needs(ms, task, p->next_op, p->next_op, win, 1, 0, &ops, &run);
	if (next < 0)
		return -ENOMEM;
	deep.start_ns[ns] = run;
	p->refresh_in = ops > 1 ? ops / 2 : 1;
	uint32_t covered = ops;
	if (covered < p->w->n_ops) {
		/* The window after it comes second (HP pages are protected wherever HP's slices
		 * stand), so that gmx_msched__apply_plan prefetches it while the first computes. */
		ms->first[ns++] = ms->n_need;
		next = window_needs(ms, task, (uint32_t)next, p->next_op, win, 2, 0, &ops, &run);
		if (next < 0)
			return -ENOMEM;
		deep.start_ns[ns] = deep.start_ns[ns - 1] + run;
		covered += ops ? ops : p->w->n_ops;
	}
	deep.lo = deep.hi = ns;
	for (uint32_t i = 0; i < ms->n && ns < GMX_MAX_TASKS; i++)
		if (ms->t[i].runnable && gmx_msched__is_hp(ms, ms->t[i].priority)) {
			ms->first[ns++] = ms->n_need;
			if (gmx_msched__slice_needs(ms, i, 0))
				return -ENOMEM;
			deep.start_ns[ns] = deep.start_ns[ns - 1]; /* an interruption, not in its GPU time */
			deep.hi = ns;
		}
	while (covered < p->w->n_ops && ns < GMX_MAX_TASKS) {
		ms->first[ns++] = ms->n_need;
		next = window_needs(ms, task, (uint32_t)next, p->next_op, win, 3, gen0, &ops, &run);
		if (next < 0)
			return -ENOMEM;
		deep.start_ns[ns] = deep.start_ns[ns - 1] + run;
		covered += ops ? ops : p->w->n_ops;
	}
	ms->first[ns] = ms->n_need;
	return gmx_msched__apply_plan(ms, ns, now, 2, &deep);
}
