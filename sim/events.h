/* The simulator's event queue: a binary min-heap on (time, sequence), so that
 * events at the same time run in the order they were scheduled: deterministic. */
#ifndef GMX_SIM_EVENTS_H
#define GMX_SIM_EVENTS_H

#include <stdint.h>

typedef struct gmx_event {
	int64_t time;
	uint64_t seq;
	uint32_t kind;
	uint32_t a;   /* kind-specific: task, stream slot, ... */
	uint64_t b;   /* kind-specific: generation, command seq, ... */
} gmx_event_t;

typedef struct gmx_event_queue {
	gmx_event_t *heap;
	uint32_t n, cap;
	uint64_t next_seq;
} gmx_event_queue_t;

/* Schedules an event; 0 or -ENOMEM. O(log n). */
int gmx_events_push(gmx_event_queue_t *q, int64_t time, uint32_t kind, uint32_t a, uint64_t b);

/* Removes the earliest event into *out; 0, or -ENOENT when empty. O(log n). */
int gmx_events_pop(gmx_event_queue_t *q, gmx_event_t *out);

/* Frees the queue's storage. */
void gmx_events_free(gmx_event_queue_t *q);

#endif
