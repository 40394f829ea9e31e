/*
 * Migration orders for oversubscribed clients: before each grant, the granted command's
 * working set is made resident by the memory planner (memplan.c) over the coming slices:
 * the task's other queued commands, then the other tasks in core's timeline order.
 */
#include "server_internal.h"

#include "gpumux/combined.h"
#include "gpumux/mplan.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

void gmxd__send_load(client_t *v, uint64_t ptr, uint64_t len)
{
	gmx_ring_entry_t e = {
	    .type = GMX_DOWN_MIGRATE, .a = GMX_MIGRATE_LOAD, .seq = ++SRV.tokens, .x = ptr, .y = len};
	if (v->dead || v->cut)
		return;
	v->st.mig_in_bytes += len;
	gmxd__send_action(v, &e);
}

void gmxd__send_evict(client_t *v, uint64_t ptr, uint64_t len, int untouched)
{
	gmx_ring_entry_t e = {.type = GMX_DOWN_MIGRATE,
			      .a = untouched ? GMX_MIGRATE_EVICT_NOW : GMX_MIGRATE_EVICT,
			      .seq = ++SRV.tokens,
			      .x = ptr,
			      .y = len};
	if (v->dead || v->cut)
		return;
	gmxd__lease_memory_moves(v); /* its lease ends before this eviction in its ring */
	gmxd__push_down(v, &e);
	if (!v->cut) {
		v->st.mig_out_bytes += len;
		v->st.evictions++;
		gmxd__owe(v, gmxd__now_ns());
		v->evicts++;
		SRV.evicts_outstanding++;
	}
}

void gmxd__emit_order(void *ctx, uint32_t task, int to_device, uint64_t ptr, uint64_t len)
{
	client_t *v = &SRV.cl[task];
	if (to_device) {
		if (!v->dead && !v->cut)
			*(int *)ctx = 1;
		gmxd__send_load(v, ptr, len);
		return;
	}
	gmxd__send_evict(v, ptr, len, 0);
}

static int cmp_seq(const void *a, const void *b)
{
	uint64_t x = (*(dcmd_t *const *)a)->c.seq, y = (*(dcmd_t *const *)b)->c.seq;
	return x < y ? -1 : x > y;
}

/* Keeps the GMXD_SLICE_CMDS earliest commands offered in q (a max-heap by seq, *nq used). */
static void keep_earliest(dcmd_t **q, uint32_t *nq, dcmd_t *d)
{
	uint32_t i;
	if (*nq < GMXD_SLICE_CMDS) {
		for (i = (*nq)++; i > 0 && q[(i - 1) / 2]->c.seq < d->c.seq; i = (i - 1) / 2)
			q[i] = q[(i - 1) / 2];
		q[i] = d;
		return;
	}
	if (d->c.seq >= q[0]->c.seq)
		return;
	for (i = 0;;) { /* replace the latest kept and sift down */
		uint32_t l = 2 * i + 1, big = i;
		uint64_t bs = d->c.seq;
		if (l < *nq && q[l]->c.seq > bs)
			big = l, bs = q[l]->c.seq;
		if (l + 1 < *nq && q[l + 1]->c.seq > bs)
			big = l + 1;
		if (big == i)
			break;
		q[i] = q[big];
		i = big;
	}
	q[i] = d;
}

int gmxd__task_cmds(client_t *c, const dcmd_t *skip, int state, dcmd_t **q, uint32_t *nq)
{
	int whole = 0;
	*nq = 0;
	for (int h = 0; h < HASH; h++)
		for (dcmd_t *d = c->hash[h]; d; d = d->hnext)
			if (d != skip && d->state == state && GMX_PROTO_KIND_TOUCHES_MEMORY(d->kind)) {
				if (!d->nranges)
					whole = 1;
				keep_earliest(q, nq, d); /* the furthest of a long queue matter least */
			}
	qsort(q, *nq, sizeof q[0], cmp_seq);
	return whole;
}

int gmxd__append_ranges(dcmd_t *const *q, uint32_t nq, gmx_tpl_range_t **buf, uint32_t *len, uint32_t *cap)
{
	for (uint32_t i = 0; i < nq; i++) {
		if (*len + q[i]->nranges > *cap) {
			uint32_t nc = (*cap ? *cap * 2 : 1024) + q[i]->nranges;
			gmx_tpl_range_t *nb = realloc(*buf, nc * sizeof *nb);
			if (!nb)
				return -ENOMEM;
			*buf = nb;
			*cap = nc;
		}
		memcpy(*buf + *len, q[i]->ranges, q[i]->nranges * sizeof **buf);
		*len += q[i]->nranges;
	}
	return 0;
}

