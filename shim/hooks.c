/*
 * The driver entry points gpumux schedules. Each replaces the generated (weak) forwarder of
 * the same name; each has the prototype cuda.h declares for that exported name.
 *
 * Queued: launches, async copies and memsets, event records, stream waits.
 * Draining: stream/event synchronise and query, elapsed time, destroys, capture begin.
 * With the passthrough policy every hook calls the driver at once (the shim is transparent).
 */
#include "modinfo.h"
#include "queue.h"

static inline int passthrough(void)
{
	return gmx_shim_policy->passthrough;
}

/* gmx_shim_launch_direct, called only when gmx_shim_maybe_direct() says it may hold: under a policy
 * that may hold (daemon, hold) and with no capture under way, a launch skips the call and the
 * saving of its arguments around it (43 instructions a leased launch, docs/daemon.md). */
static inline int launch_direct(CUstream s, int ptsz)
{
	return gmx_shim_maybe_direct() && gmx_shim_launch_direct(s, ptsz);
}

/* Returns what enqueue (an expression giving the queue's answer) says, or, when the queue
 * cannot take the command, calls the driver (direct_call) after the barrier on stream_var. */
#define ENQUEUED_OR_DIRECT(enqueue, stream_var, ptsz, direct_call)                                           \
	do {                                                                                                 \
		CUresult rc_ = (enqueue);                                                                    \
		if (rc_ != GMX_SHIM_DIRECT)                                                                  \
			return rc_;                                                                          \
		stream_var = gmx_shim_stream_barrier(stream_var, ptsz);                                      \
		return direct_call;                                                                          \
	} while (0)
/* Queues req; falls back to a barrier + direct call when the queue cannot take it. */
#define QUEUE_OR_DIRECT(req, stream_var, ptsz, direct_call)                                                  \
	ENQUEUED_OR_DIRECT(gmx_shim_enqueue(&(req)), stream_var, ptsz, direct_call)

/* ---- launches ---- */

/* cuLaunchKernel hands the queue its arguments as they are (gmx_shim_launch_t, 11 words): the
 * request of every kind (23 words, zeroed first) is built only for a launch that is queued. */
#define HOOK_LAUNCH_PLAIN(NAME, PTSZ)                                                                        \
	GMX_EXPORT CUresult CUDAAPI NAME(                                                                    \
	    CUfunction f, unsigned int gridDimX, unsigned int gridDimY, unsigned int gridDimZ,               \
	    unsigned int blockDimX, unsigned int blockDimY, unsigned int blockDimZ,                          \
	    unsigned int sharedMemBytes, CUstream hStream, void **kernelParams, void **extra)                \
	{                                                                                                    \
		GMX_REAL_OR_RETURN(real, NAME);                                                              \
		if (GMX_LIKELY(passthrough()) || launch_direct(hStream, PTSZ))                               \
			return real(f, gridDimX, gridDimY, gridDimZ, blockDimX, blockDimY, blockDimZ,        \
				    sharedMemBytes, hStream, kernelParams, extra);                           \
		gmx_shim_launch_t l = {.f = f,                                                               \
				       .grid = {gridDimX, gridDimY, gridDimZ},                               \
				       .block = {blockDimX, blockDimY, blockDimZ},                           \
				       .shmem = sharedMemBytes,                                              \
				       .stream = hStream,                                                    \
				       .params = kernelParams,                                               \
				       .extra = extra};                                                      \
		ENQUEUED_OR_DIRECT(gmx_shim_enqueue_launch(&l, PTSZ), hStream, PTSZ,                         \
				   real(f, gridDimX, gridDimY, gridDimZ, blockDimX, blockDimY, blockDimZ,    \
					sharedMemBytes, hStream, kernelParams, extra));                      \
	}

HOOK_LAUNCH_PLAIN(cuLaunchKernel, 0)
HOOK_LAUNCH_PLAIN(cuLaunchKernel_ptsz, 1)

