/* Finding a stream's queue (per context; the legacy and per-thread default streams), and the
 * table of events recorded through the queue (what a stream wait must follow). */
#define _GNU_SOURCE
#include "queue_internal.h"

#include <stdlib.h>

evinfo_t *gmx_q_ev_lookup(CUevent e, int create)
{
	size_t h = gmx_shim__ptr_hash(e, EV_BUCKETS);
	for (evinfo_t *x = gmx_q.ev[h]; x; x = x->next)
		if (x->ev == e)
			return x;
	if (!create)
		return NULL;
	evinfo_t *x = calloc(1, sizeof *x);
	if (!x)
		return NULL;
	x->ev = e;
	x->next = gmx_q.ev[h];
	gmx_q.ev[h] = x;
	return x;
}

void gmx_q_ev_remove(CUevent e)
{
	size_t h = gmx_shim__ptr_hash(e, EV_BUCKETS);
	for (evinfo_t **pp = &gmx_q.ev[h]; *pp; pp = &(*pp)->next)
		if ((*pp)->ev == e) {
			evinfo_t *x = *pp;
			*pp = x->next;
			free(x);
			return;
		}
}

/* ---- queues ---- */

int gmx_q_is_legacy(CUstream s, int ptsz)
{
	return s == CU_STREAM_LEGACY || (s == NULL && !ptsz);
}

int gmx_q_is_ptds(CUstream s, int ptsz)
{
	return s == CU_STREAM_PER_THREAD || (s == NULL && ptsz);
}

static gmx_sq *sq_new(CUcontext ctx, CUstream user, int kind)
{
	gmx_sq *q = calloc(1, sizeof *q);
	if (!q)
		return NULL;
	q->ring = calloc((size_t)gmx_q.ring_mask + 1, sizeof *q->ring);
	q->ring_seq = calloc((size_t)gmx_q.ring_mask + 1, sizeof *q->ring_seq);
	if (!q->ring || !q->ring_seq) {
		free(q->ring);
		free(q->ring_seq);
		free(q);
		return NULL;
	}
	q->ctx = ctx;
	q->user = user;
	q->real = user;
	q->kind = kind;
	q->next = gmx_q.queues;
	gmx_q.queues = q;
	return q;
}

/* Finds (create: or makes) the queue for a stream as seen by the calling thread, without the
 * per-thread cache (which it fills for an application stream). Not inlined: the cache's hit in
 * gmx_q_sq_find, every launch on the stream last used, then pays none of its register saving. */
__attribute__((noinline)) static gmx_sq *sq_find_slow(CUstream s, int ptsz, int create)
{
	/* The cache serves application streams only: the legacy and per-thread streams depend
	 * on the current context, which may change between calls. */
	int special = gmx_q_is_legacy(s, ptsz) || gmx_q_is_ptds(s, ptsz);
	gmx_sq *found = NULL;
	CUcontext ctx = NULL;
	if (gmx_q_is_legacy(s, ptsz) || gmx_q_is_ptds(s, ptsz)) {
		ctx = gmx_q_current_ctx();
		if (!ctx)
			return NULL;
		for (gmx_sq *q = gmx_q.queues; q; q = q->next) {
			if (q->ctx != ctx)
				continue;
			if (gmx_q_is_legacy(s, ptsz) && q->kind == SQ_LEGACY) {
				found = q;
				break;
			}
			if (gmx_q_is_ptds(s, ptsz) && q->ptds && pthread_equal(q->owner, pthread_self())) {
				found = q;
				break;
			}
		}
	} else {
		for (gmx_sq *q = gmx_q.queues; q; q = q->next)
			if (q->user == s && !q->ptds && q->kind != SQ_LEGACY) {
				found = q;
				break;
			}
	}
	if (!found && create) {
		if (gmx_q_is_legacy(s, ptsz)) {
			found = sq_new(ctx, NULL, SQ_LEGACY);
		} else if (gmx_q_is_ptds(s, ptsz)) {
			/* The per-thread default stream belongs to its thread, but queued work may be
			 * released by the dispatcher: it goes to a blocking stream of the shim's, which
			 * the driver orders exactly as the per-thread stream (blocking, synchronises with
			 * the legacy stream). Every _ptsz call of this thread is mapped onto it. */
			__typeof__(&cuStreamCreate) mk = GMX_REAL(cuStreamCreate);
			CUstream sub = NULL;
			if (!mk || mk(&sub, CU_STREAM_DEFAULT) != CUDA_SUCCESS)
				return NULL;
			found = sq_new(ctx, CU_STREAM_PER_THREAD, SQ_BLOCKING);
			if (found) {
				found->ptds = 1;
				found->owner = pthread_self();
				found->real = sub;
			}
		} else {
			unsigned flags = 0;
			CUcontext sctx = NULL;
			__typeof__(&cuStreamGetFlags) gf = GMX_REAL(cuStreamGetFlags);
			__typeof__(&cuStreamGetCtx) gc = GMX_REAL(cuStreamGetCtx);
			if (gf && gf(s, &flags) != CUDA_SUCCESS)
				return NULL; /* not a valid stream: let the driver report it */
			if (!gc || gc(s, &sctx) != CUDA_SUCCESS)
				sctx = gmx_q_current_ctx();
			found =
			    sq_new(sctx, s, (flags & CU_STREAM_NON_BLOCKING) ? SQ_NONBLOCKING : SQ_BLOCKING);
		}
	}
	if (found && !special) {
		tl_last_q = found;
		tl_last_stream = s;
		tl_last_gen = gmx_q.gen;
	}
	return found;
}

gmx_sq *gmx_q_sq_find(CUstream s, int ptsz, int create)
{
	/* The cache never holds a default stream (which depends on the current context). */
	if (tl_last_q && tl_last_stream == s && tl_last_gen == gmx_q.gen)
		return tl_last_q;
	return sq_find_slow(s, ptsz, create);
}
