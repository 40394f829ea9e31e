/* The discrete-event engine: per-stream hardware queues, one execution engine
 * shared by contexts, two copy engines, and the memory modes; the host threads
 * that feed it are in host.c. Policies (core/) decide what reaches the
 * hardware queues. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "events.h"
#include "gpumux/mplan.h"
#include "ideal.h"
#include "interference.h"
#include "memspace.h"
#include "msched.h"
#include "profile.h"
#include "sim.h"
#include "um.h"

#include "engine_internal.h"

#define GMX_SIM_PROGRESS_EVERY 0xffffu /* events between two progress calls, less one */

static const char *const mem_names[GMX_MEM_MODE_COUNT] = {
    "inmem", "um", "ideal", "msched", "msched-wholealloc", "msched-serial", "msched-fifo", "gpumux", "msched-belady"};

const char *gmx_mem_mode_name(gmx_mem_mode_t m)
{
	return m < GMX_MEM_MODE_COUNT ? mem_names[m] : "?";
}

int gmx_mem_mode_parse(const char *name)
{
	for (int i = 0; i < GMX_MEM_MODE_COUNT; i++)
		if (!strcmp(name, mem_names[i]))
			return i;
	return -1;
}

void gmx_sim__fail(sim_t *s, int rc, const char *msg)
{
	if (!s->error) {
		s->error = rc;
		snprintf(s->err, s->err_len, "%s", msg);
	}
	s->stop = 1;
}

void gmx_sim__push(sim_t *s, int64_t at, uint32_t kind, uint32_t a, uint64_t b)
{
	if (gmx_events_push(&s->q, at, kind, a, b))
		gmx_sim__fail(s, -ENOMEM, "out of memory for events");
}

/* Schedules the one pending event of command x (START, END, FAULT or
 * RESUME), tagged with its generation so that a preemption can void it. */
static void cmd_push(sim_t *s, scmd_t *x, int64_t at, uint32_t kind)
{
	x->pend_kind = (uint8_t)kind;
	x->pend_at = at;
	gmx_sim__push(s, at, kind, x->gen, (uint64_t)(uintptr_t)x);
}

