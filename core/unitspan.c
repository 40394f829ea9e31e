/* Unit boundaries of a task, from its commands' place in its workload (core/unitspan.h). */
#include "unitspan.h"

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
