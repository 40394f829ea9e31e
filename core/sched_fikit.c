/* fikit: priority kernel scheduling with idle-gap filling (docs/fikit.md).
 *
 * Ten priority levels, 0 highest. The tasks of the highest level that has a
 * task still running ("the HP level") release their commands at once. When
 * every HP task is idle (nothing queued, nothing on the device), the policy
 * predicts how long the idle gap will last from the HP task's profile: the
 * gap that followed its last kernel (in the context of the kernel before it),
 * at quantile gap_quantile of that gap's distribution given the time already
 * idle. Into that gap it places lower-priority kernels by BestPrioFit: from
 * the highest non-empty lower level, the queue head whose predicted duration
 * (at quantile 1 - gap_quantile) is the largest that still fits, else the next
 * level down, again and again until nothing fits. Only queue heads are
 * candidates, so each task's launch order (and thus stream order) holds. A
 * submitted command is never recalled: a running kernel is never cut.
 *
 * When the HP task has been idle longer than any gap in its profile (or its
 * gap is unknown for FREE_AFTER_UNKNOWN_NS), lower levels run freely, one
 * command in flight per task so that a returning HP task meets little work.
 *
 * Starvation: a command that has been at the head of its task's queue for
 * starve_ns is released whatever the HP task does (docs/fikit.md states the
 * bound this gives).
 *
 * Measurement: with params.profile_learn, every completed kernel adds to its
 * task's profile its duration (completion minus the later of its release and
 * the task's previous completion) and the idle gap after it (until the task's
 * next command arrives; 0 when one was already waiting).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "fikit.h"
#include "gpumux/kprofile.h"
#include "gpumux/sched.h"

/* A HP task whose gap the profile cannot predict leaves the GPU to lower
 * levels after this long idle: about a launch-to-start plus a few kernels. */
#define FREE_AFTER_UNKNOWN_NS 1000000LL
/* Re-evaluation step while the HP task is idle and nothing fits: the
 * conditional gap prediction grows as the gap lasts. */
#define RECHECK_MIN_NS 20000LL

typedef struct fslot {
	uint64_t seq;
	int64_t released; /* when it was released */
	int64_t pred;	  /* its predicted duration */
	int used;
} fslot_t;

typedef struct ftask {
	gmx_cmd_queue_t queue; /* launch order */
	uint32_t inflight;
	int priority, present, done;
	int host_wait; /* the task's host is blocked on the device */
	gmx_kprof_t *prof;
	uint64_t last_id, last_prev; /* last completed kernel and the one completed before it */
	uint64_t sub_last;	     /* last released kernel: the context of the head */
	int64_t last_end;	     /* last completion; -1 never */
	int64_t head_since;	     /* when the current head became head */
	/* measuring: one slot per command in flight (at most slot_cap), found by seq; a
	 * slot per task, not by seq modulo the bound, since seq is device-wide and other tasks'
	 * commands fall between this task's */
	fslot_t *slot;
	int64_t busy_until; /* predicted end of the task's in-flight work */
	int64_t prev_done;  /* previous completion of any command of the task */
	int pending;	    /* an observation waits for its gap */
	uint64_t p_id, p_prev;
	int64_t p_dur, p_end;
	gmx_lease_t lease;  /* what the device was told */
	int b_head, b_busy; /* as last noted in its level's books (note()) */
	/* slots in use: [0, span) (inflight_max, or the deepest time-sized lease granted), taken and
	 * freed from cursors (commands mostly complete in release order), their predictions' sum */
	uint32_t span, slot_at, done_at;
	int64_t pred_sum;
	/* the time-sized lease (gmx_lease_depth): the window being measured and the bound it gave */
	uint32_t w_n, w_long, depth; /* measured; of them longer than the budget; the bound */
	int64_t w_sum;		     /* the time the others took */
} ftask_t;

