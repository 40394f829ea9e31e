/* gpumux: priority scheduling and proactive memory as one policy
 * (docs/combined.md; the decisions themselves are in core/combined.c).
 *
 * Separate contexts share the execution engine in turns (not spatially: the
 * memory planner needs one task's working set at a time).
 *
 * - The HP level (best priority among tasks still running) releases its
 *   commands at once. When HP work arrives while an LP task holds the engine,
 *   the LP task is preempted at once on a device that can (REEF's immediate
 *   preemption; the GPU's compute preemption), so the HP work waits one
 *   context switch; on a device that cannot, LP commands only enter gaps they
 *   fit (below), so the HP work waits at most the command that overran.
 * - In an HP gap, the LP task whose turn it is (LP tasks take turns by the
 *   memory planner's timeline: best LP level first, round robin within it,
 *   each for its slice) releases its head when gmx_comb_admit says the head's
 *   predicted run plus the time to make its pages resident (the device's
 *   load_ns) fits the predicted gap. The gap is predicted from the HP idle
 *   gaps seen so far: the GAP_QUANTILE quantile of the last GAP_SAMPLES
 *   gaps, less the time already idle. Until GAP_MIN_SAMPLES gaps are known,
 *   the gap the HP tasks' known arrivals leave (params.arrivals: a Poisson
 *   rate, a period or a trace, less the busy time per arrival;
 *   gmx_comb_gap_prior), open (INT64_MAX) when none is known; once the HP
 *   task has been idle longer than every gap seen, open.
 * - With preemption available, a misprediction costs the HP task one switch,
 *   so every LP head is admitted in an HP gap; the admission rule governs the
 *   device without preemption (gpumuxd's software queues).
 * - An LP turn ends at a kernel boundary: a kernel in flight (or waiting for
 *   its pages) keeps its task's turn, and the next LP task waits for it. The
 *   memory planner makes the next turn's room from the outgoing task's pages,
 *   so an LP kernel cut there would resume on pages gone (faulted back one by
 *   one). Only HP work cuts LP kernels: HP's working set stays resident, so
 *   its kernels seldom need the cut kernel's pages evicted.
 * - The LP slice comes from the device (the memory planner's slice rule: a
 *   switch's migration a bounded share of the turn, latency targets) or else
 *   params.slice_ns.
 * - On a device that cannot preempt but can lease (gpumuxd), the LP task whose
 *   turn it is releases under a lease bounded by the predicted HP gap, one
 *   command in flight, revoked when HP work arrives (lp_leases).
 * - A command's predicted run is its predicted_ns; on a device whose commands
 *   carry none (gpumuxd), with params.kdur, what its task's kernels of the same
 *   identity took lately: the policy measures each kernel it released (from
 *   the later of its release and its task's previous completion), the extra
 *   time the first kernel of an LP turn took (the switch's cost, which the
 *   device's slice rule reads) and the HP level's busy time per arrival (the
 *   gap prior's busy_ns when params.arrivals gives none).
 *
 * What the memory side does (HP pages never evicted for LP work, migrations
 * in pieces with HP first, LP planned over the timeline) is the device's
 * memory planner, through the same decisions (sim/msched.c, GMX_MSCHED_PRIO).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "gpumux/combined.h"
#include "gpumux/kdur.h"
#include "gpumux/sched.h"

#define GAP_SAMPLES 64
#define GAP_MIN_SAMPLES 8
#define GAP_QUANTILE 0.05
/* How long an idle LP task keeps its turn: host gaps inside a unit are microseconds. */
#define LP_GRACE_NS 1000000LL
/* Re-evaluation step while nothing fits the predicted gap. */
#define RECHECK_NS 20000LL

typedef struct gtask {
	gmx_cmd_queue_t queue;
	uint32_t inflight;
	int priority, present, done, held;
	gmx_lease_t lease; /* what the device was last told (gmx_lease_set) */
	/* params.kdur only: when each command in flight was released (seq, time; inflight_max
	 * slots, seq 0 free) and when the task's last command completed, -1 never */
	uint64_t *rel_seq;
	int64_t *rel_at;
	uint8_t *rel_moved; /* released with pages to bring in: its run measures the migration too */
	int64_t prev_done;
} gtask_t;

