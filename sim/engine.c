/* The discrete-event device: per-stream hardware queues, one execution engine
 * shared by contexts (spatial sharing included), two copy engines, and the
 * events that drive them. The memory modes' hooks are in memmode.c, the host
 * threads that feed the device in host.c, set-up and the run loop in run.c.
 * Policies (core/) decide what reaches the hardware queues. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "events.h"
#include "interference.h"
#include "msched.h"
#include "sim.h"

#include "engine_internal.h"

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
void gmx_sim__cmd_push(sim_t *s, scmd_t *x, int64_t at, uint32_t kind)
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
		gmx_sim__cmd_push(s, x, run ? at + x->pend_at : (x->pend_at > at ? x->pend_at : at), x->pend_kind);
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
		gmx_sim__cmd_push(s, best, at, EV_START);
	}
}

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
		gmx_sim__cmd_push(s, x, s->now + x->dur, EV_END);
		return;
	}
	if (s->cfg->mem == GMX_MEM_IDEAL)
		gmx_sim__ideal_begin(s, x);
	else if (s->ms)
		gmx_sim__msched_begin(s, x);
	else
		gmx_sim__um_begin(s, x);
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
	if (s->ms && x->engine == ENG_EXEC && x->c.op->region_count && s->cfg->mem != GMX_MEM_IDEAL &&
	    s->cfg->mem != GMX_MEM_INMEM)
		gmx_sim__msched_end(s, x);
	s->cfg->policy->on_complete(s->policy, &x->c);
	if (x->ends_pending)
		x->dead = 1; /* freed when its last stale end event is popped */
	else
		free_cmd(s, x);
	gmx_sim__host_wake(s, (uint32_t)(tk - s->t));
	try_start(s);
}


gmx_device_t gmx_sim__device(sim_t *s)
{
	return (gmx_device_t){.ctx = s,
			      .now = dev_now,
			      .submit = dev_submit,
			      .migrate = NULL,
			      .set_timer = dev_set_timer,
			      .preempt = dev_preempt,
			      .slice_for = dev_slice_for,
			      .lease = dev_lease,
			      .reset = dev_reset,
			      .sms = s->dev->sms,
			      .load_ns = dev_load_ns};
}

void gmx_sim__dispatch(sim_t *s, const gmx_event_t *e)
{
	scmd_t *x = (scmd_t *)(uintptr_t)e->b;
	switch (e->kind) {
	case EV_HOST:
		gmx_sim__host_run(s, e->a);
		break;
	case EV_ARRIVAL:
		gmx_sim__on_arrival(s, e->a);
		break;
	case EV_START:
		if (e->a == x->gen)
			cmd_begin(s, x);
		break;
	case EV_FAULT:
		if (e->a == x->gen)
			gmx_sim__um_fault(s, x);
		break;
	case EV_RESUME:
		if (e->a == x->gen)
			gmx_sim__um_resume(s, x);
		break;
	case EV_END:
		if (s->spatial && x->engine == ENG_EXEC) {
			if (spatial_stale(s, x, e->a))
				break;
		} else if (e->a != x->gen) {
			break;
		}
		cmd_end(s, x);
		break;
	case EV_TIMER:
		if (e->b == s->timer_gen)
			s->cfg->policy->on_timer(s->policy);
		break;
	case EV_WARMUP:
		gmx_sim__warmup_end(s);
		break;
	case EV_STOP:
		s->stop = 1;
		break;
	}
}
