/* How device allocations share memory: the packing rule of a caching allocator
 * (PyTorch's CUDACachingAllocator, the one every PyTorch program on a GPU
 * uses), shared by the generators, the importers and the daemon's accounting.
 *
 *  - sizes round up to 512 B;
 *  - a request of at most 1 MiB comes from the small pool, whose segments are
 *    2 MiB; a larger one from the large pool, whose segments are 20 MiB for
 *    requests under 10 MiB and the request rounded up to 2 MiB otherwise;
 *  - a request takes the smallest free block of its pool that holds it (best
 *    fit) and splits off the rest when that is at least 512 B (small pool) or
 *    over 1 MiB (large pool); a freed block merges with free neighbours;
 *  - a segment is one cudaMalloc: 2 MiB aligned, never returned.
 * Source: pytorch c10/cuda/CUDACachingAllocator.cpp (kMinBlockSize 512,
 * kSmallSize 1 MiB, kSmallBuffer 2 MiB, kLargeBuffer 20 MiB, kMinLargeAlloc
 * 10 MiB, kRoundLarge 2 MiB). Pure: no I/O. */
#ifndef GMX_DEVALLOC_H
#define GMX_DEVALLOC_H

#include <stdint.h>

#define GMX_DEVALLOC_ROUND 512ull
#define GMX_DEVALLOC_SMALL (1ull << 20)       /* largest small-pool request */
#define GMX_DEVALLOC_SMALL_SEG (2ull << 20)   /* small-pool segment */
#define GMX_DEVALLOC_LARGE_SEG (20ull << 20)  /* large-pool segment for requests under 10 MiB */
#define GMX_DEVALLOC_MIN_LARGE (10ull << 20)  /* from here a request gets its own segment */
#define GMX_DEVALLOC_ROUND_LARGE (2ull << 20) /* rounding of own segments; the VA block */

typedef struct gmx_devalloc_block {
	uint32_t seg;
	uint64_t off, size;
	uint8_t free, small;
} gmx_devalloc_block_t;

typedef struct gmx_devalloc {
	uint64_t *seg_size; /* every segment, in creation order */
	uint32_t n_seg, cap_seg;
	gmx_devalloc_block_t *blk; /* blocks, kept sorted by (seg, off) */
	uint32_t n_blk, cap_blk;
} gmx_devalloc_t;

/* An empty allocator. */
void gmx_devalloc_init(gmx_devalloc_t *a);

/* Frees its tables. */
void gmx_devalloc_free(gmx_devalloc_t *a);

/* Allocates `size` bytes (> 0): sets *seg and *off (offset in the segment),
 * creating a segment when no free block fits. 0 or -ENOMEM / -EINVAL. */
int gmx_devalloc_alloc(gmx_devalloc_t *a, uint64_t size, uint32_t *seg, uint64_t *off);

/* Returns the block that starts at (seg, off) to its pool. 0 or -ENOENT. */
int gmx_devalloc_release(gmx_devalloc_t *a, uint32_t seg, uint64_t off);

/* Bytes of all segments (what the process holds on the device). */
uint64_t gmx_devalloc_reserved(const gmx_devalloc_t *a);

/* Size of the segment a request of `size` bytes creates when nothing is free. */
uint64_t gmx_devalloc_segment_size(uint64_t size);

/* The driver's placement of a sequence of separate allocations (cudaMalloc):
 * each request rounded to 512 B; requests of up to 1 MiB fill 2 MiB blocks one
 * after another, a new block when the next does not fit (no request spans two
 * blocks); larger ones get their own 2 MiB-rounded ranges (the VA block is the
 * unit of residency). Zero-initialise; `chunks` is the 2 MiB chunks used so far. */
typedef struct gmx_devalloc_pack {
	uint64_t chunks;
	uint64_t block; /* chunk of the open small block */
	uint64_t fill;	/* its bytes handed out; 0 with none open */
} gmx_devalloc_pack_t;

/* Non-zero when a request of `size` bytes shares 2 MiB blocks with others. */
int gmx_devalloc_shares(uint64_t size);

/* Places the next allocation of `size` bytes by the rule above; returns its
 * byte offset from the start of the first chunk. */
uint64_t gmx_devalloc_pack_next(gmx_devalloc_pack_t *p, uint64_t size);

/* 2 MiB chunks that n separate allocations of sizes[i] occupy when the driver
 * packs them (gmx_devalloc_pack_next). */
uint64_t gmx_devalloc_chunks(const uint64_t *sizes, uint32_t n);

#endif
