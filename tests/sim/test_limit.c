/* The memory limit's pieces: the byte curve never exceeds what a run of ops touches (brute
 * force over every start), and the bound keeps what unlimited memory allows and drops to its
 * edges with no memory and no link. */
#include <stdlib.h>
#include <string.h>

#include "sim_testutil.h"

#include "limit.h"

#define RANGES 5
#define OPS 7

/* Distinct bytes of kernel regions touched by the run of ops starting at s with work >= W. */
static uint64_t run_bytes(const gmx_workload_t *w, const int64_t *dur, uint32_t s, int64_t W)
{
	static unsigned char seen[RANGES * 1000];
	memset(seen, 0, sizeof(seen));
	uint64_t bytes = 0;
	int64_t work = 0;
	for (uint32_t k = 0; k < 4 * w->n_ops && (work < W || k == 0); k++) {
		const gmx_op_t *op = &w->ops[(s + k) % w->n_ops];
		work += dur[(s + k) % w->n_ops];
		for (uint32_t r = 0; r < op->region_count; r++) {
			const gmx_region_t *g = &w->regions[op->region_first + r];
			for (uint64_t b = g->offset; b < g->offset + g->length; b++)
				if (!seen[b]) {
					seen[b] = 1;
					bytes++;
				}
		}
	}
	return bytes;
}

static void curve_never_exceeds_a_run(void **state)
{
	(void)state;
	uint64_t x = 7;
	for (int trial = 0; trial < 30; trial++) {
		gmx_workload_t w;
		uint32_t buf, nm;
		int64_t dur[OPS];
		assert_int_equal(gmx_workload_init(&w, "b"), 0);
		assert_int_equal(gmx_workload_add_buffer(&w, 0, RANGES * 1000, NULL, &buf), 0);
		assert_int_equal(gmx_workload_intern_name(&w, "k", &nm), 0);
		for (int i = 0; i < OPS; i++) {
			x = x * 6364136223846793005ull + 1442695040888963407ull;
			dur[i] = 1000 + (int64_t)((x >> 40) % 9000);
			gmx_op_t op = {.kind = GMX_OP_KERNEL, .name = nm, .duration_ns = (uint64_t)dur[i], .buffer = UINT32_MAX};
			assert_int_equal(gmx_workload_add_op(&w, &op, NULL), 0);
			int a = (int)((x >> 20) % RANGES), b = (int)((x >> 30) % RANGES);
			assert_int_equal(gmx_workload_add_region(&w, buf, (uint64_t)a * 1000, 1000), 0);
			if (b != a)
				assert_int_equal(gmx_workload_add_region(&w, buf, (uint64_t)b * 1000 + 500, 500), 0);
		}
		gmx_limit_task_t t;
		memset(&t, 0, sizeof(t));
		assert_int_equal(gmx_limit_curve(&w, dur, &t), 0);
		for (int i = 0; i <= GMX_LIMIT_GRID; i++) {
			int64_t W = (int64_t)(t.unit_ns * i / GMX_LIMIT_GRID);
			uint64_t least = UINT64_MAX;
			for (uint32_t s = 0; s < OPS; s++) {
				uint64_t b = run_bytes(&w, dur, s, W);
				least = b < least ? b : least;
			}
			assert_true(t.D[i] <= (double)least);
			if (i)
				assert_true(t.D[i] >= t.D[i - 1]);
		}
		assert_true(t.D[GMX_LIMIT_GRID] == t.unit_bytes);
		gmx_limit_task_free(&t);
		gmx_workload_free(&w);
	}
}

/* Two steady tasks, one 100 ms unit each touching 1 GB, 100 ms slices, weights 1. */
static void two_tasks(gmx_limit_task_t *t, double capacity, double link, gmx_limit_result_t *r)
{
	for (int i = 0; i < 2; i++) {
		memset(&t[i], 0, sizeof(t[i]));
		t[i].weight = 1;
		t[i].streams = 1;
		t[i].turn_cap = 100e6;
		t[i].inflight = 0;
		t[i].steady = 1;
		t[i].window_cap = -1;
		t[i].unit_ns = 100e6;
		t[i].unit_bytes = 1e9;
		for (int k = 0; k <= GMX_LIMIT_GRID; k++)
			t[i].D[k] = 1e9 * k / GMX_LIMIT_GRID;
	}
	gmx_limit_bound(t, 2, 100e6, 1, capacity, link, 30e9, r);
}

