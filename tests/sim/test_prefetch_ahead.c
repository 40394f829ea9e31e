/* The combined policy's rule 6 (docs/combined.md): within an LP task's turn, its windows after
 * the next one are prefetched early only when the link has time to spare over its unit. Checked
 * on the mechanism, the bytes loaded for windows beyond the next (ahead_in_bytes), on the MSched
 * paper's two testcases as shipped: testcase T's training (its least bytes take 25% of its GPU
 * time on the link) has them, testcase I's inference (69%) has none, though it still prefetches
 * its next window. */
#include <stdio.h>
#include <stdlib.h>

#include "sim_testutil.h"

#include "scenario.h"

/* The first half second of scenario `name` under --sched gpumux --mem gpumux (a few of the LP
 * task's turns, each refreshing its plan many times): the bytes prefetched, and of them those
 * loaded for windows beyond the next. */
static void run_combined(const char *name, uint64_t *prefetch, uint64_t *ahead)
{
	char path[512], err[512];
	snprintf(path, sizeof(path), "%s/scenarios/combined/%s", GMX_SOURCE_DIR, name);
	gmx_scenario_t sc;
	if (gmx_scenario_load(path, &sc, err, sizeof(err)))
		fail_msg("%s", err);
	sc.warmup_ns = 0;
	sc.duration_ns = 500000000LL;
	gmx_sim_result_t *r = calloc(1, sizeof(*r));
	assert_non_null(r);
	int rc = gmx_scenario_run(&sc, "gpumux", "gpumux", r, err, sizeof(err));
	gmx_scenario_free(&sc);
	if (rc)
		fail_msg("%s", err);
	assert_true(r->msched.valid);
	*prefetch = r->msched.prefetch_in_bytes;
	*ahead = r->msched.ahead_in_bytes;
	free(r);
	print_message("%s: prefetched %llu bytes, %llu of them for windows beyond the next\n", name,
		      (unsigned long long)*prefetch, (unsigned long long)*ahead);
}

/* Testcase T: the backward pass leaves the link idle, so the next forward's windows come in
 * ahead of the window before them. */
static void training_prefetches_beyond_the_next_window(void **state)
{
	(void)state;
	uint64_t prefetch, ahead;
	run_combined("paper-resnet152-train.ini", &prefetch, &ahead);
	assert_true(ahead > 0);
}

/* Testcase I: the link has no such margin; prefetching beyond the next window moved a fifth
 * more bytes per request there and slowed it. */
static void inference_prefetches_the_next_window_only(void **state)
{
	(void)state;
	uint64_t prefetch, ahead;
	run_combined("paper-resnet152.ini", &prefetch, &ahead);
	assert_true(prefetch > 0);
	assert_int_equal(ahead, 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(training_prefetches_beyond_the_next_window),
	    cmocka_unit_test(inference_prefetches_the_next_window_only),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