struct gmx_policy {
	gmx_device_t dev;
	gmx_sched_params_t params;
	uint32_t n_tasks;
	int last_task; /* task whose command was released last (context on the GPU) */
	uint32_t level_n[GMX_PRIORITY_LEVELS];
	uint32_t level[GMX_PRIORITY_LEVELS][GMX_MAX_TASKS];
	ftask_t task[GMX_MAX_TASKS];
	/* The leases last decided (update_leases): for the HP level, the lower level running freely
	 * (-1: none) and the tasks' generation (bumped when a task arrives or finishes); the same
	 * again decides the same leases, so the pass over every task is skipped. */
	int lease_hp, lease_lower, lease_valid;
	uint64_t gen, lease_gen;
	/* Per level, kept as tasks change (note()) so that an event costs the same with 2 or 100
	 * tasks: bit k of qbits[l] / bbits[l]: level[l][k] has a queue head / work queued or in
	 * flight; nbusy[l]: how many have work; pos[task]: its k. */
	uint64_t qbits[GMX_PRIORITY_LEVELS][GMX_MAX_TASKS / 64],
	    bbits[GMX_PRIORITY_LEVELS][GMX_MAX_TASKS / 64];
	uint32_t nbusy[GMX_PRIORITY_LEVELS], pos[GMX_MAX_TASKS];
	/* Bit l: level l has a task (level_n[l] > 0). An event's passes over the levels below the HP
	 * level visit only these: with every client at one priority, none. */
	uint32_t levels;
};

/* The levels at or below level `from` that have a task, as a mask for LEVEL_NEXT. */
static uint32_t levels_from(const gmx_policy_t *s, int from)
{
	if (from <= 0)
		return s->levels;
	return from >= GMX_PRIORITY_LEVELS ? 0 : s->levels & ~((1u << from) - 1u);
}

/* The best (lowest-numbered) level in mask m, which must not be 0. */
static int level_first(uint32_t m)
{
	return __builtin_ctz(m);
}

static void bit_set(uint64_t *w, uint32_t k, int on)
{
	if (on)
		w[k / 64] |= 1ull << (k % 64);
	else
		w[k / 64] &= ~(1ull << (k % 64));
}

static int task_busy(const struct ftask *t);

/* Books task ti's queue head and work (queued or in flight) in its level's bits and count, after
 * anything that may change them. */
static void note(gmx_policy_t *s, uint32_t ti)
{
	struct ftask *t = &s->task[ti];
	int head = t->queue.head != NULL, busy = task_busy(t);
	if (head != t->b_head) {
		t->b_head = head;
		bit_set(s->qbits[t->priority], s->pos[ti], head);
	}
	if (busy != t->b_busy) {
		t->b_busy = busy;
		bit_set(s->bbits[t->priority], s->pos[ti], busy);
		if (busy)
			s->nbusy[t->priority]++;
		else
			s->nbusy[t->priority]--;
	}
}

/* Every k set in bits (a level's qbits or bbits), in increasing order, as int k; the bits are
 * read a word at a time, so the body may clear bits at or before k (not after). */
/* k is the name the loop declares: it cannot be parenthesised. */
/* NOLINTBEGIN(bugprone-macro-parentheses) */
#define FOR_BITS(k, bits)                                                                                    \
	for (uint32_t w_ = 0; w_ < GMX_MAX_TASKS / 64; w_++)                                                 \
		for (uint64_t m_ = (bits)[w_]; m_; m_ &= m_ - 1)                                             \
			for (int k = (int)(w_ * 64 + (uint32_t)__builtin_ctzll(m_)), once_ = 1; once_;       \
			     once_ = 0)
/* NOLINTEND(bugprone-macro-parentheses) */

static int fk_create(const gmx_sched_params_t *p, const gmx_device_t *dev, gmx_policy_t **out)
{
	if (gmx_sched_params_check(p, NULL, 0) != 0)
		return -EINVAL; /* inflight_max sizes the slots; 0 would leave none */
	gmx_policy_t *s = calloc(1, sizeof(*s));
	if (!s)
		return -ENOMEM;
	s->dev = *dev;
	s->params = *p;
	s->last_task = -1;
	*out = s;
	return 0;
}