static void bound_keeps_unlimited_memory_and_drops_without_it(void **state)
{
	(void)state;
	gmx_limit_task_t t[2];
	gmx_limit_result_t r;
	two_tasks(t, 4e9, 30, &r); /* both fit: each task keeps its turns' work */
	assert_true(r.bound >= 1.0);
	two_tasks(t, 0, 0, &r); /* nothing can be resident: only the edges' slack is left */
	assert_true(r.bound < 0.05);
	two_tasks(t, 1e9, 1, &r); /* one task's bytes fit; 1 GB/s: 0.2 GB in per rotation */
	assert_true(r.bound < 1.0 && r.bound > 0.3);
}

/* A host that waits for its work and then thinks past the grace ends its turn: the bursts between
 * such points are 10 ns ([k1]) and 55 ns ([k2 k3 k4]: a sync followed by a short think does not
 * end it). With every think under the grace there is no such point. */
static void burst_is_the_work_between_long_host_gaps(void **state)
{
	(void)state;
	gmx_workload_t w;
	uint32_t buf, nm;
	assert_int_equal(gmx_workload_init(&w, "b"), 0);
	assert_int_equal(gmx_workload_add_buffer(&w, 0, 4096, NULL, &buf), 0);
	assert_int_equal(gmx_workload_intern_name(&w, "k", &nm), 0);
	const struct {
		int kind;
		uint64_t think, dur;
	} seq[] = {{GMX_OP_KERNEL, 2000000, 10}, {GMX_OP_SYNC, 0, 0}, {GMX_OP_KERNEL, 2000000, 20},
		   {GMX_OP_KERNEL, 0, 30},	 {GMX_OP_SYNC, 0, 0}, {GMX_OP_KERNEL, 500000, 5}};
	int64_t dur[6];
	for (int i = 0; i < 6; i++) {
		gmx_op_t op = {.kind = (uint8_t)seq[i].kind, .name = nm, .think_ns = seq[i].think,
			       .duration_ns = seq[i].dur, .buffer = UINT32_MAX, .stream = seq[i].kind == GMX_OP_SYNC ? -1 : 0};
		assert_int_equal(gmx_workload_add_op(&w, &op, NULL), 0);
		if (seq[i].kind == GMX_OP_KERNEL)
			assert_int_equal(gmx_workload_add_region(&w, buf, 0, 4096), 0);
		dur[i] = (int64_t)seq[i].dur;
	}
	assert_true(gmx_limit_burst(&w, dur, 1000000) == 55);
	assert_true(gmx_limit_burst(&w, dur, 3000000) > 1e300);
	gmx_workload_free(&w);
}

/* gmx_limit_stream_work against every run of ops from every start: the most work among runs
 * whose work plus a gap per op after the first fits the budget (host ops carry no gap). */
static void stream_work_is_the_best_run_that_fits(void **state)
{
	(void)state;
	gmx_workload_t w;
	uint32_t buf, nm;
	assert_int_equal(gmx_workload_init(&w, "s"), 0);
	assert_int_equal(gmx_workload_add_buffer(&w, 0, 4096, NULL, &buf), 0);
	assert_int_equal(gmx_workload_intern_name(&w, "k", &nm), 0);
	const int64_t d[] = {30, 0, 5, 70, 12, 0, 41};
	for (int i = 0; i < 7; i++) {
		gmx_op_t op = {.kind = (uint8_t)(d[i] ? GMX_OP_KERNEL : GMX_OP_SYNC), .name = nm, .duration_ns = (uint64_t)d[i],
			       .buffer = UINT32_MAX, .stream = d[i] ? 0 : -1};
		assert_int_equal(gmx_workload_add_op(&w, &op, NULL), 0);
		if (d[i])
			assert_int_equal(gmx_workload_add_region(&w, buf, 0, 4096), 0);
	}
	for (int64_t gap = 0; gap <= 9; gap += 3)
		for (int64_t budget = 0; budget <= 700; budget += 7) {
			int64_t best = 0;
			for (int s = 0; s < 7; s++) {
				int64_t work = 0, cost = -gap;
				for (int k = 0; k < 70; k++) {
					int64_t x = d[(s + k) % 7];
					if (!x)
						continue;
					cost += x + gap;
					if (cost > budget)
						break;
					work += x;
				}
				if (work > best)
					best = work;
			}
			assert_true(gmx_limit_stream_work(&w, d, gap, (double)budget) == (double)best);
		}
	gmx_workload_free(&w);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(curve_never_exceeds_a_run),
	    cmocka_unit_test(bound_keeps_unlimited_memory_and_drops_without_it),
	    cmocka_unit_test(burst_is_the_work_between_long_host_gaps),
	    cmocka_unit_test(stream_work_is_the_best_run_that_fits),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
