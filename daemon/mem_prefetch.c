/*
 * Rule 6 of the combined policy in gpumuxd (docs/combined.md, docs/daemon.md "Oversubscription"):
 * at each grant of an LP client's command, its coming windows are planned resident while the
 * granted command computes. What the client announced (its queued commands with their predicted
 * ranges) is its timeline; core's gmx_comb_prefetch_cmds cuts it into windows and decides how far
 * ahead to load (the window after the current one always; further ones when the link has time to
 * spare and must start them now), from the daemon's learned kernel durations and link_mb_s.
 *
 * Ordering: the evictions go to their owners at once, so they precede the granted command in an
 * LP client's own ring (the interposer runs an eviction only once its work in flight is done, so
 * after the grant it would wait for the command); the loads follow the grant, so the interposer
 * runs them on its migration stream while the command computes, and its next grant waits for them.
 */
#include "server_internal.h"

#include "gpumux/combined.h"

#include <stdlib.h>
#include <string.h>

/* The planner's emit for a prefetch: evictions as any plan's, loads kept for after the grant. */
static void keep_load(void *ctx, uint32_t task, int to_device, uint64_t ptr, uint64_t len)
{
	gmxd_prefetch_t *pf = ctx;
	if (!to_device) {
		/* The plan protected every client's granted work: the owner need not wait for it. */
		gmxd__send_evict(&SRV.cl[task], ptr, len, 1);
		return;
	}
	if (pf->n == pf->cap) {
		uint32_t nc = pf->cap ? pf->cap * 2 : 16;
		gmx_ring_entry_t *ne = realloc(pf->e, nc * sizeof *ne);
		if (!ne)
			return; /* the load is not sent: its command pages on demand or loads at its grant */
		pf->e = ne;
		pf->cap = nc;
	}
	pf->e[pf->n++] = (gmx_ring_entry_t){
	    .type = GMX_DOWN_MIGRATE, .a = GMX_MIGRATE_LOAD, .x = ptr, .y = len}; /* c's own */
}

/* Whether c is HP: the best priority among live clients while some has a worse one. Its plan
 * only tops up what its commands miss (rule 5). */
static int is_hp(const client_t *c)
{
	int worse = 0;
	for (int t = 0; t < GMX_MAX_TASKS; t++) {
		const client_t *o = &SRV.cl[t];
		if (!o->used || o->dead || o->cut)
			continue;
		if (o->priority < c->priority)
			return 0;
		worse |= o->priority > c->priority;
	}
	return worse;
}

/* The room the better priorities leave c: the device less their resident memory, which c's
 * plans never evict (gmx_comb_may_evict). */
static uint64_t room_for(const client_t *c)
{
	uint64_t held = 0;
	for (int t = 0; t < GMX_MAX_TASKS; t++) {
		const client_t *o = &SRV.cl[t];
		if (o->used && !o->dead && !o->cut && o->priority < c->priority)
			held += gmxd_mem_resident(SRV.mem, (uint32_t)t);
	}
	return SRV.mem_cap > held ? SRV.mem_cap - held : 0;
}

typedef struct {
	gmxd_mem_slice_t sl[2 * GMX_MAX_TASKS + 3];
	uint32_t start[2 * GMX_MAX_TASKS + 3], n;
	gmx_tpl_range_t *buf;
	uint32_t len, cap;
} slices_t;

/* Appends one slice of c's commands q[0..nq) (ranges in *buf; set once buf stops moving). */
static int add_cmds(slices_t *s, const client_t *c, dcmd_t *const *q, uint32_t nq)
{
	s->sl[s->n] = (gmxd_mem_slice_t){.task = c->task};
	s->start[s->n] = s->len;
	int rc = gmxd__append_ranges(q, nq, &s->buf, &s->len, &s->cap);
	s->sl[s->n].n = s->len - s->start[s->n];
	s->n++;
	return rc;
}

static void fix_ranges(slices_t *s)
{
	for (uint32_t k = 0; k < s->n; k++)
		s->sl[k].r = s->sl[k].whole || !s->sl[k].n ? NULL : s->buf + s->start[k];
}

/* How many of c's queued commands q[0..nq) to prefetch at the grant of d (core's decision), 0
 * when none. *next gets those of the window after the current one, *ahead the missing bytes of
 * the windows taken after it. */
