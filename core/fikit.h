/* fikit policy internals that tests and benchmarks reach (core/sched_fikit.c). */
#ifndef GMX_CORE_FIKIT_H
#define GMX_CORE_FIKIT_H

#include <stdint.h>

#include "gpumux/sched.h"

/* BestPrioFit for a gap of gap_ns from `now` below priority level `above`:
 * from the highest non-empty level below `above`, the queue head with the
 * largest predicted duration that fits (after its task's own in-flight work
 * and the context switches), else the next level down. The task is stored in
 * *task and its predicted duration returned; -1 when nothing fits. Submits
 * nothing. `p` must come from gmx_sched_fikit_ops.create. */
int64_t gmx_fikit_pick(const gmx_policy_t *p, int above, int64_t now, int64_t gap_ns, uint32_t *task);

#endif
