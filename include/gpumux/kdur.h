/* Kernel durations learned from completions, for a device whose commands carry no predicted
 * duration (gpumuxd: the interposer announces a kernel's identity, not its length). The
 * combined policy (`gpumux`, docs/combined.md) records every completed kernel's measured
 * duration here and predicts a queued kernel's from the last ones of the same identity in the
 * same task; the device reads the task's mean for its slice rule (gpumux/combined.h).
 *
 * Pure: no I/O, no clock. Bounded: GMX_KDUR_IDS identities per task (the least recently
 * observed one gives way), GMX_KDUR_SAMPLES durations each.
 */
#ifndef GPUMUX_KDUR_H
#define GPUMUX_KDUR_H

#include <stdint.h>

#define GMX_KDUR_IDS 64u     /* kernel identities kept per task */
#define GMX_KDUR_SAMPLES 16u /* last durations kept per identity */

typedef struct gmx_kdur gmx_kdur_t;

/* Creates an empty table for tasks 0 .. n_tasks-1. 0, -EINVAL (n_tasks 0) or -ENOMEM. */
int gmx_kdur_create(uint32_t n_tasks, gmx_kdur_t **out);

/* Frees it (NULL: nothing). */
void gmx_kdur_destroy(gmx_kdur_t *k);

/* Forgets what task learned (it left; its slot may serve another program). */
void gmx_kdur_forget(gmx_kdur_t *k, uint32_t task);

/* Records that a kernel of identity id (0: unknown, kept as one identity) of task ran dur_ns.
 * 0, -EINVAL (task out of range, dur_ns < 0) or -ENOMEM. */
int gmx_kdur_observe(gmx_kdur_t *k, uint32_t task, uint64_t id, int64_t dur_ns);

/* The predicted duration of task's next kernel of identity id: the shortest of its last
 * GMX_KDUR_SAMPLES durations, what the device took without the delays a measurement from
 * release to completion also catches (a grant reaching a busy host, a completion reported
 * late, pages coming in); -1 when none was seen. */
int64_t gmx_kdur_predict(const gmx_kdur_t *k, uint32_t task, uint64_t id);

/* Records what task's last switch cost: how much longer the first kernel of its turn took than
 * its kernels do (its pages coming in, the outgoing task's going out), ns; an average of the
 * last ones is kept. Negative: ignored. */
void gmx_kdur_switch_observe(gmx_kdur_t *k, uint32_t task, int64_t cost_ns);

/* The switch cost of task's turns (gmx_kdur_switch_observe), ns; -1 when none was seen. */
int64_t gmx_kdur_switch_ns(const gmx_kdur_t *k, uint32_t task);

/* The mean duration of task's kernels over every identity kept (each identity's median
 * weighted by how often it ran); -1 when none was seen. */
int64_t gmx_kdur_task_mean(const gmx_kdur_t *k, uint32_t task);

#endif
