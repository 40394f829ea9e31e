/* Policy registry, shared tunables and the command queue. */
#include "gpumux/sched.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

extern const gmx_policy_ops_t gmx_sched_exclusive_ops;
extern const gmx_policy_ops_t gmx_sched_timeslice_ops;
extern const gmx_policy_ops_t gmx_sched_hpf_ops;
extern const gmx_policy_ops_t gmx_sched_timeline_ops;
extern const gmx_policy_ops_t gmx_sched_fikit_ops;
extern const gmx_policy_ops_t gmx_sched_streamprio_ops;
extern const gmx_policy_ops_t gmx_sched_mps_ops;
extern const gmx_policy_ops_t gmx_sched_tgs_ops;
extern const gmx_policy_ops_t gmx_sched_orion_ops;
extern const gmx_policy_ops_t gmx_sched_reef_ops;
extern const gmx_policy_ops_t gmx_sched_gpumux_ops;

static const gmx_policy_ops_t *const registry[] = {
	&gmx_sched_exclusive_ops,
	&gmx_sched_timeslice_ops,
	&gmx_sched_hpf_ops,
	&gmx_sched_timeline_ops,
	&gmx_sched_fikit_ops,
	&gmx_sched_streamprio_ops,
	&gmx_sched_mps_ops,
	&gmx_sched_tgs_ops,
	&gmx_sched_orion_ops,
	&gmx_sched_reef_ops,
	&gmx_sched_gpumux_ops,
};

void gmx_sched_params_default(gmx_sched_params_t *p)
{
	p->slice_ns = GMX_SLICE_NS_DEFAULT;
	p->inflight_max = GMX_INFLIGHT_DEFAULT;
	p->gap_quantile = GMX_GAP_QUANTILE_DEFAULT;
	p->switch_ns = GMX_SWITCH_NS_DEFAULT;
	p->starve_ns = GMX_STARVE_NS_DEFAULT;
	p->profiles = NULL;
	p->n_profiles = 0;
	p->profile_learn = 0;
	p->hold_task = 0;
	p->arrivals = NULL;
	p->n_arrivals = 0;
	p->kdur = NULL;
}

int gmx_sched_params_check(const gmx_sched_params_t *p, char *err, size_t err_len)
{
	if (p->slice_ns < GMX_SLICE_NS_MIN || p->slice_ns > GMX_SLICE_NS_MAX) {
		snprintf(err, err_len, "slice %.3f ms out of range (expected %.3f to %.0f ms)", p->slice_ns / 1e6,
			 GMX_SLICE_NS_MIN / 1e6, GMX_SLICE_NS_MAX / 1e6);
		return -EINVAL;
	}
	if (p->inflight_max < GMX_INFLIGHT_MIN || p->inflight_max > GMX_INFLIGHT_MAX) {
		snprintf(err, err_len, "in-flight bound %u out of range (expected %u to %u)", p->inflight_max,
			 GMX_INFLIGHT_MIN, GMX_INFLIGHT_MAX);
		return -EINVAL;
	}
	if (!(p->gap_quantile >= GMX_GAP_QUANTILE_MIN && p->gap_quantile <= GMX_GAP_QUANTILE_MAX)) {
		snprintf(err, err_len, "gap quantile %g out of range (expected %g to %g)", p->gap_quantile,
			 GMX_GAP_QUANTILE_MIN, GMX_GAP_QUANTILE_MAX);
		return -EINVAL;
	}
	if (p->switch_ns < 0 || p->switch_ns > GMX_SWITCH_NS_MAX) {
		snprintf(err, err_len, "context-switch cost %.3f ms out of range (expected 0 to %.0f ms)",
			 p->switch_ns / 1e6, GMX_SWITCH_NS_MAX / 1e6);
		return -EINVAL;
	}
	if (p->starve_ns < GMX_STARVE_NS_MIN || p->starve_ns > GMX_STARVE_NS_MAX) {
		snprintf(err, err_len, "starvation bound %.3f ms out of range (expected %.1f to %.0f ms)",
			 p->starve_ns / 1e6, GMX_STARVE_NS_MIN / 1e6, GMX_STARVE_NS_MAX / 1e6);
		return -EINVAL;
	}
	if (p->n_profiles && !p->profiles) {
		snprintf(err, err_len, "%u task profiles announced but none given", p->n_profiles);
		return -EINVAL;
	}
	return 0;
}

const gmx_policy_ops_t *gmx_sched_find(const char *name)
{
	for (size_t i = 0; i < sizeof(registry) / sizeof(registry[0]); i++)
		if (!strcmp(registry[i]->name, name))
			return registry[i];
	return NULL;
}

void gmx_sched_names(char *buf, size_t len)
{
	size_t used = 0;
	if (len)
		buf[0] = 0;
	for (size_t i = 0; i < sizeof(registry) / sizeof(registry[0]); i++) {
		int n = snprintf(buf + used, len > used ? len - used : 0, "%s%s", i ? "|" : "", registry[i]->name);
		if (n > 0)
			used += (size_t)n;
	}
}

int gmx_lease_same(const gmx_lease_t *a, const gmx_lease_t *b)
{
	uint32_t ai = a ? a->inflight : 0, bi = b ? b->inflight : 0;
	if (ai == 0 || bi == 0)
		return ai == bi;
	return ai == bi && a->until == b->until;
}

void gmx_lease_set(const gmx_device_t *dev, uint32_t task, gmx_lease_t *cur, uint32_t inflight, int64_t until)
{
	gmx_lease_t l = {inflight, inflight ? until : 0};
	if (!dev->lease || gmx_lease_same(cur, &l))
		return;
	*cur = l;
	dev->lease(dev->ctx, task, inflight ? &l : NULL);
}

uint32_t gmx_lease_depth(int64_t short_sum_ns, uint32_t n_short, uint32_t n_long, uint32_t inflight_max)
{
	if (n_short == 0 || n_long > GMX_LEASE_LONG_MAX || short_sum_ns < 0 ||
	    short_sum_ns > (int64_t)n_short * GMX_LEASE_BACKLOG_NS)
		return 0;
	/* B over the mean of the short ones: how many such commands fit in B */
	uint64_t d = short_sum_ns > 0 ? (uint64_t)GMX_LEASE_BACKLOG_NS * n_short / (uint64_t)short_sum_ns
				      : GMX_LEASE_DEPTH_MAX;
	if (d > GMX_LEASE_DEPTH_MAX)
		d = GMX_LEASE_DEPTH_MAX;
	return d > inflight_max ? (uint32_t)d : 0;
}

void gmx_cmd_queue_push(gmx_cmd_queue_t *q, gmx_cmd_t *cmd)
{
	cmd->next = NULL;
	if (q->tail)
		q->tail->next = cmd;
	else
		q->head = cmd;
	q->tail = cmd;
	q->length++;
}

gmx_cmd_t *gmx_cmd_queue_pop(gmx_cmd_queue_t *q)
{
	gmx_cmd_t *c = q->head;
	if (!c)
		return NULL;
	q->head = c->next;
	if (!q->head)
		q->tail = NULL;
	c->next = NULL;
	q->length--;
	return c;
}
