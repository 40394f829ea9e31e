/*
 * The stand-in driver: a libcuda.so.1 for tests only, implementing the subset of the driver
 * API that gpumux's tests and interposer use, on top of the shared simulated GPU (engine.c).
 * Kernels come from small text modules (docs/standin.md): a name, a duration in µs, and the
 * parameter layout (which parameters are pointers). Memory is host memory; device memory and
 * managed residency are accounted against the simulated device's size.
 *
 * Handles are indices into fixed tables of this process, validated before use: a bad handle
 * gets the driver's error code (CUDA_ERROR_INVALID_HANDLE / INVALID_CONTEXT / INVALID_VALUE).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "standin_internal.h"

si_state_t si__state = {.lock = PTHREAD_MUTEX_INITIALIZER};

__thread struct CUctx_st *tl_stack[16];
__thread int tl_depth;
__thread int tl_ptds[MAX_CTX]; /* engine stream index + 1 of this thread's default stream */
__thread int tl_ptds_gen;
int g_gen = 1; /* bumped in a forked child: per-thread state of the parent is void */

static void atfork_child(void)
{
	pthread_mutex_init(&S.lock, NULL);
	memset(S.ctx, 0, sizeof S.ctx);
	memset(S.streams, 0, sizeof S.streams);
	memset(S.events, 0, sizeof S.events);
	S.init = 0;
	S.primary_refs = 0;
	tl_depth = 0;
	g_gen++;
}

/* ---- helpers ---- */

struct CUctx_st *si__cur_ctx(void)
{
	return tl_depth > 0 ? tl_stack[tl_depth - 1] : NULL;
}

int si__valid_ctx(CUcontext c)
{
	uintptr_t p = (uintptr_t)c, b = (uintptr_t)S.ctx;
	return p >= b && p < b + sizeof S.ctx && (p - b) % sizeof S.ctx[0] == 0 && c->in_use;
}

struct CUstream_st *si__stream_of(CUstream h)
{
	uintptr_t p = (uintptr_t)h, b = (uintptr_t)S.streams;
	if (p < b || p >= b + sizeof S.streams || (p - b) % sizeof S.streams[0] != 0 || !h->in_use)
		return NULL;
	return h;
}

struct CUevent_st *si__event_of(CUevent h)
{
	uintptr_t p = (uintptr_t)h, b = (uintptr_t)S.events;
	if (p < b || p >= b + sizeof S.events || (p - b) % sizeof S.events[0] != 0 || !h->in_use)
		return NULL;
	return h;
}

struct CUfunc_st *si__func_of(CUfunction h)
{
	uintptr_t p = (uintptr_t)h, b = (uintptr_t)S.fns;
	if (p < b || p >= b + sizeof S.fns || (p - b) % sizeof S.fns[0] != 0 || !h->in_use)
		return NULL;
	return h;
}

struct CUmod_st *si__mod_of(CUmodule h)
{
	uintptr_t p = (uintptr_t)h, b = (uintptr_t)S.mods;
	if (p < b || p >= b + sizeof S.mods || (p - b) % sizeof S.mods[0] != 0 || !h->in_use)
		return NULL;
	return h;
}

/* The engine stream for a stream argument as the driver reads it (legacy/per-thread/own). */
CUresult si__resolve_stream(CUstream h, int ptsz, int *si)
{
	struct CUctx_st *c = si__cur_ctx();
	if (!S.init)
		return CUDA_ERROR_NOT_INITIALIZED;
	if (h == CU_STREAM_LEGACY || (h == NULL && !ptsz)) {
		if (!c)
			return CUDA_ERROR_INVALID_CONTEXT;
		*si = c->legacy;
		return CUDA_SUCCESS;
	}
	if (h == CU_STREAM_PER_THREAD || h == NULL) {
		if (!c)
			return CUDA_ERROR_INVALID_CONTEXT;
		if (tl_ptds_gen != g_gen) {
			memset(tl_ptds, 0, sizeof tl_ptds);
			tl_ptds_gen = g_gen;
		}
		if (!tl_ptds[c->id]) {
			int s = si_stream_open(SI_S_BLOCKING, c->id);
			if (s < 0)
				return CUDA_ERROR_OUT_OF_MEMORY;
			tl_ptds[c->id] = s + 1;
		}
		*si = tl_ptds[c->id] - 1;
		return CUDA_SUCCESS;
	}
	struct CUstream_st *s = si__stream_of(h);
	if (!s)
		return CUDA_ERROR_INVALID_HANDLE;
	*si = s->si;
	return CUDA_SUCCESS;
}