static void fk_destroy(gmx_policy_t *s)
{
	if (!s)
		return;
	for (uint32_t t = 0; t < GMX_MAX_TASKS; t++)
		free(s->task[t].slot);
	free(s);
}

/* Slots per task: a command in flight each, under a time-sized lease too. */
static uint32_t slot_cap(const gmx_policy_t *s)
{
	return s->params.inflight_max > GMX_LEASE_DEPTH_MAX ? s->params.inflight_max : GMX_LEASE_DEPTH_MAX;
}

static int fk_task_add(gmx_policy_t *s, uint32_t task, int priority)
{
	if (task >= GMX_MAX_TASKS || priority < 0 || priority >= GMX_PRIORITY_LEVELS)
		return -EINVAL;
	ftask_t *t = &s->task[task];
	if (t->present) {
		/* A device may give a finished task's index to a new task (the daemon
		 * reuses a departed client's slot): start it over. */
		if (!t->done || t->queue.head || t->inflight)
			return -EBUSY;
		uint32_t *lv = s->level[t->priority], *n = &s->level_n[t->priority];
		/* Not busy (checked above): its bits are clear; the last task takes its place. */
		uint32_t k = s->pos[task], last = --*n;
		lv[k] = lv[last];
		s->pos[lv[k]] = k;
		for (int b = 0; b < 2; b++) {
			uint64_t *bits = b ? s->bbits[t->priority] : s->qbits[t->priority];
			bit_set(bits, k, (bits[last / 64] >> (last % 64)) & 1);
			bit_set(bits, last, 0);
		}
		if (!*n)
			s->levels &= ~(1u << t->priority);
		free(t->slot);
		memset(t, 0, sizeof(*t));
	}
	t->slot = calloc(slot_cap(s), sizeof(*t->slot));
	if (!t->slot)
		return -ENOMEM;
	t->present = 1;
	t->span = s->params.inflight_max;
	t->priority = priority;
	t->last_end = -1;
	t->prev_done = -1;
	if (s->params.profiles && task < s->params.n_profiles)
		t->prof = s->params.profiles[task];
	s->pos[task] = s->level_n[priority];
	s->level[priority][s->level_n[priority]++] = task;
	s->levels |= 1u << priority;
	s->gen++;
	if (task + 1 > s->n_tasks)
		s->n_tasks = task + 1;
	return 0;
}

/* Predicted duration of command c of task t (c following t's last release), -1 unknown. */
static int64_t cmd_pred(const gmx_policy_t *s, const ftask_t *t, const gmx_cmd_t *c)
{
	if (!c)
		return -1;
	if (c->kernel_id && t->prof) {
		const gmx_kprof_entry_t *e = gmx_kprof_lookup(t->prof, c->kernel_id, t->sub_last);
		if (e)
			return gmx_kdist_quantile(&e->dur, 1.0 - s->params.gap_quantile);
	}
	return c->predicted_ns > 0 ? c->predicted_ns : -1;
}

/* Predicted duration of task t's queue head, -1 unknown. */
static int64_t head_pred(const gmx_policy_t *s, const ftask_t *t)
{
	return cmd_pred(s, t, t->queue.head);
}

/* Books command c of task ti as released now (predicted duration d, -1 unknown). */
static void account_release(gmx_policy_t *s, uint32_t ti, const gmx_cmd_t *c, int64_t d)
{
	ftask_t *t = &s->task[ti];
	int64_t now = s->dev.now(s->dev.ctx);
	int64_t pred = d > 0 ? d : 0;
	/* At most slot_cap commands of a task are in flight (its lease bounds them), so a slot is
	 * free; were none, the command would simply go unmeasured. */
	for (uint32_t k = 0; k < t->span; k++) {
		uint32_t r = (t->slot_at + k) % t->span;
		if (!t->slot[r].used) {
			t->slot[r] = (fslot_t){.seq = c->seq, .released = now, .pred = pred, .used = 1};
			t->slot_at = (r + 1) % t->span;
			t->pred_sum += pred;
			break;
		}
	}
	t->busy_until = (t->busy_until > now ? t->busy_until : now) + pred;
	if (c->kernel_id)
		t->sub_last = c->kernel_id;
	t->inflight++;
	t->head_since = now;
	s->last_task = (int)ti;
	note(s, ti);
}