#define HOOK_LAUNCH_COOP(NAME, PTSZ)                                                                         \
	GMX_EXPORT CUresult CUDAAPI NAME(CUfunction f, unsigned int gridDimX, unsigned int gridDimY,         \
					 unsigned int gridDimZ, unsigned int blockDimX,                      \
					 unsigned int blockDimY, unsigned int blockDimZ,                     \
					 unsigned int sharedMemBytes, CUstream hStream, void **kernelParams) \
	{                                                                                                    \
		GMX_REAL_OR_RETURN(real, NAME);                                                              \
		if (GMX_LIKELY(passthrough()) || launch_direct(hStream, PTSZ))                               \
			return real(f, gridDimX, gridDimY, gridDimZ, blockDimX, blockDimY, blockDimZ,        \
				    sharedMemBytes, hStream, kernelParams);                                  \
		gmx_shim_req_t r = {.kind = GMX_CMD_LAUNCH_COOP,                                             \
				    .stream = hStream,                                                       \
				    .ptsz = PTSZ,                                                            \
				    .f = f,                                                                  \
				    .grid = {gridDimX, gridDimY, gridDimZ},                                  \
				    .block = {blockDimX, blockDimY, blockDimZ},                              \
				    .shmem = sharedMemBytes,                                                 \
				    .params = kernelParams};                                                 \
		QUEUE_OR_DIRECT(r, hStream, PTSZ,                                                            \
				real(f, gridDimX, gridDimY, gridDimZ, blockDimX, blockDimY, blockDimZ,       \
				     sharedMemBytes, hStream, kernelParams));                                \
	}

HOOK_LAUNCH_COOP(cuLaunchCooperativeKernel, 0)
HOOK_LAUNCH_COOP(cuLaunchCooperativeKernel_ptsz, 1)

#define HOOK_LAUNCH_EX(NAME, PTSZ)                                                                           \
	GMX_EXPORT CUresult CUDAAPI NAME(const CUlaunchConfig *config, CUfunction f, void **kernelParams,    \
					 void **extra)                                                       \
	{                                                                                                    \
		GMX_REAL_OR_RETURN(real, NAME);                                                              \
		if (GMX_LIKELY(passthrough()) || !config || launch_direct(config->hStream, PTSZ))            \
			return real(config, f, kernelParams, extra);                                         \
		gmx_shim_req_t r = {.kind = GMX_CMD_LAUNCH_EX,                                               \
				    .stream = config->hStream,                                               \
				    .ptsz = PTSZ,                                                            \
				    .f = f,                                                                  \
				    .cfg = config,                                                           \
				    .params = kernelParams,                                                  \
				    .extra = extra};                                                         \
		CUresult rc = gmx_shim_enqueue(&r);                                                          \
		if (rc != GMX_SHIM_DIRECT)                                                                   \
			return rc;                                                                           \
		CUlaunchConfig c = *config;                                                                  \
		c.hStream = gmx_shim_stream_barrier(c.hStream, PTSZ);                                        \
		return real(&c, f, kernelParams, extra);                                                     \
	}

HOOK_LAUNCH_EX(cuLaunchKernelEx, 0)
HOOK_LAUNCH_EX(cuLaunchKernelEx_ptsz, 1)

#define HOOK_HOSTFN(NAME, PTSZ)                                                                              \
	GMX_EXPORT CUresult CUDAAPI NAME(CUstream hStream, CUhostFn fn, void *userData)                      \
	{                                                                                                    \
		GMX_REAL_OR_RETURN(real, NAME);                                                              \
		if (GMX_LIKELY(passthrough()) || gmx_shim_capturing(hStream, PTSZ))                          \
			return real(hStream, fn, userData);                                                  \
		gmx_shim_req_t r = {                                                                         \
		    .kind = GMX_CMD_HOSTFN, .stream = hStream, .ptsz = PTSZ, .fn = fn, .user = userData};    \
		QUEUE_OR_DIRECT(r, hStream, PTSZ, real(hStream, fn, userData));                              \
	}

