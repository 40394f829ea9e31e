/* orion: Orion's interference-aware admission of best-effort kernels (EuroSys'24;
 * eth-easl/orion src/scheduler/scheduler_eval.cpp, busy_wait_profile; docs/baselines.md).
 *
 * One high-priority (HP) client, the tasks of the best priority level still running, and
 * best-effort (BE) clients, every other task; all share one context (Orion runs its clients
 * as threads of one process) on prioritised streams. HP commands go to the device at once
 * (up to inflight_max ahead of completion). BE clients are visited round robin, one queue
 * head each per pass, and a head goes when:
 *  - it is not a kernel (copies and memsets always go), or
 *  - HP is between units (`seen[hp] == 0`: no request or iteration under way), or
 *  - the SMs of the BE kernels placed in this pass, its own included, stay within the SM
 *    threshold (the device's SMs, Orion's value for an inference HP), and its
 *    compute/memory class differs from that of the HP kernel released last; a class not
 *    profiled on either side counts as differing (Orion's profile -1).
 * Outstanding BE work is capped: once the predicted durations of the BE kernels released
 * since the last drain exceed ORION_MAX_BE_DURATION_NS while an HP task has not finished (between
 * its requests too), no BE head goes until every BE command on the device has completed.
 *
 * A kernel whose SM need is unknown (sm_demand 0) is taken to need the whole device (the
 * interference model's reading); on a device that does not say its SM count, the SM test
 * is skipped. Not modelled: the binary search of the SM threshold against an HP training
 * iteration's time limit (for an HP training job; every HP here keeps all SMs) and the
 * first ten iterations Orion runs unscheduled.
 */
#include <errno.h>
#include <stdlib.h>

#include "baseline.h"
#include "gpumux/sched.h"

/* Orion's --orion_max_be_duration for a ResNet-50 HP (artifact_evaluation/fig7 and fig10
 * run_orion.py: 160000 ns; 100000 for MobileNetV2): BE work outstanding before a drain. */
#define ORION_MAX_BE_DURATION_NS 160000LL

struct gmx_policy {
	gmx_device_t dev;
	gmx_sched_params_t params;
	uint32_t n_tasks;
	int hp_class;	 /* class of the HP kernel released last (GMX_CLASS_*) */
	int64_t be_sum;	 /* predicted ns of BE kernels released since the last drain */
	int large_found; /* be_sum passed the cap: BE waits for a drain */
	uint32_t rr;	 /* BE client visited first in the next pass */
	gmx_btask_t task[GMX_MAX_TASKS];
};

static int or_create(const gmx_sched_params_t *p, const gmx_device_t *dev, gmx_policy_t **out)
{
	if (gmx_sched_params_check(p, NULL, 0) != 0)
		return -EINVAL;
	gmx_policy_t *s = calloc(1, sizeof(*s));
	if (!s)
		return -ENOMEM;
	s->dev = *dev;
	s->params = *p;
	s->hp_class = GMX_CLASS_UNKNOWN;
	*out = s;
	return 0;
}

static void or_destroy(gmx_policy_t *s)
{
	free(s);
}

static int or_task_add(gmx_policy_t *s, uint32_t task, int priority)
{
	return gmx_btask_add(s->task, &s->n_tasks, task, priority);
}

static void release(gmx_policy_t *s, uint32_t i)
{
	gmx_btask_t *t = &s->task[i];
	gmx_cmd_t *c = gmx_cmd_queue_pop(&t->queue);
	t->inflight++;
	s->dev.submit(s->dev.ctx, c);
}

/* Orion's admission test for BE head c beside a running HP request, with `size` SMs already
 * placed by BE kernels in this pass. */
static int admits(const gmx_policy_t *s, const gmx_cmd_t *c, uint32_t size, uint32_t *sm)
{
	int klass = c->op ? c->op->klass : GMX_CLASS_UNKNOWN;
	*sm = c->op && c->op->sm_demand ? c->op->sm_demand : s->dev.sms;
	if (s->dev.sms && size + *sm > s->dev.sms)
		return 0;
	return klass == GMX_CLASS_UNKNOWN || s->hp_class == GMX_CLASS_UNKNOWN || klass != s->hp_class;
}

