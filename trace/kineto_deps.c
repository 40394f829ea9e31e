/* Dependencies a Kineto timeline shows without naming them (docs/traces.md, "Dependencies").
 *
 * A GPU operation normally starts as soon as it is launched (plus the launch latency) and its
 * stream is free. One that starts clearly later, right when an operation of another stream of
 * the same process ends, was waiting for it: a cudaStreamWaitEvent whose event the trace does
 * not describe, a branch of a CUDA graph, an NCCL stream joining the compute stream. Such a
 * wait is kept as a dependency on that operation, provided it was launched first (a stream
 * can only wait for work already submitted). A late start with no such operation ending just
 * before it waited for something outside the trace (another process, the host) and is left
 * alone. */
#include <errno.h>
#include <stdlib.h>

#include "kineto_internal.h"

/* Launch-to-start with an idle GPU is 4-13 us in the shipped traces (traces/README.md): a start
 * later than the launch plus the shortest of these, and later than the stream became free, by
 * more than LATE_NS was held; the operation it waited for ended at most WINDOW_NS before. */
#define MIN_LAUNCH_NS 4000
#define LATE_NS 10000
#define WINDOW_NS 15000
#define MAX_STREAMS 64

typedef struct start {
	int64_t ts;
	uint32_t seq, idx;
} start_t;

static int cmp_start(const void *a, const void *b)
{
	const start_t *x = a, *y = b;
	if (x->ts != y->ts)
		return x->ts < y->ts ? -1 : 1;
	return (x->seq > y->seq) - (x->seq < y->seq);
}

/* Host launch time of record i, or -1 when no runtime call carries its correlation. */
static int64_t launch_of(const kstate_t *k, const gpu_rec_t *g)
{
	uint32_t r;
	if (g->has_corr && gmx_u64map_get(&k->rt_by_corr, g->corr, &r))
		return k->rt[r].ts;
	return -1;
}

int gmx__kineto_deps(const kstate_t *k, int32_t **dep_of)
{
	start_t *order = malloc((k->n_gpu + 1) * sizeof(*order));
	int32_t *dep = malloc((k->n_gpu + 1) * sizeof(*dep));
	if (!order || !dep) {
		free(order);
		free(dep);
		return -ENOMEM;
	}
	for (size_t i = 0; i < k->n_gpu; i++) {
		order[i] = (start_t){k->gpu[i].ts, k->gpu[i].seq, (uint32_t)i};
		dep[i] = -1;
	}
	gmx_sort(order, k->n_gpu, sizeof(*order), cmp_start);
	int64_t sid[MAX_STREAMS], free_at[MAX_STREAMS];
	int32_t last[MAX_STREAMS]; /* latest-starting record of each stream so far */
	uint32_t ns = 0;
	for (size_t n = 0; n < k->n_gpu; n++) {
		uint32_t i = order[n].idx;
		const gpu_rec_t *g = &k->gpu[i];
		uint32_t s = 0;
		while (s < ns && sid[s] != g->stream)
			s++;
		if (s == ns) {
			if (ns == MAX_STREAMS)
				continue; /* beyond 64 streams: no inference for the rest */
			sid[ns] = g->stream;
			free_at[ns] = INT64_MIN;
			last[ns++] = -1;
		}
		int64_t launch = launch_of(k, g);
		int64_t ready = launch + MIN_LAUNCH_NS > free_at[s] ? launch + MIN_LAUNCH_NS : free_at[s];
		if (launch >= 0 && g->ts > ready + LATE_NS) {
			int32_t best = -1;
			int64_t best_end = INT64_MIN;
			for (uint32_t o = 0; o < ns; o++) {
				if (o == s || last[o] < 0)
					continue;
				const gpu_rec_t *p = &k->gpu[last[o]];
				int64_t end = p->ts + p->dur, pl = launch_of(k, p);
				if (end <= g->ts && end >= g->ts - WINDOW_NS && end > best_end && pl >= 0 && pl <= launch) {
					best = last[o];
					best_end = end;
				}
			}
			dep[i] = best;
		}
		if (g->ts + g->dur > free_at[s])
			free_at[s] = g->ts + g->dur;
		last[s] = (int32_t)i;
	}
	free(order);
	*dep_of = dep;
	return 0;
}