alloc_t *si__alloc_find(uintptr_t p)
{
	for (int i = 0; i < S.nallocs; i++)
		if (p >= S.allocs[i].base && p < S.allocs[i].base + (S.allocs[i].size ? S.allocs[i].size : 1))
			return &S.allocs[i];
	return NULL;
}

alloc_t *si__alloc_add(uintptr_t base, size_t size, int kind)
{
	if (S.nallocs == MAX_ALLOC)
		return NULL;
	alloc_t *a = &S.allocs[S.nallocs++];
	memset(a, 0, sizeof *a);
	a->base = base;
	a->size = size;
	a->kind = kind;
	a->seq = ++S.alloc_seq;
	return a;
}

void si__alloc_remove(alloc_t *a)
{
	free(a->resident);
	*a = S.allocs[--S.nallocs];
}

size_t si__chunks(size_t size)
{
	return (size + CHUNK - 1) / CHUNK;
}

uint64_t si__chunk_bytes(const alloc_t *a, size_t i)
{
	size_t end = (i + 1) * (size_t)CHUNK;
	return end <= a->size ? CHUNK : a->size - i * (size_t)CHUNK;
}

/* Makes chunks [c0, c1) of a managed allocation resident; evicts this process's other managed
 * chunks (oldest allocation first) when the device is full. Returns bytes that moved. */
uint64_t si__make_resident(alloc_t *a, size_t c0, size_t c1)
{
	uint64_t moved = 0;
	for (size_t i = c0; i < c1; i++) {
		if (a->resident[i])
			continue;
		uint64_t b = si__chunk_bytes(a, i);
		while (si_mem_reserve(b) != 0) {
			alloc_t *victim = NULL;
			size_t vc = 0;
			for (int k = 0; k < S.nallocs && !victim; k++) {
				alloc_t *o = &S.allocs[k];
				if (o->kind != KIND_MANAGED || !o->resident)
					continue;
				for (size_t j = 0; j < si__chunks(o->size); j++)
					if (o->resident[j] && !(o == a && j >= c0 && j < c1)) {
						if (!victim || o->seq < victim->seq) {
							victim = o;
							vc = j;
						}
						break;
					}
			}
			if (!victim)
				return moved; /* the rest stays on the host: counted as faults at launch */
			victim->resident[vc] = 0;
			si_mem_release(si__chunk_bytes(victim, vc));
		}
		a->resident[i] = 1;
		moved += b;
	}
	return moved;
}

/* ---- init, version, errors ---- */

SI_EXPORT CUresult CUDAAPI cuInit(unsigned int Flags)
{
	if (Flags != 0)
		return CUDA_ERROR_INVALID_VALUE;
	pthread_mutex_lock(&S.lock);
	static int atfork_done;
	if (!atfork_done) {
		pthread_atfork(NULL, NULL, atfork_child);
		atfork_done = 1;
	}
	CUresult r = CUDA_SUCCESS;
	if (!S.init) {
		if (si_engine_attach() != 0)
			r = CUDA_ERROR_NO_DEVICE;
		else
			S.init = 1;
	}
	pthread_mutex_unlock(&S.lock);
	return r;
}