static uint32_t decide(client_t *c, dcmd_t *d, dcmd_t *const *q, uint32_t nq, uint32_t *next, uint64_t *ahead)
{
	dcmd_t *g[GMXD_SLICE_CMDS];
	uint32_t ng;
	if (gmxd__task_cmds(c, d, D_GRANTED, g, &ng))
		return 0; /* work in flight needs all of it */
	slices_t s = {.n = 0};
	uint64_t *fresh = malloc(((size_t)nq + 2) * 2 * sizeof *fresh);
	gmx_comb_coming_t *cm = malloc(((size_t)nq + 1) * sizeof *cm);
	uint32_t k = 0;
	int64_t cur_ns = d ? gmxd__comb_run_ns(d) : 0;
	if (!fresh || !cm || add_cmds(&s, c, &d, d ? 1 : 0) || add_cmds(&s, c, g, ng))
		goto out;
	for (uint32_t i = 0; i < ng; i++)
		cur_ns += gmxd__comb_run_ns(g[i]);
	/* One slice per queued command: their fresh bytes in launch order. */
	gmxd_mem_slice_t *one = malloc(((size_t)nq + 2) * sizeof *one);
	if (!one)
		goto out;
	fix_ranges(&s);
	one[0] = s.sl[0];
	one[1] = s.sl[1];
	for (uint32_t i = 0; i < nq; i++)
		one[i + 2] = (gmxd_mem_slice_t){c->task, 0, q[i]->ranges, q[i]->nranges};
	uint64_t *missing = fresh + nq + 2;
	int counted = gmxd_mem_fresh(SRV.mem, one, nq + 2, fresh, missing);
	free(one);
	if (counted < 2)
		goto out;
	for (uint32_t i = 0; i + 2 < (uint32_t)counted; i++)
		cm[i] = (gmx_comb_coming_t){fresh[i + 2], missing[i + 2], gmxd__comb_run_ns(q[i])};
	k = gmx_comb_prefetch_cmds(cm, (uint32_t)counted - 2, fresh[0] + fresh[1], cur_ns, room_for(c),
				   SRV.cfg->link_mb_s / 1000.0, next);
	uint64_t miss = 0;
	for (uint32_t i = 0; i < k; i++) {
		miss += cm[i].missing_bytes;
		*ahead += i >= *next ? cm[i].missing_bytes : 0;
	}
	if (!miss)
		k = 0; /* all of it is in */
out:
	free(s.buf);
	free(fresh);
	free(cm);
	return k;
}

void gmxd__prefetch_plan(client_t *c, dcmd_t *d, gmxd_prefetch_t *pf)
{
	pf->n = 0;
	if (!c->oversub || !SRV.ops || !(SRV.ops->flags & GMX_POLICY_MEM_PRIORITY) || (d && !d->nranges) ||
	    is_hp(c))
		return;
	dcmd_t *q[GMXD_SLICE_CMDS + GMX_AHEAD_MAX];
	uint32_t nq, next = 0;
	uint64_t ahead = 0;
	gmxd__task_cmds(c, d, D_QUEUED, q, &nq);
	/* What it announced ahead (protocol 7) is queued behind those in its streams: its timeline
	 * goes on there. */
	for (uint32_t i = 0; i < c->nahead; i++)
		if (GMX_PROTO_KIND_TOUCHES_MEMORY(c->ahead[i]->kind))
			q[nq++] = c->ahead[i];
	for (uint32_t i = 0; i < nq; i++)
		if (!q[i]->nranges) {
			nq = i; /* a command with no prediction needs every allocation: plan up to it */
			break;
		}
	uint32_t k = nq ? decide(c, d, q, nq, &next, &ahead) : 0;
	if (!k)
		return;
	/* The timeline: the windows taken (loaded), then what must stay (d, the work granted to
	 * every client), then c's later commands and the other clients' queued work in core's
	 * timeline order (evicted furthest first). */
	slices_t s = {.n = 0};
	int rc = add_cmds(&s, c, q, k) || add_cmds(&s, c, &d, d ? 1 : 0);
	for (int t = 0; t < GMX_MAX_TASKS && !rc; t++) {
		client_t *o = &SRV.cl[t];
		if (o->used && !o->dead && !o->cut && o->oversub && o->inflight) {
			rc = gmxd__task_slice(o, d, D_GRANTED, &s.sl[s.n], &s.buf, &s.len, &s.cap,
					      &s.start[s.n]);
			s.n++;
		}
	}
	uint32_t n_protected = s.n;
	rc = rc || add_cmds(&s, c, q + k, nq - k);
	uint32_t order[GMX_MAX_TASKS];
	uint32_t n_order = gmxd__timeline_order(c->task, order);
	for (uint32_t i = 0; i < n_order && !rc; i++)
		if (order[i] != c->task) {
			rc = gmxd__task_slice(&SRV.cl[order[i]], NULL, D_QUEUED, &s.sl[s.n], &s.buf, &s.len,
					      &s.cap, &s.start[s.n]);
			s.n++;
		}
	gmxd_mem_stats_t st = {0};
	if (!rc) {
		fix_ranges(&s);
		rc = gmxd_mem_plan(SRV.mem, s.sl, s.n, n_protected, keep_load, pf, &st);
	}
	free(s.buf);
	if (rc) {
		gmxd_log("client %u (%s): prefetch plan failed; its commands load at their grants", c->id,
			 c->name);
		return;
	}
	SRV.mig_prefetches++;
	SRV.mig_evict_bytes += st.evict_bytes;
	SRV.mig_load_bytes += st.load_bytes;
	SRV.mig_prefetch_bytes += st.load_bytes;
	SRV.mig_ahead_bytes += ahead < st.load_bytes ? ahead : st.load_bytes;
}

void gmxd__prefetch_refresh(client_t *c)
{
	if (!c->oversub || !c->inflight || (!c->queued && !c->nahead) || c->dead || c->cut)
		return;
	gmxd_prefetch_t pf = {0};
	gmxd__prefetch_plan(c, NULL, &pf);
	gmxd__prefetch_send(c, &pf);
}

void gmxd__prefetch_send(client_t *c, gmxd_prefetch_t *pf)
{
	for (uint32_t i = 0; i < pf->n; i++)
		gmxd__send_load(c, pf->e[i].x, pf->e[i].y); /* a plan loads only its first slice's task's */
	pf->n = 0;
	free(pf->e);
	pf->e = NULL;
	pf->cap = 0;
}
