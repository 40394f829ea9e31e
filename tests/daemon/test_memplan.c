/* gpumuxd's memory planner: residency per chunk, loads of predicted ranges only, eviction
 * by the timeline (unneeded first, then the furthest slice), never the next slice's memory,
 * and the device bound, on fixed and random cases. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "gmx_proto.h"
#include "memplan.h"

#define CH GMX_MIG_CHUNK
#define MAXO 256

typedef struct {
	uint32_t task;
	int to_device;
	uint64_t ptr, len;
} order_t;

static order_t g_o[MAXO];
static int g_n;

static void rec(void *ctx, uint32_t task, int to_device, uint64_t ptr, uint64_t len)
{
	(void)ctx;
	assert_true(g_n < MAXO);
	g_o[g_n++] = (order_t){task, to_device, ptr, len};
}

static gmxd_mem_slice_t whole(uint32_t task)
{
	return (gmxd_mem_slice_t){.task = task, .whole = 1};
}

static gmxd_mem_slice_t ranges(uint32_t task, const gmx_tpl_range_t *r, uint32_t n)
{
	return (gmxd_mem_slice_t){.task = task, .r = r, .n = n};
}

static void test_bookkeeping(void **state)
{
	(void)state;
	gmxd_mem_t *m;
	assert_int_equal(gmxd_mem_create(8 * CH, &m), 0);
	assert_int_equal(gmxd_mem_alloc(m, 0, 0x100000000ull, 3 * CH + 4096), 0);
	assert_int_equal(gmxd_mem_alloc(m, 0, 0x100000000ull + CH, 4096), -EINVAL); /* overlaps */
	assert_int_equal(gmxd_mem_alloc(m, 0, 0x200000000ull, 0), -EINVAL);
	assert_int_equal(gmxd_mem_alloc(m, 1, 0x100000000ull, CH), 0); /* another task's space */
	assert_int_equal(gmxd_mem_alloc(m, GMX_MAX_TASKS, 0x1000, CH), -EINVAL);
	assert_int_equal(gmxd_mem_bytes(m, 0), 3 * CH + 4096);
	assert_int_equal(gmxd_mem_resident(m, 0), 0);
	assert_int_equal(gmxd_mem_free(m, 0, 0x300000000ull), -ENOENT);
	gmxd_mem_slice_t s = whole(0);
	gmxd_mem_stats_t st;
	g_n = 0;
	assert_int_equal(gmxd_mem_plan(m, &s, 1, 1, rec, NULL, &st), 0);
	assert_int_equal(st.load_bytes, 3 * CH + 4096);
	assert_int_equal(g_n, 1); /* contiguous chunks merge into one order */
	assert_int_equal(g_o[0].len, 3 * CH + 4096);
	assert_int_equal(gmxd_mem_resident(m, GMX_MAX_TASKS), 3 * CH + 4096);
	assert_true(gmxd_mem_ready(m, &s));
	assert_int_equal(gmxd_mem_free(m, 0, 0x100000000ull), 0);
	assert_int_equal(gmxd_mem_resident(m, GMX_MAX_TASKS), 0);
	gmxd_mem_drop(m, 1);
	assert_int_equal(gmxd_mem_bytes(m, 1), 0);
	gmxd_mem_destroy(m);
}

/* Only the chunks a prediction reaches are loaded, in access order; a second plan for the
 * same ranges moves nothing. */
static void test_loads_predicted_chunks(void **state)
{
	(void)state;
	gmxd_mem_t *m;
	const uint64_t base = 0x7f0000001000ull; /* not chunk-aligned: chunks count from the base */
	assert_int_equal(gmxd_mem_create(64 * CH, &m), 0);
	assert_int_equal(gmxd_mem_alloc(m, 3, base, 24 * CH), 0);
	gmx_tpl_range_t r[2] = {{base + 10 * CH + 100, 4096}, {base + 2 * CH, CH + 1}};
	gmxd_mem_slice_t s = ranges(3, r, 2);
	gmxd_mem_stats_t st;
	g_n = 0;
	assert_false(gmxd_mem_ready(m, &s));
	assert_int_equal(gmxd_mem_plan(m, &s, 1, 1, rec, NULL, &st), 0);
	assert_int_equal(st.load_bytes, 3 * CH);
	assert_int_equal(st.evict_bytes, 0);
	assert_int_equal(g_n, 2);
	assert_int_equal(g_o[0].ptr, base + 10 * CH); /* access order: the first range first */
	assert_int_equal(g_o[0].len, CH);
	assert_int_equal(g_o[1].ptr, base + 2 * CH);
	assert_int_equal(g_o[1].len, 2 * CH);
	assert_true(g_o[0].to_device && g_o[1].to_device);
	g_n = 0;
	assert_int_equal(gmxd_mem_plan(m, &s, 1, 1, rec, NULL, &st), 0);
	assert_int_equal(g_n, 0);
	gmxd_mem_destroy(m);
}

