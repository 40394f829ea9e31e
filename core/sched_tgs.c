/* tgs: TGS's adaptive rate control (NSDI'23; pkusys/TGS hijack/src/high_priority_hijack_call.c
 * and low_priority_hijack_call.c; docs/baselines.md).
 *
 * TGS runs a production (HP) and an opportunistic (LP) container on one GPU, each in its own
 * context: the GPU time-slices them as it does any two processes. So the device side here is
 * `timeslice` unchanged (the GPU's default sharing, core/sched_timeslice.c); what TGS adds
 * sits in front of it:
 *  - HP's launches pass at once; HP counts the thread blocks it launches and reports the
 *    count every TGS_REPORT_NS.
 *  - LP's launches pass while the LP blocks launched in the current 50 ms window do not exceed
 *    the LP limit; a launch over it waits for the next window (rate_limiter, rate_watcher).
 *  - At each HP report the limit follows TCP-style control (limit_manager, update_rate_limit):
 *    first a profiling phase of TGS_PROFILE_REPORTS reports with the limit at 0 that finds HP's
 *    peak rate (the maximum of the window's adjacent-pair means); then slow start from 20,000
 *    blocks (x1.5 + 1 per report while HP's rate is within 3% of its peak, else /1.5 and
 *    congestion avoidance), additive increase by max(0.025% of the peak, 1,000) blocks while
 *    within 3%, multiplicative decrease by max(8%, 1,000) otherwise, back to slow start with
 *    the limit /10 when 9% off, and the peak x0.8 (limit /2) after 20 reports 12% off. When
 *    HP's rate is near zero in more than 2 of the last 5 reports, LP is unlimited; when the
 *    peak moves by more than 20% the peak is profiled again.
 *  - When HP has finished, LP is unlimited.
 * With HP reporting every 5 s and profiling for at least 5 reports, LP is all but stopped for
 * the first 25-30 s of a run: measure TGS after a warm-up of that length.
 * The memory side (HP's pages preferred on the device, LP's evicted first) is the device's:
 * the policy carries GMX_POLICY_UM_PRIORITY, which the simulator honours under `um`.
 *
 * Choices that are ours: a kernel's size is its thread blocks, or its wave size in SMs when
 * the workload records no grid (Orion's profiles); several LP tasks share one counter and one
 * limit, taking launches in turn (TGS pairs one production and one opportunistic job per GPU); the profiling
 * phase goes on while the peak still rises, where the code's test (the window's maximum equals the peak,
 * within one block) also holds for a perfectly steady HP and would profile forever with LP at limit 0 (a real
 * HP's jitter breaks it; a simulated periodic one does not).
 */
#include <errno.h>
#include <stdlib.h>

#include "baseline.h"
#include "gpumux/sched.h"
#include "tgs.h"

extern const gmx_policy_ops_t gmx_sched_timeslice_ops;

#define TGS_WINDOW_NS 50000000LL   /* LP rate_watcher: the counter restarts every 50 ms */
#define TGS_REPORT_NS 5000000000LL /* HP rate report period: rate_watcher sleeps 5000 ms */
#define TGS_PROFILE_REPORTS 5	   /* PROFILE_TIME */
#define TGS_RATE_WINDOW 5	   /* WINDOW_SIZE */
#define TGS_LIMIT_INIT 20000.0	   /* LIMIT_INITIALIZER */
#define TGS_RATE_MIN 1000.0	   /* RATE_MIN */
#define TGS_THRESHOLD 0.03	   /* update_rate_limit's threshold */
#define TGS_UNLIMITED 4294967296.0 /* 65536 * 65536: the code's cap, in effect no limit */

