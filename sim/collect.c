/* The figures of a run (gmx_sim_result_t) taken from the simulator's state,
 * and the warm-up that is not measured. */
#include <errno.h>
#include <math.h>
#include <stdlib.h>

#include "ideal.h"
#include "msched.h"

#include "engine_internal.h"

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

void gmx_sim__collect(sim_t *s, gmx_sim_result_t *r)
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
void gmx_sim__warmup_end(sim_t *s)
{
	s->warm = calloc(1, sizeof(*s->warm));
	if (!s->warm) {
		gmx_sim__fail(s, -ENOMEM, "out of memory ending the warm-up");
		return;
	}
	gmx_sim__collect(s, s->warm);
	for (uint32_t i = 0; i < s->n; i++)
		s->t[i].n_lat = 0;
}

/* Turns whole-run figures r into the measured window's, given the warm-up's w. */
void gmx_sim__subtract_warmup(gmx_sim_result_t *r, const gmx_sim_result_t *w)
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
	r->msched.forgone_turns -= w->msched.forgone_turns;
	r->msched.planned_in_bytes -= w->msched.planned_in_bytes;
	r->msched.topup_in_bytes -= w->msched.topup_in_bytes;
	r->msched.prefetch_in_bytes -= w->msched.prefetch_in_bytes;
	r->msched.ahead_in_bytes -= w->msched.ahead_in_bytes;
	r->msched.predicted_missing -= w->msched.predicted_missing;
}