struct gmx_policy {
	gmx_device_t dev;
	gmx_sched_params_t params;
	uint32_t n_tasks;
	gtask_t task[GMX_MAX_TASKS];
	int lp_active;	       /* LP task whose turn it is, -1 none */
	int64_t lp_end;	       /* when its turn ends */
	int64_t lp_idle_since; /* when it ran dry, -1 busy */
	int turn_new;	       /* params.kdur: the LP turn has released nothing yet */
	int turn_task;	       /* the task whose turn was measured last, -1 none */
	uint64_t turn_seq;     /* seq + 1 of its first command, 0 none: its switch is measured */
	int hp_idle;	       /* the HP level has nothing queued or in flight */
	int64_t hp_idle_since;
	int64_t gaps[GAP_SAMPLES]; /* last HP idle gaps, ring */
	uint32_t n_gaps, gap_next;
	int64_t hp_busy_since; /* when the HP level last went busy */
	int64_t hp_busy_ns;    /* params.kdur only: its busy time per arrival, averaged; 0 unknown */
};

static int gm_create(const gmx_sched_params_t *p, const gmx_device_t *dev, gmx_policy_t **out)
{
	if (gmx_sched_params_check(p, NULL, 0) != 0)
		return -EINVAL;
	gmx_policy_t *s = calloc(1, sizeof(*s));
	if (!s)
		return -ENOMEM;
	s->dev = *dev;
	s->params = *p;
	s->lp_active = -1;
	s->turn_task = -1;
	s->lp_idle_since = -1;
	s->hp_idle = 1;
	*out = s;
	return 0;
}

static void gm_destroy(gmx_policy_t *s)
{
	for (uint32_t i = 0; i < s->n_tasks; i++) {
		free(s->task[i].rel_seq);
		free(s->task[i].rel_at);
		free(s->task[i].rel_moved);
	}
	free(s);
}

static int gm_task_add(gmx_policy_t *s, uint32_t task, int priority)
{
	if (task >= GMX_MAX_TASKS || priority < 0 || priority >= GMX_PRIORITY_LEVELS)
		return -EINVAL;
	gtask_t *t = &s->task[task];
	if (t->present && (!t->done || t->queue.head || t->inflight))
		return -EBUSY;
	uint64_t *rs = t->rel_seq;
	int64_t *ra = t->rel_at;
	uint8_t *rm = t->rel_moved;
	if (s->params.kdur && !rs) {
		rs = calloc(s->params.inflight_max, sizeof *rs);
		ra = calloc(s->params.inflight_max, sizeof *ra);
		rm = calloc(s->params.inflight_max, sizeof *rm);
		if (!rs || !ra || !rm) {
			free(rs);
			free(ra);
			free(rm);
			return -ENOMEM;
		}
	}
	memset(t, 0, sizeof(*t));
	t->rel_seq = rs;
	t->rel_at = ra;
	t->rel_moved = rm;
	if (rs)
		memset(rs, 0, s->params.inflight_max * sizeof *rs);
	t->prev_done = -1;
	gmx_kdur_forget(s->params.kdur, task); /* a new task in the slot: nothing learned yet */
	t->present = 1;
	t->priority = priority;
	if (task + 1 > s->n_tasks)
		s->n_tasks = task + 1;
	return 0;
}

/* The HP level: the best priority among tasks still running, when some running task has a
 * worse one; -1 when every running task shares one level (they all take turns as LP). */
static int hp_level(const gmx_policy_t *s)
{
	int best = -1, worst = -1;
	for (uint32_t i = 0; i < s->n_tasks; i++) {
		const gtask_t *t = &s->task[i];
		if (!t->present || t->done)
			continue;
		if (best < 0 || t->priority < best)
			best = t->priority;
		if (t->priority > worst)
			worst = t->priority;
	}
	return best < worst ? best : -1;
}

static int has_work(const gmx_policy_t *s, uint32_t i)
{
	const gtask_t *t = &s->task[i];
	return t->present && (t->queue.head || (t->held && t->inflight));
}

/* Counts c (task i's) in flight: released by the policy or under the task's lease; moved: its
 * pages were not all resident at its release (params.kdur then learns no run from it). */
