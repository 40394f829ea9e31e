/* Residency of every task's memory on the simulated device.
 *
 * All tasks' buffers are laid out in one page space as the driver places
 * separate cudaMallocs (gmx_devalloc_pack_next, include/gpumux/devalloc.h):
 * buffers of up to 1 MiB share 2 MB chunks (the driver's root chunk and VA
 * block) one after another, larger ones start on a chunk of their own. A chunk
 * belongs to one task: tasks never share one. A chunk holds a 512-bit
 * bitmap of its resident 4 KB pages, so an 8.5 GB model costs 4,352 chunks,
 * not 2 million objects, and a fully resident chunk is skipped in O(1).
 * Device memory is handed out in whole chunks: a chunk with any resident page
 * occupies 2 MB of capacity. Chunks are kept in the order they were populated,
 * which is the order the driver evicts them in.
 */
#ifndef GMX_SIM_MEMSPACE_H
#define GMX_SIM_MEMSPACE_H

#include <stdint.h>

#include "gpumux/sched.h"
#include "gpumux/workload.h"

#define GMX_PAGE_SHIFT 12
#define GMX_PAGE_SIZE (1ull << GMX_PAGE_SHIFT) /* 4 KB base page */
#define GMX_BIG_SHIFT 16
#define GMX_BIG_SIZE (1ull << GMX_BIG_SHIFT) /* 64 KB big page */
#define GMX_CHUNK_SHIFT 21
#define GMX_CHUNK_SIZE (1ull << GMX_CHUNK_SHIFT) /* 2 MB chunk */
#define GMX_PAGES_PER_CHUNK 512u
#define GMX_PAGES_PER_BIG 16u
#define GMX_BIGS_PER_CHUNK 32u
#define GMX_NO_CHUNK UINT32_MAX

typedef struct gmx_chunk {
	uint64_t bits[GMX_PAGES_PER_CHUNK / 64]; /* resident 4 KB pages */
	uint16_t resident;			 /* number of set bits */
	uint16_t valid;				 /* pages that exist (a buffer's last chunk may be short) */
	uint32_t task;
	uint32_t prev, next;   /* population-order list */
	uint64_t stamp;	       /* batch that last touched it: not evicted by its own batch */
	int64_t evicted_at;    /* last eviction time, -1 never: thrashing detection */
	uint8_t thrash_events; /* consecutive quick re-faults */
	uint8_t throttles;
	uint32_t tprev, tnext; /* population order within its task (priority eviction only) */
	uint64_t pop;	       /* when it was populated, in populations (priority eviction only) */
} gmx_chunk_t;

typedef struct gmx_memspace {
	gmx_chunk_t *chunks;
	uint32_t n_chunks;
	uint64_t capacity_chunks;
	uint64_t used_chunks;
	uint32_t head, tail; /* population order: head is evicted first */
	uint64_t resident_pages;
	uint64_t h2d_bytes, d2h_bytes;
	uint64_t task_h2d[GMX_MAX_TASKS], task_d2h[GMX_MAX_TASKS]; /* the same, by owning task */
	/* When set, told of every migration as it is decided (the simulator's timeline). */
	void (*note)(void *ctx, uint32_t task, int out, uint64_t bytes, int64_t now);
	void *note_ctx;
	uint64_t initial_pages;					   /* resident after the warm start */
	uint64_t *buf_addr[GMX_MAX_TASKS];			   /* byte address of each task's buffers */
	uint32_t task_chunk[GMX_MAX_TASKS + 1]; /* task t's chunks: [task_chunk[t], task_chunk[t + 1]) */
	uint32_t n_tasks;
	/* Priority protection (the combined policy, gpumux/combined.h): when set, a chunk is
	 * evicted only for a task it may be evicted for (gmx_comb_may_evict), worse
	 * priorities before the requester's own. */
	int protect;
	int prio[GMX_MAX_TASKS];
	int prio_worst; /* the worst priority among the tasks */
	const uint8_t *ws; /* per chunk: in a task's predicted working set (only those are protected);
			      NULL: every chunk; owned by whoever set it */
	/* Priority eviction (gmx_memspace_prio_evict): off, the driver's order alone. */
	int prio_evict;
	int8_t rank[GMX_MAX_TASKS];			/* each task's priority, 0 best */
	uint32_t thead[GMX_MAX_TASKS], ttail[GMX_MAX_TASKS]; /* each task's population order */
	uint64_t pops;					/* populations so far */
} gmx_memspace_t;

/* Sets addr[b] to buffer b's byte offset from the start of the task's first
 * chunk, as the driver packs the task's buffers; returns the chunks they occupy. */
uint64_t gmx_memspace_layout(const gmx_workload_t *w, uint64_t *addr);

/* Lays out the buffers of n tasks; capacity in bytes. 0, -ENOMEM or -E2BIG. */
int gmx_memspace_init(gmx_memspace_t *m, const gmx_workload_t *const *w, uint32_t n, uint64_t capacity);

/* Frees the space. */
void gmx_memspace_free(gmx_memspace_t *m);

/* Global page index of byte `offset` of buffer `buf` of `task`. */
static inline uint64_t gmx_memspace_page(const gmx_memspace_t *m, uint32_t task, uint32_t buf,
					 uint64_t offset)
{
	return (m->buf_addr[task][buf] + offset) >> GMX_PAGE_SHIFT;
}

/* Non-zero when page `p` is resident. */
static inline int gmx_memspace_resident(const gmx_memspace_t *m, uint64_t p)
{
	const gmx_chunk_t *c = &m->chunks[p >> 9];
	return (c->bits[(p & 511) >> 6] >> (p & 63)) & 1;
}

/* First non-resident page in [from, to), or `to`. Skips whole resident chunks. */
uint64_t gmx_memspace_next_missing(const gmx_memspace_t *m, uint64_t from, uint64_t to);

/* The chunk gmx_memspace_populate would evict next to make room for one of task for_task's
 * (batch `stamp`), or GMX_NO_CHUNK when none may go. */
uint32_t gmx_memspace_victim(const gmx_memspace_t *m, uint32_t for_task, uint64_t stamp);

/* Makes the pages of `mask` (bit i = page i) of chunk c resident; allocates the
 * chunk (evicting in population order, never a chunk stamped `stamp`; with
 * protect, never a better priority's working-set chunk, and a worse priority's
 * chunk first) when it
 * had none. Adds to *in_bytes and *out_bytes. Returns pages made resident, or
 * -ENOSPC when nothing can be evicted. */
int64_t gmx_memspace_populate(gmx_memspace_t *m, uint32_t c, const uint64_t mask[8], uint64_t stamp,
			      int64_t now, uint64_t *in_bytes, uint64_t *out_bytes);

/* Evicts chunk c to the host; returns the bytes written back. */
uint64_t gmx_memspace_evict(gmx_memspace_t *m, uint32_t c, int64_t now);

/* Turns on priority eviction (TGS, docs/baselines.md): a chunk to evict is the earliest
 * populated among the tasks of the worst priority level that has one (priority[t], 0 best),
 * so a better level's chunks go only when no worse level holds any. Call after init, before
 * anything is populated. */
void gmx_memspace_prio_evict(gmx_memspace_t *m, const int *priority);

/* Fills device memory in task then buffer order until capacity (the warm
 * start every mode shares: applications initialise their data in order). */
void gmx_memspace_warm(gmx_memspace_t *m);

/* Checks capacity and byte conservation; returns 0 or -1 with a message. */
int gmx_memspace_check(const gmx_memspace_t *m, char *err, size_t len);

#endif
