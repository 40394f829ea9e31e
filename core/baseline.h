/* What the published baselines (tgs, orion, reef; docs/baselines.md) share: their per-task
 * state, the HP level, and unit boundaries.
 *
 * Whether a task is inside one of its units (a request, an iteration): from the launch of a
 * command of the unit to the completion of the unit's last GPU operation. The baselines that
 * keep best-effort work off the GPU for as long as a high-priority request lasts (orion, reef;
 * docs/baselines.md) ask it, since a request's host gaps leave the task with nothing queued
 * while the request is still under way. */
#ifndef GMX_CORE_BASELINE_H
#define GMX_CORE_BASELINE_H

#include <stdint.h>

#include "gpumux/sched.h"

typedef struct gmx_unitspan {
	const gmx_workload_t *w; /* workload last_gpu was computed for */
	uint32_t last_gpu;	 /* index of the unit's last kernel, copy or memset */
	int inside;		 /* a unit has begun and its last GPU operation not completed */
} gmx_unitspan_t;

/* A command of the task was launched: the task is inside a unit. */
void gmx_unitspan_launch(gmx_unitspan_t *u, const gmx_cmd_t *c);

/* A command of the task completed: the unit ends when it is the unit's last GPU operation,
 * or at any completion when the command carries no launch details (the caller then looks at
 * what the task still has queued or in flight). */
void gmx_unitspan_complete(gmx_unitspan_t *u, const gmx_cmd_t *c);

/* A task as the baselines keep it. */
typedef struct gmx_btask {
	gmx_cmd_queue_t queue; /* launched, not yet released to the device */
	uint32_t inflight;     /* released, not completed */
	int priority, present, done;
	int held; /* preempted on the device (reef) */
	gmx_unitspan_t unit;
} gmx_btask_t;

/* Registers task `task` of tasks[] at `priority` and grows *n_tasks to cover it; a finished
 * task's index may be given again (it starts over). 0, -EINVAL (out of range) or -EBUSY (the
 * index is in use). */
int gmx_btask_add(gmx_btask_t *tasks, uint32_t *n_tasks, uint32_t task, int priority);

/* The HP level: the best priority among the first n tasks that are present and not finished;
 * -1 when there is none. */
int gmx_btask_hp_level(const gmx_btask_t *tasks, uint32_t n);

#endif
