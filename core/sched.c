/* Policy registry, shared tunables and the command queue. */
#include "gpumux/sched.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

/* Tunables: default and bounds in one place. */
#define GMX_SLICE_NS_DEFAULT 2000000LL     /* 2 ms: the GPU's default time slice (DESIGN.md) */
#define GMX_SLICE_NS_MIN 10000LL           /* 10 us: below a context switch's own cost */
#define GMX_SLICE_NS_MAX 60000000000LL     /* 60 s */
#define GMX_INFLIGHT_DEFAULT 2u            /* a held task stops within two kernels */
#define GMX_INFLIGHT_MIN 1u
#define GMX_INFLIGHT_MAX 1024u

extern const gmx_policy_ops_t gmx_sched_exclusive_ops;
extern const gmx_policy_ops_t gmx_sched_timeslice_ops;

static const gmx_policy_ops_t *const registry[] = {
	&gmx_sched_exclusive_ops,
	&gmx_sched_timeslice_ops,
};

void gmx_sched_params_default(gmx_sched_params_t *p)
{
	p->slice_ns = GMX_SLICE_NS_DEFAULT;
	p->inflight_max = GMX_INFLIGHT_DEFAULT;
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