static void account(gmx_policy_t *s, uint32_t i, const gmx_cmd_t *c, int moved)
{
	gtask_t *t = &s->task[i];
	t->inflight++;
	for (uint32_t k = 0; t->rel_seq && k < s->params.inflight_max; k++)
		if (!t->rel_seq[k]) { /* its release time, to measure its run (params.kdur) */
			t->rel_seq[k] = c->seq + 1;
			t->rel_at[k] = s->dev.now(s->dev.ctx);
			t->rel_moved[k] = (uint8_t)(moved != 0);
			if (s->turn_new && (int)i == s->lp_active) {
				s->turn_new = 0;
				s->turn_seq = c->seq + 1;
			}
			break;
		}
}

static void submit(gmx_policy_t *s, uint32_t i)
{
	gmx_cmd_t *c = gmx_cmd_queue_pop(&s->task[i].queue);
	/* params.kdur: whether its pages must come in first (asked before the device plans them). */
	int moved = s->params.kdur && s->dev.load_ns && s->dev.load_ns(s->dev.ctx, c) > 0;
	account(s, i, c, moved);
	s->dev.submit(s->dev.ctx, c);
}

/* A command's predicted run: its own prediction, else (params.kdur) what its task's kernels of
 * the same identity took lately; 0 unknown. */
static int64_t predicted_run(const gmx_policy_t *s, const gmx_cmd_t *c)
{
	if (c->predicted_ns > 0)
		return c->predicted_ns;
	int64_t d = s->params.kdur && c->kind == GMX_OP_KERNEL ? gmx_kdur_predict(s->params.kdur, c->task, c->kernel_id) : -1;
	return d > 0 ? d : 0;
}

static void hold(gmx_policy_t *s, uint32_t i, int on)
{
	gtask_t *t = &s->task[i];
	if (t->held == on || !s->dev.preempt)
		return;
	if (on && !t->inflight)
		return;
	t->held = on;
	s->dev.preempt(s->dev.ctx, i, on);
}

/* Before GAP_MIN_SAMPLES gaps are seen: the gap the HP tasks' known arrivals leave
 * (params.arrivals: a Poisson rate, a period or a trace, less the busy time per arrival), the
 * shortest over the HP tasks; INT64_MAX (open) when none is known. */
static int64_t prior_gap(const gmx_policy_t *s, int hp, int64_t idle)
{
	int64_t best = -1;
	for (uint32_t i = 0; s->params.arrivals && i < s->n_tasks && i < s->params.n_arrivals; i++) {
		const gtask_t *t = &s->task[i];
		if (!t->present || t->done || t->priority != hp)
			continue;
		gmx_comb_arrivals_t a = s->params.arrivals[i];
		if (a.busy_ns <= 0)
			a.busy_ns = s->hp_busy_ns; /* measured (params.kdur), else 0 */
		int64_t g = gmx_comb_gap_prior(&a, idle, GAP_QUANTILE);
		if (g >= 0 && (best < 0 || g < best))
			best = g;
	}
	return best < 0 ? INT64_MAX : best;
}

/* The predicted rest of the HP gap at `now`: INT64_MAX when open. */
static int64_t hp_gap(const gmx_policy_t *s, int64_t now)
{
	if (s->n_gaps < GAP_MIN_SAMPLES)
		return prior_gap(s, hp_level(s), now - s->hp_idle_since);
	int64_t v[GAP_SAMPLES];
	uint32_t n = s->n_gaps < GAP_SAMPLES ? s->n_gaps : GAP_SAMPLES;
	if (n == 0) /* GAP_MIN_SAMPLES may be 0 */
		return INT64_MAX;
	memcpy(v, s->gaps, n * sizeof(*v));
	/* insertion sort: n <= 64 */
	for (uint32_t i = 1; i < n; i++)
		for (uint32_t j = i; j > 0 && v[j - 1] > v[j]; j--) {
			int64_t x = v[j];
			v[j] = v[j - 1];
			v[j - 1] = x;
		}
	int64_t idle = now - s->hp_idle_since;
	if (idle >= v[n - 1])
		return INT64_MAX; /* longer than any gap seen */
	/* the quantile among the gaps that lasted at least this long */
	uint32_t lo = 0;
	while (lo < n && v[lo] <= idle)
		lo++;
	uint32_t k = lo + (uint32_t)(GAP_QUANTILE * (double)(n - lo));
	if (k >= n)
		k = n - 1;
	return v[k] - idle;
}

