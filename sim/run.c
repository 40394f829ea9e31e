/* A simulation run: set-up of the tasks, memory space and policy, the event
 * loop, tear-down, the checks made before a scenario runs, and the runs that
 * make one result (exclusive: one per task; ideal under timeline: held phases). */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "events.h"
#include "ideal.h"
#include "limit.h"
#include "memspace.h"
#include "msched.h"
#include "profile.h"
#include "sim.h"

#include "engine_internal.h"

#define GMX_SIM_PROGRESS_EVERY 0xffffu /* events between two progress calls, less one */

static const char *const mem_names[GMX_MEM_MODE_COUNT] = {
    "inmem", "um", "ideal", "msched", "msched-wholealloc", "msched-serial", "msched-fifo", "gpumux", "msched-switch"};

const char *gmx_mem_mode_name(gmx_mem_mode_t m)
{
	return m < GMX_MEM_MODE_COUNT ? mem_names[m] : "?";
}

int gmx_mem_mode_parse(const char *name)
{
	for (int i = 0; i < GMX_MEM_MODE_COUNT; i++)
		if (!strcmp(name, mem_names[i]))
			return i;
	if (!strcmp(name, "msched-belady"))
		return GMX_MEM_MSCHED; /* its planner is msched's since it became the default */
	return -1;
}

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
	gmx_sim_scales(s->dev, tk->w, &tk->scale_mem, &tk->scale_compute);
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
		if (!rc && s.ms) {
			gmx_msched_slice_rule(s.ms, cfg->mem_slice_auto);
			gmx_msched_forgo_turns(s.ms, cfg->mem_forgo_turns);
		}
		if (!rc && cfg->mem == GMX_MEM_IDEAL)
			rc = gmx_ideal_create(&s.mem, ws, s.n, cfg->capacity_bytes, &s.ideal);
	}
	gmx_device_t dev = gmx_sim__device(&s);
	/* What the scenario says of each task's arrivals, for a policy that seeds its predictions
	 * with it (gpumux), unless the caller gave its own. */
	gmx_comb_arrivals_t arr[GMX_MAX_TASKS];
	int64_t *arr_gaps[GMX_MAX_TASKS] = {0};
	gmx_sched_params_t sp = cfg->sched;
	if (!rc && !sp.arrivals && s.n <= GMX_MAX_TASKS) {
		rc = gmx_sim__arrivals(&s, arr, arr_gaps);
		sp.arrivals = arr;
		sp.n_arrivals = s.n;
	}
	if (!rc)
		rc = cfg->policy->create(&sp, &dev, &s.policy);
	for (uint32_t i = 0; !rc && i < s.n; i++)
		rc = cfg->policy->task_add(s.policy, i, cfg->tasks[i].priority);
	if (rc) {
		snprintf(err, err_len, "cannot set up the simulation: %s", strerror(-rc));
		destroy(&s);
		for (uint32_t i = 0; i < s.n && i < GMX_MAX_TASKS; i++)
			free(arr_gaps[i]);
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
		gmx_sim__dispatch(&s, &e);
	}
	rc = s.error;
	if (!rc) {
		gmx_sim__collect(&s, res);
		if (s.warm)
			gmx_sim__subtract_warmup(res, s.warm);
		if ((cfg->mem == GMX_MEM_UM || s.ms) && gmx_memspace_check(&s.mem, err, err_len))
			rc = -EFAULT;
		if (cfg->mem == GMX_MEM_IDEAL && gmx_ideal_check(s.ideal)) {
			snprintf(err, err_len, "ideal: resident pages exceed capacity");
			rc = -EFAULT;
		}
	}
	destroy(&s);
	for (uint32_t i = 0; i < s.n && i < GMX_MAX_TASKS; i++)
		free(arr_gaps[i]);
	return rc;
}

struct span {
	uint64_t lo, hi; /* chunk range in the task's layout, inclusive */
};

