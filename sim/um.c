/* Unified memory demand paging. Mechanics follow NVIDIA's open UVM driver
 * (open-gpu-kernel-modules, kernel-open/nvidia-uvm; see brief/msched.md):
 *  - uvm_gpu_replayable_faults.c: at most 256 fault entries per batch,
 *    duplicates coalesced, a batch serviced then replayed;
 *  - uvm_perf_prefetch.c: a fault grows to its 64 KB big page, and a bitmap
 *    tree over the 2 MB block prefetches the largest enclosing subregion that
 *    is over 51% resident-or-faulted;
 *  - uvm_pmm_gpu.c pick_root_chunk_to_evict: 2 MB root chunks evicted in the
 *    order they were populated, not by access;
 *  - uvm_perf_thrashing.c: 3 events each within 500 us throttle the page with
 *    a 500 us nap. (Pinning after 10 throttles is not modelled.)
 * Costs are the preset's (MSched paper, RTX 5080): fault_batch_ns of control
 * per batch, fault_entry_ns per faulted page, plus DMA at the serial swap rate. */
#include "um.h"

#include <errno.h>
#include <string.h>

#define UM_BATCH_MAX_ENTRIES 256             /* uvm_gpu_replayable_faults.h */
#define UM_FAULT_WINDOW_BYTES (16ull << 20)  /* accesses in flight ahead of the first fault */
#define UM_PREFETCH_THRESHOLD_PCT 51         /* uvm_perf_prefetch.c default threshold */
#define UM_THRASH_LAPSE_NS 500000            /* uvm_perf_thrashing.c lapse */
#define UM_THRASH_EVENTS 3                   /* events before throttling */
#define UM_THRASH_NAP_NS 500000              /* throttling nap */

/* Pages region r covers where task's buffers lie in m (a buffer that shares its
 * chunk need not start on a page). */
static void region_pages(const gmx_memspace_t *m, uint32_t task, const gmx_region_t *r, uint64_t *first,
			 uint64_t *count)
{
	*first = gmx_memspace_page(m, task, r->buffer, r->offset);
	*count = gmx_memspace_page(m, task, r->buffer, r->offset + r->length - 1) - *first + 1;
}

uint64_t gmx_um_access_pages(const gmx_memspace_t *m, uint32_t task, const gmx_region_t *regions,
			     uint32_t n_regions)
{
	uint64_t total = 0;
	for (uint32_t i = 0; i < n_regions; i++) {
		uint64_t first, count;
		region_pages(m, task, &regions[i], &first, &count);
		total += count;
	}
	return total;
}

uint64_t gmx_um_seek_missing(const gmx_memspace_t *m, uint32_t task, const gmx_region_t *regions,
			     uint32_t n_regions, gmx_access_cursor_t *cur, int *done)
{
	uint64_t passed = 0;
	*done = 0;
	while (cur->region < n_regions) {
		uint64_t first, count;
		region_pages(m, task, &regions[cur->region], &first, &count);
		uint64_t p = gmx_memspace_next_missing(m, first + cur->page, first + count);
		passed += p - (first + cur->page);
		if (p < first + count) {
			cur->page = p - first;
			return passed;
		}
		cur->region++;
		cur->page = 0;
	}
	*done = 1;
	return passed;
}

struct batch_chunk {
	uint32_t chunk;
	uint64_t faulted[8];
};

/* Big pages (bit i = big page i) of a chunk that are fully resident. */
static uint32_t resident_bigs(const gmx_chunk_t *k)
{
	uint32_t mask = 0;
	for (uint32_t b = 0; b < GMX_BIGS_PER_CHUNK; b++) {
		uint32_t lo = b * GMX_PAGES_PER_BIG;
		if (lo >= k->valid) {
			mask |= 1u << b; /* pages past the buffer's end count as present */
			continue;
		}
		uint64_t bits = (k->bits[lo >> 6] >> (lo & 63)) & 0xffffull;
		uint32_t need = k->valid - lo >= GMX_PAGES_PER_BIG ? 0xffffu : ((1u << (k->valid - lo)) - 1);
		if ((bits & need) == need)
			mask |= 1u << b;
	}
	return mask;
}

/* The tree prefetcher: from the faulted big pages, the big pages to fetch. */
static uint32_t prefetch_bigs(uint32_t faulted, uint32_t resident)
{
	uint32_t fetch = faulted, present = faulted | resident;
	for (uint32_t size = GMX_BIGS_PER_CHUNK; size >= 2; size /= 2) {
		uint32_t group = size == 32 ? 0xffffffffu : ((1u << size) - 1);
		for (uint32_t lo = 0; lo < GMX_BIGS_PER_CHUNK; lo += size) {
			uint32_t g = group << lo;
			if (!(faulted & g) || (fetch & g) == g)
				continue;
			if ((uint32_t)__builtin_popcount(present & g) * 100 > UM_PREFETCH_THRESHOLD_PCT * size)
				fetch |= g;
		}
	}
	return fetch;
}