/* The next LP task by the timeline: best LP level first, round robin after `from`. */
static int next_lp(const gmx_policy_t *s, int hp, int from)
{
	int best = -1;
	for (uint32_t k = 1; k <= s->n_tasks; k++) {
		uint32_t i =
		    (uint32_t)(((from < 0 ? -1 : from) + (int)k + (int)s->n_tasks) % (int)s->n_tasks);
		if (s->task[i].priority <= hp || !has_work(s, i))
			continue;
		if (best < 0 || s->task[i].priority < s->task[best].priority)
			best = (int)i;
	}
	return best;
}

/* On a device that cannot preempt but can lease (gpumuxd's software queues), the LP task whose
 * turn it is releases its commands under a lease instead of a notice and a grant each: one
 * command in flight beside HP (an HP arrival revokes it at once, dispatch, and waits for the
 * one in flight), as many as params.inflight_max when there is no HP level. The lease ends at
 * the end of the turn and, beside HP, where the predicted HP gap ends less one of its kernels
 * and the switches (none when that is already past). Every other LP task's lease is revoked.
 * A lease kept within LEASE_SLACK_NS of the new end is not resent. */
#define LEASE_SLACK_NS 200000LL
static void lp_leases(gmx_policy_t *s, int hp, int a, int64_t gap, int64_t now)
{
	if (s->dev.preempt || !s->dev.lease)
		return;
	uint32_t n = 0;
	int64_t until = s->lp_end;
	if (a >= 0 && !s->task[a].done) {
		n = hp >= 0 ? 1 : s->params.inflight_max;
		if (hp >= 0 && gap != INT64_MAX) {
			const gmx_cmd_t *h = s->task[a].queue.head;
			int64_t run = h ? predicted_run(s, h) : 0;
			if (run <= 0 && s->params.kdur)
				run = gmx_kdur_task_mean(s->params.kdur, (uint32_t)a);
			int64_t end = now + gap - (run > 0 ? run : 0) - 2 * s->params.switch_ns;
			if (end <= now)
				n = 0;
			else if (end < until)
				until = end;
		}
	}
	for (uint32_t i = 0; i < s->n_tasks; i++) {
		gtask_t *t = &s->task[i];
		if (!t->present || t->priority <= hp)
			continue;
		uint32_t k = (int)i == a ? n : 0;
		if (k && t->lease.inflight == k && t->lease.until <= until && until - t->lease.until < LEASE_SLACK_NS)
			continue;
		gmx_lease_set(&s->dev, i, &t->lease, k, k ? until : 0);
	}
}

/* HP work about to be released: every LP lease ends before it is, so the revoke reaches the LP
 * interposers before the device prepares HP's release (gpumuxd plans and orders its memory
 * there, hundreds of microseconds on a loaded machine, while a leased LP client kept releasing
 * kernels that the HP kernel then queued behind). */
static void revoke_before_hp(gmx_policy_t *s, int hp)
{
	int arriving = 0;
	for (uint32_t i = 0; i < s->n_tasks && !arriving; i++) {
		const gtask_t *t = &s->task[i];
		arriving = t->present && t->priority == hp && t->queue.head && t->inflight < s->params.inflight_max;
	}
	for (uint32_t i = 0; arriving && i < s->n_tasks; i++)
		if (s->task[i].present && s->task[i].priority > hp)
			gmx_lease_set(&s->dev, i, &s->task[i].lease, 0, 0);
}

