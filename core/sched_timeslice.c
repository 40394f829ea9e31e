/* The slice-based policies, one dispatcher with four behaviours.
 *
 * timeslice: contexts take turns in fixed slices, as the GPU's default time
 * slicing does (docs/simulator.md, "Default sharing"): the runlist is served
 * round robin, blind to any priority the processes may have. On a device
 * that can preempt (the simulator: the GPU's instruction-level compute
 * preemption, Pascal and later), a slice that expires while the task has
 * kernels running stops them where they are, and they resume when the task's
 * turn comes again; on one that cannot, the slice ends when that work
 * completes. A task with nothing queued and nothing stopped yields at once
 * (the hardware moves to the next runnable context); a task that becomes
 * ready waits for the running slice to end. A task alone renews its slice
 * without a switch.
 *
 * hpf: the same slices, but the next task is taken in round-robin order
 * within the highest priority level that has work (XSched's highest priority
 * first at slice granularity): a high-priority task never waits for a turn.
 *
 * timeline: the scheduler the memory planner plans over. Tasks take turns in
 * exactly the order gmx_timeline_order() predicts, so that the planner knows
 * which task runs next and after it. Unlike timeslice, a task whose queue runs
 * dry keeps its slice for a short grace period: between two units a
 * closed-loop host needs a few microseconds to launch again, and giving the
 * device away at that instant would turn every unit boundary into a context
 * switch (and, with memory oversubscribed, into a migration of gigabytes).
 *
 * exclusive: the first unfinished task owns the device until it is done; the
 * simulator runs each task alone, one after another, with this policy.
 */
#include <errno.h>
#include <stdlib.h>

#include "gpumux/mplan.h"
#include "gpumux/sched.h"


enum variant { V_TIMESLICE, V_HPF, V_TIMELINE, V_EXCLUSIVE };

struct gmx_policy {
	gmx_device_t dev;
	gmx_sched_params_t params;
	enum variant variant;
	int64_t grace_ns; /* how long an idle active task keeps the device */
	uint32_t n_tasks;
	int active;	    /* task owning the device, -1 none */
	int64_t slice_end;  /* when the active task's slice expires */
	int64_t idle_since; /* when the active task ran dry, -1 busy */
	int waiting;	    /* timeline with hold_task: the turn is the held task's, its work not yet come */
	struct {
		gmx_cmd_queue_t queue; /* launch order; the device keeps per-stream order */
		uint32_t inflight;
		int priority;
		int present, done;
		int held; /* preempted: its in-flight work waits on the device for its next turn */
		gmx_lease_t lease; /* what the device was told */
	} task[GMX_MAX_TASKS];
	int leased; /* the task holding a lease, -1 none */
};

static int create(const gmx_sched_params_t *p, const gmx_device_t *dev, gmx_policy_t **out, enum variant v)
{
	if (gmx_sched_params_check(p, NULL, 0) != 0)
		return -EINVAL; /* e.g. inflight_max 0 would never release anything */
	gmx_policy_t *s = calloc(1, sizeof(*s));
	if (!s)
		return -ENOMEM;
	s->dev = *dev;
	s->params = *p;
	s->variant = v;
	s->grace_ns = v == V_TIMELINE ? GMX_TIMELINE_GRACE_NS : 0;
	s->active = -1;
	s->idle_since = -1;
	s->leased = -1;
	*out = s;
	return 0;
}

static int ts_create(const gmx_sched_params_t *p, const gmx_device_t *dev, gmx_policy_t **out)
{
	return create(p, dev, out, V_TIMESLICE);
}

static int hpf_create(const gmx_sched_params_t *p, const gmx_device_t *dev, gmx_policy_t **out)
{
	return create(p, dev, out, V_HPF);
}

static int tl_create(const gmx_sched_params_t *p, const gmx_device_t *dev, gmx_policy_t **out)
{
	return create(p, dev, out, V_TIMELINE);
}

static int ex_create(const gmx_sched_params_t *p, const gmx_device_t *dev, gmx_policy_t **out)
{
	return create(p, dev, out, V_EXCLUSIVE);
}

static void ts_destroy(gmx_policy_t *s)
{
	free(s);
}

static int ts_task_add(gmx_policy_t *s, uint32_t task, int priority)
{
	if (task >= GMX_MAX_TASKS || priority < 0 || priority >= GMX_PRIORITY_LEVELS)
		return -EINVAL;
	/* A device may give a finished task's index to a new task: start it over. */
	s->task[task].present = 1;
	s->task[task].done = 0;
	s->task[task].priority = priority;
	s->task[task].lease = (gmx_lease_t){0}; /* a new task holds none */
	if (task + 1 > s->n_tasks)
		s->n_tasks = task + 1;
	return 0;
}

static int has_work(const gmx_policy_t *s, uint32_t t)
{
	return s->task[t].present &&
	       (s->task[t].queue.length > 0 || (s->task[t].held && s->task[t].inflight > 0));
}

