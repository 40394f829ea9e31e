/* Demand paging: batches, big-page growth, the tree prefetcher, thrashing. */
#include <stdlib.h>
#include <string.h>

#include "gpumux/gen.h"
#include "sim.h"

#include "sim_testutil.h"

#include "um.h"

static const gmx_preset_t *dev;

static void setup_space(gmx_workload_t *w, gmx_memspace_t *m, uint64_t size, uint64_t capacity)
{
	uint32_t b;
	assert_int_equal(gmx_workload_init(w, "t"), 0);
	assert_int_equal(gmx_workload_add_buffer(w, 0, size, NULL, &b), 0);
	const gmx_workload_t *ws[1] = {w};
	assert_int_equal(gmx_memspace_init(m, ws, 1, capacity), 0);
}

static void one_fault_grows_to_its_big_page(void **state)
{
	(void)state;
	gmx_workload_t w;
	gmx_memspace_t m;
	setup_space(&w, &m, 4 * GMX_CHUNK_SIZE, 64 * GMX_CHUNK_SIZE);
	gmx_region_t r = {.buffer = 0, .offset = 5 * 4096, .length = 4096};
	gmx_um_batch_t b;
	gmx_access_cursor_t at = {0, 0};
	assert_int_equal(gmx_um_service(&m, dev, 0, NULL, &r, 1, at, 1, 0, &b), 0);
	assert_int_equal(b.entries, 1);
	assert_int_equal(b.in_bytes, 64 * 1024);
	assert_int_equal(b.out_bytes, 0);
	/* control + set-up + 64 KB at the serial rate */
	assert_int_equal(b.cost_ns, dev->fault_batch_ns + dev->fault_entry_ns + dev->fault_dma_setup_ns +
					    (int64_t)(65536.0 / dev->link_serial_gbps));
	assert_true(gmx_memspace_resident(&m, 0) && gmx_memspace_resident(&m, 15) && !gmx_memspace_resident(&m, 16));
	gmx_memspace_free(&m);
	gmx_workload_free(&w);
}

static void a_sequential_sweep_takes_two_batches_per_chunk(void **state)
{
	(void)state;
	gmx_workload_t w;
	gmx_memspace_t m;
	setup_space(&w, &m, 8 * GMX_CHUNK_SIZE, 64 * GMX_CHUNK_SIZE);
	gmx_region_t r = {.buffer = 0, .offset = 0, .length = 8 * GMX_CHUNK_SIZE};
	gmx_access_cursor_t cur = {0, 0};
	uint32_t batches = 0;
	for (;;) {
		int done;
		gmx_um_seek_missing(&m, 0, &r, 1, &cur, &done);
		if (done)
			break;
		gmx_um_batch_t b;
		assert_int_equal(gmx_um_service(&m, dev, 0, NULL, &r, 1, cur, batches + 1, 0, &b), 0);
		assert_true(b.entries <= 256);
		batches++;
	}
	/* 256 faults cover half a block (1 MB of 4 KB pages); the prefetcher
	 * completes a block only once it is over 51% present. */
	assert_int_equal(batches, 16);
	assert_int_equal(m.h2d_bytes, 8 * GMX_CHUNK_SIZE);
	gmx_memspace_free(&m);
	gmx_workload_free(&w);
}

static void the_prefetcher_fetches_a_block_over_51_percent(void **state)
{
	(void)state;
	gmx_workload_t w;
	gmx_memspace_t m;
	setup_space(&w, &m, GMX_CHUNK_SIZE, 4 * GMX_CHUNK_SIZE);
	/* 16 of 32 big pages resident: exactly 50%, not over. One more fault
	 * in the other half tips the whole 2 MB block over 51%. */
	uint64_t half[8] = {~0ull, ~0ull, ~0ull, ~0ull, 0, 0, 0, 0}, in = 0, out = 0;
	gmx_memspace_populate(&m, 0, half, 1, 0, &in, &out);
	gmx_region_t r = {.buffer = 0, .offset = 31 * 65536, .length = 4096};
	gmx_um_batch_t b;
	gmx_access_cursor_t at = {0, 0};
	assert_int_equal(gmx_um_service(&m, dev, 0, NULL, &r, 1, at, 2, 0, &b), 0);
	assert_int_equal(b.in_bytes, GMX_CHUNK_SIZE / 2);
	assert_int_equal(m.chunks[0].resident, 512);
	gmx_memspace_free(&m);
	gmx_workload_free(&w);
}

