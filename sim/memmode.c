/* The memory modes' hooks on the device: a kernel's start under ideal (the
 * physical limit), under msched's proactive plan and under unified memory
 * (run until the next missing page, fault, resume). */
#include <errno.h>
#include <stdint.h>
#include <string.h>

#include "gpumux/mplan.h"
#include "ideal.h"
#include "memspace.h"
#include "msched.h"
#include "um.h"

#include "engine_internal.h"

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

void gmx_sim__ideal_begin(sim_t *s, scmd_t *x)
{
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
	gmx_sim__cmd_push(s, x, start + x->dur, EV_END);
}

void gmx_sim__msched_begin(sim_t *s, scmd_t *x)
{
	stask_t *tk = &s->t[x->c.task];
	const gmx_op_t *op = x->c.op;
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
	    gmx_um_access_pages(&s->mem, x->c.task, &tk->w->regions[op->region_first], op->region_count);
	if (ready > s->now) /* its pages are still on their way in */
		gmx_sim__record_for(s, x, GMX_SPAN_STALL, s->now, ready);
	x->compute_left = x->dur;
	memset(&x->cur, 0, sizeof(x->cur));
	gmx_sim__cmd_push(s, x, ready, EV_RESUME);
}

void gmx_sim__msched_end(sim_t *s, scmd_t *x)
{
	if (gmx_msched_op_end(s->ms, x->c.task, x->op_index, s->now))
		gmx_sim__fail(s, -ENOMEM, "out of memory in msched's planner");
}

void gmx_sim__um_begin(sim_t *s, scmd_t *x)
{
	stask_t *tk = &s->t[x->c.task];
	const gmx_op_t *op = x->c.op;
	x->pages_total = x->pages_left =
	    gmx_um_access_pages(&s->mem, x->c.task, &tk->w->regions[op->region_first], op->region_count);
	x->compute_left = x->dur;
	memset(&x->cur, 0, sizeof(x->cur));
	gmx_sim__um_resume(s, x);
}

void gmx_sim__um_resume(sim_t *s, scmd_t *x)
{
	stask_t *tk = &s->t[x->c.task];
	const gmx_op_t *op = x->c.op;
	int done;
	uint64_t passed = gmx_um_seek_missing(&s->mem, x->c.task, &tk->w->regions[op->region_first],
					      op->region_count, &x->cur, &done);
	if (done) {
		gmx_sim__cmd_push(s, x, s->now + x->compute_left, EV_END);
		return;
	}
	if (passed > x->pages_left)
		passed = x->pages_left;
	int64_t run =
	    x->pages_left ? (int64_t)((double)x->compute_left * (double)passed / (double)x->pages_left) : 0;
	x->pages_left -= passed;
	x->compute_left -= run;
	gmx_sim__cmd_push(s, x, s->now + run, EV_FAULT);
}

void gmx_sim__um_fault(sim_t *s, scmd_t *x)
{
	stask_t *tk = &s->t[x->c.task];
	const gmx_op_t *op = x->c.op;
	gmx_um_batch_t b;
	int rc = gmx_um_service(&s->mem, s->dev, x->c.task, op, &tk->w->regions[op->region_first],
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
	gmx_sim__cmd_push(s, x, at, EV_RESUME);
}