HOOK_HOSTFN(cuLaunchHostFunc, 0)
HOOK_HOSTFN(cuLaunchHostFunc_ptsz, 1)

#define HOOK_GRAPH(NAME, PTSZ)                                                                               \
	GMX_EXPORT CUresult CUDAAPI NAME(CUgraphExec hGraphExec, CUstream hStream)                           \
	{                                                                                                    \
		GMX_REAL_OR_RETURN(real, NAME);                                                              \
		if (GMX_LIKELY(passthrough()) || gmx_shim_capturing(hStream, PTSZ))                          \
			return real(hGraphExec, hStream);                                                    \
		gmx_shim_req_t r = {                                                                         \
		    .kind = GMX_CMD_GRAPH, .stream = hStream, .ptsz = PTSZ, .gexec = hGraphExec};            \
		QUEUE_OR_DIRECT(r, hStream, PTSZ, real(hGraphExec, hStream));                                \
	}

HOOK_GRAPH(cuGraphLaunch, 0)
HOOK_GRAPH(cuGraphLaunch_ptsz, 1)

/* ---- async copies and memsets ---- */

#define HOOK_COPY_DD(NAME, PTSZ, CK)                                                                         \
	GMX_EXPORT CUresult CUDAAPI NAME(CUdeviceptr dst, CUdeviceptr src, size_t ByteCount,                 \
					 CUstream hStream)                                                   \
	{                                                                                                    \
		GMX_REAL_OR_RETURN(real, NAME);                                                              \
		if (GMX_LIKELY(passthrough()) || gmx_shim_capturing(hStream, PTSZ))                          \
			return real(dst, src, ByteCount, hStream);                                           \
		gmx_shim_req_t r = {.kind = GMX_CMD_COPY,                                                    \
				    .stream = hStream,                                                       \
				    .ptsz = PTSZ,                                                            \
				    .copy_kind = CK,                                                         \
				    .dst = dst,                                                              \
				    .src = src,                                                              \
				    .n = ByteCount};                                                         \
		QUEUE_OR_DIRECT(r, hStream, PTSZ, real(dst, src, ByteCount, hStream));                       \
	}

HOOK_COPY_DD(cuMemcpyAsync, 0, 0)
HOOK_COPY_DD(cuMemcpyAsync_ptsz, 1, 0)
HOOK_COPY_DD(cuMemcpyDtoDAsync_v2, 0, 3)
HOOK_COPY_DD(cuMemcpyDtoDAsync_v2_ptsz, 1, 3)

#define HOOK_COPY_HTOD(NAME, PTSZ)                                                                           \
	GMX_EXPORT CUresult CUDAAPI NAME(CUdeviceptr dstDevice, const void *srcHost, size_t ByteCount,       \
					 CUstream hStream)                                                   \
	{                                                                                                    \
		GMX_REAL_OR_RETURN(real, NAME);                                                              \
		if (GMX_LIKELY(passthrough()) || gmx_shim_capturing(hStream, PTSZ))                          \
			return real(dstDevice, srcHost, ByteCount, hStream);                                 \
		gmx_shim_req_t r = {.kind = GMX_CMD_COPY,                                                    \
				    .stream = hStream,                                                       \
				    .ptsz = PTSZ,                                                            \
				    .copy_kind = 1,                                                          \
				    .dst = dstDevice,                                                        \
				    .hsrc = srcHost,                                                         \
				    .n = ByteCount};                                                         \
		QUEUE_OR_DIRECT(r, hStream, PTSZ, real(dstDevice, srcHost, ByteCount, hStream));             \
	}

HOOK_COPY_HTOD(cuMemcpyHtoDAsync_v2, 0)
HOOK_COPY_HTOD(cuMemcpyHtoDAsync_v2_ptsz, 1)

