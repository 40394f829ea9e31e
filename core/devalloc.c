/* The caching allocator's packing rule (include/gpumux/devalloc.h). */
#include "gpumux/devalloc.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

static uint64_t round_up(uint64_t v, uint64_t to)
{
	return (v + to - 1) / to * to;
}

void gmx_devalloc_init(gmx_devalloc_t *a)
{
	memset(a, 0, sizeof(*a));
}

void gmx_devalloc_free(gmx_devalloc_t *a)
{
	free(a->seg_size);
	free(a->blk);
	memset(a, 0, sizeof(*a));
}

uint64_t gmx_devalloc_segment_size(uint64_t size)
{
	size = round_up(size ? size : 1, GMX_DEVALLOC_ROUND);
	if (size <= GMX_DEVALLOC_SMALL)
		return GMX_DEVALLOC_SMALL_SEG;
	if (size < GMX_DEVALLOC_MIN_LARGE)
		return GMX_DEVALLOC_LARGE_SEG;
	return round_up(size, GMX_DEVALLOC_ROUND_LARGE);
}

/* Inserts a block at index i. */
static int insert(gmx_devalloc_t *a, uint32_t i, gmx_devalloc_block_t b)
{
	if (a->n_blk == a->cap_blk) {
		uint32_t nc = a->cap_blk ? 2 * a->cap_blk : 64;
		gmx_devalloc_block_t *p = realloc(a->blk, nc * sizeof(*p));
		if (!p)
			return -ENOMEM;
		a->blk = p;
		a->cap_blk = nc;
	}
	memmove(&a->blk[i + 1], &a->blk[i], (a->n_blk - i) * sizeof(*a->blk));
	a->blk[i] = b;
	a->n_blk++;
	return 0;
}

static void remove_at(gmx_devalloc_t *a, uint32_t i)
{
	memmove(&a->blk[i], &a->blk[i + 1], (a->n_blk - i - 1) * sizeof(*a->blk));
	a->n_blk--;
}

int gmx_devalloc_alloc(gmx_devalloc_t *a, uint64_t size, uint32_t *seg, uint64_t *off)
{
	if (!size)
		return -EINVAL;
	size = round_up(size, GMX_DEVALLOC_ROUND);
	uint8_t small = size <= GMX_DEVALLOC_SMALL;
	uint32_t best = UINT32_MAX;
	for (uint32_t i = 0; i < a->n_blk; i++) {
		const gmx_devalloc_block_t *b = &a->blk[i];
		if (b->free && b->small == small && b->size >= size && (best == UINT32_MAX || b->size < a->blk[best].size))
			best = i;
	}
	if (best == UINT32_MAX) {
		if (a->n_seg == a->cap_seg) {
			uint32_t nc = a->cap_seg ? 2 * a->cap_seg : 16;
			uint64_t *p = realloc(a->seg_size, nc * sizeof(*p));
			if (!p)
				return -ENOMEM;
			a->seg_size = p;
			a->cap_seg = nc;
		}
		uint64_t ss = gmx_devalloc_segment_size(size);
		a->seg_size[a->n_seg] = ss;
		gmx_devalloc_block_t nb = {.seg = a->n_seg, .off = 0, .size = ss, .free = 1, .small = small};
		a->n_seg++;
		if (insert(a, a->n_blk, nb))
			return -ENOMEM;
		best = a->n_blk - 1;
	}
	gmx_devalloc_block_t *b = &a->blk[best];
	uint64_t rest = b->size - size;
	if (small ? rest >= GMX_DEVALLOC_ROUND : rest > GMX_DEVALLOC_SMALL) {
		gmx_devalloc_block_t tail = {.seg = b->seg, .off = b->off + size, .size = rest, .free = 1, .small = small};
		b->size = size;
		if (insert(a, best + 1, tail))
			return -ENOMEM;
		b = &a->blk[best];
	}
	b->free = 0;
	*seg = b->seg;
	*off = b->off;
	return 0;
}

int gmx_devalloc_release(gmx_devalloc_t *a, uint32_t seg, uint64_t off)
{
	for (uint32_t i = 0; i < a->n_blk; i++) {
		gmx_devalloc_block_t *b = &a->blk[i];
		if (b->seg != seg || b->off != off || b->free)
			continue;
		b->free = 1;
		if (i + 1 < a->n_blk && a->blk[i + 1].free && a->blk[i + 1].seg == seg) {
			b->size += a->blk[i + 1].size;
			remove_at(a, i + 1);
		}
		if (i > 0 && a->blk[i - 1].free && a->blk[i - 1].seg == seg) {
			a->blk[i - 1].size += a->blk[i].size;
			remove_at(a, i);
		}
		return 0;
	}
	return -ENOENT;
}

uint64_t gmx_devalloc_reserved(const gmx_devalloc_t *a)
{
	uint64_t s = 0;
	for (uint32_t i = 0; i < a->n_seg; i++)
		s += a->seg_size[i];
	return s;
}

int gmx_devalloc_shares(uint64_t size)
{
	/* the same as its 512 B rounding (GMX_DEVALLOC_SMALL is a multiple of 512), which would
	 * wrap for a size within 511 bytes of 2^64 */
	return size <= GMX_DEVALLOC_SMALL;
}

uint64_t gmx_devalloc_pack_next(gmx_devalloc_pack_t *p, uint64_t size)
{
	if (!gmx_devalloc_shares(size)) {
		uint64_t at = p->chunks * GMX_DEVALLOC_ROUND_LARGE;
		/* chunks counted without rounding the size up first (no wrap near 2^64) */
		p->chunks += size / GMX_DEVALLOC_ROUND_LARGE + (size % GMX_DEVALLOC_ROUND_LARGE != 0);
		return at;
	}
	uint64_t s = round_up(size ? size : 1, GMX_DEVALLOC_ROUND);
	if (!p->fill || p->fill + s > GMX_DEVALLOC_SMALL_SEG) {
		p->block = p->chunks++;
		p->fill = 0;
	}
	uint64_t at = p->block * GMX_DEVALLOC_SMALL_SEG + p->fill;
	p->fill += s;
	return at;
}

uint64_t gmx_devalloc_chunks(const uint64_t *sizes, uint32_t n)
{
	gmx_devalloc_pack_t p = {0};
	for (uint32_t i = 0; i < n; i++)
		(void)gmx_devalloc_pack_next(&p, sizes[i]);
	return p.chunks;
}