SI_EXPORT CUresult CUDAAPI cuDriverGetVersion(int *driverVersion)
{
	if (!driverVersion)
		return CUDA_ERROR_INVALID_VALUE;
	*driverVersion = CUDA_VERSION;
	return CUDA_SUCCESS;
}

SI_EXPORT CUresult CUDAAPI cuGetErrorString(CUresult error, const char **pStr)
{
	if (!pStr)
		return CUDA_ERROR_INVALID_VALUE;
	switch (error) {
	case CUDA_SUCCESS:
		*pStr = "no error";
		break;
	case CUDA_ERROR_INVALID_VALUE:
		*pStr = "invalid argument";
		break;
	case CUDA_ERROR_OUT_OF_MEMORY:
		*pStr = "out of memory";
		break;
	case CUDA_ERROR_NOT_INITIALIZED:
		*pStr = "initialization error";
		break;
	case CUDA_ERROR_INVALID_CONTEXT:
		*pStr = "invalid device context";
		break;
	case CUDA_ERROR_INVALID_HANDLE:
		*pStr = "invalid resource handle";
		break;
	case CUDA_ERROR_NOT_FOUND:
		*pStr = "named symbol not found";
		break;
	case CUDA_ERROR_NOT_READY:
		*pStr = "device not ready";
		break;
	case CUDA_ERROR_NOT_SUPPORTED:
		*pStr = "operation not supported";
		break;
	default:
		*pStr = "unknown error (stand-in driver)";
		break;
	}
	return CUDA_SUCCESS;
}

SI_EXPORT CUresult CUDAAPI cuGetErrorName(CUresult error, const char **pStr)
{
	if (!pStr)
		return CUDA_ERROR_INVALID_VALUE;
	static char buf[32];
	snprintf(buf, sizeof buf, "CUDA_ERROR_%d", (int)error);
	*pStr = error == CUDA_SUCCESS ? "CUDA_SUCCESS" : buf;
	return CUDA_SUCCESS;
}

/* The runtime's private tables cannot be provided by a stand-in. */
SI_EXPORT CUresult CUDAAPI cuGetExportTable(const void **ppExportTable, const CUuuid *pExportTableId)
{
	(void)pExportTableId;
	if (ppExportTable)
		*ppExportTable = NULL;
	return CUDA_ERROR_NOT_SUPPORTED;
}

/* ---- devices: one simulated GPU ---- */

SI_EXPORT CUresult CUDAAPI cuDeviceGetCount(int *count)
{
	REQUIRE_INIT();
	if (!count)
		return CUDA_ERROR_INVALID_VALUE;
	*count = 1;
	return CUDA_SUCCESS;
}

SI_EXPORT CUresult CUDAAPI cuDeviceGet(CUdevice *device, int ordinal)
{
	REQUIRE_INIT();
	if (!device)
		return CUDA_ERROR_INVALID_VALUE;
	if (ordinal != 0)
		return CUDA_ERROR_INVALID_DEVICE;
	*device = 0;
	return CUDA_SUCCESS;
}

SI_EXPORT CUresult CUDAAPI cuDeviceGetName(char *name, int len, CUdevice dev)
{
	REQUIRE_INIT();
	if (dev != 0)
		return CUDA_ERROR_INVALID_DEVICE;
	if (!name || len <= 0)
		return CUDA_ERROR_INVALID_VALUE;
	snprintf(name, (size_t)len, "gpumux stand-in GPU");
	return CUDA_SUCCESS;
}

SI_EXPORT CUresult CUDAAPI cuDeviceTotalMem_v2(size_t *bytes, CUdevice dev)
{
	REQUIRE_INIT();
	if (dev != 0)
		return CUDA_ERROR_INVALID_DEVICE;
	if (!bytes)
		return CUDA_ERROR_INVALID_VALUE;
	uint64_t f, t;
	si_mem_info(&f, &t);
	*bytes = t;
	return CUDA_SUCCESS;
}

