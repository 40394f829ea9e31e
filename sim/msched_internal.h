/* msched's state, shared by the device side (msched.c), its Belady planner
 * (msched_belady.c) and the combined policy's LP planning (msched_prio.c). Not a public
 * interface. */
#ifndef GMX_SIM_MSCHED_INTERNAL_H
#define GMX_SIM_MSCHED_INTERNAL_H

#include <stdint.h>

#include "gpumux/mplan.h"
#include "maxheap.h"
#include "msched.h"

/* Stamps of msched's own migrations: the high bit keeps them apart from the
 * fault batches' stamps, so a batch never spares a migration's chunk. */
#define MSCHED_STAMP_BIT (1ull << 63)
/* A next use no prediction reaches. */
#define MSCHED_NEVER INT64_MAX

typedef struct ptask {
	const gmx_workload_t *w;
	uint32_t *op_first, *op_n; /* per op: slice of the predicted ranges */
	uint64_t *rp;              /* predicted range: first global page */
	uint32_t *rn;              /* and its page count */
	uint32_t n_r, cap_r;
	uint32_t op_floor;         /* ranges from here on belong to the op being predicted */
	int64_t *op_ns;            /* per op: solo time plus the launch gap, for the slice walk */
	uint32_t next_op;          /* the op the task runs next */
	uint32_t refresh_in;       /* PRIO, LP: kernels until its plan is refreshed */
	uint8_t runnable;
	int priority;
	int64_t target_ns;         /* latency target, 0 = none */
} ptask_t;

/* key: task time (ns of its predicted GPU time) of the chunk's next use; id: the chunk. */
typedef gmx_heap_entry_t bentry_t;

/* The Belady planner's view of one task: when each of its chunks is next
 * predicted to be used, in the task's own GPU time. */
typedef struct bindex {
	uint32_t first, n;   /* its chunks: first .. first + n - 1 */
	uint32_t *off, *ops; /* CSR: the ops predicted to touch local chunk c, ascending */
	int64_t *cum;        /* predicted GPU ns before op i; cum[n_ops] = one unit */
	int64_t *idle;       /* per op: predicted ns from its end to the task's next kernel
			      * when the host waits in between (copies, then host work after a
			      * sync); 0 when the next kernel is already queued */
	int64_t *tail;       /* per op: when the host leaves the device longer than the
			      * scheduler's grace after it, how long after its end the turn
			      * ends (the copies behind it, then the grace); -1 otherwise */
	gmx_maxheap_t heap;  /* lazy max-heap of its resident chunks by key */
	uint64_t unit;       /* units started */
	uint32_t op;         /* op it runs (or ran last) */
	int started;         /* it has run an op */
	int forgone;         /* its last turn was forgone (the link served the next turn first) */
} bindex_t;

/* Where the prefetch stream stands on the predicted timeline. */
typedef struct bcursor {
	uint32_t slot;  /* 0 = the running turn, s = the s-th turn after it */
	uint64_t unit;  /* of the slot's task */
	uint32_t op, r; /* op, and range within its predicted ranges */
	uint64_t pg;    /* next page of that range */
	int64_t start;  /* task time where the slot began */
	uint32_t steps; /* ops walked in the slot: at most one unit (units repeat) */
	int valid;
} bcursor_t;

struct gmx_msched {
	gmx_memspace_t *m;
	const gmx_preset_t *dev;
	gmx_msched_variant_t variant;
	int64_t slice_ns;
	int rule;              /* pick each slice by the rule (msched.h) */
	int oom;               /* the rule ran out of memory: the next kernel reports it */
	double slice_sum;      /* of the slices given by the rule, for the stats */
	uint64_t slices;
	int64_t slice_lo, slice_hi;
	uint32_t n;
	ptask_t t[GMX_MAX_TASKS];
	gmx_mplan_t *plan;
	int64_t *ready;        /* per chunk: when its last load completes */
	uint64_t (*mask)[8];   /* per chunk: pages the next slice needs */
	uint32_t *seen;        /* per chunk: generation of the last slice that listed it */
	uint32_t gen;
	uint32_t *need, n_need, cap_need;
	uint32_t first[GMX_MAX_TASKS + 1];
	uint32_t *resident, *evict, *load;
	uint8_t *is_res;
	int cur;
	uint64_t stamp;
	int64_t h2d_free, d2h_free;
	int64_t piece_ns;      /* PRIO: link time of one migration piece */
	int hp;                /* PRIO: the best priority among the runnable tasks */
	uint8_t *ws;           /* PRIO: per chunk, in some task's predicted working set */
	uint32_t *mgen;        /* PRIO: per chunk, the window (generation) whose pages its mask holds */
	int lp_exists;         /* PRIO: a runnable task has a worse priority than hp */
	/* The continuous planner (FULL; msched_belady.c). */
	int belady;
	bindex_t b[GMX_MAX_TASKS];
	int64_t *bkey;         /* per chunk: key of its valid heap entry, INT64_MIN none */
	uint32_t *bmark;       /* per chunk: heap compaction generation */
	uint32_t bgen;
	bentry_t *stash;       /* entries set aside while picking a victim */
	uint32_t stash_n, stash_cap;
	uint32_t order[GMX_MAX_TASKS], n_order; /* the timeline: order[0] runs now */
	uint32_t slot_of[GMX_MAX_TASKS];        /* each task's place in it, UINT32_MAX none */
	int64_t turn_end;      /* when the running turn is predicted to end */
	int forgo_on;          /* turns the link cannot feed may be forgone (gmx_msched_forgo_turns) */
	int forgo;             /* the running turn is forgone: the link serves the next turn first */
	int forgo_last;        /* the turn before the running one was forgone */
	bcursor_t cur_at;      /* the prefetch stream */
	gmx_sim_msched_stats_t st;
};