static int span_cmp(const void *a, const void *b)
{
	const struct span *x = a, *y = b;
	return (x->lo > y->lo) - (x->lo < y->lo);
}

/* Sets *bytes to the bytes of the distinct 2 MB chunks kernel op touches (what it
 * needs resident at once), its buffers at addr (gmx_memspace_layout: small ones
 * share chunks). 0 or -ENOMEM. */
static int kernel_chunk_bytes(const gmx_workload_t *w, const uint64_t *addr, const gmx_op_t *op,
			      uint64_t *bytes)
{
	struct span *s = calloc(op->region_count ? op->region_count : 1, sizeof(*s));
	if (!s)
		return -ENOMEM;
	for (uint32_t i = 0; i < op->region_count; i++) {
		const gmx_region_t *r = &w->regions[op->region_first + i];
		uint64_t at = addr[r->buffer] + r->offset;
		s[i] = (struct span){at >> GMX_CHUNK_SHIFT,
				     (at + (r->length ? r->length : 1) - 1) >> GMX_CHUNK_SHIFT};
	}
	qsort(s, op->region_count, sizeof(*s), span_cmp);
	uint64_t chunks = 0;
	for (uint32_t i = 0; i < op->region_count;) {
		uint64_t lo = s[i].lo, hi = s[i].hi;
		for (i++; i < op->region_count && s[i].lo <= hi + 1; i++)
			hi = s[i].hi > hi ? s[i].hi : hi;
		chunks += hi - lo + 1;
	}
	free(s);
	*bytes = chunks << GMX_CHUNK_SHIFT;
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
		uint64_t *addr = malloc((w->n_buffers ? w->n_buffers : 1) * sizeof(*addr));
		if (!addr) {
			snprintf(err, err_len, "out of memory checking the kernels' sizes");
			return -ENOMEM;
		}
		(void)gmx_memspace_layout(w, addr);
		for (uint32_t i = 0; i < w->n_ops; i++) {
			const gmx_op_t *op = &w->ops[i];
			if (op->kind != GMX_OP_KERNEL || !op->region_count)
				continue;
			uint64_t need = 0;
			if (kernel_chunk_bytes(w, addr, op, &need)) {
				free(addr);
				snprintf(err, err_len, "out of memory checking the kernels' sizes");
				return -ENOMEM;
			}
			if (need <= cfg->capacity_bytes)
				continue;
			free(addr);
			snprintf(err, err_len,
				 "task %s: kernel %s (op %u) touches %.2f GiB (in 2 MiB chunks), more than the %.2f GiB "
				 "of device memory: --mem %s cannot run it (only inmem can; give the device more memory "
				 "or the task a smaller size)",
				 cfg->tasks[t].name ? cfg->tasks[t].name : "?", w->names[op->name], i, need / GMX_GIB,
				 cfg->capacity_bytes / GMX_GIB, gmx_mem_mode_name(cfg->mem));
			return -E2BIG;
		}
		free(addr);
	}
	return 0;
}

/* The memory limit under the timeline scheduler (docs/simulator.md, "ideal"):
 * not a simulation but a bound on the mean share of same-schedule inmem that
 * any memory policy keeps. It runs inmem under the same schedule (the shares'
 * denominators), each task whose host can leave the device idle alone (its
 * host's pace), and bounds the rest from the workloads; every task reports
 * the bound's share of its inmem throughput. */
