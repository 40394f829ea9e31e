/* The simulated host threads: each task's host issues its unit's operations in
 * order, waits its think times, blocks at synchronisations and at the end of a
 * unit, and (open loop) waits for arrivals. Closed loop: a slower device delays
 * the host's later launches. */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "engine_internal.h"
#include "limit.h"
#include "profile.h"

static int64_t seconds_ns(double sec)
{
	return (int64_t)llround(sec * 1e9);
}

void gmx_sim__start_unit(sim_t *s, uint32_t t, int64_t started)
{
	stask_t *tk = &s->t[t];
	tk->pc = 0;
	tk->unit_start = started;
	tk->host = HOST_RUNNING;
	gmx_sim__push(s, s->now + (int64_t)tk->w->ops[0].think_ns, EV_HOST, t, 0);
}

void gmx_sim__next_arrival(sim_t *s, uint32_t t)
{
	stask_t *tk = &s->t[t];
	const gmx_sim_task_t *c = tk->cfg;
	double gap;
	if (c->arrival == GMX_ARRIVAL_POISSON) {
		double u = ((double)(gmx_sim__rng_next(s) >> 11) + 0.5) / 9007199254740992.0;
		gap = -log(u) / c->rate_per_s;
	} else {
		gap = c->gaps_s[tk->next_gap++ % c->n_gaps];
	}
	gmx_sim__push(s, s->now + seconds_ns(gap), EV_ARRIVAL, t, 0);
}

static int record_latency(stask_t *tk, double sec)
{
	if (tk->n_lat == tk->cap_lat) {
		uint64_t ncap = tk->cap_lat ? tk->cap_lat * 2 : 256;
		double *p = realloc(tk->lat, ncap * sizeof(*p));
		if (!p)
			return -ENOMEM;
		tk->lat = p;
		tk->cap_lat = ncap;
	}
	tk->lat[tk->n_lat++] = sec;
	return 0;
}

static void unit_complete(sim_t *s, uint32_t t)
{
	stask_t *tk = &s->t[t];
	if (record_latency(tk, (double)(s->now - tk->unit_start) / 1e9))
		gmx_sim__fail(s, -ENOMEM, "out of memory for latencies");
	tk->units_done++;
	tk->unit++;
	tk->pc = 0;
	tk->done_gpu_ns = 0;
	if (tk->cfg->units && tk->units_done >= tk->cfg->units) {
		tk->done = 1;
		tk->done_time = s->now;
		tk->host = HOST_DONE;
		s->cfg->policy->task_done(s->policy, t);
		if (s->ms)
			gmx_msched_task_done(s->ms, t);
		int all = 1;
		for (uint32_t i = 0; i < s->n; i++)
			all &= s->t[i].done;
		if (all)
			s->stop = 1;
		return;
	}
	if (tk->cfg->arrival == GMX_ARRIVAL_CLOSED) {
		gmx_sim__start_unit(s, t, s->now);
	} else if (tk->arr_n) {
		int64_t a = tk->arrivals[tk->arr_head];
		tk->arr_head = (tk->arr_head + 1) % tk->arr_cap;
		tk->arr_n--;
		gmx_sim__start_unit(s, t, a);
	} else {
		tk->host = HOST_IDLE;
	}
}

static uint32_t slot_of(const stask_t *tk, int16_t stream)
{
	for (uint32_t k = 0; k < tk->n_slots; k++)
		if (tk->slots[k].stream == stream)
			return k;
	return 0; /* unreachable: slots are built from the workload's own streams */
}

static int sync_satisfied(const stask_t *tk)
{
	if (tk->wait_unit_end || tk->wait_stream < 0)
		return tk->outstanding == 0;
	return tk->slots[slot_of(tk, tk->wait_stream)].outstanding == 0;
}

/* Solo time of a GPU op on this device: copies at the link rate unless the
 * workload recorded their time; kernels rescaled from the workload's device. */
int64_t gmx_sim__op_duration(const sim_t *s, const stask_t *tk, const gmx_op_t *op)
{
	return gmx_sim_solo_ns(s->dev, tk->scale_mem, tk->scale_compute, op);
}

void gmx_sim_scales(const gmx_preset_t *dev, const gmx_workload_t *w, double *scale_mem, double *scale_compute)
{
	*scale_mem = *scale_compute = 1.0;
	const gmx_preset_t *ref = w->device ? gmx_preset_find(w->device) : NULL;
	if (ref && ref != dev) {
		*scale_mem = ref->hbm_gbps / dev->hbm_gbps;
		*scale_compute = ref->fp32_tflops / dev->fp32_tflops;
	}
}