/* Device of 6 chunks. Task 0 holds 4 resident chunks, of which the coming slice needs the
 * first two; task 1 needs 4: the two unneeded chunks go first, then, as no more are
 * unneeded, the furthest need. */
static void test_evicts_unneeded_then_furthest(void **state)
{
	(void)state;
	gmxd_mem_t *m;
	const uint64_t a0 = 0x100000000ull, a1 = 0x200000000ull, a2 = 0x300000000ull;
	assert_int_equal(gmxd_mem_create(6 * CH, &m), 0);
	assert_int_equal(gmxd_mem_alloc(m, 0, a0, 4 * CH), 0);
	assert_int_equal(gmxd_mem_alloc(m, 1, a1, 2 * CH), 0);
	assert_int_equal(gmxd_mem_alloc(m, 2, a2, 2 * CH), 0);
	gmxd_mem_stats_t st;
	gmxd_mem_slice_t s0 = whole(0), s2 = whole(2);
	assert_int_equal(gmxd_mem_plan(m, &s0, 1, 1, rec, NULL, &st), 0);
	assert_int_equal(gmxd_mem_plan(m, &s2, 1, 1, rec, NULL, &st), 0);
	assert_int_equal(gmxd_mem_resident(m, GMX_MAX_TASKS), 6 * CH);
	/* Task 1 next; then task 2 (whole), then task 0's first two chunks. */
	gmx_tpl_range_t need0 = {a0, 2 * CH};
	gmxd_mem_slice_t tl[3] = {whole(1), whole(2), ranges(0, &need0, 1)};
	g_n = 0;
	assert_int_equal(gmxd_mem_plan(m, tl, 3, 1, rec, NULL, &st), 0);
	assert_int_equal(st.evict_bytes, 2 * CH);
	assert_int_equal(st.load_bytes, 2 * CH);
	assert_int_equal(g_n, 2);
	assert_int_equal(g_o[0].task, 0); /* task 0's unneeded tail, not task 2's next slice */
	assert_false(g_o[0].to_device);
	assert_int_equal(g_o[0].ptr, a0 + 2 * CH);
	assert_int_equal(g_o[0].len, 2 * CH);
	assert_int_equal(g_o[1].task, 1);
	assert_true(g_o[1].to_device);
	/* Task 0 next needs all 4: nothing unneeded is left; task 1 is needed by nobody, task 2
	 * by the slice after: task 1 goes, then task 2 (further than... nothing else). */
	gmxd_mem_slice_t tl2[2] = {whole(0), whole(2)};
	g_n = 0;
	assert_int_equal(gmxd_mem_plan(m, tl2, 2, 1, rec, NULL, &st), 0);
	assert_int_equal(st.evict_bytes, 2 * CH);
	assert_int_equal(g_o[0].task, 1);
	assert_false(g_o[0].to_device);
	assert_int_equal(gmxd_mem_resident(m, 2), 2 * CH); /* task 2 kept */
	gmxd_mem_destroy(m);
}

/* Work already granted to another task (a protected slice) keeps its memory even when that
 * task is the furthest: the switch evicts elsewhere or falls short, never under a kernel
 * that may be running. */
