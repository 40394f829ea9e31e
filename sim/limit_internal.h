/* What the two halves of the limit share: a stretch of a task's cycle in which a byte range is
 * unused (limit_curve.c builds them, limit.c prices them). */
#ifndef GMX_SIM_LIMIT_INTERNAL_H
#define GMX_SIM_LIMIT_INTERNAL_H

#include "limit.h"

#include <stdint.h>

typedef struct gmx_limit_gap {
	int64_t start, len; /* on the unit's cycle of solo work, start in [0, U) */
	uint64_t bytes;
} gap_t;

#endif