static int run_ideal(const gmx_sim_config_t *cfg, gmx_sim_result_t *res, char *err, size_t err_len)
{
	gmx_sim_config_t in = *cfg;
	in.mem = GMX_MEM_INMEM;
	int rc = run_one(&in, res, err, err_len);
	if (rc)
		return rc;
	uint32_t n = cfg->n_tasks, n_meas = 0;
	gmx_limit_task_t *lt = calloc(n, sizeof(*lt));
	if (!lt)
		return -ENOMEM;
	int same_prio = 1;
	double minop[GMX_MAX_TASKS], loose_cap[GMX_MAX_TASKS];
	for (uint32_t i = 0; i < n; i++) {
		minop[i] = INFINITY;
		same_prio &= cfg->tasks[i].priority == cfg->tasks[0].priority;
		n_meas += res->tasks[i].throughput_per_s > 0;
	}
	double T = (double)cfg->duration_ns;
	for (uint32_t i = 0; i < n && !rc; i++) {
		const gmx_sim_task_t *tc = &cfg->tasks[i];
		const gmx_workload_t *w = tc->workload;
		gmx_limit_task_t *t = &lt[i];
		int64_t *dur = calloc((size_t)w->n_ops + 1, sizeof(int64_t));
		if (!dur) {
			rc = -ENOMEM;
			break;
		}
		double sm, sc, longest = 0;
		minop[i] = INFINITY;
		gmx_sim_scales(cfg->device, w, &sm, &sc);
		for (uint32_t k = 0; k < w->n_ops; k++) {
			dur[k] = gmx_sim_solo_ns(cfg->device, sm, sc, &w->ops[k]);
			if ((double)dur[k] > longest)
				longest = (double)dur[k];
			double big = 0; /* at most the op's distinct bytes: its largest region */
			for (uint32_t g = 0; w->ops[k].kind == GMX_OP_KERNEL && g < w->ops[k].region_count; g++)
				if ((double)w->regions[w->ops[k].region_first + g].length > big)
					big = (double)w->regions[w->ops[k].region_first + g].length;
			if (w->ops[k].kind == GMX_OP_KERNEL && dur[k] > 0 && big < minop[i])
				minop[i] = big;
		}
		rc = gmx_limit_curve(w, dur, t);
		double burst = gmx_limit_burst(w, dur, GMX_TIMELINE_GRACE_NS);
		/* One stream: its ops run one after the other, each at least the device's kernel gap after
		 * the previous one ended, so a slice completes less work than its length. */
		double in_slice = !rc && t->streams == 1 ? gmx_limit_stream_work(w, dur, cfg->device->kernel_gap_ns,
									     (double)cfg->sched.slice_ns)
							   : t->streams * (double)cfg->sched.slice_ns;
		if (in_slice < 0)
			rc = -ENOMEM;
		free(dur);
		if (rc)
			break;
		double I = res->tasks[i].throughput_per_s;
		t->weight = I > 0 && t->unit_ns > 0 ? 1e9 / ((double)n_meas * t->unit_ns * I) : 0;
		t->inflight = (double)cfg->sched.inflight_max * longest;
		loose_cap[i] = t->streams * (double)cfg->sched.slice_ns + t->inflight;
		t->turn_cap = in_slice + t->inflight;
		int closed = tc->arrival == GMX_ARRIVAL_CLOSED && tc->units == 0;
		t->steady = same_prio && closed && gmx_limit_host_gap(w) < GMX_TIMELINE_GRACE_NS &&
			    (int64_t)(n - 1) * cfg->sched.slice_ns > GMX_TIMELINE_GRACE_NS;
		t->window_cap = -1;
		t->burst = burst;
		if (!t->steady && closed && n > 1) { /* its host's pace: alone, unlimited memory */
			gmx_sim_config_t one = in;
			one.tasks = &cfg->tasks[i];
			one.n_tasks = 1;
			gmx_sim_result_t *r = calloc(1, sizeof(*r));
			if (!r) {
				rc = -ENOMEM;
				break;
			}
			rc = run_one(&one, r, err, err_len);
			if (!rc)
				t->window_cap = (r->tasks[0].progress + 2.0) * t->unit_ns;
			free(r);
		}
	}
	/* A task whose host waits for its work and then thinks past the grace ends its turn there,
	 * when a steady task is waiting (always): a turn holds one burst of its host at most. */
	int any_steady = 0, n_steady = 0;
	for (uint32_t i = 0; i < n && !rc; i++) {
		any_steady |= lt[i].steady;
		n_steady += lt[i].steady != 0;
	}
	/* The switch: every turn of a task follows another task's (a steady one runs between two
	 * of them), whose last kernel held at least that task's smallest kernel's bytes; so at most
	 * C less those of the next task's are in at the switch, and its first kernel waits for the
	 * rest of its own bytes at the link's rate before any work. */
	for (uint32_t i = 0; i < n && !rc; i++) {
		double held = INFINITY;
		for (uint32_t u = 0; u < n; u++)
			if (u != i && minop[u] < held)
				held = minop[u];
		double room = (double)cfg->capacity_bytes - held;
		if (n_steady - (lt[i].steady != 0) >= 1 && same_prio && isfinite(minop[i]) && minop[i] > room) {
			double wait = (minop[i] - room) / cfg->device->link_in_gbps;
			/* from the cap without the kernel gaps: what they take from the rest of the slice is
			 * not known here */
			double paid = loose_cap[i] - lt[i].streams * (wait < (double)cfg->sched.slice_ns ? wait : (double)cfg->sched.slice_ns);
			if (paid < lt[i].turn_cap)
				lt[i].turn_cap = paid;
		}
	}
	for (uint32_t i = 0; i < n && !rc && any_steady; i++)
		if (!lt[i].steady && same_prio && lt[i].burst < lt[i].turn_cap)
			lt[i].turn_cap = lt[i].burst;
	/* Round robin: between two turns of a task every steady task takes a turn of at least a
	 * slice, so the turns of a task that is not steady start at least n_s S apart, and at most
	 * floor(T / (n_s S)) + 1 of them (those cut by the window's edges included) complete work
	 * in the window, a turn's cap each (F2d). */
	for (uint32_t i = 0; i < n && !rc && any_steady && same_prio; i++)
		if (!lt[i].steady && res->tasks[i].throughput_per_s > 0) {
			double rr = (floor(T / ((double)n_steady * (double)cfg->sched.slice_ns)) + 1) * lt[i].turn_cap;
			if (lt[i].window_cap < 0 || rr < lt[i].window_cap)
				lt[i].window_cap = rr;
		}
	if (!rc) {
		gmx_limit_result_t lr;
		double link = cfg->device->link_in_gbps;
		gmx_limit_bound(lt, n, (double)cfg->sched.slice_ns, (double)cfg->sched.inflight_max,
				(double)cfg->capacity_bytes, link, T, &lr);
		res->limit_valid = 1;
		res->limit_bound = lr.bound;
		res->limit_rotations = lr.rotations;
		res->limit_block_rate = lr.block_rate;
		res->limit_edges = lr.edges;
		res->limit_rotation_bound = lr.rotation_bound;
		res->limit_reuse_bound = lr.reuse_bound;
		for (uint32_t i = 0; i < n; i++) {
			gmx_task_result_t *o = &res->tasks[i];
			if (o->throughput_per_s <= 0)
				continue;
			o->throughput_per_s *= lr.bound;
			o->progress = o->throughput_per_s * o->active_s;
			o->units = (uint64_t)o->progress;
			o->gpu_s *= lr.bound;
			o->lat_p50_s = o->lat_p95_s = o->lat_p99_s = -1;
		}
		res->h2d_bytes = res->d2h_bytes = 0;
	}
	for (uint32_t i = 0; i < n; i++)
		gmx_limit_task_free(&lt[i]);
	free(lt);
	return rc;
}

int gmx_sim_run(const gmx_sim_config_t *cfg, gmx_sim_result_t *res, char *err, size_t err_len)
{
	memset(res, 0, sizeof(*res));
	uint64_t footprint = 0;
	for (uint32_t i = 0; i < cfg->n_tasks; i++) {
		uint64_t f = gmx_workload_footprint(cfg->tasks[i].workload);
		footprint = f > UINT64_MAX - footprint ? UINT64_MAX : footprint + f; /* never wraps */
	}
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