/* Preempting is what the hardware's time slicing does (timeslice, and hpf
 * on the same mechanism); the timeline and exclusive variants (gpumux's own
 * schedulers) let kernels finish. */
static int can_preempt(const gmx_policy_t *s)
{
	return (s->variant == V_TIMESLICE || s->variant == V_HPF) && s->dev.preempt;
}

/* The next task after `from` in round robin that has work, -1 when nobody
 * has; with by_priority, only among the best priority level that has work. */
static int next_round_robin(const gmx_policy_t *s, int from, int by_priority)
{
	int best = -1;
	for (uint32_t k = 1; k <= s->n_tasks; k++) {
		uint32_t t = (uint32_t)((from + (int)k + (int)s->n_tasks) % (int)s->n_tasks);
		if (!has_work(s, t))
			continue;
		if (best < 0 || (by_priority && s->task[t].priority < s->task[best].priority))
			best = (int)t;
		if (!by_priority)
			break;
	}
	return best;
}

/* timeline with hold_task: the held task keeps its place in the rotation
 * until it is done, with work or not. */
static int is_held_turn(const gmx_policy_t *s, uint32_t t)
{
	return s->variant == V_TIMELINE && s->params.hold_task == t + 1 && s->task[t].present && !s->task[t].done;
}

/* timeline: the next task with work in the order the planner predicts. */
static int next_on_timeline(const gmx_policy_t *s, int from)
{
	int prio[GMX_MAX_TASKS];
	uint8_t run[GMX_MAX_TASKS];
	uint32_t order[GMX_MAX_TASKS];
	for (uint32_t t = 0; t < s->n_tasks; t++) {
		prio[t] = s->task[t].priority;
		run[t] = (uint8_t)(has_work(s, t) || is_held_turn(s, t));
	}
	if (from < 0) { /* nobody yet: the best level's first task with work */
		int best = -1;
		for (uint32_t t = 0; t < s->n_tasks; t++)
			if (run[t] && (best < 0 || prio[t] < prio[best]))
				best = (int)t;
		return best;
	}
	uint32_t n = gmx_timeline_order(prio, run, s->n_tasks, (uint32_t)from, order);
	/* order[0] is `from` itself: it keeps the device only when nobody else
	 * has work, or when it outranks the next in line. */
	if (n > 1 && !(run[from] && prio[from] < prio[order[1]]))
		return (int)order[1];
	return run[from] ? from : -1;
}

/* Decides who owns the device and releases its work. */
static void pick_owner(gmx_policy_t *s, int64_t now)
{
	if (s->variant == V_EXCLUSIVE) {
		if (s->active < 0 || s->task[s->active].done) {
			s->active = -1;
			for (uint32_t t = 0; t < s->n_tasks; t++)
				if (s->task[t].present && !s->task[t].done) {
					s->active = (int)t;
					break;
				}
		}
		return;
	}
	int a = s->active;
	if (s->waiting) {
		/* The held task's turn: the device waits for its work, and its
		 * slice starts when the work comes. */
		if (a >= 0 && is_held_turn(s, (uint32_t)a) && !has_work(s, (uint32_t)a))
			return;
		s->waiting = 0;
		if (a >= 0 && has_work(s, (uint32_t)a)) {
			s->slice_end = now + s->params.slice_ns;
			s->dev.set_timer(s->dev.ctx, s->slice_end);
		}
	}
	if (a >= 0 && has_work(s, (uint32_t)a))
		s->idle_since = -1;
	else if (a >= 0 && s->task[a].inflight == 0 && s->idle_since < 0)
		s->idle_since = now;
	int idle = a >= 0 && !has_work(s, (uint32_t)a);
	int expired = a < 0 || now >= s->slice_end;
	int grace_over =
	    idle && (s->task[a].done || (s->idle_since >= 0 && now >= s->idle_since + s->grace_ns));
	if (expired || grace_over) {
		if (a >= 0 && s->task[a].inflight > 0 && !can_preempt(s))
			return; /* never cut a kernel: switch when it completes */
		int n = s->variant == V_TIMELINE
			    ? next_on_timeline(s, a)
			    : next_round_robin(s, a < 0 ? (int)s->n_tasks - 1 : a, s->variant == V_HPF);
		if (n >= 0 && n != a && a >= 0 && s->task[a].inflight > 0) {
			s->task[a].held = 1; /* cut its kernels where they are */
			s->dev.preempt(s->dev.ctx, (uint32_t)a, 1);
		}
		if (n >= 0 && (n != a || expired)) {
			if (s->task[n].held) {
				s->task[n].held = 0;
				s->dev.preempt(s->dev.ctx, (uint32_t)n, 0);
			}
			s->active = n;
			s->idle_since = -1;
			int64_t sl = s->variant == V_TIMELINE && s->dev.slice_for ? s->dev.slice_for(s->dev.ctx, (uint32_t)n)
										  : 0;
			s->slice_end = now + (sl > 0 ? sl : s->params.slice_ns);
			s->dev.set_timer(s->dev.ctx, s->slice_end);
			s->waiting = !has_work(s, (uint32_t)n) && is_held_turn(s, (uint32_t)n);
		}
	} else if (idle && s->idle_since >= 0) {
		/* Come back when the grace period ends, or the slice, whichever first. */
		int64_t at = s->idle_since + s->grace_ns;
		s->dev.set_timer(s->dev.ctx, at < s->slice_end ? at : s->slice_end);
	}
}