static void dispatch(gmx_policy_t *s)
{
	int hp = gmx_btask_hp_level(s->task, s->n_tasks);
	if (hp < 0)
		return;
	int hp_active = 0;
	for (uint32_t i = 0; i < s->n_tasks; i++) {
		gmx_btask_t *t = &s->task[i];
		if (!t->present || t->priority != hp)
			continue;
		while (t->queue.head && t->inflight < s->params.inflight_max) {
			if (t->queue.head->kind == GMX_OP_KERNEL)
				s->hp_class =
				    t->queue.head->op ? t->queue.head->op->klass : GMX_CLASS_UNKNOWN;
			gmx_unitspan_launch(&t->unit, t->queue.head);
			release(s, i);
		}
		hp_active |= !t->done && (t->unit.inside || t->queue.head || t->inflight);
	}
	/* Passes until one releases nothing (Orion's scheduler loop polls continuously). */
	for (int released = 1; released;) {
		released = 0;
		uint32_t size = 0;
		for (uint32_t k = 0; k < s->n_tasks; k++) {
			uint32_t i = (s->rr + k) % s->n_tasks;
			gmx_btask_t *t = &s->task[i];
			if (!t->present || t->priority == hp || !t->queue.head)
				continue;
			const gmx_cmd_t *c = t->queue.head;
			uint32_t sm = 0;
			int kernel = c->kind == GMX_OP_KERNEL;
			int go = !kernel || !hp_active || admits(s, c, size, &sm);
			if (go && s->large_found) {
				int drained = 1;
				for (uint32_t j = 0; j < s->n_tasks; j++)
					drained &= s->task[j].priority == hp || s->task[j].inflight == 0;
				if (!drained)
					go = 0;
				else
					s->large_found = 0, s->be_sum = 0;
			}
			if (!go)
				continue;
			size += sm;
			if (kernel)
				s->be_sum += c->predicted_ns > 0 ? c->predicted_ns : 0;
			if (s->be_sum > ORION_MAX_BE_DURATION_NS) /* HP has not finished (hp >= 0) */
				s->large_found = 1;
			release(s, i);
			s->rr = i + 1;
			released = 1;
		}
	}
}

static void or_task_done(gmx_policy_t *s, uint32_t task)
{
	if (task < GMX_MAX_TASKS) {
		s->task[task].done = 1;
		s->task[task].unit.inside = 0;
		while (s->task[task].queue.head) /* nobody waits for it */
			release(s, task);
	}
	dispatch(s);
}

static void or_on_launch(gmx_policy_t *s, gmx_cmd_t *cmd)
{
	gmx_cmd_queue_push(&s->task[cmd->task].queue, cmd);
	dispatch(s);
}

static void or_on_complete(gmx_policy_t *s, gmx_cmd_t *cmd)
{
	gmx_btask_t *t = &s->task[cmd->task];
	if (t->inflight)
		t->inflight--;
	gmx_unitspan_complete(&t->unit, cmd);
	dispatch(s);
}

static void or_on_timer(gmx_policy_t *s)
{
	dispatch(s);
}

static void or_on_host_wait(gmx_policy_t *s, uint32_t task)
{
	(void)task;
	dispatch(s);
}

const gmx_policy_ops_t gmx_sched_orion_ops = {
    .name = "orion",
    .summary =
	"Orion (EuroSys'24): HP kernels at once; a BE kernel beside an HP request only when its SMs fit "
	"and its compute/memory class differs; BE work outstanding capped",
    .flags = GMX_POLICY_SPATIAL | GMX_POLICY_PRIORITY_BLOCKS,
    .create = or_create,
    .destroy = or_destroy,
    .task_add = or_task_add,
    .task_done = or_task_done,
    .on_launch = or_on_launch,
    .on_complete = or_on_complete,
    .on_timer = or_on_timer,
    .on_host_wait = or_on_host_wait,
};