struct gmx_policy {
	gmx_device_t dev;    /* the real device */
	gmx_policy_t *inner; /* timeslice, driven through the wrapped device below */
	int64_t inner_at;    /* the timer timeslice asked for; INT64_MAX none */
	int64_t next_window, next_report;
	uint32_t n_tasks;
	uint32_t rr;			 /* LP task served first by the next pump */
	gmx_btask_t task[GMX_MAX_TASKS]; /* queue: LP launches waiting for the limit */
	/* the controller (limit_manager) */
	gmx_tgs_ctl_t c; /* limit (g_rate_limit: LP blocks per window), HP's peak, state */
	double lp_count; /* g_rate_counter: LP blocks in this window */
	double hp_count; /* HP blocks in this report period */
	double window[TGS_RATE_WINDOW];
	int profiling; /* in a profiling phase */
	int prof_t;    /* reports in it so far */
	long cnt;      /* reports in the control phase */
};

static int64_t w_now(void *c)
{
	const gmx_policy_t *s = c;
	return s->dev.now(s->dev.ctx);
}

static int w_submit(void *c, gmx_cmd_t *cmd)
{
	gmx_policy_t *s = c;
	return s->dev.submit(s->dev.ctx, cmd);
}

static void arm(gmx_policy_t *s)
{
	int64_t at = s->next_window < s->inner_at ? s->next_window : s->inner_at;
	s->dev.set_timer(s->dev.ctx, at);
}

static void w_set_timer(void *c, int64_t at)
{
	gmx_policy_t *s = c;
	s->inner_at = at;
	arm(s);
}

static void w_preempt(void *c, uint32_t task, int hold)
{
	gmx_policy_t *s = c;
	s->dev.preempt(s->dev.ctx, task, hold);
}

static int tg_create(const gmx_sched_params_t *p, const gmx_device_t *dev, gmx_policy_t **out)
{
	if (gmx_sched_params_check(p, NULL, 0) != 0)
		return -EINVAL;
	gmx_policy_t *s = calloc(1, sizeof(*s));
	if (!s)
		return -ENOMEM;
	s->dev = *dev;
	gmx_device_t w = {.ctx = s,
			  .now = w_now,
			  .submit = w_submit,
			  .set_timer = w_set_timer,
			  .preempt = dev->preempt ? w_preempt : NULL,
			  .sms = dev->sms};
	int rc = gmx_sched_timeslice_ops.create(p, &w, &s->inner);
	if (rc) {
		free(s);
		return rc;
	}
	int64_t now = dev->now(dev->ctx);
	s->inner_at = INT64_MAX;
	s->next_window = now + TGS_WINDOW_NS;
	s->next_report = now + TGS_REPORT_NS;
	s->profiling = 1; /* limit 0 until the first profiling phase ends */
	*out = s;
	return 0;
}

static void tg_destroy(gmx_policy_t *s)
{
	if (!s)
		return;
	gmx_sched_timeslice_ops.destroy(s->inner);
	free(s);
}

static int tg_task_add(gmx_policy_t *s, uint32_t task, int priority)
{
	int rc = gmx_btask_add(s->task, &s->n_tasks, task, priority);
	return rc ? rc : gmx_sched_timeslice_ops.task_add(s->inner, task, priority);
}

/* A launch's size: its thread blocks (TGS's kernel_size), or its wave size in SMs where the
 * workload records no grid; copies and memsets 0 (TGS counts kernel launches only). */
static double launch_size(const gmx_cmd_t *c)
{
	if (c->kind != GMX_OP_KERNEL)
		return 0;
	if (!c->op)
		return 1;
	double blocks = (double)c->op->grid[0] * (c->op->grid[1] ? c->op->grid[1] : 1) *
			(c->op->grid[2] ? c->op->grid[2] : 1);
	if (blocks <= 1 && c->op->sm_demand)
		return c->op->sm_demand;
	return blocks > 0 ? blocks : 1;
}

/* Passes LP launches while the window's count is within the limit (launch_test), one launch per
 * LP task in turn so that LP tasks share the window; HP's and, with no HP left, everyone's go. */
