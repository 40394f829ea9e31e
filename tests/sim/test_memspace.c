/* Residency bitmaps, population-order eviction and byte conservation. */
#include <string.h>

#include "sim_testutil.h"

#include "memspace.h"

static void layout_puts_each_buffer_on_its_own_chunks(void **state)
{
	(void)state;
	gmx_workload_t w;
	uint32_t b;
	assert_int_equal(gmx_workload_init(&w, "t"), 0);
	assert_int_equal(gmx_workload_add_buffer(&w, 0, 3 * GMX_CHUNK_SIZE + 5, NULL, &b), 0);
	assert_int_equal(gmx_workload_add_buffer(&w, 0, 4096, NULL, &b), 0);
	const gmx_workload_t *ws[1] = {&w};
	gmx_memspace_t m;
	assert_int_equal(gmx_memspace_init(&m, ws, 1, 64 * GMX_CHUNK_SIZE), 0);
	assert_int_equal(m.n_chunks, 5);
	assert_int_equal(m.buf_addr[0][1], 4 * GMX_CHUNK_SIZE);
	assert_int_equal(m.chunks[3].valid, 1);   /* 5 bytes: one page */
	assert_int_equal(m.chunks[4].valid, 1);
	assert_int_equal(gmx_memspace_page(&m, 0, 1, 0), 4 * 512);
	gmx_memspace_free(&m);
	gmx_workload_free(&w);
}

static void next_missing_skips_resident_pages(void **state)
{
	(void)state;
	gmx_workload_t w;
	uint32_t b;
	assert_int_equal(gmx_workload_init(&w, "t"), 0);
	assert_int_equal(gmx_workload_add_buffer(&w, 0, 4 * GMX_CHUNK_SIZE, NULL, &b), 0);
	const gmx_workload_t *ws[1] = {&w};
	gmx_memspace_t m;
	assert_int_equal(gmx_memspace_init(&m, ws, 1, 64 * GMX_CHUNK_SIZE), 0);
	uint64_t all[8], in = 0, out = 0;
	memset(all, 0xff, sizeof(all));
	assert_int_equal(gmx_memspace_populate(&m, 0, all, 1, 0, &in, &out), 512);
	uint64_t some[8] = {0x7, 0, 0, 0, 0, 0, 0, 0};
	assert_int_equal(gmx_memspace_populate(&m, 1, some, 1, 0, &in, &out), 3);
	assert_int_equal(gmx_memspace_next_missing(&m, 0, 4 * 512), 512 + 3);
	assert_int_equal(gmx_memspace_next_missing(&m, 0, 300), 300);
	assert_int_equal(in, 515 * 4096);
	char err[128];
	assert_int_equal(gmx_memspace_check(&m, err, sizeof(err)), 0);
	gmx_memspace_free(&m);
	gmx_workload_free(&w);
}

static void eviction_follows_population_order_not_access(void **state)
{
	(void)state;
	gmx_workload_t w;
	uint32_t b;
	assert_int_equal(gmx_workload_init(&w, "t"), 0);
	assert_int_equal(gmx_workload_add_buffer(&w, 0, 4 * GMX_CHUNK_SIZE, NULL, &b), 0);
	const gmx_workload_t *ws[1] = {&w};
	gmx_memspace_t m;
	assert_int_equal(gmx_memspace_init(&m, ws, 1, 2 * GMX_CHUNK_SIZE), 0);
	uint64_t one[8] = {1, 0, 0, 0, 0, 0, 0, 0}, in = 0, out = 0;
	gmx_memspace_populate(&m, 2, one, 1, 0, &in, &out);
	gmx_memspace_populate(&m, 0, one, 2, 0, &in, &out);
	/* Touching chunk 2 again does not move it: FIFO by population. */
	uint64_t two[8] = {2, 0, 0, 0, 0, 0, 0, 0};
	gmx_memspace_populate(&m, 2, two, 3, 0, &in, &out);
	gmx_memspace_populate(&m, 1, one, 4, 0, &in, &out);
	assert_int_equal(m.chunks[2].resident, 0); /* oldest population evicted */
	assert_int_equal(m.chunks[0].resident, 1);
	assert_int_equal(out, 2 * 4096);
	char err[128];
	assert_int_equal(gmx_memspace_check(&m, err, sizeof(err)), 0);
	assert_true(m.used_chunks <= m.capacity_chunks);
	gmx_memspace_free(&m);
	gmx_workload_free(&w);
}

static void a_batch_never_evicts_its_own_chunks(void **state)
{
	(void)state;
	gmx_workload_t w;
	uint32_t b;
	assert_int_equal(gmx_workload_init(&w, "t"), 0);
	assert_int_equal(gmx_workload_add_buffer(&w, 0, 4 * GMX_CHUNK_SIZE, NULL, &b), 0);
	const gmx_workload_t *ws[1] = {&w};
	gmx_memspace_t m;
	assert_int_equal(gmx_memspace_init(&m, ws, 1, 1 * GMX_CHUNK_SIZE), 0);
	uint64_t one[8] = {1, 0, 0, 0, 0, 0, 0, 0}, in = 0, out = 0;
	assert_int_equal(gmx_memspace_populate(&m, 0, one, 7, 0, &in, &out), 1);
	assert_int_equal(gmx_memspace_populate(&m, 1, one, 7, 0, &in, &out), -28 /* -ENOSPC */);
	gmx_memspace_free(&m);
	gmx_workload_free(&w);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(layout_puts_each_buffer_on_its_own_chunks),
		cmocka_unit_test(next_missing_skips_resident_pages),
		cmocka_unit_test(eviction_follows_population_order_not_access),
		cmocka_unit_test(a_batch_never_evicts_its_own_chunks),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