#define HOOK_COPY_DTOH(NAME, PTSZ)                                                                           \
	GMX_EXPORT CUresult CUDAAPI NAME(void *dstHost, CUdeviceptr srcDevice, size_t ByteCount,             \
					 CUstream hStream)                                                   \
	{                                                                                                    \
		GMX_REAL_OR_RETURN(real, NAME);                                                              \
		if (GMX_LIKELY(passthrough()) || gmx_shim_capturing(hStream, PTSZ))                          \
			return real(dstHost, srcDevice, ByteCount, hStream);                                 \
		gmx_shim_req_t r = {.kind = GMX_CMD_COPY,                                                    \
				    .stream = hStream,                                                       \
				    .ptsz = PTSZ,                                                            \
				    .copy_kind = 2,                                                          \
				    .hdst = dstHost,                                                         \
				    .src = srcDevice,                                                        \
				    .n = ByteCount};                                                         \
		QUEUE_OR_DIRECT(r, hStream, PTSZ, real(dstHost, srcDevice, ByteCount, hStream));             \
	}

HOOK_COPY_DTOH(cuMemcpyDtoHAsync_v2, 0)
HOOK_COPY_DTOH(cuMemcpyDtoHAsync_v2_ptsz, 1)

#define HOOK_MEMSET(NAME, PTSZ, T, W)                                                                        \
	GMX_EXPORT CUresult CUDAAPI NAME(CUdeviceptr dstDevice, T value, size_t N, CUstream hStream)         \
	{                                                                                                    \
		GMX_REAL_OR_RETURN(real, NAME);                                                              \
		if (GMX_LIKELY(passthrough()) || gmx_shim_capturing(hStream, PTSZ))                          \
			return real(dstDevice, value, N, hStream);                                           \
		gmx_shim_req_t r = {.kind = GMX_CMD_MEMSET,                                                  \
				    .stream = hStream,                                                       \
				    .ptsz = PTSZ,                                                            \
				    .dst = dstDevice,                                                        \
				    .value = value,                                                          \
				    .n = N,                                                                  \
				    .width = W};                                                             \
		QUEUE_OR_DIRECT(r, hStream, PTSZ, real(dstDevice, value, N, hStream));                       \
	}

HOOK_MEMSET(cuMemsetD8Async, 0, unsigned char, 1)
HOOK_MEMSET(cuMemsetD8Async_ptsz, 1, unsigned char, 1)
HOOK_MEMSET(cuMemsetD16Async, 0, unsigned short, 2)
HOOK_MEMSET(cuMemsetD16Async_ptsz, 1, unsigned short, 2)
HOOK_MEMSET(cuMemsetD32Async, 0, unsigned int, 4)
HOOK_MEMSET(cuMemsetD32Async_ptsz, 1, unsigned int, 4)

/* ---- events and stream waits ---- */

#define HOOK_RECORD(NAME, PTSZ)                                                                              \
	GMX_EXPORT CUresult CUDAAPI NAME(CUevent hEvent, CUstream hStream)                                   \
	{                                                                                                    \
		GMX_REAL_OR_RETURN(real, NAME);                                                              \
		if (GMX_LIKELY(passthrough()) || gmx_shim_capturing(hStream, PTSZ))                          \
			return real(hEvent, hStream);                                                        \
		gmx_shim_req_t r = {                                                                         \
		    .kind = GMX_CMD_EVENT_RECORD, .stream = hStream, .ptsz = PTSZ, .ev = hEvent};            \
		QUEUE_OR_DIRECT(r, hStream, PTSZ, real(hEvent, hStream));                                    \
	}

HOOK_RECORD(cuEventRecord, 0)
HOOK_RECORD(cuEventRecord_ptsz, 1)