SI_EXPORT CUresult CUDAAPI cuDeviceGetAttribute(int *pi, CUdevice_attribute attrib, CUdevice dev)
{
	REQUIRE_INIT();
	if (dev != 0)
		return CUDA_ERROR_INVALID_DEVICE;
	if (!pi)
		return CUDA_ERROR_INVALID_VALUE;
	switch (attrib) {
	case CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT:
		*pi = 84;
		break;
	case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR:
		*pi = 9;
		break;
	case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR:
		*pi = 0;
		break;
	case CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK:
		*pi = 1024;
		break;
	case CU_DEVICE_ATTRIBUTE_WARP_SIZE:
		*pi = 32;
		break;
	case CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING:
		*pi = 1;
		break;
	case CU_DEVICE_ATTRIBUTE_MANAGED_MEMORY:
		*pi = 1;
		break;
	case CU_DEVICE_ATTRIBUTE_CONCURRENT_MANAGED_ACCESS:
		*pi = 1;
		break;
	case CU_DEVICE_ATTRIBUTE_COOPERATIVE_LAUNCH:
		*pi = 1;
		break;
	default:
		*pi = 0;
		break;
	}
	return CUDA_SUCCESS;
}

/* ---- contexts ---- */

static CUresult ctx_new(int primary, struct CUctx_st **out)
{
	for (int i = 0; i < MAX_CTX; i++)
		if (!S.ctx[i].in_use) {
			int legacy = si_stream_open(SI_S_LEGACY, i);
			if (legacy < 0)
				return CUDA_ERROR_OUT_OF_MEMORY;
			S.ctx[i] = (struct CUctx_st){1, i, primary, 1, legacy};
			*out = &S.ctx[i];
			return CUDA_SUCCESS;
		}
	return CUDA_ERROR_OUT_OF_MEMORY;
}

static void ctx_free(struct CUctx_st *c)
{
	si_wait_ctx(c->id);
	for (int i = 0; i < SI_STREAMS; i++)
		if (S.streams[i].in_use && S.streams[i].ctx == c->id) {
			si_stream_close(S.streams[i].si);
			S.streams[i].in_use = 0;
		}
	si_stream_close(c->legacy);
	c->in_use = 0;
	for (int i = 0; i < tl_depth; i++)
		if (tl_stack[i] == c)
			tl_stack[i] = NULL;
}

SI_EXPORT CUresult CUDAAPI cuDevicePrimaryCtxRetain(CUcontext *pctx, CUdevice dev)
{
	REQUIRE_INIT();
	if (!pctx)
		return CUDA_ERROR_INVALID_VALUE;
	if (dev != 0)
		return CUDA_ERROR_INVALID_DEVICE;
	pthread_mutex_lock(&S.lock);
	CUresult r = CUDA_SUCCESS;
	struct CUctx_st *p = NULL;
	for (int i = 0; i < MAX_CTX; i++)
		if (S.ctx[i].in_use && S.ctx[i].primary)
			p = &S.ctx[i];
	if (p)
		p->refs++;
	else
		r = ctx_new(1, &p);
	if (r == CUDA_SUCCESS)
		*pctx = p;
	pthread_mutex_unlock(&S.lock);
	return r;
}

SI_EXPORT CUresult CUDAAPI cuDevicePrimaryCtxRelease_v2(CUdevice dev)
{
	REQUIRE_INIT();
	if (dev != 0)
		return CUDA_ERROR_INVALID_DEVICE;
	pthread_mutex_lock(&S.lock);
	CUresult r = CUDA_ERROR_INVALID_CONTEXT;
	for (int i = 0; i < MAX_CTX; i++)
		if (S.ctx[i].in_use && S.ctx[i].primary) {
			if (--S.ctx[i].refs == 0)
				ctx_free(&S.ctx[i]);
			r = CUDA_SUCCESS;
		}
	pthread_mutex_unlock(&S.lock);
	return r;
}