static void release(gmx_policy_t *s, uint32_t ti)
{
	ftask_t *t = &s->task[ti];
	int64_t d = head_pred(s, t);
	gmx_cmd_t *c = gmx_cmd_queue_pop(&t->queue);
	account_release(s, ti, c, d);
	s->dev.submit(s->dev.ctx, c);
}

/* The HP level: the best priority among tasks not finished. */
static int hp_level(const gmx_policy_t *s)
{
	for (uint32_t m = s->levels; m; m &= m - 1) {
		int l = level_first(m);
		for (uint32_t k = 0; k < s->level_n[l]; k++)
			if (!s->task[s->level[l][k]].done)
				return l;
	}
	return -1;
}

int64_t gmx_fikit_pick(const gmx_policy_t *s, int above, int64_t now, int64_t gap_ns, uint32_t *task)
{
	/* Work already placed in the gap counts against it: concurrent lower
	 * kernels would slow each other, so the gap is budgeted as if serial. */
	int64_t placed = 0;
	for (uint32_t m = levels_from(s, above + 1); m; m &= m - 1) {
		int l = level_first(m);
		FOR_BITS(k, s->bbits[l])
		{ /* a task with no work has busy_until <= now */
			int64_t b = s->task[s->level[l][k]].busy_until - now;
			if (b > placed)
				placed = b;
		}
	}
	for (uint32_t m = levels_from(s, above + 1); m; m &= m - 1) {
		int l = level_first(m);
		int64_t best = -1;
		FOR_BITS(k, s->qbits[l])
		{
			uint32_t ti = s->level[l][k];
			const ftask_t *t = &s->task[ti];
			if (!t->queue.head || t->inflight >= s->params.inflight_max)
				continue;
			int64_t d = head_pred(s, t);
			if (d < 0)
				continue;
			/* after the work already placed, a context switch in (unless this
			 * task holds the GPU) and one back out */
			int64_t cost = placed + d + s->params.switch_ns * (s->last_task == (int)ti ? 1 : 2);
			if (cost <= gap_ns && d > best) {
				best = d;
				*task = ti;
			}
		}
		if (best >= 0)
			return best;
	}
	return -1;
}

/* Remaining predicted gap of the HP level at `now`: INT64_MAX when lower
 * levels may run freely, else ns (0: none). *recheck: when to look again. */
static int64_t hp_gap(const gmx_policy_t *s, int hp, int64_t now, int64_t *recheck)
{
	int64_t g = INT64_MAX;
	*recheck = INT64_MAX;
	for (uint32_t k = 0; k < s->level_n[hp]; k++) {
		const ftask_t *t = &s->task[s->level[hp][k]];
		if (t->done)
			continue;
		int64_t since = t->last_end >= 0 ? t->last_end : 0;
		const gmx_kprof_entry_t *e =
		    t->prof && t->last_id ? gmx_kprof_lookup(t->prof, t->last_id, t->last_prev) : NULL;
		int64_t r;
		if (!e) {
			if (now - since >= FREE_AFTER_UNKNOWN_NS)
				continue; /* unknown and long: free */
			r = 0;
			if (since + FREE_AFTER_UNKNOWN_NS < *recheck)
				*recheck = since + FREE_AFTER_UNKNOWN_NS;
		} else if (now - since >= e->gap.q[GMX_KPROF_QPTS - 1]) {
			continue; /* idle longer than ever seen: free */
		} else {
			r = gmx_kdist_remaining(&e->gap, now - since, s->params.gap_quantile);
			int64_t at = now + (r > RECHECK_MIN_NS ? r : RECHECK_MIN_NS);
			if (since + e->gap.q[GMX_KPROF_QPTS - 1] < at)
				at = since + e->gap.q[GMX_KPROF_QPTS - 1];
			if (at < *recheck)
				*recheck = at;
		}
		if (r < g)
			g = r;
	}
	return g;
}

