/*
 * What was released and has not completed: each queue's ring of in-flight commands, bounded
 * (GPUMUX_SHIM_INFLIGHT) so that a held process stops within a few kernels.
 *
 * Completion is tracked without a driver call per command where the stream allows it. A command
 * released onto an application stream gets no event: the stream's query says when it and
 * everything before it completed, and a leased launch asks it only when the lease's bound holds
 * (short kernels: one query retires several). While a look found the stream's work still
 * running (a pipeline), each release first records an event marking what it follows (exactly the
 * earlier commands), so each completion is seen as it happens. The legacy stream (whose handle
 * means the current context's) gets an event after each command.
 */
#define _GNU_SOURCE
#include "queue_internal.h"

#include <stdlib.h>

static void retire_oldest(gmx_sq *q, CUresult r);
static void retire_all(gmx_sq *q, CUresult r);

/* A completion event of q's context: a spare one, or a new one (NULL if the driver refuses). */
static CUevent event_get(gmx_sq *q)
{
	if (q->npool > 0)
		return q->pool[--q->npool];
	CUevent e = NULL;
	__typeof__(&cuEventCreate) mk = GMX_REAL(cuEventCreate);
	if (!mk || mk(&e, CU_EVENT_DISABLE_TIMING) != CUDA_SUCCESS)
		return NULL;
	return e;
}

/* Keeps e for reuse (or destroys it when the pool cannot grow). */
static void event_put(gmx_sq *q, CUevent e)
{
	if (q->npool == q->cappool) {
		int cap = q->cappool ? q->cappool * 2 : 8;
		CUevent *np = realloc(q->pool, (size_t)cap * sizeof *np);
		if (np) {
			q->pool = np;
			q->cappool = cap;
		}
	}
	if (q->npool < q->cappool) {
		q->pool[q->npool++] = e;
	} else {
		__typeof__(&cuEventDestroy_v2) destroy = GMX_REAL(cuEventDestroy_v2);
		if (destroy)
			destroy(e);
	}
}

/* Nonzero when q's newest in-flight command has no completion event yet. */
int gmx_q_tail_unmarked(const gmx_sq *q)
{
	return q->rlen > 0 && !q->ring[(unsigned)(q->rhead + q->rlen - 1) & gmx_q.ring_mask];
}

/* Before a command is released onto q: if q's newest in-flight command has no completion event,
 * records one now, so that it marks exactly the commands before the one about to go; unless the
 * stream's query (skipped when the caller just saw it busy) finds them all complete already
 * (short kernels, or a stream the application synchronised): they are retired instead. Lock
 * held. */
void gmx_q_mark_tail(gmx_sq *q, int known_busy)
{
	if (!gmx_q_tail_unmarked(q))
		return;
	if (!known_busy) {
		__typeof__(&cuStreamQuery) squery = GMX_REAL(cuStreamQuery);
		gmx_q.stream_queries++;
		CUresult sr = squery ? squery(q->real) : CUDA_ERROR_NOT_READY;
		q->busy = sr == CUDA_ERROR_NOT_READY;
		if (sr != CUDA_ERROR_NOT_READY) {
			retire_all(q, sr);
			return;
		}
	}
	CUevent e = event_get(q);
	__typeof__(&cuEventRecord) rec = GMX_REAL(cuEventRecord);
	if (!e)
		return;
	if (rec && rec(e, q->real) == CUDA_SUCCESS) {
		q->ring[(unsigned)(q->rhead + q->rlen - 1) & gmx_q.ring_mask] = e;
		gmx_q.events_recorded++;
	} else {
		event_put(q, e);
	}
}

int gmx_q_track_event(gmx_sq *q, uint64_t seq)
{
	__typeof__(&cuEventRecord) rec = GMX_REAL(cuEventRecord);
	CUevent e = event_get(q);
	if (!e)
		return 0;
	if (!rec || rec(e, q->real) != CUDA_SUCCESS) {
		event_put(q, e);
		return 0;
	}
	gmx_q.events_recorded++;
	gmx_q_track_as(q, seq, e);
	return 1;
}