/* splitmix64: a small, well-known generator; deterministic across platforms. */
uint64_t gmx_sim__rng_next(sim_t *s)
{
	uint64_t z = (s->rng += 0x9e3779b97f4a7c15ull);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

/* ---- device side ---------------------------------------------------------- */

static int64_t dev_now(void *ctx)
{
	return ((sim_t *)ctx)->now;
}

static void try_start(sim_t *s);

/* Puts x in its stream's hardware queue (start: and starts what may start). */
static void hw_submit(sim_t *s, scmd_t *x, int start)
{
	slot_t *sl = &s->t[x->c.task].slots[x->slot];
	x->hw_next = NULL;
	if (sl->hw_tail)
		sl->hw_tail->hw_next = x;
	else
		sl->hw_head = x;
	sl->hw_tail = x;
	if (start)
		try_start(s);
}

static int dev_submit(void *ctx, gmx_cmd_t *c)
{
	sim_t *s = ctx;
	stask_t *tk = &s->t[c->task];
	if (!c->leased && tk->waiting)
		tk->waiting--;
	hw_submit(s, (scmd_t *)c, 1);
	return 0;
}

/* Leases: what the interposer does on a real GPU. A revoke or a narrower bound holds from the
 * next release on (the kernel boundary); what is in flight stays. */
static void dev_lease(void *ctx, uint32_t task, const gmx_lease_t *l)
{
	sim_t *s = ctx;
	s->t[task].lease = l ? *l : (gmx_lease_t){0};
}

int gmx_sim__lease_release(sim_t *s, scmd_t *x)
{
	stask_t *tk = &s->t[x->c.task];
	/* Bounded as the interposer bounds it: what the task has in flight, leased or not. */
	if (!tk->lease.inflight || tk->waiting || tk->outstanding - 1 >= tk->lease.inflight ||
	    (tk->lease.until && s->now >= tk->lease.until))
		return 0;
	x->c.leased = 1;
	tk->leased_now++;
	tk->leased++;
	hw_submit(s, x, 0); /* started once the policy has heard of it, as if it had released it */
	return 1;
}

void gmx_sim__start_ready(sim_t *s)
{
	try_start(s);
}

static void dev_set_timer(void *ctx, int64_t at)
{
	sim_t *s = ctx;
	gmx_sim__push(s, at < s->now ? s->now : at, EV_TIMER, 0, ++s->timer_gen);
}

/* msched's slice rule, when on (the timeline scheduler asks at each turn). */
static int64_t dev_slice_for(void *ctx, uint32_t task)
{
	sim_t *s = ctx;
	return s->ms && s->cfg->mem_slice_auto ? gmx_msched_slice(s->ms, task) : 0;
}

/* The memory planner's estimate of how long the command's pages take to come in. */
static int64_t dev_load_ns(void *ctx, const gmx_cmd_t *c)
{
	sim_t *s = ctx;
	const scmd_t *x = (const scmd_t *)c;
	return s->ms && x->engine == ENG_EXEC ? gmx_msched_load_ns(s->ms, c->task, x->op_index, s->now) : 0;
}

/* The GPU's compute preemption at the end of a time slice: the task's
 * kernels on the execution engine stop where they are (a kernel computing
 * keeps the rest of its run, one waiting for a fault batch or a migration
 * keeps waiting for it) and nothing of it starts there until it is resumed,
 * which costs a context switch. Copy engines are not held. */
static void dev_preempt(void *ctx, uint32_t task, int hold)
{
	sim_t *s = ctx;
	stask_t *tk = &s->t[task];
	if (hold) {
		tk->held = 1;
		for (uint32_t k = 0; k < tk->n_slots; k++) {
			scmd_t *x = tk->slots[k].busy;
			if (!x || x->engine != ENG_EXEC || x->held)
				continue;
			x->held = 1;
			x->gen++; /* voids the pending event */
			if (x->pend_kind == EV_END || x->pend_kind == EV_FAULT)
				x->pend_at -= s->now; /* a run: keep what is left of it */
			if (x->began && s->cfg->timeline) /* the stretch it ran before the cut */
				gmx_sim__record_cmd(s, x);
			if (x->began)
				x->active_ns += s->now - x->seg_start;
			s->running[ENG_EXEC]--;
		}
		try_start(s);
		return;
	}
	tk->held = 0;
	int64_t at = s->now;
	int resumed = 0;
	for (uint32_t k = 0; k < tk->n_slots; k++) {
		scmd_t *x = tk->slots[k].busy;
		if (!x || !x->held)
			continue;
		if (!resumed++ && s->ee_last_task != (int)task)
			at += s->dev->ctx_switch_ns;
		s->ee_task = s->ee_last_task = (int)task;
		x->held = 0;
		s->running[ENG_EXEC]++;
		x->seg_start = at;
		int run = x->pend_kind == EV_END || x->pend_kind == EV_FAULT;
		cmd_push(s, x, run ? at + x->pend_at : (x->pend_at > at ? x->pend_at : at), x->pend_kind);
	}
	try_start(s);
}

/* REEF's reset-based preemption: the task's kernels on the execution engine are
 * killed and lose what they computed; each runs again from its start when the
 * task is resumed (dev_preempt with hold = 0), a kernel that was waiting for a
 * fault batch no earlier than that batch ends (its pages were already counted
 * in). Pages a killed kernel brought in stay resident. Held like a preemption
 * meanwhile; copy engines are not touched. */
static void dev_reset(void *ctx, uint32_t task)
{
	sim_t *s = ctx;
	stask_t *tk = &s->t[task];
	tk->held = 1;
	for (uint32_t k = 0; k < tk->n_slots; k++) {
		scmd_t *x = tk->slots[k].busy;
		if (!x || x->engine != ENG_EXEC)
			continue;
		if (!x->held) {
			x->held = 1;
			x->gen++; /* voids the pending event */
			/* A resumed kernel still in its context switch (seg_start ahead) ran nothing yet. */
			if (x->began && s->now > x->seg_start) {
				if (s->cfg->timeline)
					gmx_sim__record_cmd(s, x);
				x->active_ns += s->now - x->seg_start;
			}
			s->running[ENG_EXEC]--;
		} else if (x->pend_kind == EV_END || x->pend_kind == EV_FAULT) {
			x->pend_at += s->now; /* already held: back to an absolute time for the rules below */
		}
		if (!x->began)
			continue; /* its start is pending: nothing computed, nothing lost */
		if (x->pages_total) {
			/* Demand paging (or msched's fallback): from the first page again. */
			int64_t after = x->pend_kind == EV_RESUME ? x->pend_at : 0;
			x->compute_left = x->dur;
			x->pages_left = x->pages_total;
			memset(&x->cur, 0, sizeof(x->cur));
			x->pend_kind = EV_RESUME;
			x->pend_at = after;
		} else {
			/* Its whole run again (and what it still waited for, under ideal). */
			int64_t left = x->pend_at - s->now;
			x->pend_kind = EV_END;
			x->pend_at = left > x->dur ? left : x->dur;
		}
	}
	try_start(s);
}

/* Whether the cross-stream waits of x are all met (met ones are dropped). */
static int waits_met(sim_t *s, scmd_t *x)
{
	const stask_t *tk = &s->t[x->c.task];
	uint32_t k = 0;
	while (k < x->n_deps) {
		const slot_t *sl = &tk->slots[x->deps[k].slot];
		if (sl->issued - sl->outstanding >= x->deps[k].count)
			x->deps[k] = x->deps[--x->n_deps];
		else
			k++;
	}
	return x->n_deps == 0;
}

static int engine_free(const sim_t *s, uint8_t eng, uint32_t task)
{
	if (eng == ENG_EXEC)
		return s->spatial || s->running[ENG_EXEC] == 0 || s->ee_task == (int)task;
	return s->running[eng] == 0;
}

/* Starts every submitted command whose stream and engine are free, earliest
 * launch first. Commands of one context may overlap on the execution engine
 * (streams run concurrently); different contexts never do. */
static void try_start(sim_t *s)
{
	for (;;) {
		scmd_t *best = NULL;
		for (uint32_t t = 0; t < s->n; t++)
			for (uint32_t k = 0; k < s->t[t].n_slots; k++) {
				slot_t *sl = &s->t[t].slots[k];
				scmd_t *x = sl->hw_head;
				if (!x || sl->busy || (x->engine == ENG_EXEC && s->t[t].held) ||
				    !engine_free(s, x->engine, t) || (x->n_deps && !waits_met(s, x)))
					continue;
				if (!best || x->c.seq < best->c.seq)
					best = x;
			}
		if (!best)
			return;
		stask_t *tk = &s->t[best->c.task];
		slot_t *sl = &tk->slots[best->slot];
		sl->hw_head = best->hw_next;
		if (!sl->hw_head)
			sl->hw_tail = NULL;
		sl->busy = best;
		int64_t at = s->now;
		if (best->issue + s->dev->launch_ns > at)
			at = best->issue + s->dev->launch_ns;
		if (sl->last_end + s->dev->kernel_gap_ns > at && sl->last_end > 0)
			at = sl->last_end + s->dev->kernel_gap_ns;
		if (best->engine == ENG_EXEC) {
			if (!s->spatial && s->ee_last_task >= 0 && s->ee_last_task != (int)best->c.task)
				at += s->dev->ctx_switch_ns; /* spatial: one shared context, no switch */
			s->ee_task = s->ee_last_task = (int)best->c.task;
		}
		s->running[best->engine]++;
		cmd_push(s, best, at, EV_START);
	}
}

static void um_resume(sim_t *s, scmd_t *x);

/* Spatial sharing: brings every running kernel's work up to date, computes
 * its slowdown among the kernels running now (sim/interference.c) and, where
 * the slowdown changed, schedules its end anew (the old end event goes stale). */
static void spatial_update(sim_t *s)
{
	gmx_kernel_load_t load[256];
	uint32_t n = s->n_run < 256 ? s->n_run : 256;
	for (uint32_t i = 0; i < n; i++) {
		scmd_t *x = s->run[i];
		if (x->slow > 0) /* 0: just started */
			x->work_left -= (double)(s->now - x->rate_t) / x->slow;
		if (x->work_left < 0)
			x->work_left = 0;
		x->rate_t = s->now;
		load[i] = (gmx_kernel_load_t){x->c.task, x->c.op ? x->c.op->sm_demand : 0,
					      x->c.op ? x->c.op->klass : GMX_CLASS_UNKNOWN,
					      (int8_t)s->t[x->c.task].cfg->priority};
	}
	int prio = (s->cfg->policy->flags & GMX_POLICY_PRIORITY_BLOCKS) != 0;
	for (uint32_t i = 0; i < n; i++) {
		scmd_t *x = s->run[i];
		double f = prio ? gmx_interference_slowdown_prioritized(load, n, i, s->dev->sms)
				: gmx_interference_slowdown(load, n, i, s->dev->sms);
		if (f == x->slow)
			continue;
		x->slow = f;
		x->end_gen++;
		x->ends_pending++;
		gmx_sim__push(s, s->now + (int64_t)ceil(x->work_left * f), EV_END, x->end_gen,
			      (uint64_t)(uintptr_t)x);
	}
}

static void spatial_begin(sim_t *s, scmd_t *x)
{
	if (s->n_run == s->cap_run) {
		uint32_t nc = s->cap_run ? 2 * s->cap_run : 16;
		scmd_t **p = realloc(
		    s->run, nc * sizeof(*p)); // NOLINT(bugprone-sizeof-expression): an array of pointers
		if (!p) {
			gmx_sim__fail(s, -ENOMEM, "out of memory for running kernels");
			return;
		}
		s->run = p;
		s->cap_run = nc;
	}
	x->work_left = (double)x->dur;
	x->slow = 0; /* forces a first end event */
	x->rate_t = s->now;
	x->running = 1;
	s->run[s->n_run++] = x;
	spatial_update(s);
}

static void spatial_end(sim_t *s, scmd_t *x)
{
	for (uint32_t i = 0; i < s->n_run; i++)
		if (s->run[i] == x) {
			s->run[i] = s->run[--s->n_run];
			break;
		}
	x->running = 0;
	spatial_update(s);
}

/* Where each task stands on the round-robin slice timeline, for ideal's
 * ranking: the running task has a whole slice of its own GPU time ahead, the
 * others follow in the order the scheduler takes them, a slice each. The
 * running task is ranked as at the start of its turn (as msched's plan is made
 * at the switch), not by the wall-clock rest of its slice: a turn stretched by
 * loads would otherwise rank the task's own next pages a rotation away, evict
 * them, and stretch the next turn the same way. */
static void ideal_timeline(sim_t *s, uint32_t task)
{
	int64_t S = s->cfg->sched.slice_ns;
	int prio[GMX_MAX_TASKS];
	uint8_t run[GMX_MAX_TASKS];
	uint32_t order[GMX_MAX_TASKS];
	int64_t wait[GMX_MAX_TASKS], left[GMX_MAX_TASKS];
	for (uint32_t t = 0; t < s->n; t++) {
		prio[t] = s->t[t].cfg->priority;
		run[t] = (uint8_t)!s->t[t].done;
		wait[t] = INT64_MAX / 4;
		left[t] = 0;
	}
	uint32_t n = gmx_timeline_order(prio, run, s->n, task, order);
	for (uint32_t k = 0; k < n; k++) {
		wait[order[k]] = (int64_t)k * S;
		left[order[k]] = S;
	}
	gmx_ideal_timeline(s->ideal, wait, left, S, (int64_t)(n ? n - 1 : 0) * S);
}

static void cmd_begin(sim_t *s, scmd_t *x)
{
	stask_t *tk = &s->t[x->c.task];
	const gmx_op_t *op = x->c.op;
	x->started = x->seg_start = s->now;
	x->began = 1;
	if (s->now > x->issue)
		gmx_sim__record_for(s, x, GMX_SPAN_WAIT, x->issue, s->now);
	if (x->engine == ENG_EXEC) {
		tk->exec_unit = x->unit;
		tk->exec_op = x->op_index;
	}
	if (s->spatial && x->engine == ENG_EXEC) {
		spatial_begin(s, x); /* inmem only: run_one refuses other memory modes */
		return;
	}
	if (x->engine != ENG_EXEC || !op->region_count || s->cfg->mem == GMX_MEM_INMEM) {
		cmd_push(s, x, s->now + x->dur, EV_END);
		return;
	}
	if (s->cfg->mem == GMX_MEM_IDEAL) {
		for (uint32_t t = 0; t < s->n; t++)
			s->progress[t] = gmx_ideal_task_time(s->ideal, t, s->t[t].exec_unit, s->t[t].exec_op);
		ideal_timeline(s, x->c.task);
		gmx_ideal_moves_t mv;
		int rc = gmx_ideal_access(s->ideal, x->c.task, x->unit, x->op_index, s->progress, &mv);
		if (rc) {
			gmx_sim__fail(s, rc,
				      rc == -ENOMEM ? "out of memory in the ideal mode's bookkeeping"
						    : "a kernel touches more memory than the device holds");
			return;
		}
		/* The physical limit: every transfer as early as the link allows. An
		 * eviction starts when its copy engine is free, the loads go on the
		 * other copy engine at the same time (full duplex) and may run any time
		 * before the kernel (perfect foresight). Where the space they go into
		 * was still in use then is not asked (a relaxation: the limit may only
		 * err high), except for what the switch constraint below proves. */
		int64_t begin_out = s->d2h_free;
		int64_t begin_in = s->h2d_free;
		if (mv.out_bytes && begin_out > begin_in)
			begin_in = begin_out;
		if (mv.in_bytes)
			s->h2d_free = begin_in + (int64_t)((double)mv.in_bytes / s->dev->link_in_gbps);
		if (mv.out_bytes)
			s->d2h_free = begin_out + (int64_t)((double)mv.out_bytes / s->dev->link_out_gbps);
		int64_t start = s->now;
		if (mv.in_bytes && s->h2d_free > start)
			start = s->h2d_free;
		if (mv.out_bytes && s->d2h_free > start)
			start = s->d2h_free;
		/* The switch constraint: what of the turn's pages cannot have been
		 * resident at the switch crosses the link after the previous turn's
		 * last op has ended, whatever the policy (docs/simulator.md). */
		if (mv.new_turn)
			s->ideal_switch_at = s->ideal_last_end;
		int64_t after = s->ideal_switch_at + (int64_t)((double)mv.after_switch_bytes / s->dev->link_in_gbps);
		if (mv.after_switch_bytes && after > start)
			start = after;
		s->ideal_last_end = start + x->dur;
		gmx_ideal_used_until(s->ideal, start + x->dur);
		cmd_push(s, x, start + x->dur, EV_END);
		return;
	}
	if (s->ms) {
		/* Proactive: start when the kernel's own pages are in; what the
		 * prediction missed faults in through the unified-memory path below. */
		int64_t ready;
		int mrc = gmx_msched_kernel(s->ms, x->c.task, x->op_index, s->now, &ready);
		if (mrc) {
			gmx_sim__fail(s, mrc == -ENOMEM ? -ENOMEM : -ENOSPC,
				      mrc == -ENOMEM ? "out of memory in msched's planner"
						     : "a kernel touches more memory than the device holds");
			return;
		}
		x->pages_total = x->pages_left =
		    gmx_um_access_pages(&tk->w->regions[op->region_first], op->region_count);
		if (ready > s->now) /* its pages are still on their way in */
			gmx_sim__record_for(s, x, GMX_SPAN_STALL, s->now, ready);
		x->compute_left = x->dur;
		memset(&x->cur, 0, sizeof(x->cur));
		cmd_push(s, x, ready, EV_RESUME);
		return;
	}
	/* Unified memory: run until the next missing page, fault, resume. */
	x->pages_total = x->pages_left =
	    gmx_um_access_pages(&tk->w->regions[op->region_first], op->region_count);
	x->compute_left = x->dur;
	memset(&x->cur, 0, sizeof(x->cur));
	um_resume(s, x);
}

static void um_resume(sim_t *s, scmd_t *x)
{
	stask_t *tk = &s->t[x->c.task];
	const gmx_op_t *op = x->c.op;
	int done;
	uint64_t passed = gmx_um_seek_missing(&s->mem, x->c.task, &tk->w->regions[op->region_first],
					      op->region_count, &x->cur, &done);
	if (done) {
		cmd_push(s, x, s->now + x->compute_left, EV_END);
		return;
	}
	if (passed > x->pages_left)
		passed = x->pages_left;
	int64_t run =
	    x->pages_left ? (int64_t)((double)x->compute_left * (double)passed / (double)x->pages_left) : 0;
	x->pages_left -= passed;
	x->compute_left -= run;
	cmd_push(s, x, s->now + run, EV_FAULT);
}

static void um_fault(sim_t *s, scmd_t *x)
{
	stask_t *tk = &s->t[x->c.task];
	const gmx_op_t *op = x->c.op;
	gmx_um_batch_t b;
	int rc = gmx_um_service(&s->mem, s->dev, x->c.task, &tk->w->regions[op->region_first],
				op->region_count, x->cur, ++s->stamp, s->now, &b);
	if (rc) {
		gmx_sim__fail(s, rc, "a fault batch needs more memory than the device holds");
		return;
	}
	int64_t at = s->now;
	if (b.entries) {
		s->faults++;
		s->fault_entries += b.entries;
		s->throttles += b.throttles;
		tk->faults++;
		tk->fault_entries += b.entries;
		int64_t begin = s->um_free > s->now ? s->um_free : s->now; /* one fault handler */
		s->um_free = begin + b.cost_ns;
		at = s->um_free;
		tk->stall_ns += at - s->now;
		gmx_sim__record_for(s, x, GMX_SPAN_STALL, s->now, at);
	}
#ifdef GMX_CHECK_INVARIANTS
	char msg[160];
	if (gmx_memspace_check(&s->mem, msg, sizeof(msg))) {
		gmx_sim__fail(s, -EFAULT, msg);
		return;
	}
#endif
	cmd_push(s, x, at, EV_RESUME);
}


static void free_cmd(sim_t *s, scmd_t *x)
{
	if (x->live_prev)
		x->live_prev->live_next = x->live_next;
	else
		s->live = x->live_next;
	if (x->live_next)
		x->live_next->live_prev = x->live_prev;
	free(x->deps);
	free(x);
}

/* Spatial end events: one per slowdown change; only the latest counts. */
static int spatial_stale(sim_t *s, scmd_t *x, uint32_t gen)
{
	x->ends_pending--;
	if (x->dead) {
		if (!x->ends_pending)
			free_cmd(s, x);
		return 1;
	}
	return gen != x->end_gen;
}

static void cmd_end(sim_t *s, scmd_t *x)
{
	stask_t *tk = &s->t[x->c.task];
	slot_t *sl = &tk->slots[x->slot];
	sl->busy = NULL;
	sl->last_end = s->now;
	sl->outstanding--;
	tk->outstanding--;
	s->running[x->engine]--;
	s->kernels++;
	if (x->engine == ENG_EXEC)
		tk->gpu_ns += x->active_ns + (s->now - x->seg_start);
	if (s->cfg->timeline)
		gmx_sim__record_cmd(s, x);
	tk->done_gpu_ns += (double)x->dur;
	if (x->running)
		spatial_end(s, x);
	if (x->c.leased)
		tk->leased_now--;
	s->cfg->policy->on_complete(s->policy, &x->c);
	if (x->ends_pending)
		x->dead = 1; /* freed when its last stale end event is popped */
	else
		free_cmd(s, x);
	gmx_sim__host_wake(s, (uint32_t)(tk - s->t));
	try_start(s);
}

/* ---- set-up and the loop --------------------------------------------------- */

static int cmp_u32(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
	return (x > y) - (x < y);
}

/* Numbers the workload's events densely and sizes the wait matrix; nothing
 * when it has no RECORD or WAIT. 0 or -ENOMEM. */
static int build_events(stask_t *tk)
{
	const gmx_workload_t *w = tk->w;
	uint32_t n = 0;
	for (uint32_t k = 0; k < w->n_ops; k++)
		n += w->ops[k].kind == GMX_OP_RECORD || w->ops[k].kind == GMX_OP_WAIT;
	if (!n)
		return 0;
	uint32_t *ids = malloc(n * sizeof(*ids));
	tk->ev_of_op = calloc(w->n_ops, sizeof(*tk->ev_of_op));
	tk->ev_slot = calloc(n, sizeof(*tk->ev_slot));
	tk->ev_count = calloc(n, sizeof(*tk->ev_count));
	tk->need = calloc((size_t)tk->n_slots * tk->n_slots, sizeof(*tk->need));
	if (!ids || !tk->ev_of_op || !tk->ev_slot || !tk->ev_count || !tk->need) {
		free(ids);
		return -ENOMEM;
	}
	n = 0;
	for (uint32_t k = 0; k < w->n_ops; k++)
		if (w->ops[k].kind == GMX_OP_RECORD || w->ops[k].kind == GMX_OP_WAIT)
			ids[n++] = w->ops[k].event;
	qsort(ids, n, sizeof(*ids), cmp_u32);
	uint32_t u = 0;
	for (uint32_t k = 0; k < n; k++)
		if (!u || ids[u - 1] != ids[k])
			ids[u++] = ids[k];
	for (uint32_t k = 0; k < w->n_ops; k++) {
		if (w->ops[k].kind != GMX_OP_RECORD && w->ops[k].kind != GMX_OP_WAIT)
			continue;
		uint32_t lo = 0, hi = u; /* ids[lo] == the op's event */
		while (hi - lo > 1) {
			uint32_t mid = lo + (hi - lo) / 2;
			if (ids[mid] <= w->ops[k].event)
				lo = mid;
			else
				hi = mid;
		}
		tk->ev_of_op[k] = lo;
	}
	free(ids);
	return 0;
}

static int build_task(sim_t *s, uint32_t i)
{
	stask_t *tk = &s->t[i];
	const gmx_sim_task_t *c = &s->cfg->tasks[i];
	tk->cfg = c;
	tk->w = c->workload;
	tk->wait_stream = -1;
	tk->slots = calloc(64, sizeof(slot_t));
	if (!tk->slots)
		return -ENOMEM;
	uint32_t cap = 64;
	for (uint32_t k = 0; k < tk->w->n_ops; k++) {
		const gmx_op_t *op = &tk->w->ops[k];
		if (op->kind == GMX_OP_SYNC || op->kind == GMX_OP_ALLOC || op->kind == GMX_OP_FREE)
			continue;
		uint32_t j = 0;
		while (j < tk->n_slots && tk->slots[j].stream != op->stream)
			j++;
		if (j < tk->n_slots)
			continue;
		if (tk->n_slots == cap) {
			slot_t *p = realloc(tk->slots, 2 * (size_t)cap * sizeof(*p));
			if (!p)
				return -ENOMEM;
			memset(p + cap, 0, cap * sizeof(*p));
			tk->slots = p;
			cap *= 2;
		}
		tk->slots[tk->n_slots++].stream = op->stream;
	}
	int rc = build_events(tk);
	if (rc)
		return rc;
	/* Durations were measured on the workload's device; rescale to this one. */
	tk->scale_mem = tk->scale_compute = 1.0;
	const gmx_preset_t *ref = tk->w->device ? gmx_preset_find(tk->w->device) : NULL;
	if (ref && ref != s->dev) {
		tk->scale_mem = ref->hbm_gbps / s->dev->hbm_gbps;
		tk->scale_compute = ref->fp32_tflops / s->dev->fp32_tflops;
	}
	for (uint32_t k = 0; k < tk->w->n_ops; k++)
		tk->unit_gpu_ns += (double)gmx_sim__op_duration(s, tk, &tk->w->ops[k]);
	if (c->arrival != GMX_ARRIVAL_CLOSED) {
		tk->arr_cap = 1024;
		tk->arrivals = calloc(tk->arr_cap, sizeof(int64_t));
		if (!tk->arrivals)
			return -ENOMEM;
	}
	return 0;
}

static double percentile(double *v, uint64_t n, double q)
{
	if (!n)
		return -1;
	uint64_t rank = (uint64_t)ceil(q * (double)n);
	if (rank < 1)
		rank = 1;
	return v[rank - 1];
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

static void collect(sim_t *s, gmx_sim_result_t *r)
{
	r->sim_time_s = (double)s->now / 1e9;
	r->n_tasks = s->n;
	for (uint32_t i = 0; i < s->n; i++) {
		stask_t *tk = &s->t[i];
		gmx_task_result_t *o = &r->tasks[i];
		o->name = tk->cfg->name;
		o->priority = tk->cfg->priority;
		o->units = tk->units_done;
		/* A closed-loop task's unfinished unit counts by the share of its GPU
		 * work completed, so that slow tasks are measured, not rounded to 0. */
		double frac = 0;
		if (!tk->done && tk->cfg->arrival == GMX_ARRIVAL_CLOSED && tk->unit_gpu_ns > 0)
			frac = tk->done_gpu_ns / tk->unit_gpu_ns;
		if (frac > 1)
			frac = 1;
		o->progress = (double)tk->units_done + frac;
		o->active_s = (double)(tk->done ? tk->done_time : s->now) / 1e9;
		o->throughput_per_s = o->active_s > 0 ? o->progress / o->active_s : 0;
		o->jct_s = tk->done ? (double)tk->done_time / 1e9 : -1;
		if (tk->n_lat)
			qsort(tk->lat, tk->n_lat, sizeof(double), cmp_double);
		o->lat_p50_s = percentile(tk->lat, tk->n_lat, 0.50);
		o->lat_p95_s = percentile(tk->lat, tk->n_lat, 0.95);
		o->lat_p99_s = percentile(tk->lat, tk->n_lat, 0.99);
		o->gpu_s = (double)tk->gpu_ns / 1e9;
		o->stall_s = (double)tk->stall_ns / 1e9;
		o->faults = tk->faults;
		o->fault_entries = tk->fault_entries;
		o->h2d_bytes = s->mem.task_h2d[i];
		o->d2h_bytes = s->mem.task_d2h[i];
	}
	r->faults += s->faults;
	r->fault_entries += s->fault_entries;
	r->throttles += s->throttles;
	r->kernels += s->kernels;
	r->events += s->events;
	if (s->ms)
		gmx_msched_stats(s->ms, &r->msched);
	if (s->cfg->mem == GMX_MEM_UM || s->ms) {
		r->h2d_bytes += s->mem.h2d_bytes;
		r->d2h_bytes += s->mem.d2h_bytes;
	} else if (s->cfg->mem == GMX_MEM_IDEAL) {
		uint64_t in, out;
		gmx_ideal_totals(s->ideal, &in, &out);
		r->h2d_bytes += in;
		r->d2h_bytes += out;
	}
}

/* Ends the warm-up: what happened so far is not measured. Latency samples
 * restart; everything else is subtracted from the end figures. */
static void warmup_end(sim_t *s)
{
	s->warm = calloc(1, sizeof(*s->warm));
	if (!s->warm) {
		gmx_sim__fail(s, -ENOMEM, "out of memory ending the warm-up");
		return;
	}
	collect(s, s->warm);
	for (uint32_t i = 0; i < s->n; i++)
		s->t[i].n_lat = 0;
}

/* Turns whole-run figures r into the measured window's, given the warm-up's w. */
static void subtract_warmup(gmx_sim_result_t *r, const gmx_sim_result_t *w)
{
	r->warmup_s = w->sim_time_s;
	for (uint32_t i = 0; i < r->n_tasks; i++) {
		gmx_task_result_t *o = &r->tasks[i];
		const gmx_task_result_t *b = &w->tasks[i];
		o->units -= b->units;
		o->progress -= b->progress;
		o->active_s -= b->active_s;
		o->throughput_per_s = o->active_s > 0 ? o->progress / o->active_s : 0;
		o->gpu_s -= b->gpu_s;
		o->stall_s -= b->stall_s;
		o->faults -= b->faults;
		o->fault_entries -= b->fault_entries;
		o->h2d_bytes -= b->h2d_bytes;
		o->d2h_bytes -= b->d2h_bytes;
	}
	r->faults -= w->faults;
	r->fault_entries -= w->fault_entries;
	r->throttles -= w->throttles;
	r->h2d_bytes -= w->h2d_bytes;
	r->d2h_bytes -= w->d2h_bytes;
	r->kernels -= w->kernels;
	r->events -= w->events;
	r->msched.switches -= w->msched.switches;
	r->msched.planned_in_bytes -= w->msched.planned_in_bytes;
	r->msched.topup_in_bytes -= w->msched.topup_in_bytes;
	r->msched.predicted_missing -= w->msched.predicted_missing;
}

static void destroy(sim_t *s)
{
	free(s->warm);
	if (s->policy)
		s->cfg->policy->destroy(s->policy);
	for (uint32_t i = 0; i < s->n && s->t; i++) {
		stask_t *tk = &s->t[i];
		free(tk->slots);
		free(tk->need);
		free(tk->ev_of_op);
		free(tk->ev_slot);
		free(tk->ev_count);
		free(tk->arrivals);
		free(tk->lat);
	}
	for (scmd_t *x = s->live, *nx; x; x = nx) {
		nx = x->live_next;
		free(x->deps);
		free(x);
	}
	free(s->t);
	free(s->run);
	free(s->progress);
	gmx_ideal_destroy(s->ideal);
	gmx_msched_destroy(s->ms);
	gmx_memspace_free(&s->mem);
	gmx_events_free(&s->q);
}

/* Runs one simulation of the configured tasks together. */
static int run_one(const gmx_sim_config_t *cfg, gmx_sim_result_t *res, char *err, size_t err_len)
{
	sim_t s = {0};
	s.cfg = cfg;
	s.dev = cfg->device;
	s.n = cfg->n_tasks;
	s.err = err;
	s.err_len = err_len;
	s.ee_task = s.ee_last_task = -1;
	s.rng = cfg->seed;
	s.spatial = (cfg->policy->flags & GMX_POLICY_SPATIAL) != 0;
	if (s.spatial && cfg->mem != GMX_MEM_INMEM) {
		snprintf(err, err_len,
			 "scheduler %s shares the engine between contexts, which the simulator models "
			 "with unlimited memory only (--mem inmem)",
			 cfg->policy->name);
		return -EINVAL;
	}
	s.t = calloc(s.n ? s.n : 1, sizeof(stask_t));
	s.progress = calloc(s.n ? s.n : 1, sizeof(int64_t));
	int rc = (!s.t || !s.progress) ? -ENOMEM : 0;
	for (uint32_t i = 0; !rc && i < s.n; i++)
		rc = build_task(&s, i);
	const gmx_workload_t *ws[GMX_MAX_TASKS];
	for (uint32_t i = 0; i < s.n; i++)
		ws[i] = cfg->tasks[i].workload;
	if (!rc && cfg->mem != GMX_MEM_INMEM) {
		rc = gmx_memspace_init(&s.mem, ws, s.n, cfg->capacity_bytes);
		if (!rc && cfg->mem == GMX_MEM_UM && (cfg->policy->flags & GMX_POLICY_UM_PRIORITY)) {
			int prio[GMX_MAX_TASKS];
			for (uint32_t i = 0; i < s.n; i++)
				prio[i] = cfg->tasks[i].priority;
			gmx_memspace_prio_evict(&s.mem, prio);
		}
		if (!rc && (cfg->mem == GMX_MEM_UM || cfg->mem >= GMX_MEM_MSCHED))
			gmx_memspace_warm(&s.mem);
		if (!rc && cfg->timeline) {
			s.mem.note = gmx_sim__note_migration;
			s.mem.note_ctx = &s;
		}
		if (!rc && cfg->mem >= GMX_MEM_MSCHED)
			rc = gmx_msched_create(&s.mem, s.dev, cfg->tasks, s.n,
					       (gmx_msched_variant_t)(cfg->mem - GMX_MEM_MSCHED),
					       cfg->sched.slice_ns, cfg->templates, &s.ms);
		if (!rc && s.ms)
			gmx_msched_slice_rule(s.ms, cfg->mem_slice_auto);
		if (!rc && cfg->mem == GMX_MEM_IDEAL)
			rc = gmx_ideal_create(&s.mem, ws, s.n, cfg->capacity_bytes, &s.ideal);
	}
	gmx_device_t dev = {.ctx = &s,
			    .now = dev_now,
			    .submit = dev_submit,
			    .migrate = NULL,
			    .set_timer = dev_set_timer,
			    .preempt = dev_preempt,
			    .slice_for = dev_slice_for,
			    .lease = dev_lease,
			    .reset = dev_reset,
			    .sms = s.dev->sms,
			    .load_ns = dev_load_ns};
	if (!rc)
		rc = cfg->policy->create(&cfg->sched, &dev, &s.policy);
	for (uint32_t i = 0; !rc && i < s.n; i++)
		rc = cfg->policy->task_add(s.policy, i, cfg->tasks[i].priority);
	if (rc) {
		snprintf(err, err_len, "cannot set up the simulation: %s", strerror(-rc));
		destroy(&s);
		return rc;
	}
	for (uint32_t i = 0; i < s.n; i++) {
		if (cfg->tasks[i].arrival == GMX_ARRIVAL_CLOSED)
			gmx_sim__start_unit(&s, i, 0);
		else {
			s.t[i].host = HOST_IDLE;
			gmx_sim__next_arrival(&s, i);
		}
	}
	int64_t warmup = cfg->warmup_ns > 0 ? cfg->warmup_ns : 0;
	if (warmup)
		gmx_sim__push(&s, warmup, EV_WARMUP, 0, 0);
	gmx_sim__push(&s, warmup + cfg->duration_ns, EV_STOP, 0, 0);
	gmx_event_t e;
	const double span_ns = (double)(warmup + cfg->duration_ns);
	while (!s.stop && !gmx_events_pop(&s.q, &e)) {
		s.now = e.time;
		s.events++;
		if (cfg->progress && !(s.events & GMX_SIM_PROGRESS_EVERY))
			cfg->progress(cfg->progress_ctx, (double)s.now / span_ns);
		scmd_t *x = (scmd_t *)(uintptr_t)e.b;
		switch (e.kind) {
		case EV_HOST:
			gmx_sim__host_run(&s, e.a);
			break;
		case EV_ARRIVAL:
			gmx_sim__on_arrival(&s, e.a);
			break;
		case EV_START:
			if (e.a == x->gen)
				cmd_begin(&s, x);
			break;
		case EV_FAULT:
			if (e.a == x->gen)
				um_fault(&s, x);
			break;
		case EV_RESUME:
			if (e.a == x->gen)
				um_resume(&s, x);
			break;
		case EV_END:
			if (s.spatial && x->engine == ENG_EXEC) {
				if (spatial_stale(&s, x, e.a))
					break;
			} else if (e.a != x->gen) {
				break;
			}
			cmd_end(&s, x);
			break;
		case EV_TIMER:
			if (e.b == s.timer_gen)
				cfg->policy->on_timer(s.policy);
			break;
		case EV_WARMUP:
			warmup_end(&s);
			break;
		case EV_STOP:
			s.stop = 1;
			break;
		}
	}
	rc = s.error;
	if (!rc) {
		collect(&s, res);
		if (s.warm)
			subtract_warmup(res, s.warm);
		if ((cfg->mem == GMX_MEM_UM || s.ms) && gmx_memspace_check(&s.mem, err, err_len))
			rc = -EFAULT;
		if (cfg->mem == GMX_MEM_IDEAL && gmx_ideal_check(s.ideal)) {
			snprintf(err, err_len, "ideal: resident pages exceed capacity");
			rc = -EFAULT;
		}
	}
	destroy(&s);
	return rc;
}

struct span {
	uint32_t buffer;
	uint64_t lo, hi; /* chunk range within the buffer, inclusive */
};

static int span_cmp(const void *a, const void *b)
{
	const struct span *x = a, *y = b;
	if (x->buffer != y->buffer)
		return x->buffer < y->buffer ? -1 : 1;
	return (x->lo > y->lo) - (x->lo < y->lo);
}

/* Sets *bytes to the bytes of the distinct 2 MB chunks kernel op touches (what it
 * needs resident at once). 0 or -ENOMEM. */
static int kernel_chunk_bytes(const gmx_workload_t *w, const gmx_op_t *op, uint64_t *bytes)
{
	struct span *s = calloc(op->region_count ? op->region_count : 1, sizeof(*s));
	if (!s)
		return -ENOMEM;
	for (uint32_t i = 0; i < op->region_count; i++) {
		const gmx_region_t *r = &w->regions[op->region_first + i];
		s[i] = (struct span){r->buffer, r->offset >> 21, (r->offset + (r->length ? r->length : 1) - 1) >> 21};
	}
	qsort(s, op->region_count, sizeof(*s), span_cmp);
	uint64_t chunks = 0;
	for (uint32_t i = 0; i < op->region_count;) {
		uint32_t b = s[i].buffer;
		uint64_t lo = s[i].lo, hi = s[i].hi;
		for (i++; i < op->region_count && s[i].buffer == b && s[i].lo <= hi + 1; i++)
			hi = s[i].hi > hi ? s[i].hi : hi;
		chunks += hi - lo + 1;
	}
	free(s);
	*bytes = chunks << 21;
	return 0;
}

/* The one rule for a kernel that needs more memory than the device holds: every
 * memory mode but inmem refuses the scenario before it runs (none can model a
 * kernel that evicts its own pages). 0, -E2BIG with the task and kernel named,
 * or -ENOMEM. */
static int check_kernels_fit(const gmx_sim_config_t *cfg, char *err, size_t err_len)
{
	if (cfg->mem == GMX_MEM_INMEM)
		return 0;
	for (uint32_t t = 0; t < cfg->n_tasks; t++) {
		const gmx_workload_t *w = cfg->tasks[t].workload;
		for (uint32_t i = 0; i < w->n_ops; i++) {
			const gmx_op_t *op = &w->ops[i];
			if (op->kind != GMX_OP_KERNEL || !op->region_count)
				continue;
			uint64_t need = 0;
			if (kernel_chunk_bytes(w, op, &need)) {
				snprintf(err, err_len, "out of memory checking the kernels' sizes");
				return -ENOMEM;
			}
			if (need <= cfg->capacity_bytes)
				continue;
			snprintf(err, err_len,
				 "task %s: kernel %s (op %u) touches %.2f GiB (in 2 MiB chunks), more than the %.2f GiB "
				 "of device memory: --mem %s cannot run it (only inmem can; give the device more memory "
				 "or the task a smaller size)",
				 cfg->tasks[t].name ? cfg->tasks[t].name : "?", w->names[op->name], i, need / GMX_GIB,
				 cfg->capacity_bytes / GMX_GIB, gmx_mem_mode_name(cfg->mem));
			return -E2BIG;
		}
	}
	return 0;
}

/* A task the rotation can skip: one whose host leaves the device for longer
 * than the timeline scheduler's grace (1 ms) between launches, or open loop. */
static int may_miss_turns(const gmx_sim_task_t *t)
{
	if (t->arrival != GMX_ARRIVAL_CLOSED)
		return 1;
	for (uint32_t i = 0; i < t->workload->n_ops; i++)
		if (t->workload->ops[i].think_ns >= 1000000)
			return 1;
	return 0;
}

/* The memory limit under the timeline scheduler. How the rotation falls for
 * a task whose host is busy between units depends on how long the others'
 * turns last, and a memory policy that makes them longer can have it ready at
 * each of its turns where faster memory makes it miss them. The limit grants
 * every such task that best phase: its figures come from a run in which its
 * turn waits for it (sched.hold_task), when they beat the plain run's. */
static int run_ideal(const gmx_sim_config_t *cfg, gmx_sim_result_t *res, char *err, size_t err_len)
{
	int rc = run_one(cfg, res, err, err_len);
	for (uint32_t h = 0; h < cfg->n_tasks && !rc; h++) {
		if (cfg->n_tasks < 2 || !may_miss_turns(&cfg->tasks[h]))
			continue;
		gmx_sim_config_t held = *cfg;
		held.sched.hold_task = h + 1;
		gmx_sim_result_t *r = calloc(1, sizeof(*r));
		if (!r)
			return -ENOMEM;
		rc = run_one(&held, r, err, err_len);
		if (!rc && r->tasks[h].throughput_per_s > res->tasks[h].throughput_per_s)
			res->tasks[h] = r->tasks[h];
		free(r);
	}
	return rc;
}

int gmx_sim_run(const gmx_sim_config_t *cfg, gmx_sim_result_t *res, char *err, size_t err_len)
{
	memset(res, 0, sizeof(*res));
	uint64_t footprint = 0;
	for (uint32_t i = 0; i < cfg->n_tasks; i++)
		footprint += gmx_workload_footprint(cfg->tasks[i].workload);
	res->capacity_bytes = cfg->capacity_bytes;
	res->footprint_bytes = footprint;
	if (cfg->n_tasks == 0 || cfg->n_tasks > GMX_MAX_TASKS) {
		snprintf(err, err_len, "a scenario needs 1 to %d tasks, not %u", GMX_MAX_TASKS, cfg->n_tasks);
		return -EINVAL;
	}
	if (footprint > cfg->device->host_bytes) {
		snprintf(err, err_len, "the tasks' memory (%.1f GiB) exceeds the host memory of %s (%.1f GiB)",
			 footprint / GMX_GIB, cfg->device->name, cfg->device->host_bytes / GMX_GIB);
		return -E2BIG;
	}
	int rc = check_kernels_fit(cfg, err, err_len);
	if (rc)
		return rc;
	if (cfg->mem == GMX_MEM_IDEAL && strcmp(cfg->policy->name, "timeline") == 0)
		return run_ideal(cfg, res, err, err_len);
	if (strcmp(cfg->policy->name, "exclusive") != 0)
		return run_one(cfg, res, err, err_len);
	/* Each task alone, one after another: one run per task, times added up. */
	double total = 0;
	for (uint32_t i = 0; i < cfg->n_tasks; i++) {
		gmx_sim_config_t one = *cfg;
		one.tasks = &cfg->tasks[i];
		one.n_tasks = 1;
		gmx_sim_result_t r;
		memset(&r, 0, sizeof(r));
		rc = run_one(&one, &r, err, err_len);
		if (rc)
			return rc;
		res->tasks[i] = r.tasks[0];
		res->faults += r.faults;
		res->fault_entries += r.fault_entries;
		res->throttles += r.throttles;
		res->h2d_bytes += r.h2d_bytes;
		res->d2h_bytes += r.d2h_bytes;
		res->kernels += r.kernels;
		res->events += r.events;
		res->warmup_s += r.warmup_s;
		total += r.sim_time_s;
	}
	res->n_tasks = cfg->n_tasks;
	res->sim_time_s = total;
	return 0;
}