static void test_protected_slices(void **state)
{
	(void)state;
	gmxd_mem_t *m;
	const uint64_t a0 = 0x100000000ull, a1 = 0x200000000ull, a2 = 0x300000000ull;
	assert_int_equal(gmxd_mem_create(4 * CH, &m), 0);
	assert_int_equal(gmxd_mem_alloc(m, 0, a0, 2 * CH), 0);
	assert_int_equal(gmxd_mem_alloc(m, 1, a1, 2 * CH), 0);
	assert_int_equal(gmxd_mem_alloc(m, 2, a2, 2 * CH), 0);
	gmxd_mem_stats_t st;
	gmxd_mem_slice_t s0 = whole(0), s1 = whole(1);
	assert_int_equal(gmxd_mem_plan(m, &s0, 1, 1, rec, NULL, &st), 0);
	assert_int_equal(gmxd_mem_plan(m, &s1, 1, 1, rec, NULL, &st), 0);
	/* Task 2 next; task 1 has work in flight (protected); task 0 is needed later. */
	gmxd_mem_slice_t tl[3] = {whole(2), whole(1), whole(0)};
	g_n = 0;
	assert_int_equal(gmxd_mem_plan(m, tl, 3, 2, rec, NULL, &st), 0);
	assert_int_equal(gmxd_mem_resident(m, 1), 2 * CH); /* untouched */
	assert_int_equal(gmxd_mem_resident(m, 0), 0);	   /* evicted instead */
	assert_int_equal(gmxd_mem_resident(m, 2), 2 * CH);
	/* Task 0 next, tasks 2 and 1 both with work in flight: nothing may go, so task 0 falls
	 * short (demand paging) rather than evict under a running kernel. */
	gmxd_mem_slice_t tl2[3] = {whole(0), whole(2), whole(1)};
	assert_int_equal(gmxd_mem_plan(m, tl2, 3, 3, rec, NULL, &st), 0);
	assert_int_equal(gmxd_mem_resident(m, 1), 2 * CH);
	assert_int_equal(gmxd_mem_resident(m, 2), 2 * CH);
	assert_int_equal(st.short_bytes, 2 * CH);
	assert_int_equal(gmxd_mem_plan(m, tl, 3, 4, rec, NULL, &st), -EINVAL);
	gmxd_mem_destroy(m);
}

/* Priorities in the plan (the combined policy): an idle HP task's chunks, which no coming slice
 * needs, are never evicted for LP work (without protection they go first); LP chunks go before
 * the requester's own level; an HP plan evicts LP chunks, even ones the next LP slice needs. */
static void test_priority_protection(void **state)
{
	(void)state;
	const uint64_t a0 = 0x100000000ull, a1 = 0x200000000ull, a2 = 0x300000000ull;
	for (int protect = 0; protect <= 1; protect++) {
		gmxd_mem_t *m;
		assert_int_equal(gmxd_mem_create(6 * CH, &m), 0);
		gmxd_mem_set_protect(m, protect);
		gmxd_mem_set_priority(m, 0, 0); /* HP */
		gmxd_mem_set_priority(m, 1, 7);
		gmxd_mem_set_priority(m, 2, 7);
		assert_int_equal(gmxd_mem_alloc(m, 0, a0, 2 * CH), 0);
		assert_int_equal(gmxd_mem_alloc(m, 1, a1, 4 * CH), 0);
		assert_int_equal(gmxd_mem_alloc(m, 2, a2, 4 * CH), 0);
		gmxd_mem_stats_t st;
		gmxd_mem_slice_t s0 = whole(0), s1 = whole(1);
		assert_int_equal(gmxd_mem_plan(m, &s0, 1, 1, rec, NULL, &st), 0);
		assert_int_equal(gmxd_mem_plan(m, &s1, 1, 1, rec, NULL, &st), 0);
		assert_int_equal(gmxd_mem_resident(m, GMX_MAX_TASKS), 6 * CH);
		/* Task 2 (LP) next, then task 1 (LP); HP idle, in no slice. */
		gmxd_mem_slice_t tl[2] = {whole(2), whole(1)};
		g_n = 0;
		assert_int_equal(gmxd_mem_plan(m, tl, 2, 1, rec, NULL, &st), 0);
		assert_int_equal(st.evict_bytes, 4 * CH);
		assert_int_equal(gmxd_mem_resident(m, 0), protect ? 2 * CH : 0);
		assert_int_equal(gmxd_mem_resident(m, 1), protect ? 0 : 2 * CH);
		for (int i = 0; i < g_n; i++)
			if (!g_o[i].to_device)
				assert_int_equal(g_o[i].task, protect ? 1 : (g_o[i].ptr < a1 ? 0 : 1));
		char err[256];
		assert_int_equal(gmxd_mem_check(m, err, sizeof err), 0);
		gmxd_mem_destroy(m);
	}
	/* An HP plan: LP chunks go before HP's own, though the next slice (LP) needs them and
	 * HP's other allocation is needed by nobody. */
	gmxd_mem_t *m;
	assert_int_equal(gmxd_mem_create(4 * CH, &m), 0);
	gmxd_mem_set_protect(m, 1);
	gmxd_mem_set_priority(m, 0, 0);
	gmxd_mem_set_priority(m, 1, 7);
	assert_int_equal(gmxd_mem_alloc(m, 0, a0, 2 * CH), 0);
	assert_int_equal(gmxd_mem_alloc(m, 0, a0 + 16 * CH, 2 * CH), 0);
	assert_int_equal(gmxd_mem_alloc(m, 1, a1, 2 * CH), 0);
	gmx_tpl_range_t first = {a0, 2 * CH}, second = {a0 + 16 * CH, 2 * CH};
	gmxd_mem_slice_t h1 = ranges(0, &first, 1), l = whole(1);
	gmxd_mem_stats_t st;
	assert_int_equal(gmxd_mem_plan(m, &h1, 1, 1, rec, NULL, &st), 0);
	assert_int_equal(gmxd_mem_plan(m, &l, 1, 1, rec, NULL, &st), 0);
	gmxd_mem_slice_t tl[2] = {ranges(0, &second, 1), whole(1)};
	assert_int_equal(gmxd_mem_plan(m, tl, 2, 1, rec, NULL, &st), 0);
	assert_int_equal(gmxd_mem_resident(m, 1), 0);
	assert_int_equal(gmxd_mem_resident(m, 0), 4 * CH);
	gmxd_mem_destroy(m);
}

