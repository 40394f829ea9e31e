/* reef: REEF's immediate preemption of best-effort work (OSDI'22; SJTU-IPADS/reef
 * src/reef/server/scheduler.cpp, loop_body and preempt_reset; docs/baselines.md).
 *
 * Real-time (RT) tasks are those of the best priority level still running; every other task
 * is best-effort (BE). RT commands go to the device at once (up to inflight_max ahead of
 * completion). While any RT task is inside a request (from its first command to its unit's
 * last GPU operation, host gaps included: REEF runs a whole RT task in real-time mode) or has
 * work queued or on the device, no BE command is released, and BE work already on the device
 * is preempted the moment RT work arrives: on a device that can kill kernels (reset), the BE
 * kernels running are killed and re-run from their start later, and BE commands submitted
 * but not started wait (REEF resets the compute units and flushes the device queues; the
 * work is idempotent); on one that cannot, in-flight BE work drains (REEF-N, and REEF's
 * NoPreempt mode). When RT is idle, BE tasks resume and release up to REEF_BE_QUEUE_CAP
 * commands each ahead of completion (REEF bounds a BE stream's device queue to 2 in its
 * reset modes, so that a reset flushes little).
 *
 * Not modelled: dynamic kernel padding (REEF's fused RT+BE kernels, which need its compiler
 * pass; REEF-N has none either). The simulator charges its context switch (32 us) where the
 * engine passes between RT and BE, standing in for REEF's reset latency.
 */
#include <errno.h>
#include <stdlib.h>

#include "baseline.h"
#include "gpumux/sched.h"

/* be_stream_device_queue_cap in REEF's Reset and REEF modes (scheduler.cpp). */
#define REEF_BE_QUEUE_CAP 2u

struct gmx_policy {
	gmx_device_t dev;
	gmx_sched_params_t params;
	uint32_t n_tasks;
	gmx_btask_t task[GMX_MAX_TASKS]; /* held: killed or held until RT goes idle */
};

static int rf_create(const gmx_sched_params_t *p, const gmx_device_t *dev, gmx_policy_t **out)
{
	if (gmx_sched_params_check(p, NULL, 0) != 0)
		return -EINVAL;
	gmx_policy_t *s = calloc(1, sizeof(*s));
	if (!s)
		return -ENOMEM;
	s->dev = *dev;
	s->params = *p;
	*out = s;
	return 0;
}

static void rf_destroy(gmx_policy_t *s)
{
	free(s);
}

static int rf_task_add(gmx_policy_t *s, uint32_t task, int priority)
{
	return gmx_btask_add(s->task, &s->n_tasks, task, priority);
}

static void release(gmx_policy_t *s, uint32_t i)
{
	gmx_btask_t *t = &s->task[i];
	gmx_cmd_t *c = gmx_cmd_queue_pop(&t->queue);
	gmx_unitspan_launch(&t->unit, c);
	t->inflight++;
	s->dev.submit(s->dev.ctx, c);
}

static int can_reset(const gmx_policy_t *s)
{
	return s->dev.reset && s->dev.preempt;
}

static void dispatch(gmx_policy_t *s)
{
	int rt = gmx_btask_hp_level(s->task, s->n_tasks);
	if (rt < 0)
		return;
	int rt_busy = 0;
	for (uint32_t i = 0; i < s->n_tasks; i++) {
		gmx_btask_t *t = &s->task[i];
		if (!t->present || t->priority != rt)
			continue;
		while (t->queue.head && t->inflight < s->params.inflight_max)
			release(s, i);
		rt_busy |= !t->done && (t->unit.inside || t->queue.head || t->inflight);
	}
	for (uint32_t i = 0; i < s->n_tasks; i++) {
		gmx_btask_t *t = &s->task[i];
		if (!t->present || t->priority == rt)
			continue;
		if (rt_busy) {
			if (t->inflight && !t->held && can_reset(s)) {
				t->held = 1;
				s->dev.reset(s->dev.ctx, i);
			}
			continue;
		}
		if (t->held) {
			t->held = 0;
			s->dev.preempt(s->dev.ctx, i, 0);
		}
		while (t->queue.head && t->inflight < REEF_BE_QUEUE_CAP)
			release(s, i);
	}
}

static void rf_task_done(gmx_policy_t *s, uint32_t task)
{
	if (task < GMX_MAX_TASKS) {
		gmx_btask_t *t = &s->task[task];
		t->done = 1;
		t->unit.inside = 0;
		if (t->held) {
			t->held = 0;
			s->dev.preempt(s->dev.ctx, task, 0);
		}
		while (t->queue.head) /* nobody waits for it */
			release(s, task);
	}
	dispatch(s);
}

static void rf_on_launch(gmx_policy_t *s, gmx_cmd_t *cmd)
{
	gmx_cmd_queue_push(&s->task[cmd->task].queue, cmd);
	dispatch(s);
}

static void rf_on_complete(gmx_policy_t *s, gmx_cmd_t *cmd)
{
	gmx_btask_t *t = &s->task[cmd->task];
	if (t->inflight)
		t->inflight--;
	gmx_unitspan_complete(&t->unit, cmd);
	if (!t->inflight && t->held) {
		/* Its last work in flight was a copy (copy engines are not reset). */
		t->held = 0;
		s->dev.preempt(s->dev.ctx, cmd->task, 0);
	}
	dispatch(s);
}

static void rf_on_timer(gmx_policy_t *s)
{
	dispatch(s);
}

static void rf_on_host_wait(gmx_policy_t *s, uint32_t task)
{
	(void)task;
	dispatch(s);
}

const gmx_policy_ops_t gmx_sched_reef_ops = {
    .name = "reef",
    .summary =
	"REEF (OSDI'22): BE held while an RT request runs; BE kernels running when RT work arrives are "
	"killed and re-run later (reset-based preemption)",
    .create = rf_create,
    .destroy = rf_destroy,
    .task_add = rf_task_add,
    .task_done = rf_task_done,
    .on_launch = rf_on_launch,
    .on_complete = rf_on_complete,
    .on_timer = rf_on_timer,
    .on_host_wait = rf_on_host_wait,
};