int64_t gmx_sim_solo_ns(const gmx_preset_t *dev, double scale_mem, double scale_compute, const gmx_op_t *op)
{
	double d = (double)op->duration_ns;
	switch (op->kind) {
	case GMX_OP_COPY_H2D:
	case GMX_OP_COPY_D2H:
		if (!op->duration_ns)
			d = (double)op->bytes / dev->link_serial_gbps;
		break;
	case GMX_OP_COPY_D2D: /* read and write the bytes at memory bandwidth */
		if (!op->duration_ns) {
			d = 2.0 * (double)op->bytes / dev->hbm_gbps;
			break;
		}
		d *= scale_mem;
		break;
	case GMX_OP_KERNEL:
	case GMX_OP_MEMSET:
		d *= op->klass == GMX_CLASS_COMPUTE ? scale_compute
		     : op->klass == GMX_CLASS_MEMORY ? scale_mem
						      : sqrt(scale_compute * scale_mem);
		break;
	default:
		return 0;
	}
	return (int64_t)llround(d);
}

/* Gives x the cross-stream waits issued on its stream since the stream's
 * previous command, those not yet met; later commands of the stream wait
 * behind x. 0 or -ENOMEM (the run stops). */
static int attach_waits(sim_t *s, stask_t *tk, scmd_t *x)
{
	if (!tk->need)
		return 0;
	uint64_t *row = tk->need + (size_t)x->slot * tk->n_slots;
	uint32_t n = 0;
	for (uint32_t k = 0; k < tk->n_slots; k++)
		if (row[k] && row[k] > tk->slots[k].issued - tk->slots[k].outstanding)
			n++;
	if (n) {
		x->deps = malloc(n * sizeof(*x->deps));
		if (!x->deps) {
			gmx_sim__fail(s, -ENOMEM, "out of memory for stream waits");
			return -ENOMEM;
		}
		for (uint32_t k = 0; k < tk->n_slots; k++)
			if (row[k] && row[k] > tk->slots[k].issued - tk->slots[k].outstanding)
				x->deps[x->n_deps++] = (struct scmd_dep){k, row[k]};
	}
	memset(row, 0, tk->n_slots * sizeof(*row));
	return 0;
}

/* cudaEventRecord / cudaStreamWaitEvent: the host does not block. A record
 * notes how many commands its stream has issued; a wait makes the stream's
 * next command wait for that many of the recording stream's to complete. */
static void event_op(stask_t *tk, const gmx_op_t *op, uint32_t pc)
{
	uint32_t e = tk->ev_of_op[pc], j = slot_of(tk, op->stream);
	if (op->kind == GMX_OP_RECORD) {
		tk->ev_slot[e] = j;
		tk->ev_count[e] = tk->slots[j].issued + 1; /* +1: 0 means never recorded */
		return;
	}
	if (!tk->ev_count[e] || tk->ev_slot[e] == j)
		return; /* never recorded, or the stream's own order already covers it */
	uint64_t *need = &tk->need[(size_t)j * tk->n_slots + tk->ev_slot[e]];
	if (tk->ev_count[e] - 1 > *need)
		*need = tk->ev_count[e] - 1;
}

static void issue_gpu_op(sim_t *s, uint32_t t, const gmx_op_t *op)
{
	stask_t *tk = &s->t[t];
	scmd_t *x = calloc(1, sizeof(*x));
	if (!x) {
		gmx_sim__fail(s, -ENOMEM, "out of memory for commands");
		return;
	}
	x->live_next = s->live;
	if (s->live)
		s->live->live_prev = x;
	s->live = x;
	x->c.seq = ++s->next_seq;
	x->c.task = t;
	x->c.stream = op->stream;
	x->c.kind = op->kind;
	x->c.op = op;
	x->c.workload = tk->w;
	if (op->kind == GMX_OP_KERNEL)
		x->c.kernel_id = gmx_sim_kernel_id(tk->w, op);
	x->issue = s->now;
	x->slot = slot_of(tk, op->stream);
	x->op_index = tk->pc;
	x->unit = tk->unit;
	x->engine = op->kind == GMX_OP_COPY_H2D	  ? ENG_H2D
		    : op->kind == GMX_OP_COPY_D2H ? ENG_D2H
		    : op->kind == GMX_OP_COPY_D2D ? ENG_D2D
						  : ENG_EXEC;
	x->dur = gmx_sim__op_duration(s, tk, op);
	x->c.predicted_ns = x->dur;
	if (attach_waits(s, tk, x))
		return;
	tk->outstanding++;
	tk->slots[x->slot].outstanding++;
	tk->slots[x->slot].issued++;
	int leased = gmx_sim__lease_release(s, x);
	if (!leased)
		tk->waiting++;
	s->cfg->policy->on_launch(s->policy, &x->c);
	if (leased)
		gmx_sim__start_ready(s);
}