/* Orders are cut into pieces of whole chunks (a piece below one chunk is one chunk); what a
 * slice misses is counted without planning. */
static void test_pieces_and_missing(void **state)
{
	(void)state;
	gmxd_mem_t *m;
	const uint64_t a0 = 0x100000000ull;
	assert_int_equal(gmxd_mem_create(16 * CH, &m), 0);
	gmxd_mem_set_piece(m, 2 * CH + 1000);
	assert_int_equal(gmxd_mem_alloc(m, 0, a0, 5 * CH), 0);
	gmxd_mem_slice_t s = whole(0);
	gmx_tpl_range_t r = {a0 + CH, 2 * CH};
	gmxd_mem_slice_t part = ranges(0, &r, 1);
	assert_int_equal(gmxd_mem_missing(m, &s), 5 * CH);
	assert_int_equal(gmxd_mem_missing(m, &part), 2 * CH);
	gmxd_mem_stats_t st;
	g_n = 0;
	assert_int_equal(gmxd_mem_plan(m, &part, 1, 1, rec, NULL, &st), 0);
	assert_int_equal(gmxd_mem_missing(m, &s), 3 * CH);
	assert_int_equal(gmxd_mem_missing(m, &part), 0);
	g_n = 0;
	assert_int_equal(gmxd_mem_plan(m, &s, 1, 1, rec, NULL, &st), 0);
	assert_int_equal(g_n, 2); /* chunks 0 and 3-4: apart, the second within one piece */
	gmxd_mem_drop(m, 0);
	assert_int_equal(gmxd_mem_alloc(m, 0, a0, 5 * CH), 0);
	g_n = 0;
	assert_int_equal(gmxd_mem_plan(m, &s, 1, 1, rec, NULL, &st), 0);
	assert_int_equal(g_n, 3); /* 2 + 2 + 1 chunks */
	assert_int_equal(g_o[0].len, 2 * CH);
	assert_int_equal(g_o[1].ptr, a0 + 2 * CH);
	assert_int_equal(g_o[2].len, CH);
	gmxd_mem_set_piece(m, 1);
	gmxd_mem_drop(m, 0);
	assert_int_equal(gmxd_mem_alloc(m, 0, a0, 3 * CH), 0);
	g_n = 0;
	assert_int_equal(gmxd_mem_plan(m, &s, 1, 1, rec, NULL, &st), 0);
	assert_int_equal(g_n, 3);
	gmxd_mem_destroy(m);
}

/* A slice larger than the device loads what fits, never evicting its own chunks, and
 * reports the rest as demand-paged. */
static void test_slice_larger_than_device(void **state)
{
	(void)state;
	gmxd_mem_t *m;
	assert_int_equal(gmxd_mem_create(3 * CH, &m), 0);
	assert_int_equal(gmxd_mem_alloc(m, 0, 0x100000000ull, 5 * CH), 0);
	gmxd_mem_slice_t s = whole(0);
	gmxd_mem_stats_t st;
	g_n = 0;
	assert_int_equal(gmxd_mem_plan(m, &s, 1, 1, rec, NULL, &st), 0);
	assert_int_equal(st.load_bytes, 3 * CH);
	assert_int_equal(st.short_bytes, 2 * CH);
	assert_int_equal(st.evict_bytes, 0);
	assert_int_equal(gmxd_mem_resident(m, GMX_MAX_TASKS), 3 * CH);
	gmxd_mem_destroy(m);
}