static void dispatch(gmx_policy_t *s)
{
	int64_t now = s->dev.now(s->dev.ctx);
	int hp = hp_level(s);
	int busy = 0;
	revoke_before_hp(s, hp);
	for (uint32_t i = 0; i < s->n_tasks; i++) {
		gtask_t *t = &s->task[i];
		if (!t->present || t->priority != hp)
			continue;
		while (t->queue.head && t->inflight < s->params.inflight_max)
			submit(s, i);
		busy |= t->inflight > 0 || t->queue.head != NULL;
	}
	if (busy) {
		if (s->hp_idle && s->hp_idle_since >= 0 && now > s->hp_idle_since) {
			s->gaps[s->gap_next] = now - s->hp_idle_since;
			s->gap_next = (s->gap_next + 1) % GAP_SAMPLES;
			s->n_gaps++;
		}
		if (s->hp_idle)
			s->hp_busy_since = now;
		s->hp_idle = 0;
		for (uint32_t i = 0; i < s->n_tasks; i++)
			if (s->task[i].present && s->task[i].priority > hp) {
				hold(s, i, 1); /* HP first: the LP task waits at once */
				gmx_lease_set(&s->dev, i, &s->task[i].lease, 0, 0);
			}
		return;
	}
	if (!s->hp_idle) {
		s->hp_idle = 1;
		s->hp_idle_since = now;
		if (s->params.kdur) { /* measured busy time per arrival, for the gap prior */
			int64_t b = now - s->hp_busy_since;
			s->hp_busy_ns = s->hp_busy_ns ? (7 * s->hp_busy_ns + b) / 8 : b;
		}
	}
	/* The LP turn: kept while its slice lasts, through host gaps under LP_GRACE_NS
	 * (a closed-loop host launching its next unit), as the timeline scheduler does. */
	int a = s->lp_active;
	if (a >= 0 && (has_work(s, (uint32_t)a) || s->task[a].inflight))
		s->lp_idle_since = -1; /* a kernel in flight (or waiting for its pages) is not idle */
	else if (a >= 0 && s->lp_idle_since < 0)
		s->lp_idle_since = now;
	int over = a < 0 || s->task[a].priority <= hp || s->task[a].done || now >= s->lp_end ||
		   (s->lp_idle_since >= 0 && now >= s->lp_idle_since + LP_GRACE_NS);
	if (over) {
		int n = next_lp(s, hp, a);
		if (n < 0)
			return; /* no LP work: the next launch decides */
		if (a >= 0 && n != a && s->task[a].inflight) {
			/* Never cut an LP kernel for another LP turn: the planner makes the
			 * next turn's room from the outgoing task's pages, and a kernel cut
			 * there would resume on pages gone (faulted back one by one). Let
			 * it finish (resumed if HP had held it) and switch when it completes,
			 * as msched's own timeline scheduler does. */
			hold(s, (uint32_t)a, 0);
			gmx_lease_set(&s->dev, (uint32_t)a, &s->task[a].lease, 0, 0); /* nothing more of it */
			return;
		}
		a = s->lp_active = n;
		s->lp_idle_since = -1;
		s->turn_new = n != s->turn_task;
		s->turn_task = n;
		int64_t sl = s->dev.slice_for ? s->dev.slice_for(s->dev.ctx, (uint32_t)a) : 0;
		s->lp_end = now + (sl > 0 ? sl : s->params.slice_ns);
	}
	int64_t wake = s->lp_end;
	if (s->lp_idle_since >= 0 && s->lp_idle_since + LP_GRACE_NS < wake)
		wake = s->lp_idle_since + LP_GRACE_NS;
	gtask_t *t = &s->task[a];
	hold(s, (uint32_t)a, 0);
	int64_t gap = s->dev.preempt ? INT64_MAX : hp_gap(s, now);
	int64_t placed = 0;
	while (t->queue.head && t->inflight < s->params.inflight_max) {
		const gmx_cmd_t *c = t->queue.head;
		int64_t load = gap != INT64_MAX && s->dev.load_ns ? s->dev.load_ns(s->dev.ctx, c) : 0;
		int64_t run = predicted_run(s, c);
		if (!gmx_comb_admit(gap == INT64_MAX ? gap : gap - placed, run, load, s->params.switch_ns)) {
			if (now + RECHECK_NS < wake)
				wake = now + RECHECK_NS; /* the prediction grows as the gap lasts */
			break;
		}
		placed += run + load;
		submit(s, (uint32_t)a);
	}
	lp_leases(s, hp, a, gap, now);
	s->dev.set_timer(s->dev.ctx, wake);
}

