/* msched's working-set prediction and its accuracy (msched_predict.c), shared with the planner
 * (msched.c). Not a public interface. */
#ifndef GMX_SIM_MSCHED_PREDICT_H
#define GMX_SIM_MSCHED_PREDICT_H

#include <stdint.h>

#include "gpumux/template.h"
#include "sim.h"

/* Receives one predicted range: buffer, offset, length. 0 or -ENOMEM. */
typedef int (*emit_fn)(void *ctx, uint32_t buf, uint64_t off, uint64_t len);

/* Calls emit for each predicted range of op, page-aligned, clipped to buffers (whole
 * allocations with wholealloc, or for a launch no template covers). Returns the template
 * kind, or -ENOMEM. */
int gmx_msched__predict_op(const gmx_tpl_set_t *set, const gmx_workload_t *w, const gmx_op_t *op,
			   int wholealloc, emit_fn emit, void *ctx);

/* Adds one workload's per-unit accuracy under set to the counters. 0 or -ENOMEM. */
int gmx_msched__accuracy_add(const gmx_tpl_set_t *set, const gmx_workload_t *w, int wholealloc,
			     uint64_t *touched, uint64_t *predicted, uint64_t *hit, uint64_t *launches);

/* Fills out's false negative and false positive percentages from the counters. */
void gmx_msched__accuracy_pct(uint64_t touched, uint64_t predicted, uint64_t hit,
			      gmx_sim_msched_stats_t *out);

#endif