/* What a task may declare is bounded, with overflow-checked sums: past the task limit (or by
 * a size that would wrap the sum) an allocation is refused with -E2BIG and nothing changes. */
static void test_task_limit(void **state)
{
	(void)state;
	gmxd_mem_t *m;
	char err[200];
	assert_int_equal(gmxd_mem_create(4 * CH, &m), 0);
	assert_int_equal(gmxd_mem_task_limit(m), GMXD_MEM_TASK_BYTES_MAX);
	gmxd_mem_set_task_limit(m, UINT64_MAX); /* capped */
	assert_int_equal(gmxd_mem_task_limit(m), GMXD_MEM_TASK_BYTES_MAX);
	gmxd_mem_set_task_limit(m, 10 * CH);
	assert_int_equal(gmxd_mem_alloc(m, 0, 0x100000000ull, 6 * CH), 0);
	assert_int_equal(gmxd_mem_alloc(m, 0, 0x200000000ull, 4 * CH + 1), -E2BIG);
	assert_int_equal(gmxd_mem_alloc(m, 0, 0x200000000ull, UINT64_MAX - 0x200000000ull), -E2BIG);
	assert_int_equal(gmxd_mem_alloc(m, 0, 0x200000000ull, UINT64_MAX), -EINVAL); /* wraps */
	assert_int_equal(gmxd_mem_alloc(m, 0, 0x200000000ull, 4 * CH), 0);	     /* exactly the limit */
	assert_int_equal(gmxd_mem_alloc(m, 0, 0x300000000ull, 1), -E2BIG);
	assert_int_equal(gmxd_mem_alloc(m, 1, 0x300000000ull, 10 * CH), 0); /* per task */
	assert_int_equal(gmxd_mem_bytes(m, 0), 10 * CH);
	assert_int_equal(gmxd_mem_free(m, 0, 0x100000000ull), 0);
	assert_int_equal(gmxd_mem_alloc(m, 0, 0x300000000ull, 6 * CH), 0);
	assert_int_equal(gmxd_mem_check(m, err, sizeof err), 0);
	gmxd_mem_destroy(m);
}

/* The task limit bounds what the device holds for a task: small allocations the driver packed
 * into one 2 MiB block (their addresses share a chunk) count that chunk once, and a 1.5 MiB
 * allocation holds a whole chunk (include/gpumux/devalloc.h). */
static void test_small_allocations_share_chunks(void **state)
{
	(void)state;
	gmxd_mem_t *m;
	char err[200];
	const uint64_t base = 0x100000000ull, k512 = 512ull << 10;
	assert_int_equal(gmxd_mem_create(8 * CH, &m), 0);
	gmxd_mem_set_task_limit(m, 2 * CH);
	for (uint64_t i = 0; i < 4; i++) /* four 512 KiB blocks: one chunk */
		assert_int_equal(gmxd_mem_alloc(m, 0, base + i * k512, k512), 0);
	assert_int_equal(gmxd_mem_footprint(m, 0), CH);
	assert_int_equal(gmxd_mem_alloc(m, 0, base + CH, 3 * k512), 0); /* 1.5 MiB: a chunk of its own */
	assert_int_equal(gmxd_mem_footprint(m, 0), 2 * CH);
	assert_int_equal(gmxd_mem_bytes(m, 0), 7 * k512);
	/* 3.75 MiB of sizes is under the 4 MiB limit, but a third chunk is not. */
	assert_int_equal(gmxd_mem_alloc(m, 0, base + 2 * CH, k512 / 2), -E2BIG);
	/* The free quarter of the second chunk takes it. */
	assert_int_equal(gmxd_mem_alloc(m, 0, base + CH + 3 * k512, k512), 0);
	assert_int_equal(gmxd_mem_footprint(m, 0), 2 * CH);
	assert_int_equal(gmxd_mem_free(m, 0, base + k512), 0); /* the chunk stays: three share it */
	assert_int_equal(gmxd_mem_footprint(m, 0), 2 * CH);
	assert_int_equal(gmxd_mem_free(m, 0, base), 0);
	assert_int_equal(gmxd_mem_free(m, 0, base + 3 * k512), 0);
	assert_int_equal(gmxd_mem_footprint(m, 0), 2 * CH);
	assert_int_equal(gmxd_mem_free(m, 0, base + 2 * k512), 0); /* its last one */
	assert_int_equal(gmxd_mem_footprint(m, 0), CH);
	assert_int_equal(gmxd_mem_check(m, err, sizeof err), 0);
	/* A range whose ends share chunks with its neighbours holds only the chunks between. */
	gmxd_mem_set_task_limit(m, 8 * CH);
	assert_int_equal(gmxd_mem_alloc(m, 1, base, k512), 0);
	assert_int_equal(gmxd_mem_alloc(m, 1, base + 3 * CH + k512, k512), 0);
	assert_int_equal(gmxd_mem_footprint(m, 1), 2 * CH);
	assert_int_equal(gmxd_mem_alloc(m, 1, base + k512, 3 * CH), 0); /* chunks 0-3 */
	assert_int_equal(gmxd_mem_footprint(m, 1), 4 * CH);
	assert_int_equal(gmxd_mem_check(m, err, sizeof err), 0);
	assert_int_equal(gmxd_mem_free(m, 1, base + k512), 0);
	assert_int_equal(gmxd_mem_footprint(m, 1), 2 * CH);
	assert_int_equal(gmxd_mem_check(m, err, sizeof err), 0);
	gmxd_mem_destroy(m);
}

