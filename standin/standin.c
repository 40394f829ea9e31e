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
	si__cls_forget(NULL);
	si__capture_forget();
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
		int full = 0;
		while (si_mem_reserve(b) != 0) {
			if (!full++)
				si_log_full(b);
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

/* GPUMUX_STANDIN_DRIVER_VERSION: the CUDA version the stand-in plays (default: the toolkit's).
 * Below 12030 it has no cuFuncGetName, below 12040 no cuFuncGetParamInfo (cuGetProcAddress). */
static int g_version;
static pthread_once_t g_version_once = PTHREAD_ONCE_INIT;

static void version_init(void)
{
	g_version = CUDA_VERSION;
	const char *v = getenv("GPUMUX_STANDIN_DRIVER_VERSION");
	if (v && *v) {
		char *end;
		long n = strtol(v, &end, 10);
		if (*end || n < 11000 || n > CUDA_VERSION)
			fprintf(stderr,
				"gpumux stand-in: GPUMUX_STANDIN_DRIVER_VERSION=%s is not a CUDA version "
				"between 11000 and %d (e.g. 12020); using %d\n",
				v, CUDA_VERSION, CUDA_VERSION);
		else
			g_version = (int)n;
	}
}

int si__driver_version(void)
{
	pthread_once(&g_version_once, version_init);
	return g_version;
}

SI_EXPORT CUresult CUDAAPI cuDriverGetVersion(int *driverVersion)
{
	if (!driverVersion)
		return CUDA_ERROR_INVALID_VALUE;
	*driverVersion = si__driver_version();
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

void si__device_uuid(CUuuid *uuid)
{
	static const char id[16] = {'g', 'p', 'u', 'm', 'u', 'x', '-', 's', 't', 'a', 'n', 'd', '-', 'i', 'n', 0};
	memcpy(uuid->bytes, id, 16);
}

SI_EXPORT CUresult CUDAAPI cuDeviceGetUuid(CUuuid *uuid, CUdevice dev)
{
	REQUIRE_INIT();
	if (dev != 0)
		return CUDA_ERROR_INVALID_DEVICE;
	if (!uuid)
		return CUDA_ERROR_INVALID_VALUE;
	si__device_uuid(uuid);
	return CUDA_SUCCESS;
}

SI_EXPORT CUresult CUDAAPI cuDeviceGetUuid_v2(CUuuid *uuid, CUdevice dev)
{
	return cuDeviceGetUuid(uuid, dev);
}

SI_EXPORT CUresult CUDAAPI cuDeviceGetAttribute(int *pi, CUdevice_attribute attrib, CUdevice dev)
{
	REQUIRE_INIT();
	if (dev != 0)
		return CUDA_ERROR_INVALID_DEVICE;
	if (!pi)
		return CUDA_ERROR_INVALID_VALUE;
	*pi = si__device_attribute(attrib);
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
	si__cls_forget(c);
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

SI_EXPORT CUresult CUDAAPI cuCtxGetDevice_v2(CUdevice *device, CUcontext ctx)
{
	REQUIRE_INIT();
	if (ctx && !si__valid_ctx(ctx))
		return CUDA_ERROR_INVALID_CONTEXT;
	if (!ctx && !si__cur_ctx())
		return CUDA_ERROR_INVALID_CONTEXT;
	if (!device)
		return CUDA_ERROR_INVALID_VALUE;
	*device = 0;
	return CUDA_SUCCESS;
}

SI_EXPORT CUresult CUDAAPI cuCtxSynchronize_v2(CUcontext ctx)
{
	REQUIRE_INIT();
	if (ctx && !si__valid_ctx(ctx))
		return CUDA_ERROR_INVALID_CONTEXT;
	struct CUctx_st *c = ctx ? ctx : si__cur_ctx();
	if (!c)
		return CUDA_ERROR_INVALID_CONTEXT;
	si_wait_ctx(c->id);
	return CUDA_SUCCESS;
}

SI_EXPORT CUresult CUDAAPI cuDevicePrimaryCtxGetState(CUdevice dev, unsigned int *flags, int *active)
{
	REQUIRE_INIT();
	if (dev != 0)
		return CUDA_ERROR_INVALID_DEVICE;
	if (!flags || !active)
		return CUDA_ERROR_INVALID_VALUE;
	pthread_mutex_lock(&S.lock);
	*flags = S.primary_flags;
	*active = 0;
	for (int i = 0; i < MAX_CTX; i++)
		if (S.ctx[i].in_use && S.ctx[i].primary)
			*active = 1;
	pthread_mutex_unlock(&S.lock);
	return CUDA_SUCCESS;
}

SI_EXPORT CUresult CUDAAPI cuDevicePrimaryCtxSetFlags_v2(CUdevice dev, unsigned int flags)
{
	REQUIRE_INIT();
	if (dev != 0)
		return CUDA_ERROR_INVALID_DEVICE;
	S.primary_flags = flags;
	return CUDA_SUCCESS;
}

SI_EXPORT CUresult CUDAAPI cuDevicePrimaryCtxReset_v2(CUdevice dev)
{
	REQUIRE_INIT();
	if (dev != 0)
		return CUDA_ERROR_INVALID_DEVICE;
	pthread_mutex_lock(&S.lock);
	for (int i = 0; i < MAX_CTX; i++)
		if (S.ctx[i].in_use && S.ctx[i].primary) {
			S.ctx[i].refs = 0;
			ctx_free(&S.ctx[i]);
		}
	pthread_mutex_unlock(&S.lock);
	return CUDA_SUCCESS;
}

SI_EXPORT CUresult CUDAAPI cuCtxGetFlags(unsigned int *flags)
{
	REQUIRE_CTX(c);
	if (!flags)
		return CUDA_ERROR_INVALID_VALUE;
	*flags = c->primary ? S.primary_flags : 0;
	return CUDA_SUCCESS;
}

SI_EXPORT CUresult CUDAAPI cuCtxGetApiVersion(CUcontext ctx, unsigned int *version)
{
	REQUIRE_INIT();
	if (ctx && !si__valid_ctx(ctx))
		return CUDA_ERROR_INVALID_CONTEXT;
	if (!version)
		return CUDA_ERROR_INVALID_VALUE;
	*version = 3020;
	return CUDA_SUCCESS;
}

SI_EXPORT CUresult CUDAAPI cuCtxGetStreamPriorityRange(int *leastPriority, int *greatestPriority)
{
	REQUIRE_CTX(c);
	(void)c;
	if (leastPriority)
		*leastPriority = 0;
	if (greatestPriority)
		*greatestPriority = -5;
	return CUDA_SUCCESS;
}

/* Limits: the stack, printf FIFO and heap sizes a runtime sets are kept and read back. */
SI_EXPORT CUresult CUDAAPI cuCtxSetLimit(CUlimit limit, size_t value)
{
	REQUIRE_CTX(c);
	(void)c;
	if ((unsigned)limit >= sizeof S.limits / sizeof S.limits[0])
		return CUDA_ERROR_UNSUPPORTED_LIMIT;
	S.limits[limit] = value;
	return CUDA_SUCCESS;
}

SI_EXPORT CUresult CUDAAPI cuCtxGetLimit(size_t *pvalue, CUlimit limit)
{
	REQUIRE_CTX(c);
	(void)c;
	if (!pvalue)
		return CUDA_ERROR_INVALID_VALUE;
	if ((unsigned)limit >= sizeof S.limits / sizeof S.limits[0])
		return CUDA_ERROR_UNSUPPORTED_LIMIT;
	static const size_t defaults[] = {1024, 1 << 20, 8 << 20, 2, 2048, 0, 0};
	*pvalue = S.limits[limit] ? S.limits[limit] : limit < 7 ? defaults[limit] : 0;
	return CUDA_SUCCESS;
}

SI_EXPORT CUresult CUDAAPI cuCtxGetCacheConfig(CUfunc_cache *pconfig)
{
	REQUIRE_CTX(c);
	(void)c;
	if (!pconfig)
		return CUDA_ERROR_INVALID_VALUE;
	*pconfig = CU_FUNC_CACHE_PREFER_NONE;
	return CUDA_SUCCESS;
}

SI_EXPORT CUresult CUDAAPI cuCtxSetCacheConfig(CUfunc_cache config)
{
	REQUIRE_CTX(c);
	(void)c;
	(void)config;
	return CUDA_SUCCESS;
}

SI_EXPORT CUresult CUDAAPI cuDeviceGetPCIBusId(char *pciBusId, int len, CUdevice dev)
{
	REQUIRE_INIT();
	if (dev != 0)
		return CUDA_ERROR_INVALID_DEVICE;
	if (!pciBusId || len <= 0)
		return CUDA_ERROR_INVALID_VALUE;
	snprintf(pciBusId, (size_t)len, "00000000:%02X:00.0", SI_PCI_BUS);
	return CUDA_SUCCESS;
}

SI_EXPORT CUresult CUDAAPI cuDeviceCanAccessPeer(int *canAccessPeer, CUdevice dev, CUdevice peerDev)
{
	REQUIRE_INIT();
	if (!canAccessPeer)
		return CUDA_ERROR_INVALID_VALUE;
	if (dev != 0 || peerDev != 0)
		return CUDA_ERROR_INVALID_DEVICE;
	*canAccessPeer = 0;
	return CUDA_SUCCESS;
}

/* Test hook (not a driver entry point): takes the shared engine's lock and never returns, so
 * a test can kill the process while it holds the lock. */
SI_EXPORT void gmx_standin_test_hang_locked(void)
{
	si_engine_hang_locked();
}
