/* The stand-in driver: streams and events. */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "standin_internal.h"

/* ---- streams ---- */

static CUresult stream_create(CUstream *ph, unsigned flags, int priority)
{
	REQUIRE_CTX(c);
	if (!ph || (flags & ~(unsigned)CU_STREAM_NON_BLOCKING))
		return CUDA_ERROR_INVALID_VALUE;
	pthread_mutex_lock(&S.lock);
	CUresult r = CUDA_ERROR_OUT_OF_MEMORY;
	for (int i = 0; i < SI_STREAMS; i++)
		if (!S.streams[i].in_use) {
			int si = si_stream_open(
			    (flags & CU_STREAM_NON_BLOCKING) ? SI_S_NONBLOCKING : SI_S_BLOCKING, c->id);
			if (si < 0)
				break;
			S.streams[i] = (struct CUstream_st){1, si, c->id, flags, priority};
			*ph = &S.streams[i];
			r = CUDA_SUCCESS;
			break;
		}
	pthread_mutex_unlock(&S.lock);
	return r;
}

SI_EXPORT CUresult CUDAAPI cuStreamCreate(CUstream *phStream, unsigned int Flags)
{
	return stream_create(phStream, Flags, 0);
}

SI_EXPORT CUresult CUDAAPI cuStreamCreateWithPriority(CUstream *phStream, unsigned int flags, int priority)
{
	/* clamped to the range cuCtxGetStreamPriorityRange reports, as the driver does */
	return stream_create(phStream, flags, priority > 0 ? 0 : priority < -5 ? -5 : priority);
}

SI_EXPORT CUresult CUDAAPI cuStreamDestroy_v2(CUstream hStream)
{
	REQUIRE_INIT();
	pthread_mutex_lock(&S.lock);
	struct CUstream_st *s = si__stream_of(hStream);
	if (s) {
		si_stream_close(s->si);
		s->in_use = 0;
	}
	pthread_mutex_unlock(&S.lock);
	return s ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE;
}

static CUresult stream_sync(CUstream h, int ptsz)
{
	int si;
	CUresult r = si__resolve_stream(h, ptsz, &si);
	if (r != CUDA_SUCCESS)
		return r;
	if (si_stream_kind(si) == SI_S_LEGACY) /* the legacy stream waits for the whole context */
		si_wait_ctx(si__cur_ctx()->id);
	else
		si_wait_stream(si, 0);
	return CUDA_SUCCESS;
}

SI_EXPORT CUresult CUDAAPI cuStreamSynchronize(CUstream hStream)
{
	return stream_sync(hStream, 0);
}

SI_EXPORT CUresult CUDAAPI cuStreamSynchronize_ptsz(CUstream hStream)
{
	return stream_sync(hStream, 1);
}

static CUresult stream_query(CUstream h, int ptsz)
{
	int si;
	CUresult r = si__resolve_stream(h, ptsz, &si);
	if (r != CUDA_SUCCESS)
		return r;
	return si_stream_done(si, 0) ? CUDA_SUCCESS : CUDA_ERROR_NOT_READY;
}

SI_EXPORT CUresult CUDAAPI cuStreamQuery(CUstream hStream)
{
	return stream_query(hStream, 0);
}

SI_EXPORT CUresult CUDAAPI cuStreamQuery_ptsz(CUstream hStream)
{
	return stream_query(hStream, 1);
}

static CUresult stream_wait(CUstream h, int ptsz, CUevent e, unsigned flags)
{
	int si;
	CUresult r = si__resolve_stream(h, ptsz, &si);
	if (r != CUDA_SUCCESS)
		return r;
	struct CUevent_st *ev = si__event_of(e);
	if (!ev)
		return CUDA_ERROR_INVALID_HANDLE;
	(void)flags;
	if (ev->cap_from && si__capturing(ev->cap_from - 1)) {
		si__capture_join(si, ev->cap_from - 1); /* captured order is a chain: no node */
		return CUDA_SUCCESS;
	}
	if (si__capturing(si))
		return CUDA_SUCCESS; /* an event recorded outside the capture: already ordered */
	int ws;
	uint64_t seq;
	if (!si_event_target(ev->ei, &ws, &seq))
		return CUDA_SUCCESS; /* never recorded: nothing to wait for */
	si_submit_t s = {.kind = SI_K_WAIT, .stream = si, .wait_stream = ws, .wait_seq = seq};
	return si_submit(&s) ? CUDA_SUCCESS : CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES;
}

SI_EXPORT CUresult CUDAAPI cuStreamWaitEvent(CUstream hStream, CUevent hEvent, unsigned int Flags)
{
	return stream_wait(hStream, 0, hEvent, Flags);
}