/* A hostile task declares its whole limit (16 TiB in 4096 allocations of 4 GiB: 8M chunks).
 * Plans cost at most the budget whatever it declared, its own plan loads what the device
 * holds and reports the rest as demand-paged, and an honest task's plans stay exact. */
static void test_plan_cost_bounded(void **state)
{
	(void)state;
	gmxd_mem_t *m;
	char err[200];
	const uint64_t cap = 64 * CH, big = 4ull << 30;
	assert_int_equal(gmxd_mem_create(cap, &m), 0);
	gmxd_mem_set_task_limit(m, 4096 * big);
	uint64_t budget = gmxd_mem_budget(m);
	assert_true(budget >= GMXD_MEM_BUDGET_BASE && budget < GMXD_MEM_BUDGET_BASE + 1000);
	for (uint64_t i = 0; i < 4096; i++)
		assert_int_equal(gmxd_mem_alloc(m, 1, (i + 1) << 40, big), 0);
	assert_int_equal(gmxd_mem_alloc(m, 1, 4097ull << 40, 1), -E2BIG);
	gmxd_mem_stats_t st;
	/* The hostile task's whole allocation first: the device fills, the rest pages. */
	gmxd_mem_slice_t hs = whole(1);
	g_n = 0;
	assert_int_equal(gmxd_mem_plan(m, &hs, 1, 1, rec, NULL, &st), 0);
	assert_true(st.visits <= budget);
	assert_int_equal(st.load_bytes, cap);
	assert_int_equal(st.short_bytes, 4096 * big - cap);
	assert_int_equal(gmxd_mem_resident(m, GMX_MAX_TASKS), cap);
	assert_int_equal(gmxd_mem_check(m, err, sizeof err), 0);
	/* An honest task of 8 chunks next, the hostile one after it: exactly 8 chunks go out
	 * and 8 come in, within the budget although the timeline names 16 TiB. */
	assert_int_equal(gmxd_mem_alloc(m, 0, 0x1000, 8 * CH), 0);
	gmxd_mem_slice_t tl[2] = {whole(0), whole(1)};
	g_n = 0;
	assert_int_equal(gmxd_mem_plan(m, tl, 2, 1, rec, NULL, &st), 0);
	assert_true(st.visits <= budget);
	assert_int_equal(st.load_bytes, 8 * CH);
	assert_int_equal(st.evict_bytes, 8 * CH);
	assert_int_equal(st.short_bytes, 0);
	assert_int_equal(gmxd_mem_resident(m, 0), 8 * CH);
	assert_int_equal(gmxd_mem_resident(m, GMX_MAX_TASKS), cap);
	assert_true(gmxd_mem_ready(m, &tl[0]));
	/* Ranges that name the hostile task's whole address space: bounded too. */
	gmx_tpl_range_t all = {0, UINT64_MAX};
	gmxd_mem_slice_t rs[3] = {ranges(1, &all, 1), ranges(1, &all, 1), whole(0)};
	assert_false(gmxd_mem_ready(m, &rs[0]));
	assert_int_equal(gmxd_mem_plan(m, rs, 3, 1, rec, NULL, &st), 0);
	assert_true(st.visits <= budget);
	assert_true(gmxd_mem_resident(m, GMX_MAX_TASKS) <= cap);
	assert_int_equal(gmxd_mem_check(m, err, sizeof err), 0);
	gmxd_mem_drop(m, 1);
	assert_int_equal(gmxd_mem_check(m, err, sizeof err), 0);
	assert_int_equal(gmxd_mem_resident(m, GMX_MAX_TASKS), gmxd_mem_resident(m, 0));
	gmxd_mem_destroy(m);
}

