/* Trace replay against the recording. */
#include "replay.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sim.h"
#include "trace.h"

static int cmp_i64(const void *a, const void *b)
{
	int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
	return (x > y) - (x < y);
}

static int cmp_span(const void *a, const void *b)
{
	const gmx_sim_span_t *x = a, *y = b;
	if (x->stream != y->stream)
		return x->stream - y->stream;
	return (x->start_ns > y->start_ns) - (x->start_ns < y->start_ns);
}

/* Same-stream idle gaps between consecutive kernels, percentiles in us. */
static int replay_gaps(gmx_sim_timeline_t *tl, double out[3])
{
	gmx_sim_span_t *k = malloc((tl->n + 1) * sizeof(*k));
	int64_t *gaps = malloc((tl->n + 1) * sizeof(*gaps));
	if (!k || !gaps) {
		free(k);
		free(gaps);
		return -ENOMEM;
	}
	uint64_t nk = 0, ng = 0;
	for (uint64_t i = 0; i < tl->n; i++)
		if (tl->spans[i].kind == GMX_OP_KERNEL)
			k[nk++] = tl->spans[i];
	qsort(k, nk, sizeof(*k), cmp_span);
	for (uint64_t i = 1; i < nk; i++)
		if (k[i].stream == k[i - 1].stream)
			gaps[ng++] = k[i].start_ns > k[i - 1].end_ns ? k[i].start_ns - k[i - 1].end_ns : 0;
	qsort(gaps, ng, sizeof(*gaps), cmp_i64);
	static const double q[3] = {0.50, 0.90, 0.99};
	for (int i = 0; i < 3; i++) {
		uint64_t rank = (uint64_t)ceil(q[i] * (double)ng);
		out[i] = ng ? (double)gaps[rank ? rank - 1 : 0] / 1e3 : 0;
	}
	free(k);
	free(gaps);
	return 0;
}

int gmx_replay_compare(const char *path, gmx_replay_result_t *r, char *err, size_t err_len)
{
	memset(r, 0, sizeof(*r));
	gmx_workload_t w;
	gmx_trace_info_t info = {0};
	gmx_trace_opts_t opts = {.pack = 1}; /* as a scenario's workload = trace replays it */
	int rc = gmx_trace_import(path, &opts, &w, &info, err, err_len);
	if (rc)
		return rc;
	gmx_trace_stats_t st;
	rc = gmx_trace_stats(&w, &info, &st);
	if (rc) {
		snprintf(err, err_len, "%s: out of memory computing statistics", path);
		goto out;
	}
	const gmx_preset_t *dev = w.device ? gmx_preset_find(w.device) : NULL;
	if (!dev)
		dev = gmx_preset_find("rtx5080");
	snprintf(r->device, sizeof(r->device), "%s", dev->name);
	r->kernels = st.kernels;
	for (uint32_t i = 0; i < w.n_ops; i++) {
		r->waits += w.ops[i].kind == GMX_OP_WAIT;
		r->d2d += w.ops[i].kind == GMX_OP_COPY_D2D;
	}
	r->recorded_span_s = st.span_s;
	memcpy(r->recorded_gap_us, st.gap_us, sizeof(r->recorded_gap_us));
	gmx_sim_task_t task = {.name = "trace", .units = 1, .workload = &w};
	gmx_sim_timeline_t tl = {0};
	gmx_sim_config_t cfg = {
		.device = dev,
		.capacity_bytes = dev->hbm_bytes - dev->reserved_bytes,
		.mem = GMX_MEM_INMEM,
		.policy = gmx_sched_find("timeslice"),
		.duration_ns = (int64_t)(st.span_s * 1e9) * 10 + 10000000000LL,
		.seed = 1,
		.tasks = &task,
		.n_tasks = 1,
		.timeline = &tl,
	};
	gmx_sched_params_default(&cfg.sched);
	gmx_sim_result_t *res = calloc(1, sizeof(*res));
	rc = res ? gmx_sim_run(&cfg, res, err, err_len) : -ENOMEM;
	if (!rc) {
		r->replay_span_s = res->tasks[0].jct_s;
		rc = replay_gaps(&tl, r->replay_gap_us);
	}
	free(res);
	free(tl.spans);
out:
	gmx_trace_info_free(&info);
	gmx_workload_free(&w);
	return rc;
}