#define HOOK_RECORD_FLAGS(NAME, PTSZ)                                                                        \
	GMX_EXPORT CUresult CUDAAPI NAME(CUevent hEvent, CUstream hStream, unsigned int flags)               \
	{                                                                                                    \
		GMX_REAL_OR_RETURN(real, NAME);                                                              \
		if (GMX_LIKELY(passthrough()) || gmx_shim_capturing(hStream, PTSZ))                          \
			return real(hEvent, hStream, flags);                                                 \
		gmx_shim_req_t r = {.kind = GMX_CMD_EVENT_RECORD,                                            \
				    .stream = hStream,                                                       \
				    .ptsz = PTSZ,                                                            \
				    .ev = hEvent,                                                            \
				    .flags = flags,                                                          \
				    .with_flags = 1};                                                        \
		QUEUE_OR_DIRECT(r, hStream, PTSZ, real(hEvent, hStream, flags));                             \
	}

HOOK_RECORD_FLAGS(cuEventRecordWithFlags, 0)
HOOK_RECORD_FLAGS(cuEventRecordWithFlags_ptsz, 1)

#define HOOK_WAIT(NAME, PTSZ)                                                                                \
	GMX_EXPORT CUresult CUDAAPI NAME(CUstream hStream, CUevent hEvent, unsigned int Flags)               \
	{                                                                                                    \
		GMX_REAL_OR_RETURN(real, NAME);                                                              \
		if (GMX_LIKELY(passthrough()) || gmx_shim_capturing(hStream, PTSZ))                          \
			return real(hStream, hEvent, Flags);                                                 \
		gmx_shim_req_t r = {.kind = GMX_CMD_STREAM_WAIT,                                             \
				    .stream = hStream,                                                       \
				    .ptsz = PTSZ,                                                            \
				    .ev = hEvent,                                                            \
				    .flags = Flags};                                                         \
		QUEUE_OR_DIRECT(r, hStream, PTSZ, real(hStream, hEvent, Flags));                             \
	}

HOOK_WAIT(cuStreamWaitEvent, 0)
HOOK_WAIT(cuStreamWaitEvent_ptsz, 1)

/* ---- synchronisation and queries: drain first, then the driver's own answer ---- */

#define HOOK_STREAM_SYNC(NAME, PTSZ)                                                                         \
	GMX_EXPORT CUresult CUDAAPI NAME(CUstream hStream)                                                   \
	{                                                                                                    \
		GMX_REAL_OR_RETURN(real, NAME);                                                              \
		if (GMX_LIKELY(passthrough()))                                                               \
			return real(hStream);                                                                \
		CUresult deferred;                                                                           \
		CUstream s = gmx_shim_stream_flush(hStream, PTSZ, &deferred);                                \
		CUresult r = real(s);                                                                        \
		return r == CUDA_SUCCESS ? deferred : r;                                                     \
	}

HOOK_STREAM_SYNC(cuStreamSynchronize, 0)
HOOK_STREAM_SYNC(cuStreamSynchronize_ptsz, 1)

/* A stream with work still in its software queue is not idle: CUDA_ERROR_NOT_READY. */
#define HOOK_STREAM_QUERY(NAME, PTSZ)                                                                        \
	GMX_EXPORT CUresult CUDAAPI NAME(CUstream hStream)                                                   \
	{                                                                                                    \
		GMX_REAL_OR_RETURN(real, NAME);                                                              \
		if (GMX_LIKELY(passthrough()))                                                               \
			return real(hStream);                                                                \
		CUstream s;                                                                                  \
		CUresult r = gmx_shim_stream_pending(hStream, PTSZ, &s);                                     \
		return r != CUDA_SUCCESS ? r : real(s);                                                      \
	}

HOOK_STREAM_QUERY(cuStreamQuery, 0)
HOOK_STREAM_QUERY(cuStreamQuery_ptsz, 1)

/* An event whose record is still queued has not completed: CUDA_ERROR_NOT_READY. */
GMX_EXPORT CUresult CUDAAPI cuEventQuery(CUevent hEvent)
{
	GMX_REAL_OR_RETURN(real, cuEventQuery);
	if (!passthrough() && gmx_shim_event_pending(hEvent))
		return CUDA_ERROR_NOT_READY;
	return real(hEvent);
}