/* Issues ops until the host must wait: think time, a synchronisation, or the
 * end of the unit (an implicit device synchronisation: the unit's result). */
void gmx_sim__host_run(sim_t *s, uint32_t t)
{
	stask_t *tk = &s->t[t];
	const gmx_workload_t *w = tk->w;
	while (!s->stop) {
		const gmx_op_t *op = &w->ops[tk->pc];
		switch (op->kind) {
		case GMX_OP_KERNEL:
		case GMX_OP_COPY_H2D:
		case GMX_OP_COPY_D2H:
		case GMX_OP_COPY_D2D:
		case GMX_OP_MEMSET:
			issue_gpu_op(s, t, op);
			break;
		case GMX_OP_RECORD:
		case GMX_OP_WAIT:
			event_op(tk, op, tk->pc);
			break;
		case GMX_OP_SYNC:
			tk->wait_stream = op->stream;
			tk->wait_unit_end = 0;
			if (!sync_satisfied(tk)) {
				tk->host = HOST_BLOCKED;
				s->cfg->policy->on_host_wait(s->policy, t);
				return;
			}
			break;
		default:
			break;
		}
		tk->pc++;
		if (tk->pc == w->n_ops) {
			tk->wait_unit_end = 1;
			if (tk->outstanding) {
				tk->host = HOST_BLOCKED;
				s->cfg->policy->on_host_wait(s->policy, t);
			} else {
				unit_complete(s, t);
			}
			return;
		}
		if (w->ops[tk->pc].think_ns) {
			gmx_sim__push(s, s->now + (int64_t)w->ops[tk->pc].think_ns, EV_HOST, t, 0);
			return;
		}
	}
}

void gmx_sim__host_wake(sim_t *s, uint32_t t)
{
	stask_t *tk = &s->t[t];
	if (tk->host != HOST_BLOCKED || !sync_satisfied(tk))
		return;
	tk->host = HOST_RUNNING;
	if (tk->wait_unit_end) {
		tk->wait_unit_end = 0;
		unit_complete(s, t);
		return;
	}
	tk->pc++;
	if (tk->pc == tk->w->n_ops) {
		tk->pc--; /* let host_run see the end of unit through its usual path */
		tk->wait_unit_end = 1;
		if (tk->outstanding) {
			tk->host = HOST_BLOCKED;
			return;
		}
		tk->wait_unit_end = 0;
		unit_complete(s, t);
		return;
	}
	gmx_sim__push(s, s->now + (int64_t)tk->w->ops[tk->pc].think_ns, EV_HOST, t, 0);
}

void gmx_sim__on_arrival(sim_t *s, uint32_t t)
{
	stask_t *tk = &s->t[t];
	if (tk->done)
		return;
	if (tk->host == HOST_IDLE) {
		gmx_sim__start_unit(s, t, s->now);
	} else if (tk->arr_n < tk->arr_cap) {
		tk->arrivals[(tk->arr_head + tk->arr_n) % tk->arr_cap] = s->now;
		tk->arr_n++;
	} /* a queue 1024 deep is saturated: further requests are dropped, not queued */
	gmx_sim__next_arrival(s, t);
}

int gmx_sim__arrivals(const sim_t *s, gmx_comb_arrivals_t *out, int64_t **gaps)
{
	for (uint32_t t = 0; t < s->n; t++) {
		const stask_t *tk = &s->t[t];
		const gmx_sim_task_t *c = tk->cfg;
		gmx_comb_arrivals_t *a = &out[t];
		memset(a, 0, sizeof(*a));
		gaps[t] = NULL;
		if (c->arrival == GMX_ARRIVAL_CLOSED)
			continue; /* no idle gaps but host ones */
		for (uint32_t k = 0; k < tk->w->n_ops; k++) {
			const gmx_op_t *op = &tk->w->ops[k];
			if (op->kind != GMX_OP_SYNC && op->kind != GMX_OP_ALLOC && op->kind != GMX_OP_FREE)
				a->busy_ns += gmx_sim__op_duration(s, tk, op);
		}
		if (c->arrival == GMX_ARRIVAL_POISSON) {
			a->rate_per_s = c->rate_per_s;
			continue;
		}
		gaps[t] = malloc((c->n_gaps ? c->n_gaps : 1) * sizeof(int64_t));
		if (!gaps[t])
			return -ENOMEM;
		for (uint32_t k = 0; k < c->n_gaps; k++)
			gaps[t][k] = seconds_ns(c->gaps_s[k]);
		a->interarrival_ns = gaps[t];
		a->n_interarrival = c->n_gaps;
	}
	return 0;
}