static CUresult ctx_create(CUcontext *pctx, CUdevice dev)
{
	REQUIRE_INIT();
	if (!pctx)
		return CUDA_ERROR_INVALID_VALUE;
	if (dev != 0)
		return CUDA_ERROR_INVALID_DEVICE;
	pthread_mutex_lock(&S.lock);
	struct CUctx_st *c = NULL;
	CUresult r = ctx_new(0, &c);
	pthread_mutex_unlock(&S.lock);
	if (r != CUDA_SUCCESS)
		return r;
	if (tl_depth == 16)
		return CUDA_ERROR_INVALID_VALUE;
	tl_stack[tl_depth++] = c; /* a created context becomes current, pushed */
	*pctx = c;
	return CUDA_SUCCESS;
}

SI_EXPORT CUresult CUDAAPI cuCtxCreate_v2(CUcontext *pctx, unsigned int flags, CUdevice dev)
{
	(void)flags;
	return ctx_create(pctx, dev);
}

SI_EXPORT CUresult CUDAAPI cuCtxCreate_v4(CUcontext *pctx, CUctxCreateParams *ctxCreateParams,
					  unsigned int flags, CUdevice dev)
{
	(void)ctxCreateParams;
	(void)flags;
	return ctx_create(pctx, dev);
}

SI_EXPORT CUresult CUDAAPI cuCtxDestroy_v2(CUcontext ctx)
{
	REQUIRE_INIT();
	if (!si__valid_ctx(ctx) || ctx->primary)
		return CUDA_ERROR_INVALID_CONTEXT;
	pthread_mutex_lock(&S.lock);
	ctx_free(ctx);
	pthread_mutex_unlock(&S.lock);
	return CUDA_SUCCESS;
}

SI_EXPORT CUresult CUDAAPI cuCtxSetCurrent(CUcontext ctx)
{
	REQUIRE_INIT();
	if (ctx && !si__valid_ctx(ctx))
		return CUDA_ERROR_INVALID_CONTEXT;
	if (!ctx) {
		if (tl_depth > 0)
			tl_depth--;
		return CUDA_SUCCESS;
	}
	if (tl_depth == 0)
		tl_depth = 1;
	tl_stack[tl_depth - 1] = ctx;
	return CUDA_SUCCESS;
}

SI_EXPORT CUresult CUDAAPI cuCtxGetCurrent(CUcontext *pctx)
{
	REQUIRE_INIT();
	if (!pctx)
		return CUDA_ERROR_INVALID_VALUE;
	*pctx = si__cur_ctx();
	return CUDA_SUCCESS;
}

SI_EXPORT CUresult CUDAAPI cuCtxPushCurrent_v2(CUcontext ctx)
{
	REQUIRE_INIT();
	if (!si__valid_ctx(ctx))
		return CUDA_ERROR_INVALID_CONTEXT;
	if (tl_depth == 16)
		return CUDA_ERROR_INVALID_VALUE;
	tl_stack[tl_depth++] = ctx;
	return CUDA_SUCCESS;
}

SI_EXPORT CUresult CUDAAPI cuCtxPopCurrent_v2(CUcontext *pctx)
{
	REQUIRE_INIT();
	if (tl_depth == 0)
		return CUDA_ERROR_INVALID_CONTEXT;
	CUcontext c = tl_stack[--tl_depth];
	if (pctx)
		*pctx = c;
	return CUDA_SUCCESS;
}

SI_EXPORT CUresult CUDAAPI cuCtxGetDevice(CUdevice *device)
{
	REQUIRE_CTX(c);
	(void)c;
	if (!device)
		return CUDA_ERROR_INVALID_VALUE;
	*device = 0;
	return CUDA_SUCCESS;
}

SI_EXPORT CUresult CUDAAPI cuCtxSynchronize(void)
{
	REQUIRE_CTX(c);
	si_wait_ctx(c->id);
	return CUDA_SUCCESS;
}