static void gm_task_done(gmx_policy_t *s, uint32_t task)
{
	if (task < GMX_MAX_TASKS) {
		gtask_t *t = &s->task[task];
		t->done = 1;
		hold(s, task, 0);
		gmx_lease_set(&s->dev, task, &t->lease, 0, 0);
		while (t->queue.head)
			submit(s, task);
	}
	dispatch(s);
}

static void gm_on_launch(gmx_policy_t *s, gmx_cmd_t *cmd)
{
	if (cmd->leased) { /* released under its lease: in flight already */
		account(s, cmd->task, cmd, 0); /* leased only while its memory is resident: nothing moves */
		dispatch(s);
		return;
	}
	gmx_cmd_queue_push(&s->task[cmd->task].queue, cmd);
	dispatch(s);
}

/* params.kdur: a kernel's run is from the later of its release and its task's previous
 * completion (work released ahead queues behind it) to its completion. A kernel released with
 * pages to bring in measures their migration too (its pieces, the outgoing task's evictions, a
 * round trip each): it gives the switch's cost, never a run. Learned as a run, it made every
 * later kernel of its task look as long as a switch, so none fitted an HP gap again, and the
 * only kernels it still ran (in gaps longer than any seen) were switches, learned the same way. */
static void learn(gmx_policy_t *s, gtask_t *t, const gmx_cmd_t *cmd)
{
	int64_t now = s->dev.now(s->dev.ctx), began = -1;
	int moved = 0;
	for (uint32_t k = 0; k < s->params.inflight_max; k++)
		if (t->rel_seq[k] == cmd->seq + 1) {
			t->rel_seq[k] = 0;
			began = t->rel_at[k];
			moved = t->rel_moved[k];
			break;
		}
	if (began >= 0 && cmd->kind == GMX_OP_KERNEL && !t->done) {
		if (s->turn_seq == cmd->seq + 1) { /* the first kernel of an LP turn: what its switch cost */
			int64_t pred = gmx_kdur_predict(s->params.kdur, cmd->task, cmd->kernel_id);
			/* Moved with no run known yet: all of it counts (a run more than the switch).
			 * Left unmeasured, the task's turns stayed as short as the link time of its
			 * pages: too short for a kernel beyond the switch's, so every turn of it was
			 * another switch and none gave a run to learn. */
			if (pred >= 0 || moved)
				gmx_kdur_switch_observe(s->params.kdur, cmd->task, now - began - (pred > 0 ? pred : 0));
		}
		if (t->prev_done > began)
			began = t->prev_done;
		if (!moved)
			gmx_kdur_observe(s->params.kdur, cmd->task, cmd->kernel_id, now - began);
	}
	if (s->turn_seq == cmd->seq + 1)
		s->turn_seq = 0;
	t->prev_done = now;
}

static void gm_on_complete(gmx_policy_t *s, gmx_cmd_t *cmd)
{
	gtask_t *t = &s->task[cmd->task];
	if (t->rel_seq)
		learn(s, t, cmd);
	if (t->inflight)
		t->inflight--;
	if (!t->inflight && t->held) {
		t->held = 0; /* its last work in flight was a copy: nothing is held */
		s->dev.preempt(s->dev.ctx, cmd->task, 0);
	}
	dispatch(s);
}

static void gm_on_timer(gmx_policy_t *s)
{
	dispatch(s);
}

static void gm_on_host_wait(gmx_policy_t *s, uint32_t task)
{
	(void)task;
	dispatch(s);
}

const gmx_policy_ops_t gmx_sched_gpumux_ops = {
    .name = "gpumux",
    .flags = GMX_POLICY_MEM_PRIORITY,
    .summary = "the combined policy: HP first with immediate preemption, LP in HP gaps when its pages fit, "
	       "LP turns by the memory planner's timeline (docs/combined.md)",
    .create = gm_create,
    .destroy = gm_destroy,
    .task_add = gm_task_add,
    .task_done = gm_task_done,
    .on_launch = gm_on_launch,
    .on_complete = gm_on_complete,
    .on_timer = gm_on_timer,
    .on_host_wait = gm_on_host_wait,
};