/* A plan cut short by the budget in a protected slice evicts nothing (it cannot tell what
 * granted work needs), but still loads into free room. */
static void test_truncated_protected_slice_evicts_nothing(void **state)
{
	(void)state;
	gmxd_mem_t *m;
	assert_int_equal(gmxd_mem_create(4 * CH, &m), 0);
	uint64_t budget = gmxd_mem_budget(m);
	/* Task 1 holds 3 chunks; task 0 needs 2 (one fits in the free room). */
	assert_int_equal(gmxd_mem_alloc(m, 1, 0x100000000ull, 3 * CH), 0);
	assert_int_equal(gmxd_mem_alloc(m, 0, 0x200000000ull, 2 * CH), 0);
	gmxd_mem_slice_t s1 = whole(1);
	gmxd_mem_stats_t st;
	assert_int_equal(gmxd_mem_plan(m, &s1, 1, 1, rec, NULL, &st), 0);
	/* A protected slice of task 1 that repeats one range more often than the budget
	 * allows: the walk stops inside it. */
	uint32_t nrep = (uint32_t)(budget / 3 + 2);
	gmx_tpl_range_t *rep = malloc(nrep * sizeof *rep);
	assert_non_null(rep);
	for (uint32_t i = 0; i < nrep; i++)
		rep[i] = (gmx_tpl_range_t){0x100000000ull, 3 * CH};
	gmxd_mem_slice_t tl[2] = {whole(0), ranges(1, rep, nrep)};
	g_n = 0;
	assert_int_equal(gmxd_mem_plan(m, tl, 2, 2, rec, NULL, &st), 0);
	assert_true(st.truncated);
	assert_true(st.visits <= budget);
	assert_int_equal(st.evict_bytes, 0);
	assert_int_equal(st.load_bytes, CH);
	assert_int_equal(st.short_bytes, CH);
	assert_int_equal(gmxd_mem_resident(m, 1), 3 * CH);
	free(rep);
	gmxd_mem_destroy(m);
}

/* The resident list survives frees and reallocations at the same address: a chunk freed
 * while resident is forgotten, the new allocation there starts away. */
static void test_free_and_realloc_resident(void **state)
{
	(void)state;
	gmxd_mem_t *m;
	char err[200];
	assert_int_equal(gmxd_mem_create(4 * CH, &m), 0);
	assert_int_equal(gmxd_mem_alloc(m, 0, 0x100000000ull, 2 * CH), 0);
	gmxd_mem_slice_t s = whole(0);
	gmxd_mem_stats_t st;
	assert_int_equal(gmxd_mem_plan(m, &s, 1, 1, rec, NULL, &st), 0);
	assert_int_equal(gmxd_mem_free(m, 0, 0x100000000ull), 0);
	assert_int_equal(gmxd_mem_alloc(m, 0, 0x100000000ull, 3 * CH), 0);
	assert_int_equal(gmxd_mem_resident(m, 0), 0);
	assert_false(gmxd_mem_ready(m, &s));
	assert_int_equal(gmxd_mem_check(m, err, sizeof err), 0);
	assert_int_equal(gmxd_mem_plan(m, &s, 1, 1, rec, NULL, &st), 0);
	assert_int_equal(st.load_bytes, 3 * CH);
	assert_int_equal(gmxd_mem_check(m, err, sizeof err), 0);
	gmxd_mem_destroy(m);
}

/* Random cases: the device bound always holds, a plan never evicts what its first slice
 * needs, and when the first slice fits, it is resident afterwards. */
