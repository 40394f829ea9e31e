/* Buffers laid out in the simulator's page space as the driver packs separate
 * cudaMallocs (include/gpumux/devalloc.h): buffers of up to 1 MiB share 2 MiB
 * chunks of their own task, each keeping its own bytes, and a device that holds
 * the packed chunks runs without paging where a chunk per buffer would not. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "sim_testutil.h"

#include "gpumux/devalloc.h"
#include "memspace.h"
#include "sim.h"

#define KIB 1024ull
#define MIB (1ull << 20)
#define SMALL 302u /* buffers of 300 KiB: 6 to a 2 MiB chunk */

/* A 20 us kernel named nm touching buffers [lo, hi] whole. */
static void kernel(gmx_workload_t *w, uint32_t nm, uint32_t lo, uint32_t hi)
{
	gmx_op_t op = {.kind = GMX_OP_KERNEL,
		       .klass = GMX_CLASS_MEMORY,
		       .name = nm,
		       .duration_ns = 20000,
		       .buffer = UINT32_MAX};
	assert_int_equal(gmx_workload_add_op(w, &op, NULL), 0);
	for (uint32_t k = lo; k <= hi; k++) {
		assert_int_equal(gmx_workload_add_arg(w, w->buffers[k].addr, 1, 8), 0);
		assert_int_equal(gmx_workload_add_region(w, k, 0, w->buffers[k].size), 0);
	}
}

/* SMALL buffers of 300 KiB with one of 5 MiB after the 100th; kernel i touches
 * buffers i and i + 1 whole, and one last kernel touches every buffer. */
static void build(gmx_workload_t *w, const char *name)
{
	uint32_t b, nm;
	assert_int_equal(gmx_workload_init(w, name), 0);
	for (uint32_t i = 0; i < SMALL; i++) {
		assert_int_equal(gmx_workload_add_buffer(w, 0, 300 * KIB, NULL, &b), 0);
		if (i == 100)
			assert_int_equal(gmx_workload_add_buffer(w, 0, 5 * MIB, NULL, &b), 0);
	}
	assert_int_equal(gmx_workload_intern_name(w, "k", &nm), 0);
	for (uint32_t i = 0; i + 1 < w->n_buffers; i++)
		kernel(w, nm, i, i + 1);
	kernel(w, nm, 0, w->n_buffers - 1);
	gmx_op_t sync = {.kind = GMX_OP_SYNC, .stream = -1, .buffer = UINT32_MAX};
	assert_int_equal(gmx_workload_add_op(w, &sync, NULL), 0);
}

static uint64_t driver_chunks(const gmx_workload_t *w)
{
	uint64_t *sizes = calloc(w->n_buffers, sizeof(*sizes));
	assert_non_null(sizes);
	for (uint32_t b = 0; b < w->n_buffers; b++)
		sizes[b] = w->buffers[b].size;
	uint64_t n = gmx_devalloc_chunks(sizes, w->n_buffers);
	free(sizes);
	return n;
}

static void small_buffers_share_their_tasks_chunks(void **state)
{
	(void)state;
	gmx_workload_t a, b;
	build(&a, "a");
	build(&b, "b");
	const gmx_workload_t *ws[2] = {&a, &b};
	gmx_memspace_t m;
	assert_int_equal(gmx_memspace_init(&m, ws, 2, 1ull << 30), 0);
	/* 50 chunks of six small buffers each, one of two, 3 for the large one, per task */
	uint64_t per_task = driver_chunks(&a);
	assert_int_equal(per_task, 54);
	assert_int_equal(m.n_chunks, 2 * per_task);
	assert_int_equal(m.task_chunk[1], per_task);
	assert_int_equal(m.task_chunk[2], 2 * per_task);
	for (uint32_t t = 0; t < 2; t++) {
		const gmx_workload_t *w = ws[t];
		for (uint32_t k = 0; k < w->n_buffers; k++) {
			uint64_t lo = m.buf_addr[t][k], end = lo + w->buffers[k].size;
			/* its own bytes: after the buffer before it in its chunk, never across a chunk
			 * boundary unless it is large, and in chunks of its own task */
			if (k && (m.buf_addr[t][k - 1] >> GMX_CHUNK_SHIFT) == (lo >> GMX_CHUNK_SHIFT))
				assert_true(m.buf_addr[t][k - 1] + w->buffers[k - 1].size <= lo);
			if (w->buffers[k].size <= MIB)
				assert_int_equal(lo >> GMX_CHUNK_SHIFT, (end - 1) >> GMX_CHUNK_SHIFT);
			else
				assert_int_equal(lo % GMX_CHUNK_SIZE, 0);
			for (uint64_t c = lo >> GMX_CHUNK_SHIFT; c <= (end - 1) >> GMX_CHUNK_SHIFT; c++)
				assert_int_equal(m.chunks[c].task, t);
			assert_int_equal(gmx_memspace_page(&m, t, k, 0), lo >> GMX_PAGE_SHIFT);
		}
	}
	/* a full small chunk: six buffers, 1,800 KiB, 450 pages; the last one holds two
	 * (600 KiB, 150 pages); the large buffer's last chunk 1 MiB (256 pages) */
	uint32_t c0 = (uint32_t)(m.buf_addr[0][0] >> GMX_CHUNK_SHIFT);
	assert_int_equal(m.chunks[c0].valid, 450);
	uint32_t last = (uint32_t)(m.buf_addr[0][SMALL] >> GMX_CHUNK_SHIFT);
	assert_int_equal(m.chunks[last].valid, 150);
	uint32_t big_end = (uint32_t)((m.buf_addr[0][101] + 5 * MIB - 1) >> GMX_CHUNK_SHIFT);
	assert_int_equal(m.chunks[big_end].valid, 256);
	/* the warm start fills exactly the valid pages */
	gmx_memspace_warm(&m);
	uint64_t pages = 0;
	for (uint32_t c = 0; c < m.n_chunks; c++)
		pages += m.chunks[c].valid;
	assert_int_equal(m.resident_pages, pages);
	char err[128];
	assert_int_equal(gmx_memspace_check(&m, err, sizeof(err)), 0);
	gmx_memspace_free(&m);
	gmx_workload_free(&a);
	gmx_workload_free(&b);
}