/* Waits until the event's record reached the driver, then for the driver's completion. */
GMX_EXPORT CUresult CUDAAPI cuEventSynchronize(CUevent hEvent)
{
	GMX_REAL_OR_RETURN(real, cuEventSynchronize);
	if (!passthrough())
		gmx_shim_event_flush(hEvent, 0);
	return real(hEvent);
}

/* As the driver: not ready while either record has not completed (here: is still queued). */
GMX_EXPORT CUresult CUDAAPI cuEventElapsedTime(float *pMilliseconds, CUevent hStart, CUevent hEnd)
{
	GMX_REAL_OR_RETURN(real, cuEventElapsedTime);
	if (!passthrough() && (gmx_shim_event_pending(hStart) || gmx_shim_event_pending(hEnd)))
		return CUDA_ERROR_NOT_READY;
	return real(pMilliseconds, hStart, hEnd);
}

/* cuEventElapsedTime_v2: as cuEventElapsedTime. */
GMX_EXPORT CUresult CUDAAPI cuEventElapsedTime_v2(float *pMilliseconds, CUevent hStart, CUevent hEnd)
{
	GMX_REAL_OR_RETURN(real, cuEventElapsedTime_v2);
	if (!passthrough() && (gmx_shim_event_pending(hStart) || gmx_shim_event_pending(hEnd)))
		return CUDA_ERROR_NOT_READY;
	return real(pMilliseconds, hStart, hEnd);
}

/* Destroying an event with a queued record: the record reaches the driver first. */
#define HOOK_EVENT_DESTROY(NAME)                                                                             \
	GMX_EXPORT CUresult CUDAAPI NAME(CUevent hEvent)                                                     \
	{                                                                                                    \
		GMX_REAL_OR_RETURN(real, NAME);                                                              \
		if (!passthrough())                                                                          \
			gmx_shim_event_flush(hEvent, 1);                                                     \
		return real(hEvent);                                                                         \
	}

HOOK_EVENT_DESTROY(cuEventDestroy)
HOOK_EVENT_DESTROY(cuEventDestroy_v2)

/* Destroying a stream: its queued work reaches the driver and retires first. */
#define HOOK_STREAM_DESTROY(NAME)                                                                            \
	GMX_EXPORT CUresult CUDAAPI NAME(CUstream hStream)                                                   \
	{                                                                                                    \
		GMX_REAL_OR_RETURN(real, NAME);                                                              \
		if (!passthrough())                                                                          \
			gmx_shim_stream_forget(hStream);                                                     \
		return real(hStream);                                                                        \
	}

HOOK_STREAM_DESTROY(cuStreamDestroy)
HOOK_STREAM_DESTROY(cuStreamDestroy_v2)

/* ---- stream capture: work before the capture reaches the driver first; captured work then
 * passes straight through (the driver records it into the graph, nothing runs). ---- */

#define HOOK_BEGIN_CAPTURE(NAME, PTSZ)                                                                       \
	GMX_EXPORT CUresult CUDAAPI NAME(CUstream hStream, CUstreamCaptureMode mode)                         \
	{                                                                                                    \
		GMX_REAL_OR_RETURN(real, NAME);                                                              \
		if (passthrough())                                                                           \
			return real(hStream, mode);                                                          \
		hStream = gmx_shim_stream_barrier(hStream, PTSZ);                                            \
		CUresult r = real(hStream, mode);                                                            \
		if (r == CUDA_SUCCESS)                                                                       \
			gmx_shim_capture_begin();                                                            \
		return r;                                                                                    \
	}

HOOK_BEGIN_CAPTURE(cuStreamBeginCapture_v2, 0)
HOOK_BEGIN_CAPTURE(cuStreamBeginCapture_v2_ptsz, 1)