static void test_random_invariants(void **state)
{
	(void)state;
	srand(7);
	for (int round = 0; round < 300; round++) {
		uint64_t cap = (uint64_t)(2 + rand() % 10) * CH;
		gmxd_mem_t *m;
		assert_int_equal(gmxd_mem_create(cap, &m), 0);
		uint64_t base[4], size[4];
		for (uint32_t t = 0; t < 4; t++) {
			base[t] = 0x100000000ull * (t + 1) + (uint64_t)(rand() % 7) * 4096;
			size[t] = (uint64_t)(1 + rand() % 6) * CH - (uint64_t)(rand() % 3) * 4096;
			assert_int_equal(gmxd_mem_alloc(m, t, base[t], size[t]), 0);
		}
		for (int step = 0; step < 20; step++) {
			gmx_tpl_range_t r[4][2];
			gmxd_mem_slice_t tl[4];
			uint32_t first = (uint32_t)(rand() % 4);
			for (uint32_t k = 0; k < 4; k++) {
				uint32_t t = (first + k) % 4;
				for (int j = 0; j < 2; j++) {
					uint64_t off = (uint64_t)rand() % size[t];
					uint64_t len = 1 + (uint64_t)rand() % (size[t] - off);
					r[t][j] = (gmx_tpl_range_t){base[t] + off, len};
				}
				tl[k] = rand() % 4 ? ranges(t, r[t], 2) : whole(t);
			}
			/* What the first slice needs and has must stay. */
			int had[2] = {0, 0};
			for (uint32_t j = 0; j < 2 && !tl[0].whole; j++) {
				gmxd_mem_slice_t one = ranges(first, &r[first][j], 1);
				had[j] = gmxd_mem_ready(m, &one);
			}
			uint64_t before = gmxd_mem_resident(m, first);
			gmxd_mem_stats_t st;
			g_n = 0;
			uint32_t ns = 1 + (uint32_t)(rand() % 4), np = 1 + (uint32_t)(rand() % ns);
			/* What the protected slices need and have must stay too. */
			int kept[4] = {0};
			for (uint32_t k = 1; k < np; k++)
				kept[k] = gmxd_mem_ready(m, &tl[k]);
			assert_int_equal(gmxd_mem_plan(m, tl, ns, np, rec, NULL, &st), 0);
			for (uint32_t k = 1; k < np; k++)
				if (kept[k])
					assert_true(gmxd_mem_ready(m, &tl[k]));
			assert_true(gmxd_mem_resident(m, GMX_MAX_TASKS) <= cap);
			for (uint32_t j = 0; j < 2 && !tl[0].whole; j++) {
				gmxd_mem_slice_t one = ranges(first, &r[first][j], 1);
				if (had[j])
					assert_true(gmxd_mem_ready(m, &one));
			}
			if (tl[0].whole) /* a whole slice needs every chunk of its task: none leaves */
				assert_true(gmxd_mem_resident(m, first) >= before);
			if (st.short_bytes == 0)
				assert_true(gmxd_mem_ready(m, &tl[0]));
			uint64_t moved_in = 0;
			for (int i = 0; i < g_n; i++)
				if (g_o[i].to_device)
					moved_in += g_o[i].len;
			assert_int_equal(moved_in, st.load_bytes);
			char err[200];
			if (gmxd_mem_check(m, err, sizeof err))
				fail_msg("round %d step %d: %s", round, step, err);
			if (rand() % 8 == 0) { /* the task frees and allocates again at the same place */
				uint32_t t = (uint32_t)(rand() % 4);
				assert_int_equal(gmxd_mem_free(m, t, base[t]), 0);
				assert_int_equal(gmxd_mem_alloc(m, t, base[t], size[t]), 0);
			}
		}
		gmxd_mem_destroy(m);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_bookkeeping),
	    cmocka_unit_test(test_loads_predicted_chunks),
	    cmocka_unit_test(test_evicts_unneeded_then_furthest),
	    cmocka_unit_test(test_slice_larger_than_device),
	    cmocka_unit_test(test_protected_slices),
	    cmocka_unit_test(test_priority_protection),
	    cmocka_unit_test(test_pieces_and_missing),
	    cmocka_unit_test(test_task_limit),
	    cmocka_unit_test(test_small_allocations_share_chunks),
	    cmocka_unit_test(test_plan_cost_bounded),
	    cmocka_unit_test(test_truncated_protected_slice_evicts_nothing),
	    cmocka_unit_test(test_free_and_realloc_resident),
	    cmocka_unit_test(test_random_invariants),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
