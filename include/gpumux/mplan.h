/* The memory planner of proactive memory scheduling, and the timeline it
 * plans over.
 *
 * A timeline is the order of the coming timeslices: which task runs next,
 * then after it, and so on, as the timeslice scheduler will pick them (round
 * robin within the best priority level first). Each slice lists the memory
 * units (the device's allocation granules, e.g. 2 MB chunks) its commands are
 * predicted to touch, in predicted access order.
 *
 * At a switch the planner walks the timeline backwards and ranks every
 * resident unit by the first coming slice that needs it: units no coming
 * slice needs are evicted first, then those the furthest-future slice needs
 * (within a slice, the ones it needs last first), and the next slice's units
 * are kept. It loads the next slice's missing units in access order. For
 * equal-sized units and a timeline that covers the horizon this is Belady's
 * rule at slice granularity (tests/msched compares it with a brute-force
 * optimum).
 *
 * Pure C: no I/O, no clock. The device applies the plan (sim/msched.c).
 */
#ifndef GPUMUX_MPLAN_H
#define GPUMUX_MPLAN_H

#include <stdint.h>

#define GMX_MPLAN_NONE UINT32_MAX

/* Order of the coming slices: `next` first, then every other runnable task
 * once, best priority (0) first and round robin (by index after `next`)
 * within a level. Writes the task indices into out and returns how many. */
uint32_t gmx_timeline_order(const int *priority, const uint8_t *runnable, uint32_t n_tasks, uint32_t next,
			    uint32_t *out);

typedef struct gmx_mplan gmx_mplan_t;

/* The timeline as the planner sees it: slice s needs units
 * need[first[s] .. first[s+1]), in access order (repeats allowed). */
typedef struct gmx_mplan_timeline {
	uint32_t n_slices;
	const uint32_t *first; /* n_slices + 1 offsets */
	const uint32_t *need;
} gmx_mplan_timeline_t;

/* Creates a planner over n_units units. 0 or -ENOMEM. */
int gmx_mplan_create(uint32_t n_units, gmx_mplan_t **out);

/* Frees it. */
void gmx_mplan_destroy(gmx_mplan_t *p);

/* Plans a switch. resident lists the resident units (any order, no repeats).
 * Writes them into evict in eviction order (first = evict first) and the next
 * slice's non-resident units into load, in access order without repeats
 * (load must hold first[1] - first[0] entries); *n_load gets their number and
 * *n_keep the number of resident units the next slice needs (the tail of
 * evict, which should not be evicted to make room for it). 0 or -EINVAL
 * (a unit out of range). */
int gmx_mplan_switch(gmx_mplan_t *p, const gmx_mplan_timeline_t *tl, const uint32_t *resident, uint32_t n_resident,
		     const uint8_t *is_resident, uint32_t *evict, uint32_t *load, uint32_t *n_load, uint32_t *n_keep);

/* Rank of unit u after the last plan: the first slice that needs it, or
 * GMX_MPLAN_NONE when no coming slice does. */
uint32_t gmx_mplan_rank(const gmx_mplan_t *p, uint32_t u);

#endif