SI_EXPORT CUresult CUDAAPI cuStreamWaitEvent_ptsz(CUstream hStream, CUevent hEvent, unsigned int Flags)
{
	return stream_wait(hStream, 1, hEvent, Flags);
}

static CUresult stream_flags(CUstream h, int ptsz, unsigned *flags)
{
	if (!flags)
		return CUDA_ERROR_INVALID_VALUE;
	int si;
	CUresult r = si__resolve_stream(h, ptsz, &si);
	if (r != CUDA_SUCCESS)
		return r;
	*flags = si_stream_kind(si) == SI_S_NONBLOCKING ? CU_STREAM_NON_BLOCKING : 0;
	return CUDA_SUCCESS;
}

SI_EXPORT CUresult CUDAAPI cuStreamGetFlags(CUstream hStream, unsigned int *flags)
{
	return stream_flags(hStream, 0, flags);
}

SI_EXPORT CUresult CUDAAPI cuStreamGetFlags_ptsz(CUstream hStream, unsigned int *flags)
{
	return stream_flags(hStream, 1, flags);
}

static CUresult stream_ctx(CUstream h, CUcontext *pctx)
{
	REQUIRE_INIT();
	if (!pctx)
		return CUDA_ERROR_INVALID_VALUE;
	struct CUstream_st *s = si__stream_of(h);
	if (s) {
		*pctx = &S.ctx[s->ctx];
		return CUDA_SUCCESS;
	}
	if (h == NULL || h == CU_STREAM_LEGACY || h == CU_STREAM_PER_THREAD) {
		if (!si__cur_ctx())
			return CUDA_ERROR_INVALID_CONTEXT;
		*pctx = si__cur_ctx();
		return CUDA_SUCCESS;
	}
	return CUDA_ERROR_INVALID_HANDLE;
}

SI_EXPORT CUresult CUDAAPI cuStreamGetCtx(CUstream hStream, CUcontext *pctx)
{
	return stream_ctx(hStream, pctx);
}

SI_EXPORT CUresult CUDAAPI cuStreamGetCtx_ptsz(CUstream hStream, CUcontext *pctx)
{
	return stream_ctx(hStream, pctx);
}

static CUresult is_capturing(CUstream h, int ptsz, CUstreamCaptureStatus *st)
{
	return si__is_capturing(h, ptsz, st);
}

SI_EXPORT CUresult CUDAAPI cuStreamIsCapturing(CUstream hStream, CUstreamCaptureStatus *captureStatus)
{
	return is_capturing(hStream, 0, captureStatus);
}

SI_EXPORT CUresult CUDAAPI cuStreamIsCapturing_ptsz(CUstream hStream, CUstreamCaptureStatus *captureStatus)
{
	return is_capturing(hStream, 1, captureStatus);
}

static CUresult stream_priority(CUstream h, int ptsz, int *priority)
{
	if (!priority)
		return CUDA_ERROR_INVALID_VALUE;
	int si;
	CUresult r = si__resolve_stream(h, ptsz, &si);
	if (r != CUDA_SUCCESS)
		return r;
	struct CUstream_st *s = si__stream_of(h);
	*priority = s ? s->priority : 0;
	return CUDA_SUCCESS;
}

SI_EXPORT CUresult CUDAAPI cuStreamGetPriority(CUstream hStream, int *priority)
{
	return stream_priority(hStream, 0, priority);
}

SI_EXPORT CUresult CUDAAPI cuStreamGetPriority_ptsz(CUstream hStream, int *priority)
{
	return stream_priority(hStream, 1, priority);
}

/* The stream's id: its engine stream index plus one, unique within the process. */
static CUresult stream_id(CUstream h, int ptsz, unsigned long long *id)
{
	if (!id)
		return CUDA_ERROR_INVALID_VALUE;
	int si;
	CUresult r = si__resolve_stream(h, ptsz, &si);
	if (r == CUDA_SUCCESS)
		*id = (unsigned long long)si + 1;
	return r;
}

SI_EXPORT CUresult CUDAAPI cuStreamGetId(CUstream hStream, unsigned long long *streamId)
{
	return stream_id(hStream, 0, streamId);
}

SI_EXPORT CUresult CUDAAPI cuStreamGetId_ptsz(CUstream hStream, unsigned long long *streamId)
{
	return stream_id(hStream, 1, streamId);
}

/* ---- events ---- */