/* ---- cuGetProcAddress: base name + version + per-thread flag -> entry point ---- */

typedef struct {
	const char *base;
	int version, ptds;
	void *fn;
} proc_t;

#define P(base, ver, ptds, fn) {#base, ver, ptds, (void *)&fn},
static const proc_t g_procs[] = {
    P(cuInit, 2000, 0, cuInit) P(cuDriverGetVersion, 2020, 0, cuDriverGetVersion) P(cuGetErrorString, 6000, 0,
										    cuGetErrorString)
	P(cuGetErrorName, 6000, 0, cuGetErrorName) P(cuGetExportTable, 3000, 0, cuGetExportTable) P(
	    cuDeviceGet, 2000, 0, cuDeviceGet) P(cuDeviceGetCount, 2000, 0, cuDeviceGetCount)
	    P(cuDeviceGetName, 2000, 0, cuDeviceGetName) P(cuDeviceTotalMem, 3020, 0, cuDeviceTotalMem_v2) P(
		cuDeviceGetAttribute, 2000, 0, cuDeviceGetAttribute) P(cuDevicePrimaryCtxRetain, 7000,
								       0, cuDevicePrimaryCtxRetain)
		P(cuDevicePrimaryCtxRelease, 11000, 0, cuDevicePrimaryCtxRelease_v2)
		    P(cuCtxCreate, 3020, 0, cuCtxCreate_v2) P(cuCtxCreate, 12050, 0, cuCtxCreate_v4)
			P(cuCtxDestroy, 4000, 0, cuCtxDestroy_v2) P(cuCtxSetCurrent, 4000, 0, cuCtxSetCurrent)
			    P(cuCtxGetCurrent, 4000, 0, cuCtxGetCurrent) P(cuCtxPushCurrent, 4000, 0,
									   cuCtxPushCurrent_v2)
				P(cuCtxPopCurrent, 4000, 0, cuCtxPopCurrent_v2) P(cuCtxGetDevice, 2000, 0,
										  cuCtxGetDevice)
				    P(cuCtxSynchronize, 2000, 0,
				      cuCtxSynchronize) P(cuModuleLoad, 2000, 0, cuModuleLoad)
					P(cuModuleLoadData, 2000, 0, cuModuleLoadData)
					    P(cuModuleUnload, 2000, 0, cuModuleUnload)
						P(cuModuleGetFunction, 2000, 0, cuModuleGetFunction)
						    P(cuFuncGetName, 12030, 0, cuFuncGetName)
							P(cuFuncGetParamInfo, 12040, 0, cuFuncGetParamInfo)
							    P(cuLaunchKernel, 4000, 0, cuLaunchKernel) P(
								cuLaunchKernel, 7000, 1, cuLaunchKernel_ptsz) P(cuLaunchKernelEx, 11060, 0, cuLaunchKernelEx) P(cuLaunchKernelEx, 11060, 1, cuLaunchKernelEx_ptsz) P(cuLaunchCooperativeKernel, 9000, 0, cuLaunchCooperativeKernel) P(cuLaunchCooperativeKernel, 9000, 1, cuLaunchCooperativeKernel_ptsz) P(cuLaunchHostFunc,
																																											    10000,
																																											    0,
																																											    cuLaunchHostFunc) P(cuLaunchHostFunc,
																																														10000, 1, cuLaunchHostFunc_ptsz) P(cuStreamCreate, 2000, 0, cuStreamCreate) P(cuStreamCreateWithPriority,
																																																							      5050, 0, cuStreamCreateWithPriority) P(cuStreamDestroy,
																																																												     4000, 0, cuStreamDestroy_v2) P(cuStreamSynchronize,
																																																																    2000, 0, cuStreamSynchronize) P(cuStreamSynchronize,
																																																																				    7000, 1, cuStreamSynchronize_ptsz) P(cuStreamQuery,
																																																																									 2000, 0, cuStreamQuery) P(cuStreamQuery, 7000, 1, cuStreamQuery_ptsz) P(cuStreamWaitEvent, 3020, 0, cuStreamWaitEvent) P(cuStreamWaitEvent,
																																																																																								  7000,
																																																																																								  1,
																																																																																								  cuStreamWaitEvent_ptsz) P(cuStreamGetFlags, 5050, 0, cuStreamGetFlags) P(cuStreamGetFlags, 7000, 1, cuStreamGetFlags_ptsz) P(cuStreamGetCtx, 9020, 0, cuStreamGetCtx) P(cuStreamGetCtx,
																																																																																																													  9020,
																																																																																																													  1, cuStreamGetCtx_ptsz) P(cuStreamIsCapturing,
																																																																																																																    10000, 0, cuStreamIsCapturing) P(cuStreamIsCapturing, 10000, 1,
																																																																																																																				     cuStreamIsCapturing_ptsz) P(cuEventCreate,
																																																																																																																								 2000,
																																																																																																																								 0,
																																																																																																																								 cuEventCreate) P(cuEventDestroy,
																																																																																																																										  4000,
																																																																																																																										  0, cuEventDestroy_v2) P(cuEventRecord, 2000, 0, cuEventRecord) P(cuEventRecord,
																																																																																																																																		   7000, 1, cuEventRecord_ptsz) P(cuEventRecordWithFlags, 11010, 0, cuEventRecordWithFlags) P(cuEventRecordWithFlags,
																																																																																																																																													      11010,
																																																																																																																																													      1,
																																																																																																																																													      cuEventRecordWithFlags_ptsz) P(cuEventQuery, 2000, 0, cuEventQuery) P(cuEventSynchronize,
																																																																																																																																																						    2000,
																																																																																																																																																						    0, cuEventSynchronize) P(cuEventElapsedTime, 2000, 0, cuEventElapsedTime) P(cuEventElapsedTime,
																																																																																																																																																																12080, 0, cuEventElapsedTime_v2) P(cuMemAlloc,
																																																																																																																																																																				   3020,
																																																																																																																																																																				   0,
																																																																																																																																																																				   cuMemAlloc_v2) P(cuMemFree,
																																																																																																																																																																						    3020,
																																																																																																																																																																						    0,
																																																																																																																																																																						    cuMemFree_v2) P(cuMemAllocManaged,
																																																																																																																																																																								    6000,
																																																																																																																																																																								    0,
																																																																																																																																																																								    cuMemAllocManaged) P(cuMemAllocHost, 3020, 0,
																																																																																																																																																																											 cuMemAllocHost_v2) P(cuMemHostAlloc,
																																																																																																																																																																													      2020, 0,
																																																																																																																																																																													      cuMemHostAlloc) P(cuMemFreeHost,
																																																																																																																																																																																2000,
																																																																																																																																																																																0,
																																																																																																																																																																																cuMemFreeHost)
								P(cuMemHostGetFlags, 2030, 0, cuMemHostGetFlags) P(
								    cuMemGetInfo,
								    3020,
								    0,
								    cuMemGetInfo_v2) P(cuPointerGetAttribute, 4000, 0, cuPointerGetAttribute)
								    P(cuMemcpyHtoD, 3020, 0, cuMemcpyHtoD_v2) P(cuMemcpyDtoH, 3020, 0, cuMemcpyDtoH_v2) P(
									cuMemcpyDtoD,
									3020,
									0,
									cuMemcpyDtoD_v2) P(cuMemcpy, 4000, 0, cuMemcpy)
									P(cuMemcpyAsync, 4000, 0, cuMemcpyAsync) P(
									    cuMemcpyAsync,
									    7000,
									    1,
									    cuMemcpyAsync_ptsz) P(cuMemcpyHtoDAsync, 3020, 0, cuMemcpyHtoDAsync_v2)
									    P(cuMemcpyHtoDAsync, 7000, 1, cuMemcpyHtoDAsync_v2_ptsz) P(
										cuMemcpyDtoHAsync, 3020, 0,
										cuMemcpyDtoHAsync_v2)
										P(cuMemcpyDtoHAsync, 7000, 1, cuMemcpyDtoHAsync_v2_ptsz) P(
										    cuMemcpyDtoDAsync, 3020,
										    0, cuMemcpyDtoDAsync_v2)
										    P(cuMemcpyDtoDAsync, 7000, 1, cuMemcpyDtoDAsync_v2_ptsz) P(
											cuMemsetD8,
											3020,
											0,
											cuMemsetD8_v2) P(cuMemsetD32, 3020, 0, cuMemsetD32_v2)
											P(cuMemsetD8Async, 3020, 0, cuMemsetD8Async) P(
											    cuMemsetD8Async,
											    7000,
											    1,
											    cuMemsetD8Async_ptsz)
											    P(cuMemsetD16Async, 3020, 0, cuMemsetD16Async) P(
												cuMemsetD16Async,
												7000, 1,
												cuMemsetD16Async_ptsz)
												P(cuMemsetD32Async,
												  3020,
												  0,
												  cuMemsetD32Async)
												    P(cuMemsetD32Async,
												      7000,
												      1,
												      cuMemsetD32Async_ptsz)
													P(cuMemPrefetchAsync,
													  12020,
													  0,
													  cuMemPrefetchAsync_v2)
													    P(cuMemPrefetchAsync,
													      12020,
													      1,
													      cuMemPrefetchAsync_v2_ptsz)
														P(cuGetProcAddress,
														  11030,
														  0,
														  cuGetProcAddress)
														    P(cuGetProcAddress,
														      12000,
														      0,
														      cuGetProcAddress_v2)};