static void pump(gmx_policy_t *s)
{
	int hp = gmx_btask_hp_level(s->task, s->n_tasks);
	for (int moved = 1; moved;) {
		moved = 0;
		for (uint32_t k = 0; k < s->n_tasks; k++) {
			uint32_t i = (s->rr + k) % s->n_tasks;
			if (!s->task[i].queue.head)
				continue;
			if (s->task[i].priority != hp && s->lp_count > s->c.limit)
				return;
			gmx_cmd_t *c = gmx_cmd_queue_pop(&s->task[i].queue);
			s->lp_count += launch_size(c);
			s->rr = i + 1;
			moved = 1;
			gmx_sched_timeslice_ops.on_launch(s->inner, c);
		}
	}
}

/* shift_window: the maximum of the adjacent-pair means of the window, then r shifted in. */
static double shift_window(double *w, double r)
{
	double m = 0;
	for (int i = TGS_RATE_WINDOW - 1; i > 0; i--) {
		double mean = (w[i] + w[i - 1]) / 2;
		if (mean > m)
			m = mean;
		w[i] = w[i - 1];
	}
	w[0] = r;
	return m;
}

void gmx_tgs_update_limit(gmx_tgs_ctl_t *c, double recv)
{
	double delta = c->max_rate > 0 ? (recv - c->max_rate) / c->max_rate : 1;
	if (delta < 0)
		delta = -delta;
	double l = c->limit;
	if (c->state == GMX_TGS_SLOW_START) {
		if (delta <= TGS_THRESHOLD) {
			l = l * 1.5 + 1;
		} else {
			l /= 1.5;
			c->sign = -1;
			c->state = GMX_TGS_CONGESTION_AVOIDANCE;
		}
	} else {
		if ((c->sign == -1 && delta <= TGS_THRESHOLD) || (c->sign == 1 && delta < TGS_THRESHOLD)) {
			double step = c->max_rate * 0.00025;
			l += step > TGS_RATE_MIN ? step : TGS_RATE_MIN;
			c->sign = 1;
		} else {
			double step = l * 0.08;
			l -= step > TGS_RATE_MIN ? step : TGS_RATE_MIN;
			c->sign = -1;
		}
		if (delta >= 3 * TGS_THRESHOLD) {
			c->state = GMX_TGS_SLOW_START;
			l /= 10;
		}
	}
	if (l > TGS_UNLIMITED)
		l = TGS_UNLIMITED;
	if (delta >= 0.12) {
		if (++c->max_diff >= 20) {
			c->max_rate *= 0.8;
			c->max_diff = 0;
			c->state = GMX_TGS_SLOW_START;
			l /= 2;
		}
	} else {
		c->max_diff = 0;
	}
	c->limit = l > 0 ? l : 0;
}

