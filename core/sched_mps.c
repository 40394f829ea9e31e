/* mps: spatial sharing as under NVIDIA MPS. Every task releases its commands
 * as they come (up to inflight_max ahead of completion) whatever its priority,
 * and the device runs kernels of different tasks at the same time
 * (GMX_POLICY_SPATIAL); how much they slow each other is the device's model
 * (in the simulator, sim/interference.c). */
#include <errno.h>
#include <stdlib.h>

#include "gpumux/sched.h"

struct gmx_policy {
	gmx_device_t dev;
	gmx_sched_params_t params;
	struct {
		gmx_cmd_queue_t queue;
		uint32_t inflight;
	} task[GMX_MAX_TASKS];
};

static int mps_create(const gmx_sched_params_t *p, const gmx_device_t *dev, gmx_policy_t **out)
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

static void mps_destroy(gmx_policy_t *s)
{
	free(s);
}

static int mps_task_add(gmx_policy_t *s, uint32_t task, int priority)
{
	(void)s;
	return task >= GMX_MAX_TASKS || priority < 0 || priority >= GMX_PRIORITY_LEVELS ? -EINVAL : 0;
}

static void pump(gmx_policy_t *s, uint32_t t)
{
	while (s->task[t].queue.head && s->task[t].inflight < s->params.inflight_max) {
		s->task[t].inflight++;
		s->dev.submit(s->dev.ctx, gmx_cmd_queue_pop(&s->task[t].queue));
	}
}

static void mps_task_done(gmx_policy_t *s, uint32_t task)
{
	/* What it still had queued goes now: nobody waits for it. */
	while (task < GMX_MAX_TASKS && s->task[task].queue.head) {
		s->task[task].inflight++;
		s->dev.submit(s->dev.ctx, gmx_cmd_queue_pop(&s->task[task].queue));
	}
}

static void mps_on_launch(gmx_policy_t *s, gmx_cmd_t *cmd)
{
	gmx_cmd_queue_push(&s->task[cmd->task].queue, cmd);
	pump(s, cmd->task);
}

static void mps_on_complete(gmx_policy_t *s, gmx_cmd_t *cmd)
{
	if (s->task[cmd->task].inflight)
		s->task[cmd->task].inflight--;
	pump(s, cmd->task);
}

static void mps_on_timer(gmx_policy_t *s)
{
	(void)s;
}

static void mps_on_host_wait(gmx_policy_t *s, uint32_t task)
{
	(void)s;
	(void)task;
}

const gmx_policy_ops_t gmx_sched_mps_ops = {
	.name = "mps",
	.summary = "spatial sharing (MPS): kernels of all tasks run at once and slow each other",
	.flags = GMX_POLICY_SPATIAL,
	.create = mps_create,
	.destroy = mps_destroy,
	.task_add = mps_task_add,
	.task_done = mps_task_done,
	.on_launch = mps_on_launch,
	.on_complete = mps_on_complete,
	.on_timer = mps_on_timer,
	.on_host_wait = mps_on_host_wait,
};
