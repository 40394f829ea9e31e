/* The physical limit for memory: Belady's optimal eviction over the future
 * reference timeline, charging only link time. Residency is tracked per 64 KB
 * big page. The future is each task's own (deterministic, repeating) reference
 * sequence; across tasks, a page's next use is ranked by how much of its
 * owner's GPU time lies before it, which is the order the round-robin timeline
 * reaches it when tasks share the device equally. */
#ifndef GMX_SIM_IDEAL_H
#define GMX_SIM_IDEAL_H

#include <stdint.h>

#include "memspace.h"

typedef struct gmx_ideal gmx_ideal_t;

/* What one kernel needs moved. */
typedef struct gmx_ideal_moves {
	uint64_t in_bytes, out_bytes;
	/* When the space the loads go into is vacated: the latest end of the
	 * victims' last uses (gmx_ideal_used_until); INT64_MIN when no page was
	 * evicted or the victims were never used since the warm fill. */
	int64_t free_at;
	/* The switch constraint (docs/simulator.md): new_turn is 1 when this op
	 * is the first of its task since another task's op ran; turn_bytes counts
	 * the distinct bytes the turn has touched so far, this op included; of
	 * them, after_switch_bytes cannot have been resident when the turn began
	 * (the previous turn's last op held its own pages then, so at most the
	 * capacity less those was free for this task's): they cross the link
	 * after the switch, whatever the policy. */
	int new_turn;
	uint64_t turn_bytes, after_switch_bytes;
} gmx_ideal_moves_t;

/* Builds the next-use index for n tasks laid out in m (used only for its
 * layout, which it reads until destroyed: m must outlive it). 0 or -ENOMEM. */
int gmx_ideal_create(const gmx_memspace_t *m, const gmx_workload_t *const *w, uint32_t n, uint64_t capacity,
		     gmx_ideal_t **out);

/* Frees it. */
void gmx_ideal_destroy(gmx_ideal_t *id);

/* Op `op` of unit `unit` of `task` is about to run: makes its pages resident,
 * evicting the pages used furthest in the future, and reports the bytes moved.
 * progress[t] is each task's position in its own GPU time (ns), now. */
int gmx_ideal_access(gmx_ideal_t *id, uint32_t task, uint64_t unit, uint32_t op, const int64_t *progress,
		     gmx_ideal_moves_t *out);

/* The op of the last gmx_ideal_access ends at `end` (ns): its pages are in
 * use until then and cannot be evicted before. */
void gmx_ideal_used_until(gmx_ideal_t *id, int64_t end);

/* Tells the ranking where each task stands on the slice timeline: task t
 * next runs in wait[t] ns, for left[t] ns of its own GPU time, and after that
 * waits `others` ns (the other tasks' slices) per `slice` ns it runs. A page's
 * next use is then ranked by wall-clock time rather than by its owner's GPU
 * time, which matters once slices are long. Applies to later accesses. */
void gmx_ideal_timeline(gmx_ideal_t *id, const int64_t *wait, const int64_t *left, int64_t slice, int64_t others);

/* Task-time (ns of solo GPU work) at the start of op `op` of `unit`. */
int64_t gmx_ideal_task_time(const gmx_ideal_t *id, uint32_t task, uint64_t unit, uint32_t op);

/* Totals moved so far. */
void gmx_ideal_totals(const gmx_ideal_t *id, uint64_t *in_bytes, uint64_t *out_bytes);

/* Checks resident big pages never exceed capacity. 0 or -1. */
int gmx_ideal_check(const gmx_ideal_t *id);

#endif