/* One HP report reaches the controller (limit_manager's loop body). */
static void report(gmx_policy_t *s, double counter)
{
	double recv = counter >= 1 ? counter : 1;
	double wmax = shift_window(s->window, recv);
	double d = s->c.max_rate > 0 ? (wmax - s->c.max_rate) / s->c.max_rate : 1;
	if (s->profiling) {
		int cont;
		if (d >= -0.05 && d <= 0.05) {
			cont = wmax > s->c.max_rate; /* the peak still rises (see the header) */
			if (cont)
				s->c.max_rate = wmax;
		} else {
			if (d > 0.05)
				s->c.max_rate = s->c.max_rate > wmax * 0.975 ? s->c.max_rate : wmax * 0.975;
			else
				s->c.max_rate = s->c.max_rate < wmax * 1.025 ? s->c.max_rate : wmax * 1.025;
			cont = 1;
		}
		if (++s->prof_t >= TGS_PROFILE_REPORTS && !cont)
			s->profiling = 0;
		return;
	}
	if (d >= -0.1 && d <= 0.1) {
		if (wmax > s->c.max_rate)
			s->c.max_rate = wmax;
	} else if (d > 0.2 || d < -0.2) {
		s->c.max_rate = d > 0.2 ? (s->c.max_rate > wmax * 0.975 ? s->c.max_rate : wmax * 0.975)
					: (s->c.max_rate < wmax * 1.025 ? s->c.max_rate : wmax * 1.025);
		s->profiling = 1; /* the peak moved: profile it again */
		s->prof_t = 0;
		return;
	}
	if (++s->cnt == 1) {
		s->c.limit = TGS_LIMIT_INIT;
		s->c.state = GMX_TGS_SLOW_START;
		return;
	}
	int zeros = 0;
	for (int i = 0; i < TGS_RATE_WINDOW; i++)
		zeros += s->window[i] < 1000;
	if (zeros <= TGS_RATE_WINDOW / 5 * 2 || s->cnt < 15) {
		if (zeros == 2 && s->cnt > 15) {
			s->c.limit = TGS_LIMIT_INIT;
			s->c.state = GMX_TGS_SLOW_START;
		} else {
			gmx_tgs_update_limit(&s->c, recv);
		}
	} else {
		s->c.limit = TGS_UNLIMITED; /* HP idle: LP runs freely */
		s->c.state = GMX_TGS_SLOW_START;
	}
}

static void tick(gmx_policy_t *s, int64_t now)
{
	while (now >= s->next_window) {
		s->lp_count = 0;
		s->next_window += TGS_WINDOW_NS;
	}
	while (now >= s->next_report) {
		report(s, s->hp_count);
		s->hp_count = 0;
		s->next_report += TGS_REPORT_NS;
	}
}

static void tg_on_launch(gmx_policy_t *s, gmx_cmd_t *cmd)
{
	int hp = gmx_btask_hp_level(s->task, s->n_tasks);
	if (s->task[cmd->task].priority == hp) {
		s->hp_count += launch_size(cmd);
		gmx_sched_timeslice_ops.on_launch(s->inner, cmd);
		return;
	}
	gmx_cmd_queue_push(&s->task[cmd->task].queue, cmd);
	pump(s);
}

static void tg_on_complete(gmx_policy_t *s, gmx_cmd_t *cmd)
{
	gmx_sched_timeslice_ops.on_complete(s->inner, cmd);
}

static void tg_on_timer(gmx_policy_t *s)
{
	int64_t now = s->dev.now(s->dev.ctx);
	if (now >= s->next_window) {
		tick(s, now);
		pump(s);
	}
	if (now >= s->inner_at) {
		s->inner_at = INT64_MAX;
		gmx_sched_timeslice_ops.on_timer(s->inner);
	}
	arm(s);
}

static void tg_task_done(gmx_policy_t *s, uint32_t task)
{
	if (task < GMX_MAX_TASKS) {
		s->task[task].done = 1;
		while (s->task[task].queue.head) /* nobody waits for it */
			gmx_sched_timeslice_ops.on_launch(s->inner, gmx_cmd_queue_pop(&s->task[task].queue));
	}
	gmx_sched_timeslice_ops.task_done(s->inner, task);
	pump(s);
}

static void tg_on_host_wait(gmx_policy_t *s, uint32_t task)
{
	gmx_sched_timeslice_ops.on_host_wait(s->inner, task);
}

const gmx_policy_ops_t gmx_sched_tgs_ops = {
    .name = "tgs",
    .summary =
	"TGS (NSDI'23): the GPU's time slicing, LP launch rate adapted to HP's measured rate; under um "
	"LP pages are evicted first",
    .flags = GMX_POLICY_UM_PRIORITY,
    .create = tg_create,
    .destroy = tg_destroy,
    .task_add = tg_task_add,
    .task_done = tg_task_done,
    .on_launch = tg_on_launch,
    .on_complete = tg_on_complete,
    .on_timer = tg_on_timer,
    .on_host_wait = tg_on_host_wait,
};