/* Releases a lower-level head outside a fill (starving, or free running) and
 * extends the predicted end of lower-level work by its duration. */
static void release_lp(gmx_policy_t *s, uint32_t ti, int64_t now)
{
	(void)now;
	release(s, ti);
}

static int task_busy(const ftask_t *t)
{
	return t->queue.head || t->inflight;
}

/* Forgets t's time-sized lease and its window (a kernel of unknown duration, or more longer
 * than the budget than GMX_LEASE_LONG_MAX): the count bound holds until a new window is measured. */
static void lease_forget(gmx_policy_t *s, ftask_t *t)
{
	t->w_n = t->w_long = 0;
	t->w_sum = 0;
	if (t->depth) {
		t->depth = 0;
		s->gen++; /* update_leases passes over the tasks again */
	}
}

/* One more command of t took dur_ns (from the later of its release and the task's previous
 * completion to its completion): every GMX_LEASE_WINDOW of them decide t's time-sized lease
 * (gmx_lease_depth); more than GMX_LEASE_LONG_MAX longer than the budget end it at once. */
static void lease_learn(gmx_policy_t *s, ftask_t *t, int64_t dur)
{
	if (dur > GMX_LEASE_BACKLOG_NS && ++t->w_long > GMX_LEASE_LONG_MAX) {
		lease_forget(s, t); /* more long ones than a short-kernel task has */
		return;
	}
	if (dur <= GMX_LEASE_BACKLOG_NS)
		t->w_sum += dur;
	if (++t->w_n < GMX_LEASE_WINDOW)
		return;
	uint32_t d = gmx_lease_depth(t->w_sum, t->w_n - t->w_long, t->w_long, s->params.inflight_max);
	t->w_n = t->w_long = 0;
	t->w_sum = 0;
	if (d != t->depth) {
		t->depth = d;
		if (d > t->span)
			t->span = d; /* its slots: d in flight */
		s->gen++;
	}
}

/* Leases (docs/fikit.md): the HP level's tasks release up to inflight_max commands without
 * asking (they are released at once anyway; a task alone at that level, up to the time-sized
 * bound its recent commands give, lease_learn), except while lower levels run freely (the HP
 * level idle past every gap it ever left) and have work: then the best lower level with work
 * holds leases of one command in flight per task, as the free run releases, and gives them up
 * the moment a better-priority task launches. Every other task holds none. */
static void update_leases(gmx_policy_t *s, int hp, int free_run)
{
	if (!s->dev.lease)
		return;
	int lower = -1; /* the best lower level with work */
	for (uint32_t m = levels_from(s, hp + 1); m && lower < 0; m &= m - 1)
		for (uint32_t k = 0, l = (uint32_t)level_first(m); k < s->level_n[l] && lower < 0; k++)
			if (task_busy(&s->task[s->level[l][k]]))
				lower = (int)l;
	int lp_run = free_run && lower >= 0;
	int key = lp_run ? lower : -1;
	if (s->lease_valid && s->lease_hp == hp && s->lease_lower == key && s->lease_gen == s->gen)
		return; /* every task's lease is what it would be set to */
	s->lease_valid = 1;
	s->lease_hp = hp;
	s->lease_lower = key;
	s->lease_gen = s->gen;
	uint32_t hp_live = 0; /* a lone task of the HP level may hold a time-sized lease */
	for (uint32_t k = 0; k < s->level_n[hp]; k++)
		hp_live += !s->task[s->level[hp][k]].done;
	for (uint32_t m = levels_from(s, hp); m; m &= m - 1)
		for (uint32_t k = 0, l = (uint32_t)level_first(m); k < s->level_n[l]; k++) {
			uint32_t ti = s->level[l][k];
			ftask_t *t = &s->task[ti];
			uint32_t n = 0;
			if (!t->done && (int)l == hp && !lp_run)
				n = hp_live == 1 && t->depth ? t->depth : s->params.inflight_max;
			else if (!t->done && lp_run && (int)l == lower)
				n = 1;
			gmx_lease_set(&s->dev, ti, &t->lease, n, 0);
		}
}

