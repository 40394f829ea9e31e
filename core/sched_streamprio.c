/* streamprio: stream priorities, the baseline without gap prediction.
 *
 * All tasks behave like streams of different priority in one process: one
 * queue ordered by priority (0 highest). A task's commands are released while
 * no task of a better priority has work queued or on the device; a lower
 * level therefore starts as soon as the higher one goes idle, however short
 * that idle time turns out to be, and a kernel already running is never cut
 * (CUDA stream priorities do not preempt running work). The tasks share one
 * context (GMX_POLICY_SPATIAL): a higher-priority kernel that arrives while a
 * lower one runs starts beside it, and the hardware hands free SMs to the
 * better priority first (GMX_POLICY_PRIORITY_BLOCKS).
 */
#include <errno.h>
#include <stdlib.h>

#include "gpumux/sched.h"

struct gmx_policy {
	gmx_device_t dev;
	gmx_sched_params_t params;
	uint32_t n_tasks;
	struct {
		gmx_cmd_queue_t queue;
		uint32_t inflight;
		int priority, present, done;
	} task[GMX_MAX_TASKS];
};

static int sp_create(const gmx_sched_params_t *p, const gmx_device_t *dev, gmx_policy_t **out)
{
	if (gmx_sched_params_check(p, NULL, 0) != 0)
		return -EINVAL; /* e.g. inflight_max 0 would never release anything */
	gmx_policy_t *s = calloc(1, sizeof(*s));
	if (!s)
		return -ENOMEM;
	s->dev = *dev;
	s->params = *p;
	*out = s;
	return 0;
}

static void sp_destroy(gmx_policy_t *s)
{
	free(s);
}

static int sp_task_add(gmx_policy_t *s, uint32_t task, int priority)
{
	if (task >= GMX_MAX_TASKS || priority < 0 || priority >= GMX_PRIORITY_LEVELS)
		return -EINVAL;
	s->task[task].present = 1;
	s->task[task].priority = priority;
	if (task + 1 > s->n_tasks)
		s->n_tasks = task + 1;
	return 0;
}

static void dispatch(gmx_policy_t *s)
{
	/* Levels in order; a level releases only when every better level is idle. */
	for (int l = 0; l < GMX_PRIORITY_LEVELS; l++) {
		int busy = 0;
		for (uint32_t t = 0; t < s->n_tasks; t++) {
			if (!s->task[t].present || s->task[t].priority != l)
				continue;
			while (s->task[t].queue.head && s->task[t].inflight < s->params.inflight_max) {
				s->task[t].inflight++;
				s->dev.submit(s->dev.ctx, gmx_cmd_queue_pop(&s->task[t].queue));
			}
			busy |= s->task[t].inflight > 0 || s->task[t].queue.head != NULL;
		}
		if (busy)
			return;
	}
}

static void sp_task_done(gmx_policy_t *s, uint32_t task)
{
	if (task < GMX_MAX_TASKS) {
		s->task[task].done = 1;
		/* What it still had queued goes now, whatever its level: nobody waits for it. */
		while (s->task[task].queue.head) {
			s->task[task].inflight++;
			s->dev.submit(s->dev.ctx, gmx_cmd_queue_pop(&s->task[task].queue));
		}
	}
	dispatch(s);
}

static void sp_on_launch(gmx_policy_t *s, gmx_cmd_t *cmd)
{
	gmx_cmd_queue_push(&s->task[cmd->task].queue, cmd);
	dispatch(s);
}

static void sp_on_complete(gmx_policy_t *s, gmx_cmd_t *cmd)
{
	if (s->task[cmd->task].inflight)
		s->task[cmd->task].inflight--;
	dispatch(s);
}

static void sp_on_timer(gmx_policy_t *s)
{
	dispatch(s);
}

static void sp_on_host_wait(gmx_policy_t *s, uint32_t task)
{
	(void)task;
	dispatch(s);
}

const gmx_policy_ops_t gmx_sched_streamprio_ops = {
	.name = "streamprio",
	.summary = "stream priorities: a lower level runs whenever the higher ones are idle",
	.flags = GMX_POLICY_SPATIAL | GMX_POLICY_PRIORITY_BLOCKS,
	.create = sp_create,
	.destroy = sp_destroy,
	.task_add = sp_task_add,
	.task_done = sp_task_done,
	.on_launch = sp_on_launch,
	.on_complete = sp_on_complete,
	.on_timer = sp_on_timer,
	.on_host_wait = sp_on_host_wait,
};