/* Retires q's oldest in-flight command (r: its completion status) without telling the policy;
 * its seq. Lock held. */
static uint64_t retire_quiet(gmx_sq *q, CUresult r)
{
	CUevent e = q->ring[q->rhead];
	uint64_t seq = q->ring_seq[q->rhead];
	if (r != CUDA_SUCCESS && q->deferred == CUDA_SUCCESS)
		q->deferred = r;
	q->rhead = (int)((unsigned)(q->rhead + 1) & gmx_q.ring_mask);
	q->rlen--;
	gmx_q.inflight--;
	if (e)
		event_put(q, e);
	return seq;
}

/* Retires q's oldest in-flight command (r: its completion status). Lock held. */
static void retire_oldest(gmx_sq *q, CUresult r)
{
	uint64_t seq = retire_quiet(q, r);
	if (gmx_shim_policy->completed)
		gmx_shim_policy->completed(gmx_shim_policy->self, seq);
}

/* Retires all of q's in-flight commands (its stream found idle; r: the status), telling the policy
 * in batches where it takes them (completed_n). Lock held. */
static void retire_all(gmx_sq *q, CUresult r)
{
	const gmx_grant_ops_t *p = gmx_shim_policy;
	if (!p->completed_n) {
		while (q->rlen > 0)
			retire_oldest(q, r);
		return;
	}
	uint64_t done[GMX_DONE_BATCH];
	while (q->rlen > 0) {
		unsigned n = 0;
		while (q->rlen > 0 && n < GMX_DONE_BATCH)
			done[n++] = retire_quiet(q, r);
		p->completed_n(p->self, done, n);
	}
}

/* Retires completed in-flight commands: oldest first, each by its event, and a command without
 * one (with all after it) once its stream is idle. Lock held. */
void gmx_q_reap(void)
{
	if (gmx_q.inflight == 0)
		return;
	__typeof__(&cuEventQuery) query = GMX_REAL(cuEventQuery);
	__typeof__(&cuStreamQuery) squery = GMX_REAL(cuStreamQuery);
	for (gmx_sq *q = gmx_q.queues; q; q = q->next) {
		while (q->rlen > 0) {
			CUevent e = q->ring[q->rhead];
			gmx_q.stream_queries += !e;
			CUresult r =
			    e ? (query ? query(e) : CUDA_SUCCESS) : (squery ? squery(q->real) : CUDA_SUCCESS);
			if (r == CUDA_ERROR_NOT_READY) {
				q->busy = 1;
				break;
			}
			if (e) {
				retire_oldest(q, r);
				continue;
			}
			q->busy = 0;
			retire_all(q, r); /* the stream is idle: everything released onto it completed */
		}
	}
}

/* When q's newest in-flight command has no event and the stream's query finds it idle: retires
 * all of q's in-flight commands, the first GMX_DONE_BATCH into done[] without telling the policy
 * (the caller does), the rest through completed(). How many went into done[]. Lock held. */
unsigned gmx_q_collect_idle(gmx_sq *q, uint64_t done[GMX_DONE_BATCH])
{
	if (!gmx_q_tail_unmarked(q))
		return 0;
	__typeof__(&cuStreamQuery) squery = GMX_REAL(cuStreamQuery);
	gmx_q.stream_queries++;
	CUresult sr = squery ? squery(q->real) : CUDA_ERROR_NOT_READY;
	q->busy = sr == CUDA_ERROR_NOT_READY;
	unsigned nd = 0;
	while (!q->busy && q->rlen > 0) {
		if (nd < GMX_DONE_BATCH)
			done[nd++] = retire_quiet(q, sr);
		else
			retire_oldest(q, sr);
	}
	return nd;
}