/* HP work about to be released: the lower levels' leases end before it is (update_leases
 * would end them after), so the revoke reaches their interposers before gpumuxd prepares the
 * HP release (for an oversubscribed client its memory plan and orders). */
static void revoke_before_hp(gmx_policy_t *s, int hp)
{
	if (!s->dev.lease)
		return;
	int arriving = 0;
	FOR_BITS(k, s->qbits[hp])
	{
		const ftask_t *t = &s->task[s->level[hp][k]];
		arriving |= t->queue.head && t->inflight < s->params.inflight_max;
	}
	for (uint32_t m = arriving ? levels_from(s, hp + 1) : 0; m; m &= m - 1)
		for (uint32_t k = 0, l = (uint32_t)level_first(m); k < s->level_n[l]; k++) {
			ftask_t *t = &s->task[s->level[l][k]];
			gmx_lease_set(&s->dev, s->level[l][k], &t->lease, 0, 0);
		}
}

static void dispatch(gmx_policy_t *s)
{
	int64_t now = s->dev.now(s->dev.ctx);
	int hp = hp_level(s);
	if (hp < 0)
		return;
	revoke_before_hp(s, hp);
	/* Only tasks with a queue head (their level's bits, in level order): an event costs the same
	 * however many tasks share the level. */
	FOR_BITS(k, s->qbits[hp])
	{
		uint32_t ti = s->level[hp][k];
		ftask_t *t = &s->task[ti];
		while (t->queue.head && t->inflight < s->params.inflight_max)
			release(s, ti);
	}
	int hp_busy = s->nbusy[hp] > 0;
	int64_t wake = INT64_MAX;
	/* Starvation bound: heads that waited starve_ns go now. */
	for (uint32_t m = levels_from(s, hp + 1); m; m &= m - 1) {
		int l = level_first(m);
		FOR_BITS(k, s->qbits[l])
		{
			uint32_t ti = s->level[l][k];
			ftask_t *t = &s->task[ti];
			if (!t->queue.head || t->inflight)
				continue;
			int64_t due = t->head_since + s->params.starve_ns;
			if (now >= due)
				release_lp(s, ti, now);
			else if (due < wake)
				wake = due;
		}
	}
	/* The HP level idle: its gap matters only to lower levels with work (filled into it, or run
	 * freely past it); with none, no gap is predicted and no recheck timer set (a lower task's
	 * launch dispatches again). */
	int lower_busy = 0;
	for (uint32_t m = levels_from(s, hp + 1); m && !lower_busy; m &= m - 1)
		lower_busy = s->nbusy[level_first(m)] > 0;
	int free_run = 0;
	if (!hp_busy && lower_busy) {
		int64_t recheck;
		int64_t g = hp_gap(s, hp, now, &recheck);
		free_run = g == INT64_MAX;
		if (g == INT64_MAX) {
			for (uint32_t m = levels_from(s, hp + 1); m; m &= m - 1) {
				int l = level_first(m);
				FOR_BITS(k, s->qbits[l])
				{
					uint32_t ti = s->level[l][k];
					if (s->task[ti].queue.head && !s->task[ti].inflight)
						release_lp(s, ti, now);
				}
			}
		} else {
			uint32_t ti;
			while (gmx_fikit_pick(s, hp, now, g, &ti) >= 0)
				release(s, ti);
			if (recheck < wake)
				wake = recheck;
		}
	}
	if (wake != INT64_MAX)
		s->dev.set_timer(s->dev.ctx, wake);
	update_leases(s, hp, free_run);
}

static void learn_flush(ftask_t *t, int64_t gap)
{
	if (t->pending && t->prof)
		gmx_kprof_observe(t->prof, t->p_id, t->p_prev, t->p_dur, gap, NULL);
	t->pending = 0;
}