/* Legacy (CUDA 10.0) capture entry points: no mode argument. */
#define HOOK_BEGIN_CAPTURE_V1(NAME, PTSZ)                                                                    \
	GMX_EXPORT CUresult CUDAAPI NAME(CUstream hStream)                                                   \
	{                                                                                                    \
		GMX_REAL_OR_RETURN(real, NAME);                                                              \
		if (passthrough())                                                                           \
			return real(hStream);                                                                \
		hStream = gmx_shim_stream_barrier(hStream, PTSZ);                                            \
		CUresult r = real(hStream);                                                                  \
		if (r == CUDA_SUCCESS)                                                                       \
			gmx_shim_capture_begin();                                                            \
		return r;                                                                                    \
	}

HOOK_BEGIN_CAPTURE_V1(cuStreamBeginCapture, 0)
HOOK_BEGIN_CAPTURE_V1(cuStreamBeginCapture_ptsz, 1)

#define HOOK_BEGIN_CAPTURE_TO_GRAPH(NAME, PTSZ)                                                              \
	GMX_EXPORT CUresult CUDAAPI NAME(CUstream hStream, CUgraph hGraph, const CUgraphNode *dependencies,  \
					 const CUgraphEdgeData *dependencyData, size_t numDependencies,      \
					 CUstreamCaptureMode mode)                                           \
	{                                                                                                    \
		GMX_REAL_OR_RETURN(real, NAME);                                                              \
		if (passthrough())                                                                           \
			return real(hStream, hGraph, dependencies, dependencyData, numDependencies, mode);   \
		hStream = gmx_shim_stream_barrier(hStream, PTSZ);                                            \
		CUresult r = real(hStream, hGraph, dependencies, dependencyData, numDependencies, mode);     \
		if (r == CUDA_SUCCESS)                                                                       \
			gmx_shim_capture_begin();                                                            \
		return r;                                                                                    \
	}

HOOK_BEGIN_CAPTURE_TO_GRAPH(cuStreamBeginCaptureToGraph, 0)
HOOK_BEGIN_CAPTURE_TO_GRAPH(cuStreamBeginCaptureToGraph_ptsz, 1)

#define HOOK_END_CAPTURE(NAME, PTSZ)                                                                         \
	GMX_EXPORT CUresult CUDAAPI NAME(CUstream hStream, CUgraph *phGraph)                                 \
	{                                                                                                    \
		GMX_REAL_OR_RETURN(real, NAME);                                                              \
		if (passthrough())                                                                           \
			return real(hStream, phGraph);                                                       \
		CUstream s = hStream;                                                                        \
		if (hStream == CU_STREAM_PER_THREAD || (hStream == NULL && PTSZ)) {                          \
			CUresult e_;                                                                         \
			s = gmx_shim_stream_flush(hStream, PTSZ, &e_);                                       \
		}                                                                                            \
		CUresult r = real(s, phGraph);                                                               \
		gmx_shim_capture_end();                                                                      \
		return r;                                                                                    \
	}

HOOK_END_CAPTURE(cuStreamEndCapture, 0)
HOOK_END_CAPTURE(cuStreamEndCapture_ptsz, 1)

/* ---- module unload: queued launches of its kernels reach the driver first ---- */

GMX_EXPORT CUresult CUDAAPI cuModuleUnload(CUmodule hmod)
{
	GMX_REAL_OR_RETURN(real, cuModuleUnload);
	if (!passthrough()) {
		gmx_shim_drain_all();
		gmx_shim_func_cache_clear();
		gmx_shim_modinfo_unloaded(hmod); /* before the driver can hand the handle out again */
	}
	return real(hmod);
}

GMX_EXPORT CUresult CUDAAPI cuLibraryUnload(CUlibrary library)
{
	GMX_REAL_OR_RETURN(real, cuLibraryUnload);
	if (!passthrough()) {
		gmx_shim_drain_all();
		gmx_shim_func_cache_clear();
		gmx_shim_modinfo_unloaded(library);
	}
	return real(library);
}
