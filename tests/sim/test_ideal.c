/* Belady at 64 KB: a single task's misses equal a brute-force optimum. */
#include <string.h>

#include "sim_testutil.h"

#include "ideal.h"

#define PAGES 6
#define SEQ 9

/* Minimum misses over seq[pos..] with `resident` (bitmask) and capacity cap,
 * trying every eviction choice. */
static int brute(const int *seq, int n, int pos, unsigned resident, int cap)
{
	if (pos == n)
		return 0;
	unsigned p = 1u << seq[pos];
	if (resident & p)
		return brute(seq, n, pos + 1, resident, cap);
	if (__builtin_popcount(resident) < cap)
		return 1 + brute(seq, n, pos + 1, resident | p, cap);
	int best = 1 << 30;
	for (int v = 0; v < PAGES; v++)
		if (resident & (1u << v)) {
			int m = 1 + brute(seq, n, pos + 1, (resident & ~(1u << v)) | p, cap);
			if (m < best)
				best = m;
		}
	return best;
}

static void single_task_misses_match_brute_force(void **state)
{
	(void)state;
	uint64_t x = 99;
	for (int trial = 0; trial < 40; trial++) {
		int seq[SEQ];
		for (int i = 0; i < SEQ; i++) {
			x = x * 6364136223846793005ull + 1442695040888963407ull;
			seq[i] = (int)((x >> 33) % PAGES);
		}
		int cap = 2 + trial % 3;
		gmx_workload_t w;
		uint32_t buf, nm;
		assert_int_equal(gmx_workload_init(&w, "b"), 0);
		assert_int_equal(gmx_workload_add_buffer(&w, 0, PAGES * GMX_BIG_SIZE, NULL, &buf), 0);
		assert_int_equal(gmx_workload_intern_name(&w, "k", &nm), 0);
		for (int i = 0; i < SEQ; i++) {
			gmx_op_t op = {.kind = GMX_OP_KERNEL, .name = nm, .duration_ns = 1000, .buffer = UINT32_MAX};
			assert_int_equal(gmx_workload_add_op(&w, &op, NULL), 0);
			assert_int_equal(gmx_workload_add_region(&w, buf, (uint64_t)seq[i] * GMX_BIG_SIZE, 100), 0);
		}
		const gmx_workload_t *ws[1] = {&w};
		gmx_memspace_t m;
		assert_int_equal(gmx_memspace_init(&m, ws, 1, 64 * GMX_CHUNK_SIZE), 0);
		gmx_ideal_t *id;
		assert_int_equal(gmx_ideal_create(&m, ws, 1, (uint64_t)cap * GMX_BIG_SIZE, &id), 0);
		/* The warm start holds big pages 0..cap-1. */
		unsigned warm = (1u << cap) - 1;
		int64_t progress[1];
		for (int i = 0; i < SEQ; i++) {
			gmx_ideal_moves_t mv;
			progress[0] = gmx_ideal_task_time(id, 0, 0, (uint32_t)i);
			assert_int_equal(gmx_ideal_access(id, 0, 0, (uint32_t)i, progress, &mv), 0);
			assert_int_equal(gmx_ideal_check(id), 0);
		}
		uint64_t in, out;
		gmx_ideal_totals(id, &in, &out);
		/* The ideal sees the next unit too; ties beyond the horizon do not
		 * change the misses within it. */
		assert_int_equal((int)(in / GMX_BIG_SIZE), brute(seq, SEQ, 0, warm, cap));
		gmx_ideal_destroy(id);
		gmx_memspace_free(&m);
		gmx_workload_free(&w);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(single_task_misses_match_brute_force),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