static void fk_task_done(gmx_policy_t *s, uint32_t task)
{
	if (task < GMX_MAX_TASKS) {
		s->task[task].done = 1;
		s->gen++;
		s->task[task].pending = 0; /* no next command: the gap is not a gap */
		/* What it still had queued goes now, whatever its level: nobody waits for it. */
		while (s->task[task].queue.head)
			release(s, task);
	}
	dispatch(s);
}

static void fk_on_launch(gmx_policy_t *s, gmx_cmd_t *cmd)
{
	ftask_t *t = &s->task[cmd->task];
	int64_t now = s->dev.now(s->dev.ctx);
	t->host_wait = 0;
	if (s->params.profile_learn)
		learn_flush(t, now - t->p_end);
	if (cmd->leased) { /* released under its lease: in flight already, measured as any */
		if (t->depth && cmd->kernel_id && t->prof && !gmx_kprof_find(t->prof, cmd->kernel_id, 0))
			lease_forget(s, t); /* a kernel never measured: its duration is unknown */
		account_release(s, cmd->task, cmd, cmd_pred(s, t, cmd));
		dispatch(s);
		return;
	}
	if (!t->queue.head)
		t->head_since = now;
	gmx_cmd_queue_push(&t->queue, cmd);
	note(s, cmd->task);
	dispatch(s);
}

static void fk_on_complete(gmx_policy_t *s, gmx_cmd_t *cmd)
{
	ftask_t *t = &s->task[cmd->task];
	int64_t now = s->dev.now(s->dev.ctx);
	if (t->inflight)
		t->inflight--;
	note(s, cmd->task);
	int64_t released = -1;
	for (uint32_t k = 0; k < t->span; k++) {
		uint32_t r = (t->done_at + k) % t->span;
		if (t->slot[r].used && t->slot[r].seq == cmd->seq) {
			released = t->slot[r].released;
			t->slot[r].used = 0;
			t->pred_sum -= t->slot[r].pred;
			t->done_at = (r + 1) % t->span;
			break;
		}
	}
	/* Re-base the task's predicted busy time on what is still in flight. */
	t->busy_until = now + t->pred_sum;
	if (released >= 0)
		lease_learn(s, t, now - (t->prev_done > released ? t->prev_done : released));
	if (cmd->kind == GMX_OP_KERNEL && cmd->kernel_id) {
		uint64_t ctx = t->last_id;
		if (t->host_wait && !t->queue.head && !t->inflight)
			ctx = GMX_KPROF_AFTER_SYNC(ctx);
		if (s->params.profile_learn && t->prof && released >= 0 && !t->done) {
			int64_t began = released;
			if (t->prev_done > began)
				began = t->prev_done;
			learn_flush(t, 0);
			t->pending = 1;
			t->p_id = cmd->kernel_id;
			t->p_prev = ctx;
			t->p_dur = now - began;
			t->p_end = now;
			if (t->queue.head || t->inflight)
				learn_flush(t, 0); /* the next command was already waiting */
		}
		t->last_prev = ctx;
		t->last_id = cmd->kernel_id;
	}
	t->prev_done = now;
	t->last_end = now;
	dispatch(s);
}

static void fk_on_timer(gmx_policy_t *s)
{
	dispatch(s);
}

static void fk_on_host_wait(gmx_policy_t *s, uint32_t task)
{
	if (task < GMX_MAX_TASKS)
		s->task[task].host_wait = 1;
	dispatch(s);
}

const gmx_policy_ops_t gmx_sched_fikit_ops = {
    .name = "fikit",
    .summary = "priority levels; lower levels fill the HP task's predicted idle gaps (BestPrioFit)",
    .flags = GMX_POLICY_SPATIAL | GMX_POLICY_PROFILES | GMX_POLICY_PRIORITY_BLOCKS,
    .create = fk_create,
    .destroy = fk_destroy,
    .task_add = fk_task_add,
    .task_done = fk_task_done,
    .on_launch = fk_on_launch,
    .on_complete = fk_on_complete,
    .on_timer = fk_on_timer,
    .on_host_wait = fk_on_host_wait,
};