/* 128 MiB holds the 54 packed chunks (108 MiB) but not a chunk per buffer (305
 * chunks, 610 MiB; the last kernel alone would touch all of them): every memory
 * mode runs the workload without moving a byte. */
static void packed_footprint_runs_without_paging(void **state)
{
	(void)state;
	gmx_workload_t w;
	build(&w, "small");
	const gmx_mem_mode_t modes[] = {GMX_MEM_UM, GMX_MEM_IDEAL, GMX_MEM_MSCHED};
	for (size_t i = 0; i < sizeof(modes) / sizeof(modes[0]); i++) {
		gmx_sim_result_t *r = tu_run_alone(&w, modes[i], 128 * MIB, 100000000LL);
		assert_true(r->tasks[0].units > 0);
		assert_int_equal(r->h2d_bytes + r->d2h_bytes, 0);
		free(r);
	}
	gmx_workload_free(&w);
}

/* A workload file bounds a buffer only by the address space (addr + size < 2^64):
 * one within 511 bytes of 2^64 (whose 512 B rounding wraps to 0) beside a small
 * one whose size wraps the footprint's sum is refused, never laid out. */
static void buffers_near_2_64_refused(void **state)
{
	(void)state;
	gmx_workload_t w;
	uint32_t b, nm;
	assert_int_equal(gmx_workload_init(&w, "huge"), 0);
	assert_int_equal(gmx_workload_add_buffer(&w, 1, UINT64_MAX - 1, "huge", &b), 0);
	assert_int_equal(gmx_workload_add_buffer(&w, 1ull << 20, 4 * KIB, "small", &b), 0);
	assert_int_equal(gmx_workload_intern_name(&w, "k", &nm), 0);
	kernel(&w, nm, 1, 1);
	assert_false(gmx_devalloc_shares(UINT64_MAX - 1));
	assert_true(gmx_workload_footprint(&w) == UINT64_MAX);
	const gmx_workload_t *ws[1] = {&w};
	gmx_memspace_t m;
	assert_int_equal(gmx_memspace_init(&m, ws, 1, 1ull << 30), -E2BIG);
	gmx_sim_task_t t = {.name = "huge", .workload = &w};
	gmx_sim_config_t c = {.device = gmx_preset_find("rtx5080"),
			      .capacity_bytes = 1ull << 30,
			      .mem = GMX_MEM_UM,
			      .policy = gmx_sched_find("timeslice"),
			      .duration_ns = 1000000,
			      .seed = 1,
			      .tasks = &t,
			      .n_tasks = 1};
	gmx_sched_params_default(&c.sched);
	gmx_sim_result_t *r = calloc(1, sizeof(*r));
	assert_non_null(r);
	char err[512];
	assert_int_equal(gmx_sim_run(&c, r, err, sizeof(err)), -E2BIG);
	assert_non_null(strstr(err, "exceeds the host memory"));
	free(r);
	gmx_workload_free(&w);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(small_buffers_share_their_tasks_chunks),
	    cmocka_unit_test(packed_footprint_runs_without_paging),
	    cmocka_unit_test(buffers_near_2_64_refused),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
