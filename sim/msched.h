/* Proactive memory scheduling on the simulated device: working-set templates
 * predict each kernel's pages from its arguments, and at each context switch
 * the planner (core/mplan.c) orders the driver's eviction list by the
 * timeline and loads the next task's slice in access order on the copy
 * engines. Kernels start when their own pages have arrived; pages the
 * prediction missed take the demand-paging path (sim/um.c), counted. */
#ifndef GMX_SIM_MSCHED_H
#define GMX_SIM_MSCHED_H

#include <stdint.h>

#include "gpumux/combined.h"
#include "gpumux/template.h"
#include "memspace.h"
#include "preset.h"
#include "sim.h"

/* The slice rule (when a scenario sets no mem_slice_ms, or "auto"): at each
 * switch the next task's slice is the shortest that keeps the switch's
 * migration (its missing predicted bytes over the link) within
 * GMX_MSCHED_MIGRATION_SHARE of the turn, in [SLICE_NS_MIN, SLICE_NS_MAX], and
 * no longer than the tightest latency target over the runnable tasks divided
 * by their number (a rotation fits the target); the target wins when the two
 * disagree. docs/msched.md#the-slice. */
#define GMX_MSCHED_SLICE_NS_MIN GMX_COMB_SLICE_NS_MIN /* core's rule: gmx_comb_slice_rule */
#define GMX_MSCHED_SLICE_NS_MAX GMX_COMB_SLICE_NS_MAX
#define GMX_MSCHED_MIGRATION_SHARE GMX_COMB_MIGRATION_SHARE

typedef enum gmx_msched_variant {
	GMX_MSCHED_FULL = 0,   /* templates, pipelined migration, the continuous planner
				* (msched_belady.c): Belady's rule on the predicted timeline
				* at every kernel, the next turns' pages streaming in while a
				* turn computes */
	GMX_MSCHED_WHOLEALLOC, /* SWITCH predicting whole allocations */
	GMX_MSCHED_SERIAL,     /* SWITCH on the stock path (no pipeline): evict, then load,
				* one copy at a time; kernels wait for the whole migration (no early start)
				* and nothing moves behind compute */
	GMX_MSCHED_FIFO,       /* SWITCH with the driver's eviction order (population order) */
	GMX_MSCHED_PRIO,       /* the combined policy's memory side (docs/combined.md): the
				* switch-time planner (SWITCH), with the HP working set never evicted for LP
				* work, LP evicted first, and HP migrations waiting at most one
				* piece of LP migration */
	GMX_MSCHED_SWITCH,     /* the switch-time planner (msched before the continuous one): the
				* eviction list ordered and the next slice loaded at each switch,
				* the slice after next prefetched; WHOLEALLOC, SERIAL and FIFO
				* are its ablations */
} gmx_msched_variant_t;

typedef struct gmx_msched gmx_msched_t;

/* Sets up over the laid-out (and warmed) memspace m. profile: templates to
 * use; NULL learns them from each task's own workload (its profiling run).
 * 0 or -ENOMEM. */
int gmx_msched_create(gmx_memspace_t *m, const gmx_preset_t *dev, const gmx_sim_task_t *tasks, uint32_t n,
		      gmx_msched_variant_t variant, int64_t slice_ns, const gmx_tpl_set_t *profile,
		      gmx_msched_t **out);

/* Frees it. */
void gmx_msched_destroy(gmx_msched_t *ms);

/* Op `op` of `task` is about to start at `now` on the execution engine:
 * plans a switch when the task differs from the last one, makes the op's
 * predicted pages resident, and writes into *ready when it may start (its own
 * pages in). 0, -ENOSPC when even one chunk cannot be placed, or -ENOMEM when
 * the slice rule or the planner ran out of memory. */
int gmx_msched_kernel(gmx_msched_t *ms, uint32_t task, uint32_t op, int64_t now, int64_t *ready);

/* Op `op` of `task`, begun through gmx_msched_kernel, ended at `now`: the
 * continuous planner uses the gap when the task's host leaves the device
 * after it (the other variants do nothing). 0 or -ENOMEM. */
int gmx_msched_op_end(gmx_msched_t *ms, uint32_t task, uint32_t op, int64_t now);

/* Turns the slice rule on (see GMX_MSCHED_MIGRATION_SHARE); off, every slice is
 * the slice_ns given at creation. */
void gmx_msched_slice_rule(gmx_msched_t *ms, int on);

/* With on, the continuous planner forgoes a turn the link cannot feed (its pages wait behind the
 * next turn's, docs/msched.md); off (the default), every turn is served. */
void gmx_msched_forgo_turns(gmx_msched_t *ms, int on);

/* The slice task `task` gets at the switch starting now, in ns: by the rule
 * when it is on, else the fixed slice. Also the horizon its switch plans. */
int64_t gmx_msched_slice(gmx_msched_t *ms, uint32_t task);

/* How long making op `op` of `task`'s predicted pages resident would take from
 * now (the link's backlog for its priority plus the missing bytes at the load
 * rate), in ns; 0 when they are resident. */
int64_t gmx_msched_load_ns(gmx_msched_t *ms, uint32_t task, uint32_t op, int64_t now);

/* Task `task` will run no more (leaves the timeline). */
void gmx_msched_task_done(gmx_msched_t *ms, uint32_t task);

/* Fills the msched fields of a result. */
void gmx_msched_stats(const gmx_msched_t *ms, gmx_sim_msched_stats_t *out);

/* Per-unit prediction accuracy of templates learned from `learn` and applied
 * to `apply` (which may be the same workload), at 4 KB pages against the
 * touched regions. Fills fn/fp percentages and launches per kind. 0 or
 * -ENOMEM. */
int gmx_msched_accuracy(const gmx_workload_t *learn, const gmx_workload_t *apply, int wholealloc,
			gmx_sim_msched_stats_t *out);

/* Learns the templates of a workload into *set. 0 or -ENOMEM. */
int gmx_msched_learn(const gmx_workload_t *w, gmx_tpl_set_t *set);

/* Learns templates from the launches of n workloads together (profiling runs at several
 * input sizes, so extents linear in a size can be fitted). 0 or -ENOMEM. */
int gmx_msched_learn_many(const gmx_workload_t *const *w, uint32_t n, gmx_tpl_set_t *set);

/* gmx_msched_accuracy with templates learned from n_learn workloads. */
int gmx_msched_accuracy_many(const gmx_workload_t *const *learn, uint32_t n_learn, const gmx_workload_t *apply,
			     int wholealloc, gmx_sim_msched_stats_t *out);

#endif
