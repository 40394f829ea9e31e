/* Replaying each shipped profiler trace alone on its recorded device
 * reproduces its recorded span within 10% and its same-stream gaps. */
#include <math.h>
#include <stdio.h>

#include "sim_testutil.h"

#include "replay.h"

static const char *const traces[] = {
	"hta/benchmark_result_2869224_1695835535_trace.json.gz",
	"hta/rank-0.Apr_03_18_51_38.1102.pt.trace.json.gz",
	"hta/nccl_data.json.gz",
	"hta/df_index_resolver.json.gz",
	"kineto/worker0.1623143089861.pt.trace.json.gz",
};

static void replay_matches_recording(void **state)
{
	(void)state;
	for (size_t i = 0; i < sizeof(traces) / sizeof(traces[0]); i++) {
		char path[1024], err[1024];
		snprintf(path, sizeof(path), "%s/traces/%s", GMX_SHARED_DIR, traces[i]);
		gmx_replay_result_t r;
		if (gmx_replay_compare(path, &r, err, sizeof(err)))
			fail_msg("%s", err);
		double ratio = r.replay_span_s / r.recorded_span_s;
		if (fabs(ratio - 1) > 0.10)
			fail_msg("%s: replayed span %.4f s vs recorded %.4f s", traces[i], r.replay_span_s,
				 r.recorded_span_s);
		/* The bulk of the gap distribution: p90 within 25% or 2 us. */
		double d = fabs(r.replay_gap_us[1] - r.recorded_gap_us[1]);
		if (d > 2.0 && d > 0.25 * r.recorded_gap_us[1])
			fail_msg("%s: gap p90 %.2f us vs recorded %.2f us", traces[i], r.replay_gap_us[1],
				 r.recorded_gap_us[1]);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(replay_matches_recording),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