/* Leases: the active task may release up to inflight_max commands without asking until its
 * slice ends; while no other task has work, with no end (its slice would be renewed anyway;
 * exclusive: always). Once its slice has expired with another task waiting, it has none, and
 * neither has any task that is not active. A device that preempts at the slice's end is the
 * GPU's own time slicing (the simulator's default sharing): no interposer there, no lease. */
static void update_leases(gmx_policy_t *s, int64_t now)
{
	if (can_preempt(s))
		return;
	int a = s->active;
	if (s->leased >= 0 && s->leased != a)
		gmx_lease_set(&s->dev, (uint32_t)s->leased, &s->task[s->leased].lease, 0, 0);
	s->leased = -1;
	if (a < 0)
		return;
	int others = 0;
	for (uint32_t t = 0; s->variant != V_EXCLUSIVE && t < s->n_tasks && !others; t++)
		others = (int)t != a && has_work(s, t);
	uint32_t n = s->task[a].done || (others && now >= s->slice_end) ? 0 : s->params.inflight_max;
	gmx_lease_set(&s->dev, (uint32_t)a, &s->task[a].lease, n, others ? s->slice_end : 0);
	if (n)
		s->leased = a;
}

static void dispatch(gmx_policy_t *s)
{
	int64_t now = s->dev.now(s->dev.ctx);
	int before = s->active;
	pick_owner(s, now);
	/* An owner with work in flight at an expired slice keeps it until that
	 * work completes, releasing nothing more meanwhile. */
	if (s->active >= 0 && !(s->active == before && s->variant != V_EXCLUSIVE && before >= 0 &&
				s->task[before].inflight > 0 && now >= s->slice_end)) {
		uint32_t t = (uint32_t)s->active;
		while (s->task[t].inflight < s->params.inflight_max && s->task[t].queue.length) {
			gmx_cmd_t *c = gmx_cmd_queue_pop(&s->task[t].queue);
			s->task[t].inflight++;
			s->idle_since = -1;
			s->dev.submit(s->dev.ctx, c);
		}
	}
	update_leases(s, now);
}

static void ts_task_done(gmx_policy_t *s, uint32_t task)
{
	if (task < GMX_MAX_TASKS) {
		s->task[task].done = 1;
		/* What it still had queued goes now, whoever owns the device: nobody waits for it. */
		while (s->task[task].queue.length) {
			s->task[task].inflight++;
			s->dev.submit(s->dev.ctx, gmx_cmd_queue_pop(&s->task[task].queue));
		}
	}
	dispatch(s);
}

static void ts_on_launch(gmx_policy_t *s, gmx_cmd_t *cmd)
{
	if (cmd->leased) { /* released under its lease: in flight already */
		s->task[cmd->task].inflight++;
		if ((int)cmd->task == s->active)
			s->idle_since = -1;
	} else {
		gmx_cmd_queue_push(&s->task[cmd->task].queue, cmd);
	}
	dispatch(s);
}

static void ts_on_complete(gmx_policy_t *s, gmx_cmd_t *cmd)
{
	if (s->task[cmd->task].inflight)
		s->task[cmd->task].inflight--;
	if (!s->task[cmd->task].inflight && s->task[cmd->task].held) {
		/* Its last work in flight was a copy (copy engines are not held). */
		s->task[cmd->task].held = 0;
		s->dev.preempt(s->dev.ctx, cmd->task, 0);
	}
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
    .summary = "the GPU's default time slicing: round robin between contexts, blind to priority; a slice "
	       "that expires preempts the running kernel",
    .create = ts_create,
    .destroy = ts_destroy,
    .task_add = ts_task_add,
    .task_done = ts_task_done,
    .on_launch = ts_on_launch,
    .on_complete = ts_on_complete,
    .on_timer = ts_on_timer,
    .on_host_wait = ts_on_host_wait,
};

const gmx_policy_ops_t gmx_sched_hpf_ops = {
    .name = "hpf",
    .summary = "time slices as timeslice, but round robin within the best priority level that has work",
    .create = hpf_create,
    .destroy = ts_destroy,
    .task_add = ts_task_add,
    .task_done = ts_task_done,
    .on_launch = ts_on_launch,
    .on_complete = ts_on_complete,
    .on_timer = ts_on_timer,
    .on_host_wait = ts_on_host_wait,
};

const gmx_policy_ops_t gmx_sched_timeline_ops = {
    .name = "timeline",
    .summary = "round robin by priority in the order the memory planner predicts; a slice is held "
	       "through short host gaps",
    .create = tl_create,
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