SI_EXPORT CUresult CUDAAPI cuEventCreate(CUevent *phEvent, unsigned int Flags)
{
	REQUIRE_CTX(c);
	(void)c;
	if (!phEvent)
		return CUDA_ERROR_INVALID_VALUE;
	pthread_mutex_lock(&S.lock);
	CUresult r = CUDA_ERROR_OUT_OF_MEMORY;
	for (int i = 0; i < SI_EVENTS; i++)
		if (!S.events[i].in_use) {
			int ei = si_event_open();
			if (ei < 0)
				break;
			S.events[i] = (struct CUevent_st){1, ei, Flags, 0};
			*phEvent = &S.events[i];
			r = CUDA_SUCCESS;
			break;
		}
	pthread_mutex_unlock(&S.lock);
	return r;
}

SI_EXPORT CUresult CUDAAPI cuEventDestroy_v2(CUevent hEvent)
{
	REQUIRE_INIT();
	pthread_mutex_lock(&S.lock);
	struct CUevent_st *e = si__event_of(hEvent);
	if (e) {
		si_event_close(e->ei);
		e->in_use = 0;
	}
	pthread_mutex_unlock(&S.lock);
	return e ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE;
}

static CUresult record(CUevent e, CUstream h, int ptsz)
{
	struct CUevent_st *ev = si__event_of(e);
	if (!ev)
		return S.init ? CUDA_ERROR_INVALID_HANDLE : CUDA_ERROR_NOT_INITIALIZED;
	int si;
	CUresult r = si__resolve_stream(h, ptsz, &si);
	if (r != CUDA_SUCCESS)
		return r;
	ev->cap_from = 0;
	if (si__capturing(si)) {
		ev->cap_from = si + 1;
		return si__capture(si, &(si_cap_t){.kind = SI_CAP_RECORD, .event = ev->ei}, NULL);
	}
	si_submit_t s = {.kind = SI_K_RECORD, .stream = si, .event = ev->ei, .name = "record"};
	return si_submit(&s) ? CUDA_SUCCESS : CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES;
}

SI_EXPORT CUresult CUDAAPI cuEventRecord(CUevent hEvent, CUstream hStream)
{
	return record(hEvent, hStream, 0);
}

SI_EXPORT CUresult CUDAAPI cuEventRecord_ptsz(CUevent hEvent, CUstream hStream)
{
	return record(hEvent, hStream, 1);
}

SI_EXPORT CUresult CUDAAPI cuEventRecordWithFlags(CUevent hEvent, CUstream hStream, unsigned int flags)
{
	(void)flags;
	return record(hEvent, hStream, 0);
}

SI_EXPORT CUresult CUDAAPI cuEventRecordWithFlags_ptsz(CUevent hEvent, CUstream hStream, unsigned int flags)
{
	(void)flags;
	return record(hEvent, hStream, 1);
}

SI_EXPORT CUresult CUDAAPI cuEventQuery(CUevent hEvent)
{
	REQUIRE_INIT();
	struct CUevent_st *e = si__event_of(hEvent);
	if (!e)
		return CUDA_ERROR_INVALID_HANDLE;
	return si_event_done(e->ei) ? CUDA_SUCCESS : CUDA_ERROR_NOT_READY;
}

SI_EXPORT CUresult CUDAAPI cuEventSynchronize(CUevent hEvent)
{
	REQUIRE_INIT();
	struct CUevent_st *e = si__event_of(hEvent);
	if (!e)
		return CUDA_ERROR_INVALID_HANDLE;
	si_wait_event(e->ei);
	return CUDA_SUCCESS;
}

static CUresult elapsed(float *ms, CUevent a, CUevent b)
{
	REQUIRE_INIT();
	struct CUevent_st *x = si__event_of(a), *y = si__event_of(b);
	if (!x || !y)
		return CUDA_ERROR_INVALID_HANDLE;
	if (!ms)
		return CUDA_ERROR_INVALID_VALUE;
	if ((x->flags | y->flags) & CU_EVENT_DISABLE_TIMING)
		return CUDA_ERROR_INVALID_HANDLE;
	if (!si_event_done(x->ei) || !si_event_done(y->ei))
		return CUDA_ERROR_NOT_READY;
	int64_t t0 = si_event_time(x->ei), t1 = si_event_time(y->ei);
	if (t0 < 0 || t1 < 0)
		return CUDA_ERROR_INVALID_HANDLE; /* not recorded */
	*ms = (float)((double)(t1 - t0) / 1e6);
	return CUDA_SUCCESS;
}

SI_EXPORT CUresult CUDAAPI cuEventElapsedTime(float *pMilliseconds, CUevent hStart, CUevent hEnd)
{
	return elapsed(pMilliseconds, hStart, hEnd);
}

SI_EXPORT CUresult CUDAAPI cuEventElapsedTime_v2(float *pMilliseconds, CUevent hStart, CUevent hEnd)
{
	return elapsed(pMilliseconds, hStart, hEnd);
}
