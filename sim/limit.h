/* The memory limit under the timeline scheduler (docs/simulator.md, "ideal"):
 * an upper bound on the mean share of same-schedule inmem throughput that any
 * memory policy can keep, from a relaxation of what every policy must obey
 * (one context at a time, turns of at least a slice for tasks that never run
 * dry, every touched byte resident, at most the capacity resident, bytes
 * arriving no faster than the link). Pure arithmetic over the workloads; the
 * caller supplies inmem's figures. */
#ifndef GMX_SIM_LIMIT_H
#define GMX_SIM_LIMIT_H

#include <stdint.h>

#include "gpumux/workload.h"
#include "preset.h"

/* Grid of the byte curve: D[i] bounds the bytes a run of ops with work >= U*i/G touches. */
#define GMX_LIMIT_GRID 48

/* One task as the bound sees it. */
typedef struct gmx_limit_task {
	double weight;	   /* objective per ns of solo GPU work: 1 / (n * U * inmem throughput); 0 = not measured */
	double streams;	   /* streams with GPU work: GPU work per ns of its turns at most */
	double turn_cap;   /* ns of GPU work one turn can complete: streams * slice + inflight * longest op,
			    * or one burst of a host that leaves the device (gmx_limit_burst) */
	double inflight;   /* ns of GPU work in flight at once at most: inflight * longest op */
	double burst;	   /* gmx_limit_burst of its workload */
	int steady;	   /* closed loop, never dry for the scheduler's grace: every turn lasts a slice */
	double window_cap; /* ns of GPU work in the window at most (alone, unlimited memory); < 0: none */
	double unit_ns;	   /* U: solo GPU work of one unit */
	double unit_bytes; /* F: distinct bytes the kernels of one unit touch */
	double D[GMX_LIMIT_GRID + 1];
	struct gmx_limit_gap *gaps; /* every stretch of the cycle in which a byte range is unused */
	uint64_t n_gaps;
} gmx_limit_task_t;

/* Frees what gmx_limit_curve allocated in t. */
void gmx_limit_task_free(gmx_limit_task_t *t);

/* How the bound came out. */
typedef struct gmx_limit_result {
	double bound;	  /* the limit on the mean share */
	uint32_t rotations; /* K: the rotations per block that gave it (0: compute only) */
	double block_rate;  /* rho_K: objective per second inside blocks */
	double edges;	  /* what the window's edges and the tasks capped by their host add */
	double rotation_bound; /* the least over blocks of rotations (distinct bytes per block) */
	double reuse_bound;    /* the least from the reuses (space-time and link per reuse) */
} gmx_limit_result_t;

/* Scales of a workload's durations on device dev (memory-bound, compute-bound). */
void gmx_sim_scales(const gmx_preset_t *dev, const gmx_workload_t *w, double *scale_mem, double *scale_compute);

/* Solo time (ns) of GPU op `op` on dev, given the workload's scales; 0 for host ops. */
int64_t gmx_sim_solo_ns(const gmx_preset_t *dev, double scale_mem, double scale_compute, const gmx_op_t *op);

/* Fills t->unit_ns, unit_bytes, D and streams from workload w with op durations dur[]:
 * D[i] is at most the distinct bytes of kernel regions touched by any run of consecutive
 * ops (cyclically, the unit repeating) whose solo work is at least unit_ns*i/G. 0 or -ENOMEM. */
int gmx_limit_curve(const gmx_workload_t *w, const int64_t *dur, gmx_limit_task_t *t);

/* Longest host gap (ns) between two GPU submissions of w, cyclically: the sum of think
 * times from one GPU op to the next. */
int64_t gmx_limit_host_gap(const gmx_workload_t *w);

/* The most solo work one turn of a task with w's host can complete: the largest run of GPU ops
 * between two points where the host, after waiting for all its work, thinks longer than the
 * scheduler's grace (the turn ends there whatever the memory policy); INFINITY when there are none. */
double gmx_limit_burst(const gmx_workload_t *w, const int64_t *dur, int64_t grace_ns);

/* The most solo work a run of consecutive GPU ops of w (cyclically, the unit repeating) can
 * complete in budget_ns of wall time on one stream, where each op starts at least gap_ns after
 * the previous one ended (the device's kernel_gap_ns, sim/engine.c try_start): the largest
 * sum of dur over runs whose sum of dur plus gap_ns per op after the first fits the budget.
 * At most budget_ns; -1 when out of memory. */
double gmx_limit_stream_work(const gmx_workload_t *w, const int64_t *dur, int64_t gap_ns, double budget_ns);

/* The bound over a window of window_ns: n tasks, slice_ns, inflight (ops a task may have
 * released at a slice's end), capacity (bytes), link (bytes per ns into the device). */
void gmx_limit_bound(const gmx_limit_task_t *t, uint32_t n, double slice_ns, double inflight,
		     double capacity, double link, double window_ns, gmx_limit_result_t *out);

#endif
