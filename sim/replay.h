/* Replaying a recorded trace alone on its recorded device, to compare the
 * simulated timeline with the recorded one (span, same-stream gaps). */
#ifndef GMX_SIM_REPLAY_H
#define GMX_SIM_REPLAY_H

#include <stddef.h>
#include <stdint.h>

typedef struct gmx_replay_result {
	char device[32];
	uint64_t kernels;
	uint64_t waits, d2d; /* cross-stream waits (described or inferred) and device-to-device copies replayed */
	double recorded_span_s, replay_span_s;
	double recorded_gap_us[3], replay_gap_us[3]; /* same-stream gaps p50, p90, p99 */
} gmx_replay_result_t;

/* Imports the trace at `path`, replays one pass of it alone (closed loop, unlimited
 * memory) on the preset it was recorded on, and fills *r. 0 or a negative errno
 * with one line in err. */
int gmx_replay_compare(const char *path, gmx_replay_result_t *r, char *err, size_t err_len);

#endif