static void quick_refaults_after_eviction_throttle(void **state)
{
	(void)state;
	gmx_workload_t w;
	gmx_memspace_t m;
	setup_space(&w, &m, 2 * GMX_CHUNK_SIZE, 1 * GMX_CHUNK_SIZE);
	gmx_region_t r[2] = {{.buffer = 0, .offset = 0, .length = 4096},
			     {.buffer = 0, .offset = GMX_CHUNK_SIZE, .length = 4096}};
	gmx_access_cursor_t at = {0, 0};
	uint32_t throttles = 0;
	int64_t now = 0;
	for (int i = 0; i < 8; i++) {
		gmx_um_batch_t b;
		assert_int_equal(gmx_um_service(&m, dev, 0, NULL, &r[i & 1], 1, at, (uint64_t)i + 1, now, &b), 0);
		throttles += b.throttles;
		now += 100000; /* 100 us apart: well inside the 500 us lapse */
	}
	assert_true(throttles >= 1);
	gmx_memspace_free(&m);
	gmx_workload_free(&w);
}

/* A kernel with more threads than the GPU holds at once (vector-add over 16M floats: 16.7M
 * threads, 84 x 1536 resident on the RTX 5080) faults only in the window its resident threads
 * touch: 126 pages of a 64 MB region, not 256, so a sweep takes three batches per 2 MB block
 * (512 KB, 512 KB, then the prefetcher's whole block: 0.67 MB per batch), as the paper's
 * microbenchmark counts (8.4k faults per 6 GB task, about 0.7 MB each). */
static void a_large_grid_faults_in_its_resident_window(void **state)
{
	(void)state;
	gmx_workload_t w;
	gmx_memspace_t m;
	setup_space(&w, &m, 32 * GMX_CHUNK_SIZE, 64 * GMX_CHUNK_SIZE);
	gmx_region_t r = {.buffer = 0, .offset = 0, .length = 32 * GMX_CHUNK_SIZE};
	gmx_op_t op = {.kind = GMX_OP_KERNEL, .grid = {65536, 1, 1}, .block = {256, 1, 1}};
	assert_int_equal(gmx_um_inflight_pages(dev, &op, &r), 126);
	gmx_op_t small = {.kind = GMX_OP_KERNEL, .grid = {84, 1, 1}, .block = {1536, 1, 1}};
	assert_int_equal(gmx_um_inflight_pages(dev, &small, &r), 0); /* all resident: no bound */
	gmx_access_cursor_t cur = {0, 0};
	uint32_t batches = 0;
	for (;;) {
		int done;
		gmx_um_seek_missing(&m, 0, &r, 1, &cur, &done);
		if (done)
			break;
		gmx_um_batch_t b;
		assert_int_equal(gmx_um_service(&m, dev, 0, &op, &r, 1, cur, batches + 1, 0, &b), 0);
		assert_true(b.entries <= 126);
		batches++;
	}
	assert_int_equal(batches, 3 * 32);
	assert_int_equal(m.h2d_bytes, 32 * GMX_CHUNK_SIZE);
	gmx_memspace_free(&m);
	gmx_workload_free(&w);
}

/* The engine hands the kernel to the fault path: the generated microbenchmark's vector-add
 * (16M floats, more threads than resident; two additions, 384 MiB) under um on 256 MiB faults
 * at most 126 pages per batch (the 256-page cap alone gives full batches). */
static void the_engine_faults_vector_add_in_its_window(void **state)
{
	(void)state;
	gmx_workload_t w;
	char msg[256];
	gmx_param_t p[2] = {{"n", "16777216"}, {"footprint", "402653184"}};
	assert_int_equal(gmx_gen_build("vector-add", p, 2, ".", &w, msg, sizeof(msg)), 0);
	gmx_sim_task_t task = {.name = "vadd", .units = 2, .workload = &w};
	gmx_sched_params_t sp;
	gmx_sched_params_default(&sp);
	gmx_sim_config_t cfg = {.device = dev, .capacity_bytes = 256ull << 20, .mem = GMX_MEM_UM,
				.policy = gmx_sched_find("timeslice"), .sched = sp, .duration_ns = 10000000000LL,
				.seed = 1, .tasks = &task, .n_tasks = 1};
	gmx_sim_result_t *res = calloc(1, sizeof(*res));
	char err[256];
	assert_int_equal(gmx_sim_run(&cfg, res, err, sizeof(err)), 0);
	assert_int_equal(res->tasks[0].units, 2);
	assert_true(res->faults > 100);
	assert_true(res->fault_entries <= 126 * res->faults);
	assert_true(res->fault_entries >= 100 * res->faults);
	free(res);
	gmx_workload_free(&w);
}

int main(void)
{
	dev = gmx_preset_find("rtx5080");
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(one_fault_grows_to_its_big_page),
		cmocka_unit_test(a_sequential_sweep_takes_two_batches_per_chunk),
		cmocka_unit_test(the_prefetcher_fetches_a_block_over_51_percent),
		cmocka_unit_test(quick_refaults_after_eviction_throttle),
		cmocka_unit_test(a_large_grid_faults_in_its_resident_window),
		cmocka_unit_test(the_engine_faults_vector_add_in_its_window),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
