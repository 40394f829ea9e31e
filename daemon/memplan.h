/*
 * gpumuxd's memory planner for oversubscribed clients: the residency it believes in, per
 * task and allocation in GMX_MIG_CHUNK units, and the migration orders of one switch,
 * planned by core's timeline planner (gpumux/mplan.h) over the coming slices.
 *
 * What a client declares is bounded: a task's allocations together may not exceed the task
 * limit (the daemon sets it to device plus host memory: what managed memory can hold), and a
 * plan does a bounded amount of work whatever was declared: it looks at the resident chunks
 * (bounded by the device) and at most `budget` chunks and bitmap words of the predictions;
 * a timeline longer than that is cut short, and a plan whose protected slices were cut
 * evicts nothing.
 *
 * No I/O and no clock: the server feeds it allocations and slices and sends the orders it
 * emits.
 */
#ifndef GMXD_MEMPLAN_H
#define GMXD_MEMPLAN_H

#include <stddef.h>
#include <stdint.h>

#include "gpumux/sched.h"
#include "gpumux/template.h"

/* Bounds on what one task may declare, whatever the limit set: 1 PiB (chunk indices then
 * fit 29 bits) and 65536 allocations. */
#define GMXD_MEM_TASK_BYTES_MAX (1ull << 50)
#define GMXD_MEM_ALLOCS_MAX 65536u
/* A plan's budget: this many chunks and bitmap words, plus two per chunk the device holds. */
#define GMXD_MEM_BUDGET_BASE 65536u

typedef struct gmxd_mem gmxd_mem_t;

/* What one coming slice needs: task's ranges in access order, or (whole) every allocation
 * of the task. */
typedef struct {
	uint32_t task;
	int whole;
	const gmx_tpl_range_t *r;
	uint32_t n;
} gmxd_mem_slice_t;

/* Receives one migration order: task's ptr .. ptr+len to the device or to the host. */
typedef void (*gmxd_mem_emit_fn)(void *ctx, uint32_t task, int to_device, uint64_t ptr, uint64_t len);

/* Figures of one plan. */
typedef struct {
	uint64_t load_bytes, evict_bytes;
	uint64_t short_bytes; /* needed by the first slice but not placed: demand-paged */
	uint64_t visits;      /* chunks and bitmap words looked at (at most the budget) */
	int truncated;	      /* the budget cut the timeline short */
} gmxd_mem_stats_t;

/* Creates a planner for a device of cap bytes (task limit GMXD_MEM_TASK_BYTES_MAX). 0,
 * -EINVAL (cap 0) or -ENOMEM. */
int gmxd_mem_create(uint64_t cap, gmxd_mem_t **out);

/* Frees it. */
void gmxd_mem_destroy(gmxd_mem_t *m);

/* Sets the most bytes one task may have allocated at once (capped at
 * GMXD_MEM_TASK_BYTES_MAX); allocations already recorded stay. */
void gmxd_mem_set_task_limit(gmxd_mem_t *m, uint64_t bytes);

/* The task limit, and a plan's budget (chunks and bitmap words it may look at). */
uint64_t gmxd_mem_task_limit(const gmxd_mem_t *m);
uint64_t gmxd_mem_budget(const gmxd_mem_t *m);

/* Records task's allocation ptr..ptr+size (not resident). 0, -EINVAL (empty, wrapping past
 * the end of the address space, overlapping one of the task's allocations), -E2BIG (the
 * task's allocations or their footprint, gmxd_mem_footprint, would exceed the task limit, or
 * GMXD_MEM_ALLOCS_MAX) or -ENOMEM. */
int gmxd_mem_alloc(gmxd_mem_t *m, uint32_t task, uint64_t ptr, uint64_t size);

/* Forgets task's allocation at ptr. 0 or -ENOENT. */
int gmxd_mem_free(gmxd_mem_t *m, uint32_t task, uint64_t ptr);

/* Forgets every allocation of task (it left). */
void gmxd_mem_drop(gmxd_mem_t *m, uint32_t task);

/* Bytes task has allocated / believed resident; device-wide resident bytes for task
 * GMX_MAX_TASKS. */
uint64_t gmxd_mem_bytes(const gmxd_mem_t *m, uint32_t task);
uint64_t gmxd_mem_resident(const gmxd_mem_t *m, uint32_t task);

/* What task's allocations occupy on the device: the 2 MiB-aligned chunks their addresses
 * cover, a chunk shared by several small allocations counted once (the driver packs
 * allocations under 2 MiB into shared blocks: include/gpumux/devalloc.h), times 2 MiB. The
 * task limit bounds this, not the sum of the sizes. */
uint64_t gmxd_mem_footprint(const gmxd_mem_t *m, uint32_t task);

/* Nonzero when everything slice s needs is resident (the common case: no plan needed); 0
 * also when finding out would take more than a plan's budget. */
int gmxd_mem_ready(const gmxd_mem_t *m, const gmxd_mem_slice_t *s);

/* For each slice of s[0..n): the bytes of the chunks it needs that no earlier slice needs
 * (fresh[i]) and, of those, the bytes not resident (missing[i]), looking at no more chunks than
 * a plan's budget. Returns how many slices were counted (the rest count 0), or -ENOMEM. */
int gmxd_mem_fresh(const gmxd_mem_t *m, const gmxd_mem_slice_t *s, uint32_t n, uint64_t *fresh,
		   uint64_t *missing);

/* Plans a switch to slice[0] (slice[1..] are the coming slices, in timeline order): evicts
 * first what no coming slice needs, then what the furthest needs, never what slices
 * [0, n_protected) need (the switch's own and work already granted), and loads slice[0]'s
 * missing chunks in access order, as far as the device holds them. Orders are emitted
 * evictions first, contiguous chunks merged. At most the budget of chunks and words is
 * looked at beyond the resident chunks. 0, -EINVAL (no slice, n_protected > n_slices) or
 * -ENOMEM (nothing emitted, residency unchanged). */
int gmxd_mem_plan(gmxd_mem_t *m, const gmxd_mem_slice_t *slice, uint32_t n_slices, uint32_t n_protected,
		  gmxd_mem_emit_fn emit, void *ctx, gmxd_mem_stats_t *st);

/* Priorities in every plan (the combined policy's memory side, docs/combined.md), on or off
 * (the default): a plan for a task of priority P never evicts a chunk of a task of a better
 * priority (gmx_comb_may_evict: the high-priority working set is never evicted for
 * low-priority work), and evicts the worse priorities' chunks before P's own level
 * (gmx_comb_evict_key), each level in the timeline's order. */
void gmxd_mem_set_protect(gmxd_mem_t *m, int on);

/* Records task's priority (0 highest .. 9), which protection reads. */
void gmxd_mem_set_priority(gmxd_mem_t *m, uint32_t task, int prio);

/* Cuts every order a plan emits into pieces of at most `bytes` (rounded down to whole
 * GMX_MIG_CHUNK units, at least one; 0: no limit, the default), so that a migration holds
 * the link for at most one piece at a time. */
void gmxd_mem_set_piece(gmxd_mem_t *m, uint64_t bytes);

/* Bytes of what slice s needs that are not resident (bounded by a plan's budget: a slice
 * longer than that counts what was looked at). */
uint64_t gmxd_mem_missing(const gmxd_mem_t *m, const gmxd_mem_slice_t *s);

/* Checks the planner's books (allocations sorted and disjoint per task, byte and residency
 * sums, the device bound, the resident list); 0, or -EFAULT with what is wrong in err. For
 * tests and the fuzzer: it walks everything. */
int gmxd_mem_check(const gmxd_mem_t *m, char *err, size_t err_len);

#endif
