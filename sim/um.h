/* CUDA unified memory (demand paging) as the driver does it: replayable faults
 * serviced in batches, each fault grown to its 64 KB big page, the tree
 * prefetcher over each 2 MB block, eviction of whole chunks in population
 * order, and the thrashing throttle. Sources in um.c. */
#ifndef GMX_SIM_UM_H
#define GMX_SIM_UM_H

#include "memspace.h"
#include "preset.h"

/* Where a kernel is in its access order: region index and page within it. */
typedef struct gmx_access_cursor {
	uint32_t region;
	uint64_t page; /* page offset from the region's first page */
} gmx_access_cursor_t;

/* What one serviced batch did. */
typedef struct gmx_um_batch {
	uint32_t entries;    /* distinct 4 KB pages that faulted */
	uint64_t in_bytes;   /* migrated to the device (faults, growth, prefetch) */
	uint64_t out_bytes;  /* evicted to the host to make room */
	int64_t cost_ns;     /* control + DMA, serial as the stock driver does it */
	uint32_t throttles;  /* thrashing naps taken */
} gmx_um_batch_t;

/* Gathers the batch of missing pages the kernel raises from `at` (which must be
 * a missing page) and services it: at most 256 pages, and no further ahead than
 * the threads the GPU holds at once reach (gmx_um_inflight_pages; op NULL: 16 MB).
 * 0, or -ENOSPC when capacity cannot hold the batch. */
int gmx_um_service(gmx_memspace_t *m, const gmx_preset_t *dev, uint32_t task, const gmx_op_t *op,
		   const gmx_region_t *regions, uint32_t n_regions, gmx_access_cursor_t at, uint64_t stamp, int64_t now,
		   gmx_um_batch_t *out);

/* Pages of region r that kernel op's resident threads touch at once: the region
 * shared evenly over the grid's threads, times the threads the device holds
 * (sms x threads_per_sm); 0 when every thread is resident or the grid is unknown. */
uint64_t gmx_um_inflight_pages(const gmx_preset_t *dev, const gmx_op_t *op, const gmx_region_t *r);

/* Total pages of task's region list in m's layout (the kernel's access length). */
uint64_t gmx_um_access_pages(const gmx_memspace_t *m, uint32_t task, const gmx_region_t *regions,
			     uint32_t n_regions);

/* Advances the cursor to the next missing page; returns the pages passed over
 * (all resident). Sets *done when the access list ends first. */
uint64_t gmx_um_seek_missing(const gmx_memspace_t *m, uint32_t task, const gmx_region_t *regions,
			     uint32_t n_regions, gmx_access_cursor_t *cur, int *done);

#endif
