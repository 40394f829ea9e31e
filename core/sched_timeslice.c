/* timeslice: contexts take turns in fixed slices, as the GPU's default time
 * slicing does. A kernel is never cut: a slice that expires while the task has
 * work in flight ends when that work completes. A task with nothing queued
 * yields at once (the hardware moves to the next runnable context). Tasks are
 * taken in round-robin order within the highest priority level that has work;
 * with equal priorities that is plain round robin.
 *
 * exclusive: the first unfinished task owns the device until it is done; the
 * simulator runs each task alone, one after another, with this policy.
 */
#include <errno.h>
#include <stdlib.h>

#include "gpumux/sched.h"

struct gmx_policy {
	gmx_device_t dev;
	gmx_sched_params_t params;
	int exclusive;
	uint32_t n_tasks;
	int active;        /* task owning the device, -1 none */
	int64_t slice_end; /* when the active task's slice expires */
	struct {
		gmx_cmd_queue_t queue; /* launch order; the device keeps per-stream order */
		uint32_t inflight;
		int priority;
		int present, done;
	} task[GMX_MAX_TASKS];
};

static int create_common(const gmx_sched_params_t *p, const gmx_device_t *dev, gmx_policy_t **out, int excl)
{
	gmx_policy_t *s = calloc(1, sizeof(*s));
	if (!s)
		return -ENOMEM;
	s->dev = *dev;
	s->params = *p;
	s->exclusive = excl;
	s->active = -1;
	*out = s;
	return 0;
}

static int ts_create(const gmx_sched_params_t *p, const gmx_device_t *dev, gmx_policy_t **out)
{
	return create_common(p, dev, out, 0);
}

static int ex_create(const gmx_sched_params_t *p, const gmx_device_t *dev, gmx_policy_t **out)
{
	return create_common(p, dev, out, 1);
}

static void ts_destroy(gmx_policy_t *s)
{
	free(s);
}

static int ts_task_add(gmx_policy_t *s, uint32_t task, int priority)
{
	if (task >= GMX_MAX_TASKS || priority < 0 || priority >= GMX_PRIORITY_LEVELS)
		return -EINVAL;
	s->task[task].present = 1;
	s->task[task].priority = priority;
	if (task + 1 > s->n_tasks)
		s->n_tasks = task + 1;
	return 0;
}

static int has_work(const gmx_policy_t *s, uint32_t t)
{
	return s->task[t].present && s->task[t].queue.length > 0;
}

/* Next task after `from` in round robin within the best priority that has
 * queued work; -1 when nobody has work. */
static int next_task(const gmx_policy_t *s, int from)
{
	int best = -1;
	for (uint32_t k = 1; k <= s->n_tasks; k++) {
		uint32_t t = (uint32_t)((from + (int)k + (int)s->n_tasks) % (int)s->n_tasks);
		if (!has_work(s, t))
			continue;
		if (best < 0 || s->task[t].priority < s->task[best].priority)
			best = (int)t;
	}
	return best;
}

static void dispatch(gmx_policy_t *s)
{
	int64_t now = s->dev.now(s->dev.ctx);
	if (s->exclusive) {
		if (s->active < 0 || s->task[s->active].done) {
			s->active = -1;
			for (uint32_t t = 0; t < s->n_tasks; t++)
				if (s->task[t].present && !s->task[t].done) {
					s->active = (int)t;
					break;
				}
		}
	} else {
		int a = s->active;
		int idle = a >= 0 && !has_work(s, (uint32_t)a);
		if (a < 0 || now >= s->slice_end || idle) {
			if (a >= 0 && s->task[a].inflight > 0)
				return; /* never cut a kernel: switch when it completes */
			int n = next_task(s, a < 0 ? (int)s->n_tasks - 1 : a);
			if (n >= 0 && (n != a || now >= s->slice_end)) {
				s->active = n;
				s->slice_end = now + s->params.slice_ns;
				s->dev.set_timer(s->dev.ctx, s->slice_end);
			}
		}
	}
	if (s->active < 0)
		return;
	uint32_t t = (uint32_t)s->active;
	while (s->task[t].inflight < s->params.inflight_max && s->task[t].queue.length) {
		gmx_cmd_t *c = gmx_cmd_queue_pop(&s->task[t].queue);
		s->task[t].inflight++;
		s->dev.submit(s->dev.ctx, c);
	}
}

static void ts_task_done(gmx_policy_t *s, uint32_t task)
{
	if (task < GMX_MAX_TASKS)
		s->task[task].done = 1;
	dispatch(s);
}

static void ts_on_launch(gmx_policy_t *s, gmx_cmd_t *cmd)
{
	gmx_cmd_queue_push(&s->task[cmd->task].queue, cmd);
	dispatch(s);
}

static void ts_on_complete(gmx_policy_t *s, gmx_cmd_t *cmd)
{
	if (s->task[cmd->task].inflight)
		s->task[cmd->task].inflight--;
	dispatch(s);
}

static void ts_on_timer(gmx_policy_t *s)
{
	dispatch(s);
}

static void ts_on_host_wait(gmx_policy_t *s, uint32_t task)
{
	(void)task;
	dispatch(s);
}

const gmx_policy_ops_t gmx_sched_timeslice_ops = {
	.name = "timeslice",
	.summary = "contexts take turns in fixed slices; a kernel is never cut",
	.create = ts_create,
	.destroy = ts_destroy,
	.task_add = ts_task_add,
	.task_done = ts_task_done,
	.on_launch = ts_on_launch,
	.on_complete = ts_on_complete,
	.on_timer = ts_on_timer,
	.on_host_wait = ts_on_host_wait,
};

const gmx_policy_ops_t gmx_sched_exclusive_ops = {
	.name = "exclusive",
	.summary = "each task alone, one after another",
	.create = ex_create,
	.destroy = ts_destroy,
	.task_add = ts_task_add,
	.task_done = ts_task_done,
	.on_launch = ts_on_launch,
	.on_complete = ts_on_complete,
	.on_timer = ts_on_timer,
	.on_host_wait = ts_on_host_wait,
};
