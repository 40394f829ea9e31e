/*
 * The gpumux policy's device side in gpumuxd (docs/combined.md, docs/daemon.md): what the
 * simulator knows of its tasks and the daemon has to learn or be told.
 *
 * - Kernel durations: the policy measures every completed kernel (core's gmx_kdur_t, handed to
 *   it as params.kdur) and predicts queued kernels from them for gap admission.
 * - LP turns: core's slice rule (gmx_comb_slice_rule, the simulator's), over the migration a
 *   turn would need: the bytes the task's work within the turn misses (its mean measured
 *   kernel time gives the number of commands in the turn, its queued commands' predictions the
 *   bytes each touches, at most what of it is not resident), at link_mb_s; or what its
 *   switches were measured to cost (the first kernel of a turn less its usual run), if more;
 *   capped by the latency targets of the runnable tasks.
 * - Latency targets and arrivals from the configuration's [task NAME] sections, by the
 *   client's name; a period or a Poisson rate seeds the policy's gap predictor (params.arrivals).
 */
#include "server_internal.h"

#include "gpumux/combined.h"
#include "gpumux/kdur.h"

#include <errno.h>
#include <math.h>
#include <string.h>

static struct {
	gmx_kdur_t *kdur;
	gmx_comb_arrivals_t arr[GMX_MAX_TASKS];
	int64_t period_ns[GMX_MAX_TASKS];
	int64_t target_ns[GMX_MAX_TASKS];
} G;

static int combined(void)
{
	return SRV.ops && (SRV.ops->flags & GMX_POLICY_MEM_PRIORITY);
}

int gmxd__comb_params(gmx_sched_params_t *p)
{
	gmxd__comb_fini();
	if (!combined())
		return 0;
	int rc = gmx_kdur_create(GMX_MAX_TASKS, &G.kdur);
	if (rc)
		return rc;
	p->kdur = G.kdur;
	p->arrivals = G.arr;
	p->n_arrivals = GMX_MAX_TASKS;
	return 0;
}

void gmxd__comb_fini(void)
{
	gmx_kdur_destroy(G.kdur);
	memset(&G, 0, sizeof G);
}

void gmxd__comb_task_added(const client_t *c)
{
	uint32_t t = c->task;
	if (t >= GMX_MAX_TASKS)
		return;
	G.arr[t] = (gmx_comb_arrivals_t){0};
	G.period_ns[t] = G.target_ns[t] = 0;
	for (int k = 0; k < SRV.cfg->n_task; k++) {
		const struct gmxd_task_cfg *tc = &SRV.cfg->task[k];
		if (strncmp(tc->name, c->name, sizeof tc->name) != 0)
			continue;
		G.target_ns[t] = tc->latency_target_ms * 1000000LL;
		G.period_ns[t] = tc->arrival_period_us * 1000LL;
		if (G.period_ns[t] > 0)
			G.arr[t] = (gmx_comb_arrivals_t){.interarrival_ns = &G.period_ns[t], .n_interarrival = 1};
		else if (tc->arrival_rate_per_s > 0)
			G.arr[t] = (gmx_comb_arrivals_t){.rate_per_s = tc->arrival_rate_per_s};
	}
}

/* The migration a turn of horizon_ns of task *ctx would need, in seconds at link_mb_s. */
static double turn_migration_s(void *ctx, int64_t horizon_ns)
{
	uint32_t task = *(const uint32_t *)ctx;
	const client_t *c = &SRV.cl[task];
	uint64_t bytes = gmxd_mem_bytes(SRV.mem, task), res = gmxd_mem_resident(SRV.mem, task);
	/* What its switches were measured to cost (orders in pieces, each a round trip; the
	 * outgoing task's evictions first; a lease handed over), when that is more than the link
	 * time of what it misses. */
	int64_t sw = gmx_kdur_switch_ns(G.kdur, task);
	double sw_s = sw > 0 ? (double)sw / 1e9 : 0;
	if (!c->oversub || res >= bytes)
		return sw_s;
	/* Bytes one of its commands touches: its queued commands' predictions on average, all its
	 * memory when one has none (whole-allocation prediction). */
	uint64_t sum = 0, n = 0;
	int whole = 0;
	for (int h = 0; h < HASH; h++)
		for (const dcmd_t *d = c->hash[h]; d; d = d->hnext)
			if (d->state == D_QUEUED && GMX_PROTO_KIND_TOUCHES_MEMORY(d->kind)) {
				n++;
				whole |= d->nranges == 0;
				for (uint32_t r = 0; r < d->nranges; r++)
					sum += d->ranges[r].length;
			}
	double per = whole || !n ? (double)bytes : (double)sum / (double)n;
	int64_t mean = gmx_kdur_task_mean(G.kdur, task);
	double cmds = mean > 0 ? (double)horizon_ns / (double)mean : INFINITY;
	double miss = fmin((double)(bytes - res), fmax(cmds, 1.0) * per);
	miss = fmin(miss, (double)SRV.mem_cap);
	double link_s = miss / ((double)SRV.cfg->link_mb_s * 1e6);
	return sw_s > link_s ? sw_s : link_s;
}

int64_t gmxd__dev_slice_for(void *ctx, uint32_t task)
{
	(void)ctx;
	if (!combined() || task >= GMX_MAX_TASKS)
		return 0;
	int64_t tg[GMX_MAX_TASKS];
	uint32_t n = 0;
	for (int t = 0; t < GMX_MAX_TASKS; t++) {
		const client_t *o = &SRV.cl[t];
		if (o->used && !o->dead && !o->cut && (o->queued || o->inflight))
			tg[n++] = G.target_ns[t];
	}
	int64_t cap = gmx_comb_lp_slice(tg, n, GMX_COMB_SLICE_NS_MIN, GMX_COMB_SLICE_NS_MAX);
	return gmx_comb_slice_rule(cap, turn_migration_s, &task);
}

int64_t gmxd__comb_run_ns(const dcmd_t *d)
{
	if (!G.kdur || !d->cl || d->cl->task >= GMX_MAX_TASKS)
		return 0;
	int64_t p = d->c.kind == GMX_OP_KERNEL ? gmx_kdur_predict(G.kdur, d->cl->task, d->c.kernel_id) : -1;
	if (p < 0)
		p = gmx_kdur_task_mean(G.kdur, d->cl->task);
	return p > 0 ? p : 0;
}