/* PRIO: a refresh of LP task `task`'s plan: its timeline's slices lo..hi-1 are HP's, and its
 * own window in slice s is predicted to start start_ns[s] of its GPU time from now. */
typedef struct hp_slices {
	uint32_t task, lo, hi;
	uint64_t room;  /* chunks HP's working set leaves */
	int64_t start_ns[GMX_MAX_TASKS + 1];
} hp_slices_t;

/* PRIO: whether a task of priority prio is HP: the best level among the runnable tasks while some
 * runnable task has a worse one. When every runnable task shares one level they are all LP, as
 * the scheduler takes them (so that "LP alone" is planned as LP beside HP is). */
static inline int gmx_msched__is_hp(const gmx_msched_t *ms, int prio)
{
	return ms->variant == GMX_MSCHED_PRIO && ms->lp_exists && prio <= ms->hp;
}

/* Appends chunk c to ms->need. 0 or -ENOMEM. */
int gmx_msched__need_push(gmx_msched_t *ms, uint32_t c);

/* Appends the chunks task t's coming slice needs, from its next op, in access
 * order; for the first slice (want_mask) also the pages per chunk. 0 or -ENOMEM. */
int gmx_msched__slice_needs(gmx_msched_t *ms, uint32_t t, int want_mask);

/* Pages of mask not resident in chunk k. */
uint64_t gmx_msched__missing_pages(const gmx_chunk_t *k, const uint64_t mask[8]);

/* Applies the timeline in ms->first/need (ns slices): orders the eviction list, loads the first
 * slice's pages in access order and prefetches the second's (with deep, a PRIO refresh of the
 * LP task `task`: every coming window's, gmx_msched__prio_prefetch). madvise_tasks: the tasks
 * whose helpers order the list (its cost). 0 or an error of the planner. */
int gmx_msched__apply_plan(gmx_msched_t *ms, uint32_t ns, int64_t now, uint32_t madvise_tasks,
			   const hp_slices_t *deep);

/* PRIO, LP (msched_prio.c): prefetches the coming windows of the plan in ms->first/need (ns
 * slices, HP's between hp->lo and hp->hi) from `at`, in access order, as far as room and the
 * link allow. */
void gmx_msched__prio_prefetch(gmx_msched_t *ms, uint32_t task, uint32_t ns, const hp_slices_t *hp,
			       int64_t at);

/* PRIO, LP (msched_prio.c): refreshes LP task `task`'s plan within its turn at `now` (its next
 * windows, HP's slices, its following windows round the unit) and applies it. 0 or -ENOMEM. */
int gmx_msched__prio_refresh(gmx_msched_t *ms, uint32_t task, int64_t now);

/* Pages of op `op` of task t's predicted ranges that are not resident; with `once`, not those
 * an earlier call since ms->gen was last advanced counted (ms->seen, ms->mask). */
uint64_t gmx_msched__op_missing(gmx_msched_t *ms, uint32_t t, uint32_t op, int once);

/* Bits lo..hi-1 of a chunk's 512-page mask. */
void gmx_msched__set_bits(uint64_t mask[8], uint32_t lo, uint32_t hi);

/* The chunk holding page pg: *stop gets the end of [pg, end) within it and mk
 * the mask of those pages. */
uint32_t gmx_msched__chunk_part(uint64_t pg, uint64_t end, uint64_t mk[8], uint64_t *stop);

/* Non-zero when chunk k holds every page of mask. */
int gmx_msched__has_pages(const gmx_chunk_t *k, const uint64_t mask[8]);

/* Moves the pages of mask of chunk c in from `at` on the copy engines, after
 * `pre_out` bytes already evicted for it (and whatever the memspace evicts);
 * records when they arrive and adds the bytes to *in_total. 0 or -ENOSPC. */
int64_t gmx_msched__migrate(gmx_msched_t *ms, uint32_t c, const uint64_t mask[8], int64_t at, uint64_t pre_out,
			    uint64_t *in_total);

/* The later of `start` and the arrival of every chunk in flight that op `op`
 * of `task` really touches (predicted or not): a fault on an in-flight page
 * waits for it. */
int64_t gmx_msched__inflight_wait(const gmx_msched_t *ms, uint32_t task, uint32_t op, int64_t start);

/* Builds the Belady planner's per-task index from the predictions and keys
 * the resident chunks. 0 or -ENOMEM. */
int gmx_msched__belady_create(gmx_msched_t *ms);

/* Frees it. */
void gmx_msched__belady_destroy(gmx_msched_t *ms);

/* A switch to `task` at `now`: the timeline, the eviction list in order of
 * predicted next use, and the stream restarted at the task's next op. */
int gmx_msched__belady_switch(gmx_msched_t *ms, uint32_t task, int64_t now);

/* Op `op` of `task` starts at `now`: loads its missing predicted pages
 * (evicting the resident chunk used furthest ahead), then streams the
 * timeline's coming pages in while a chunk used later than each can make
 * room, and the link is free within the horizon. *ready gets when the op's
 * pages are in. 0, -ENOSPC or -ENOMEM. */
int gmx_msched__belady_kernel(gmx_msched_t *ms, uint32_t task, uint32_t op, int64_t now, int64_t *ready);

/* Op `op` of `task` ended at `now` and its host leaves the device longer than
 * the grace (its turn ends): its chunks are keyed by their next use, in its
 * next turn, and the stream fills the gap with the coming turns' pages. 0 or
 * <0 error. */
int gmx_msched__belady_op_end(gmx_msched_t *ms, uint32_t task, uint32_t op, int64_t now);

#endif
