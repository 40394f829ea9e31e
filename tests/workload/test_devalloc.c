/* The caching allocator's packing rule (core/devalloc.c): small requests share
 * 2 MiB segments, mid-sized ones 20 MiB segments, large ones get their own;
 * best fit, splitting and merging; the cudaMalloc chunk count. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <errno.h>
#include <stdlib.h>

#include <cmocka.h>

#include "gpumux/devalloc.h"

#define MIB (1ull << 20)

static void test_small_share_a_segment(void **state)
{
	(void)state;
	gmx_devalloc_t a;
	gmx_devalloc_init(&a);
	uint32_t seg;
	uint64_t off, prev = 0;
	for (int i = 0; i < 100; i++) { /* 100 BN vectors of 1 KB: one 2 MiB segment, 512 B aligned */
		assert_int_equal(gmx_devalloc_alloc(&a, 1000, &seg, &off), 0);
		assert_int_equal(seg, 0);
		if (i)
			assert_int_equal(off, prev + 1024);
		prev = off;
	}
	assert_int_equal(a.n_seg, 1);
	assert_int_equal(gmx_devalloc_reserved(&a), 2 * MIB);
	gmx_devalloc_free(&a);
}

static void test_segment_sizes(void **state)
{
	(void)state;
	assert_int_equal(gmx_devalloc_segment_size(1), 2 * MIB);
	assert_int_equal(gmx_devalloc_segment_size(MIB), 2 * MIB);
	assert_int_equal(gmx_devalloc_segment_size(MIB + 1), 20 * MIB);
	assert_int_equal(gmx_devalloc_segment_size(10 * MIB - 512), 20 * MIB);
	assert_int_equal(gmx_devalloc_segment_size(10 * MIB), 10 * MIB);
	assert_int_equal(gmx_devalloc_segment_size(11 * MIB + 1), 12 * MIB);
	gmx_devalloc_t a;
	gmx_devalloc_init(&a);
	uint32_t s1, s2, s3;
	uint64_t o1, o2, o3;
	/* three 5 MiB requests share one 20 MiB segment: each split leaves more than 1 MiB */
	assert_int_equal(gmx_devalloc_alloc(&a, 5 * MIB, &s1, &o1), 0);
	assert_int_equal(gmx_devalloc_alloc(&a, 5 * MIB, &s2, &o2), 0);
	assert_int_equal(gmx_devalloc_alloc(&a, 5 * MIB, &s3, &o3), 0);
	assert_int_equal(s1, 0);
	assert_int_equal(s2, 0);
	assert_int_equal(s3, 0);
	assert_int_equal(o3, 10 * MIB);
	assert_int_equal(a.n_seg, 1);
	gmx_devalloc_free(&a);
}

static void test_best_fit_and_merge(void **state)
{
	(void)state;
	gmx_devalloc_t a;
	gmx_devalloc_init(&a);
	uint32_t s[3];
	uint64_t o[3];
	assert_int_equal(gmx_devalloc_alloc(&a, 64 * MIB, &s[0], &o[0]), 0);
	assert_int_equal(gmx_devalloc_alloc(&a, 32 * MIB, &s[1], &o[1]), 0);
	assert_int_equal(a.n_seg, 2);
	assert_int_equal(gmx_devalloc_release(&a, s[0], o[0]), 0);
	assert_int_equal(gmx_devalloc_release(&a, s[1], o[1]), 0);
	assert_int_equal(gmx_devalloc_release(&a, s[1], o[1]), -ENOENT); /* not allocated any more */
	/* 30 MiB takes the smaller free segment (best fit), and the rest (2 MiB > 1 MiB) splits */
	assert_int_equal(gmx_devalloc_alloc(&a, 30 * MIB, &s[2], &o[2]), 0);
	assert_int_equal(s[2], 1);
	assert_int_equal(gmx_devalloc_release(&a, s[2], o[2]), 0);
	/* merged back: the whole 32 MiB segment serves 32 MiB again, no new segment */
	assert_int_equal(gmx_devalloc_alloc(&a, 32 * MIB, &s[2], &o[2]), 0);
	assert_int_equal(s[2], 1);
	assert_int_equal(o[2], 0);
	assert_int_equal(a.n_seg, 2);
	assert_int_equal(gmx_devalloc_alloc(&a, 0, &s[2], &o[2]), -EINVAL);
	gmx_devalloc_free(&a);
}

static void test_cudamalloc_chunks(void **state)
{
	(void)state;
	uint64_t sizes[300];
	for (int i = 0; i < 300; i++)
		sizes[i] = 4096; /* 300 small buffers: one 2 MiB block per 512 of them, not 300 chunks */
	assert_int_equal(gmx_devalloc_chunks(sizes, 300), 1);
	sizes[0] = 3 * MIB; /* a large one: its own 2 chunks */
	assert_int_equal(gmx_devalloc_chunks(sizes, 300), 3);
	uint64_t mid[3] = {MIB, MIB, 512}; /* two 1 MiB requests fill a block; the third opens one */
	assert_int_equal(gmx_devalloc_chunks(mid, 3), 2);
	assert_int_equal(gmx_devalloc_chunks(NULL, 0), 0);
}

static void test_cudamalloc_placement(void **state)
{
	(void)state;
	gmx_devalloc_pack_t p = {0};
	assert_int_equal(gmx_devalloc_pack_next(&p, 1000), 0);		/* opens block 0 */
	assert_int_equal(gmx_devalloc_pack_next(&p, 3 * MIB), 2 * MIB); /* own chunks 1-2 */
	assert_int_equal(gmx_devalloc_pack_next(&p, MIB), 1024);	/* back in block 0, after 1,024 B */
	assert_int_equal(gmx_devalloc_pack_next(&p, MIB), 6 * MIB);	/* does not fit: block 3 */
	assert_int_equal(p.chunks, 4);
	assert_true(gmx_devalloc_shares(MIB));
	assert_false(gmx_devalloc_shares(MIB + 1));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_small_share_a_segment),
		cmocka_unit_test(test_segment_sizes),
		cmocka_unit_test(test_best_fit_and_merge),
		cmocka_unit_test(test_cudamalloc_chunks),
		cmocka_unit_test(test_cudamalloc_placement),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