uint64_t gmx_um_inflight_pages(const gmx_preset_t *dev, const gmx_op_t *op, const gmx_region_t *r)
{
	if (!op || !dev->sms || !dev->threads_per_sm)
		return 0;
	uint64_t threads = (uint64_t)op->grid[0] * op->grid[1] * op->grid[2] * op->block[0] * op->block[1] * op->block[2];
	uint64_t resident = (uint64_t)dev->sms * dev->threads_per_sm;
	if (!threads || resident >= threads)
		return 0;
	uint64_t pages = ((r->offset + r->length - 1) >> GMX_PAGE_SHIFT) - (r->offset >> GMX_PAGE_SHIFT) + 1;
	uint64_t w = (pages * resident + threads - 1) / threads;
	return w ? w : 1;
}

int gmx_um_service(gmx_memspace_t *m, const gmx_preset_t *dev, uint32_t task, const gmx_op_t *op,
		   const gmx_region_t *regions, uint32_t n_regions, gmx_access_cursor_t at, uint64_t stamp, int64_t now,
		   gmx_um_batch_t *out)
{
	struct batch_chunk chunks[UM_BATCH_MAX_ENTRIES];
	uint32_t n_chunks = 0, entries = 0, max_entries = UM_BATCH_MAX_ENTRIES;
	uint64_t window = UM_FAULT_WINDOW_BYTES >> GMX_PAGE_SHIFT, scanned = 0;
	/* The faults come from the threads in flight: a kernel with more threads than
	 * the GPU holds at once faults only in the part of the region they touch. */
	uint64_t inflight = at.region < n_regions ? gmx_um_inflight_pages(dev, op, &regions[at.region]) : 0;
	if (inflight && inflight < window)
		window = inflight;
	if (window < max_entries)
		max_entries = (uint32_t)window;
	memset(out, 0, sizeof(*out));

	/* Gather: the first missing pages the kernel's in-flight accesses reach. */
	gmx_access_cursor_t cur = at;
	while (entries < max_entries && scanned < window) {
		int done;
		scanned += gmx_um_seek_missing(m, task, regions, n_regions, &cur, &done);
		if (done)
			break;
		uint64_t first, count;
		region_pages(m, task, &regions[cur.region], &first, &count);
		uint64_t p = first + cur.page;
		uint32_t c = (uint32_t)(p >> 9);
		struct batch_chunk *bc = n_chunks ? &chunks[n_chunks - 1] : NULL;
		if (!bc || bc->chunk != c) {
			bc = NULL;
			for (uint32_t i = 0; i < n_chunks; i++)
				if (chunks[i].chunk == c)
					bc = &chunks[i];
			if (!bc) {
				bc = &chunks[n_chunks++];
				memset(bc, 0, sizeof(*bc));
				bc->chunk = c;
			}
		}
		uint64_t bit = 1ull << (p & 63);
		if (!(bc->faulted[(p & 511) >> 6] & bit)) {
			bc->faulted[(p & 511) >> 6] |= bit;
			entries++;
		}
		cur.page++;
		scanned++;
	}
	if (!entries)
		return 0;

	/* Service: grow to big pages, prefetch within each block, migrate. */
	int64_t nap = 0;
	for (uint32_t i = 0; i < n_chunks; i++) {
		gmx_chunk_t *k = &m->chunks[chunks[i].chunk];
		uint32_t faulted = 0;
		for (uint32_t b = 0; b < GMX_BIGS_PER_CHUNK; b++) {
			uint32_t lo = b * GMX_PAGES_PER_BIG;
			if ((chunks[i].faulted[lo >> 6] >> (lo & 63)) & 0xffffull)
				faulted |= 1u << b;
		}
		uint32_t fetch = prefetch_bigs(faulted, resident_bigs(k));
		uint64_t mask[8] = {0};
		for (uint32_t b = 0; b < GMX_BIGS_PER_CHUNK; b++)
			if (fetch & (1u << b))
				mask[(b * GMX_PAGES_PER_BIG) >> 6] |= 0xffffull << ((b * GMX_PAGES_PER_BIG) & 63);
		if (!k->resident && k->evicted_at >= 0) {
			/* Re-faulted soon after its eviction: a thrashing event. */
			if (now - k->evicted_at < UM_THRASH_LAPSE_NS) {
				if (++k->thrash_events >= UM_THRASH_EVENTS) {
					nap += UM_THRASH_NAP_NS;
					k->thrash_events = 0;
					k->throttles++;
					out->throttles++;
				}
			} else {
				k->thrash_events = 0;
			}
		}
		int64_t rc = gmx_memspace_populate(m, chunks[i].chunk, mask, stamp, now, &out->in_bytes,
						   &out->out_bytes);
		if (rc < 0)
			return (int)rc;
	}
	out->entries = entries;
	double bytes = (double)(out->in_bytes + out->out_bytes);
	out->cost_ns = dev->fault_batch_ns + (int64_t)entries * dev->fault_entry_ns + dev->fault_dma_setup_ns +
		       (int64_t)(bytes / dev->link_serial_gbps) + nap;
	return 0;
}