int gmxd__task_slice(client_t *c, const dcmd_t *skip, int state, gmxd_mem_slice_t *sl, gmx_tpl_range_t **buf,
		     uint32_t *len, uint32_t *cap, uint32_t *start)
{
	dcmd_t *q[GMXD_SLICE_CMDS];
	uint32_t nq;
	*sl = (gmxd_mem_slice_t){.task = c->task};
	sl->whole = gmxd__task_cmds(c, skip, state, q, &nq);
	if (sl->whole)
		return 0;
	*start = *len;
	int rc = gmxd__append_ranges(q, nq, buf, len, cap);
	sl->n = *len - *start;
	return rc;
}

uint32_t gmxd__timeline_order(uint32_t next, uint32_t *order)
{
	int prio[GMX_MAX_TASKS];
	uint8_t runnable[GMX_MAX_TASKS];
	for (int t = 0; t < GMX_MAX_TASKS; t++) {
		const client_t *o = &SRV.cl[t];
		prio[t] = o->priority;
		runnable[t] = o->used && !o->dead && !o->cut && o->oversub && o->queued > 0;
	}
	return gmx_timeline_order(prio, runnable, GMX_MAX_TASKS, next, order);
}

/* Makes d's working set resident before its grant (clients registered with
 * oversubscription). */
int gmxd__plan_memory(client_t *c, dcmd_t *d)
{
	if (!c->oversub)
		return 0;
	gmxd_mem_slice_t sl[2 * GMX_MAX_TASKS + 1];
	sl[0] = (gmxd_mem_slice_t){c->task, d->nranges == 0, d->ranges, d->nranges};
	if (gmxd_mem_ready(SRV.mem, &sl[0]))
		return 0;
	gmx_tpl_range_t *buf = NULL;
	uint32_t len = 0, cap = 0, n = 1, start[2 * GMX_MAX_TASKS + 1] = {0};
	/* Work already granted (in the driver's hands, perhaps not started) comes right after the
	 * granted command: its memory is evicted last, and only if the command cannot fit
	 * otherwise; the owner runs such an eviction once that work has finished (the
	 * interposer quiesces before moving memory out), so no kernel loses its memory. */
	for (int t = 0; t < GMX_MAX_TASKS; t++) {
		client_t *o = &SRV.cl[t];
		if (o->used && !o->dead && !o->cut && o->oversub && o->inflight &&
		    gmxd__task_slice(o, d, D_GRANTED, &sl[n], &buf, &len, &cap, &start[n]) == 0 &&
		    (sl[n].whole || sl[n].n))
			n++;
	}
	uint32_t n_protected = 1;
	uint32_t order[GMX_MAX_TASKS];
	uint32_t n_order = gmxd__timeline_order(c->task, order);
	for (uint32_t k = 0; k < n_order; k++)
		if (gmxd__task_slice(&SRV.cl[order[k]], d, D_QUEUED, &sl[n], &buf, &len, &cap, &start[n]) ==
		    0)
			n++;
	for (uint32_t k = 1; k < n; k++)
		sl[k].r = sl[k].whole || !sl[k].n ? NULL
						  : buf + start[k]; /* buf is NULL when no slice has ranges */
	gmxd_mem_stats_t st;
	int loaded = 0;
	int rc = gmxd_mem_plan(SRV.mem, sl, n, n_protected, gmxd__emit_order, &loaded, &st);
	free(buf);
	if (rc) {
		gmxd_log("client %u (%s): memory plan failed: %s; its kernel pages on demand", c->id, c->name,
			 strerror(-rc));
		return 0;
	}
	SRV.mig_plans++;
	SRV.mig_load_bytes += st.load_bytes;
	SRV.mig_evict_bytes += st.evict_bytes;
	SRV.mig_short_bytes += st.short_bytes;
	return loaded;
}

void gmxd__mem_policy_init(void)
{
	int on = (SRV.ops->flags & GMX_POLICY_MEM_PRIORITY) != 0;
	gmxd_mem_set_protect(SRV.mem, on);
	gmxd_mem_set_piece(SRV.mem, on ? gmx_comb_piece_bytes(SRV.cfg->link_mb_s / 1000.0, SRV.cfg->piece_us * 1000LL)
				       : 0);
}

int64_t gmxd__dev_load_ns(void *ctx, const gmx_cmd_t *cmd)
{
	(void)ctx;
	const dcmd_t *d = (const dcmd_t *)cmd;
	if (!d->cl || !d->cl->oversub || !GMX_PROTO_KIND_TOUCHES_MEMORY(d->kind))
		return 0;
	gmxd_mem_slice_t s = {d->cl->task, d->nranges == 0, d->ranges, d->nranges};
	uint64_t in = gmxd_mem_missing(SRV.mem, &s);
	if (!in)
		return 0;
	/* What must leave first to make room crosses the link too. */
	uint64_t res = gmxd_mem_resident(SRV.mem, GMX_MAX_TASKS);
	uint64_t out = res + in > SRV.mem_cap ? res + in - SRV.mem_cap : 0;
	return gmx_comb_link_ns(in + out, SRV.cfg->link_mb_s / 1000.0);
}
