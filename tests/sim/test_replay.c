/* Replaying each shipped profiler trace alone on its recorded device
 * reproduces its recorded span within 10% and its same-stream gaps; small
 * traces with a CUDA graph launch, a device-to-device copy and a described
 * cross-stream wait replay their dependencies. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "trace.h"

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

#define RT(name, ts, dur, corr)                                                                              \
	"{\"ph\":\"X\",\"cat\":\"cuda_runtime\",\"name\":\"" name "\",\"pid\":1,\"tid\":1,\"ts\":" #ts       \
	",\"dur\":" #dur ",\"args\":{\"correlation\":" #corr "}},"
#define KERNEL(name, stream, ts, dur, corr)                                                                  \
	"{\"ph\":\"X\",\"cat\":\"kernel\",\"name\":\"" name "\",\"pid\":0,\"tid\":" #stream ",\"ts\":" #ts      \
	",\"dur\":" #dur ",\"args\":{\"stream\":" #stream ",\"correlation\":" #corr                              \
	",\"grid\":[80,1,1],\"block\":[256,1,1]}},"
#define HEAD "{\"deviceProperties\":[{\"name\":\"Tesla V100-SXM2-32GB\"}],\"traceEvents\":["
#define TAIL "{\"ph\":\"i\",\"cat\":\"Trace\",\"name\":\"end\",\"ts\":0}]}"

/* One cudaGraphLaunch runs A then B on stream 7 and C on stream 9 after A
 * (a graph edge: C starts as A ends, long after its launch); then a
 * device-to-device copy on stream 7. */
static const char graph_trace[] = HEAD RT("cudaGraphLaunch", 0, 5, 10) KERNEL("A", 7, 10, 1000, 10)
    KERNEL("C", 9, 1011, 600, 10) KERNEL("B", 7, 1012, 200, 10) RT("cudaMemcpyAsync", 20, 4, 11)
	"{\"ph\":\"X\",\"cat\":\"gpu_memcpy\",\"name\":\"Memcpy DtoD (Device -> Device)\",\"pid\":0,"
	"\"tid\":7,\"ts\":1214,\"dur\":50,\"args\":{\"stream\":7,\"correlation\":11,\"bytes\":1048576}},"
	RT("cudaDeviceSynchronize", 40, 1572, 12) TAIL;

/* Stream 9's kernel waits for the event recorded on stream 7 after A: the
 * profiler names both (cuda_sync "Stream Wait Event"). */
static const char wait_trace[] = HEAD RT("cudaLaunchKernel", 0, 4, 20) KERNEL("A", 7, 8, 1000, 20)
    RT("cudaEventRecord", 5, 2, 21) RT("cudaStreamWaitEvent", 10, 2, 22)
	"{\"ph\":\"X\",\"cat\":\"cuda_sync\",\"name\":\"Stream Wait Event\",\"pid\":0,\"tid\":9,\"ts\":10,"
	"\"dur\":1,\"args\":{\"correlation\":22,\"stream\":9,\"wait_on_stream\":7,"
	"\"wait_on_cuda_event_record_corr_id\":21}},"
	RT("cudaLaunchKernel", 15, 4, 23) KERNEL("B", 9, 1010, 500, 23) RT("cudaDeviceSynchronize", 20, 1491, 24) TAIL;

/* Writes text to a temporary file, imports and replays it; returns the
 * replayed span over the recorded one and counts the op kinds. */
static double replay_text(const char *text, uint32_t kinds[GMX_OP_KIND_COUNT])
{
	char path[] = "/tmp/gmx-replay-XXXXXX";
	int fd = mkstemp(path);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, text, strlen(text)), (ssize_t)strlen(text));
	close(fd);
	gmx_workload_t w;
	char err[1024];
	if (gmx_trace_import(path, NULL, &w, NULL, err, sizeof(err)))
		fail_msg("%s", err);
	memset(kinds, 0, GMX_OP_KIND_COUNT * sizeof(*kinds));
	for (uint32_t i = 0; i < w.n_ops; i++)
		kinds[w.ops[i].kind]++;
	gmx_workload_free(&w);
	gmx_replay_result_t r;
	if (gmx_replay_compare(path, &r, err, sizeof(err)))
		fail_msg("%s", err);
	assert_int_equal(r.waits, kinds[GMX_OP_WAIT]);
	assert_int_equal(r.d2d, kinds[GMX_OP_COPY_D2D]);
	unlink(path);
	return r.replay_span_s / r.recorded_span_s;
}

static void graphs_copies_and_waits_replay_their_dependencies(void **state)
{
	(void)state;
	uint32_t k[GMX_OP_KIND_COUNT];
	/* Without the edge C would run beside A and the span end at ~1.27 ms. */
	double ratio = replay_text(graph_trace, k);
	assert_int_equal(k[GMX_OP_KERNEL], 3);
	assert_int_equal(k[GMX_OP_COPY_D2D], 1);
	assert_int_equal(k[GMX_OP_MEMSET], 0);
	assert_int_equal(k[GMX_OP_WAIT], 1);
	assert_int_equal(k[GMX_OP_RECORD], 1);
	if (fabs(ratio - 1) > 0.03)
		fail_msg("graph trace: replayed span %.3f of the recorded one", ratio);
	/* Without the wait B would start at ~25 us and the span end at ~1.01 ms. */
	ratio = replay_text(wait_trace, k);
	assert_int_equal(k[GMX_OP_WAIT], 1);
	assert_int_equal(k[GMX_OP_RECORD], 1);
	if (fabs(ratio - 1) > 0.03)
		fail_msg("wait trace: replayed span %.3f of the recorded one", ratio);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(replay_matches_recording),
		cmocka_unit_test(graphs_copies_and_waits_replay_their_dependencies),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
