/* The baselines' shared task state and unit boundaries (core/baseline.h). */
#include "baseline.h"

#include <errno.h>

void gmx_unitspan_launch(gmx_unitspan_t *u, const gmx_cmd_t *c)
{
	(void)c;
	u->inside = 1;
}

static int is_gpu(uint8_t kind)
{
	return kind == GMX_OP_KERNEL || kind == GMX_OP_COPY_H2D || kind == GMX_OP_COPY_D2H ||
	       kind == GMX_OP_MEMSET || kind == GMX_OP_COPY_D2D;
}

void gmx_unitspan_complete(gmx_unitspan_t *u, const gmx_cmd_t *c)
{
	const gmx_workload_t *w = c->workload;
	if (!w || !c->op || c->op < w->ops || c->op >= w->ops + w->n_ops) {
		u->inside = 0;
		return;
	}
	if (u->w != w) {
		u->w = w;
		u->last_gpu = 0;
		for (uint32_t k = 0; k < w->n_ops; k++)
			if (is_gpu(w->ops[k].kind))
				u->last_gpu = k;
	}
	if ((uint32_t)(c->op - w->ops) == u->last_gpu)
		u->inside = 0;
}

int gmx_btask_add(gmx_btask_t *tasks, uint32_t *n_tasks, uint32_t task, int priority)
{
	if (task >= GMX_MAX_TASKS || priority < 0 || priority >= GMX_PRIORITY_LEVELS)
		return -EINVAL;
	gmx_btask_t *t = &tasks[task];
	if (t->present && (!t->done || t->queue.head || t->inflight))
		return -EBUSY;
	*t = (gmx_btask_t){.present = 1, .priority = priority};
	if (task + 1 > *n_tasks)
		*n_tasks = task + 1;
	return 0;
}

int gmx_btask_hp_level(const gmx_btask_t *tasks, uint32_t n)
{
	int hp = -1;
	for (uint32_t i = 0; i < n; i++)
		if (tasks[i].present && !tasks[i].done && (hp < 0 || tasks[i].priority < hp))
			hp = tasks[i].priority;
	return hp;
}