static CUresult proc_lookup(const char *symbol, void **pfn, int ver, cuuint64_t flags,
			    CUdriverProcAddressQueryResult *st)
{
	if (!pfn)
		return CUDA_ERROR_INVALID_VALUE;
	*pfn = NULL;
	const proc_t *best = NULL;
	int found = 0, have_ptds = 0;
	if (symbol)
		for (size_t i = 0; i < sizeof g_procs / sizeof g_procs[0]; i++)
			if (strcmp(g_procs[i].base, symbol) == 0) {
				found = 1;
				have_ptds |= g_procs[i].ptds;
			}
	int want = (flags & CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM) && have_ptds;
	for (size_t i = 0; found && i < sizeof g_procs / sizeof g_procs[0]; i++) {
		const proc_t *p = &g_procs[i];
		if (strcmp(p->base, symbol) == 0 && p->ptds == want && p->version <= ver &&
		    (!best || p->version > best->version))
			best = p;
	}
	if (st)
		*st = best    ? CU_GET_PROC_ADDRESS_SUCCESS
		      : found ? CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT
			      : CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
	if (!best)
		return CUDA_ERROR_NOT_FOUND;
	*pfn = best->fn;
	return CUDA_SUCCESS;
}

SI_EXPORT CUresult CUDAAPI cuGetProcAddress(const char *symbol, void **pfn, int cudaVersion, cuuint64_t flags)
{
	return proc_lookup(symbol, pfn, cudaVersion, flags, NULL);
}

SI_EXPORT CUresult CUDAAPI cuGetProcAddress_v2(const char *symbol, void **pfn, int cudaVersion,
					       cuuint64_t flags, CUdriverProcAddressQueryResult *symbolStatus)
{
	return proc_lookup(symbol, pfn, cudaVersion, flags, symbolStatus);
}

/* Test hook (not a driver entry point): takes the shared engine's lock and never returns, so
 * a test can kill the process while it holds the lock. */
SI_EXPORT void gmx_standin_test_hang_locked(void)
{
	si_engine_hang_locked();
}
