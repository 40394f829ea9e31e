/* A growable max-heap of (key, id) pairs: the lazy victim indexes of the ideal limit (sim/ideal.c)
 * and of msched's continuous planner (sim/msched_belady.c). Entries may go stale; their owners skip them at the
 * top and compact the heap themselves. */
#ifndef GMX_SIM_MAXHEAP_H
#define GMX_SIM_MAXHEAP_H

#include <stdint.h>

typedef struct gmx_heap_entry {
	int64_t key; /* larger comes first */
	uint32_t id; /* what the key belongs to (a 64 KB page, a 2 MB chunk) */
} gmx_heap_entry_t;

typedef struct gmx_maxheap {
	gmx_heap_entry_t *e;
	uint32_t n, cap;
} gmx_maxheap_t;

/* Adds (key, id), growing the array as needed (1024 entries first, then doubling). 0 or -ENOMEM. */
int gmx_maxheap_push(gmx_maxheap_t *h, int64_t key, uint32_t id);

/* Removes the top entry; h->n must be above 0. */
void gmx_maxheap_pop(gmx_maxheap_t *h);

#endif
