/*
 * cuGetProcAddress and cuGetProcAddress_v2: the entry points the CUDA runtime resolves
 * (about 430 of them) by base name, requested CUDA version and per-thread-default-stream flag.
 *
 * The real driver answers first, so the version and flag semantics are exactly the driver's.
 * Its answer is then mapped back to the shim's export of the same ABI: when the pointer is
 * the real address of an exported symbol, the shim returns its own export of that symbol (a
 * hook, or a forwarder that keeps stream order); otherwise, for the calls gpumux schedules,
 * a table of (base name, version, per-thread) -> hook, checked at compile time against the
 * PFN types of cudaTypedefs.h, picks the hook. Everything else gets the real pointer.
 */
#include "shim_internal.h"
#include <cudaTypedefs.h>

#include <pthread.h>
#include <string.h>

typedef struct {
	const char *base;
	int version;
	int ptds;
	void *fn;
} hook_version_t;

/* (base name, first CUDA version, per-thread variant, our export, the toolkit's PFN type) */
#define GMX_HOOK_VERSIONS(X)                                                                                 \
	X(cuLaunchKernel, 4000, 0, cuLaunchKernel, PFN_cuLaunchKernel_v4000)                                 \
	X(cuLaunchKernel, 7000, 1, cuLaunchKernel_ptsz, PFN_cuLaunchKernel_v7000_ptsz)                       \
	X(cuLaunchKernelEx, 11060, 0, cuLaunchKernelEx, PFN_cuLaunchKernelEx_v11060)                         \
	X(cuLaunchKernelEx, 11060, 1, cuLaunchKernelEx_ptsz, PFN_cuLaunchKernelEx_v11060_ptsz)               \
	X(cuLaunchCooperativeKernel, 9000, 0, cuLaunchCooperativeKernel,                                     \
	  PFN_cuLaunchCooperativeKernel_v9000)                                                               \
	X(cuLaunchCooperativeKernel, 9000, 1, cuLaunchCooperativeKernel_ptsz,                                \
	  PFN_cuLaunchCooperativeKernel_v9000_ptsz)                                                          \
	X(cuLaunchHostFunc, 10000, 0, cuLaunchHostFunc, PFN_cuLaunchHostFunc_v10000)                         \
	X(cuLaunchHostFunc, 10000, 1, cuLaunchHostFunc_ptsz, PFN_cuLaunchHostFunc_v10000_ptsz)               \
	X(cuGraphLaunch, 10000, 0, cuGraphLaunch, PFN_cuGraphLaunch_v10000)                                  \
	X(cuGraphLaunch, 10000, 1, cuGraphLaunch_ptsz, PFN_cuGraphLaunch_v10000_ptsz)                        \
	X(cuMemcpyAsync, 4000, 0, cuMemcpyAsync, PFN_cuMemcpyAsync_v4000)                                    \
	X(cuMemcpyAsync, 7000, 1, cuMemcpyAsync_ptsz, PFN_cuMemcpyAsync_v7000_ptsz)                          \
	X(cuMemcpyHtoDAsync, 3020, 0, cuMemcpyHtoDAsync_v2, PFN_cuMemcpyHtoDAsync_v3020)                     \
	X(cuMemcpyHtoDAsync, 7000, 1, cuMemcpyHtoDAsync_v2_ptsz, PFN_cuMemcpyHtoDAsync_v7000_ptsz)           \
	X(cuMemcpyDtoHAsync, 3020, 0, cuMemcpyDtoHAsync_v2, PFN_cuMemcpyDtoHAsync_v3020)                     \
	X(cuMemcpyDtoHAsync, 7000, 1, cuMemcpyDtoHAsync_v2_ptsz, PFN_cuMemcpyDtoHAsync_v7000_ptsz)           \
	X(cuMemcpyDtoDAsync, 3020, 0, cuMemcpyDtoDAsync_v2, PFN_cuMemcpyDtoDAsync_v3020)                     \
	X(cuMemcpyDtoDAsync, 7000, 1, cuMemcpyDtoDAsync_v2_ptsz, PFN_cuMemcpyDtoDAsync_v7000_ptsz)           \
	X(cuMemsetD8Async, 3020, 0, cuMemsetD8Async, PFN_cuMemsetD8Async_v3020)                              \
	X(cuMemsetD8Async, 7000, 1, cuMemsetD8Async_ptsz, PFN_cuMemsetD8Async_v7000_ptsz)                    \
	X(cuMemsetD16Async, 3020, 0, cuMemsetD16Async, PFN_cuMemsetD16Async_v3020)                           \
	X(cuMemsetD16Async, 7000, 1, cuMemsetD16Async_ptsz, PFN_cuMemsetD16Async_v7000_ptsz)                 \
	X(cuMemsetD32Async, 3020, 0, cuMemsetD32Async, PFN_cuMemsetD32Async_v3020)                           \
	X(cuMemsetD32Async, 7000, 1, cuMemsetD32Async_ptsz, PFN_cuMemsetD32Async_v7000_ptsz)                 \
	X(cuEventRecord, 2000, 0, cuEventRecord, PFN_cuEventRecord_v2000)                                    \
	X(cuEventRecord, 7000, 1, cuEventRecord_ptsz, PFN_cuEventRecord_v7000_ptsz)                          \
	X(cuEventRecordWithFlags, 11010, 0, cuEventRecordWithFlags, PFN_cuEventRecordWithFlags_v11010)       \
	X(cuEventRecordWithFlags, 11010, 1, cuEventRecordWithFlags_ptsz,                                     \
	  PFN_cuEventRecordWithFlags_v11010_ptsz)                                                            \
	X(cuStreamWaitEvent, 3020, 0, cuStreamWaitEvent, PFN_cuStreamWaitEvent_v3020)                        \
	X(cuStreamWaitEvent, 7000, 1, cuStreamWaitEvent_ptsz, PFN_cuStreamWaitEvent_v7000_ptsz)              \
	X(cuStreamSynchronize, 2000, 0, cuStreamSynchronize, PFN_cuStreamSynchronize_v2000)                  \
	X(cuStreamSynchronize, 7000, 1, cuStreamSynchronize_ptsz, PFN_cuStreamSynchronize_v7000_ptsz)        \
	X(cuStreamQuery, 2000, 0, cuStreamQuery, PFN_cuStreamQuery_v2000)                                    \
	X(cuStreamQuery, 7000, 1, cuStreamQuery_ptsz, PFN_cuStreamQuery_v7000_ptsz)                          \
	X(cuEventSynchronize, 2000, 0, cuEventSynchronize, PFN_cuEventSynchronize_v2000)                     \
	X(cuEventQuery, 2000, 0, cuEventQuery, PFN_cuEventQuery_v2000)                                       \
	X(cuEventElapsedTime, 2000, 0, cuEventElapsedTime, PFN_cuEventElapsedTime_v2000)                     \
	X(cuEventElapsedTime, 12080, 0, cuEventElapsedTime_v2, PFN_cuEventElapsedTime_v12080)                \
	X(cuStreamDestroy, 4000, 0, cuStreamDestroy_v2, PFN_cuStreamDestroy_v4000)                           \
	X(cuEventDestroy, 4000, 0, cuEventDestroy_v2, PFN_cuEventDestroy_v4000)                              \
	X(cuStreamBeginCapture, 10010, 0, cuStreamBeginCapture_v2, PFN_cuStreamBeginCapture_v10010)          \
	X(cuStreamBeginCapture, 10010, 1, cuStreamBeginCapture_v2_ptsz,                                      \
	  PFN_cuStreamBeginCapture_v10010_ptsz)                                                              \
	X(cuStreamEndCapture, 10000, 0, cuStreamEndCapture, PFN_cuStreamEndCapture_v10000)                   \
	X(cuStreamEndCapture, 10000, 1, cuStreamEndCapture_ptsz, PFN_cuStreamEndCapture_v10000_ptsz)         \
	X(cuGetProcAddress, 11030, 0, cuGetProcAddress, PFN_cuGetProcAddress_v11030)                         \
	X(cuGetProcAddress, 12000, 0, cuGetProcAddress_v2, PFN_cuGetProcAddress_v12000)

/* A hook whose prototype differs from the PFN type of that version does not compile. */
#define GMX_CHECK(base, ver, ptds, fn, pfn)                                                                  \
	_Static_assert(__builtin_types_compatible_p(__typeof__(&fn), pfn), #fn " != " #pfn);
GMX_HOOK_VERSIONS(GMX_CHECK)

#define GMX_ENTRY(base, ver, ptds, fn, pfn) {#base, ver, ptds, (void *)&fn},
static const hook_version_t g_hooks[] = {GMX_HOOK_VERSIONS(GMX_ENTRY)};

/* Real address -> exported symbol(s), built once. Several names may share an address. */
#define MAP_SIZE 2048
#define MAP_ALIASES 4
typedef struct {
	void *addr;
	int n;
	int sym[MAP_ALIASES];
} map_slot_t;
static map_slot_t g_map[MAP_SIZE];
static pthread_once_t g_map_once = PTHREAD_ONCE_INIT;

static size_t addr_hash(void *p)
{
	uintptr_t x = (uintptr_t)p;
	x ^= x >> 17;
	x *= 0x9E3779B97F4A7C15ull;
	return (size_t)(x >> 40) & (MAP_SIZE - 1);
}

static void build_map(void)
{
	for (int i = 0; i < GMX_SYM_COUNT; i++) {
		void *a = gmx_shim_tbl[i];
		if (!a || !gmx_shim_own(i))
			continue;
		size_t h = addr_hash(a);
		while (g_map[h].addr && g_map[h].addr != a)
			h = (h + 1) & (MAP_SIZE - 1);
		g_map[h].addr = a;
		if (g_map[h].n < MAP_ALIASES)
			g_map[h].sym[g_map[h].n++] = i;
	}
}

static int is_ptds_name(const char *s)
{
	size_t n = strlen(s);
	return n > 5 && (strcmp(s + n - 5, "_ptsz") == 0 || strcmp(s + n - 5, "_ptds") == 0);
}

/* Our export for the real pointer, or NULL when the pointer is not one of the driver's exports. */
static void *by_identity(void *real, const char *base, int ptds)
{
	pthread_once(&g_map_once, build_map);
	size_t h = addr_hash(real);
	while (g_map[h].addr && g_map[h].addr != real)
		h = (h + 1) & (MAP_SIZE - 1);
	if (!g_map[h].addr)
		return NULL;
	int best = g_map[h].sym[0];
	size_t blen = strlen(base);
	/* Aliases: prefer a name of the requested base whose per-thread-ness matches the request. */
	for (int k = 0; k < g_map[h].n; k++) {
		const char *nm = gmx_shim_sym_names[g_map[h].sym[k]];
		if (strncmp(nm, base, blen) == 0 && is_ptds_name(nm) == ptds) {
			best = g_map[h].sym[k];
			break;
		}
	}
	return gmx_shim_own(best);
}

static void *by_table(const char *base, int version, int ptds)
{
	const hook_version_t *best = NULL;
	int have_ptds = 0;
	for (size_t i = 0; i < sizeof g_hooks / sizeof g_hooks[0]; i++)
		if (strcmp(g_hooks[i].base, base) == 0 && g_hooks[i].ptds)
			have_ptds = 1;
	int want = ptds && have_ptds;
	for (size_t i = 0; i < sizeof g_hooks / sizeof g_hooks[0]; i++) {
		const hook_version_t *e = &g_hooks[i];
		if (strcmp(e->base, base) != 0 || e->ptds != want || e->version > version)
			continue;
		if (!best || e->version > best->version)
			best = e;
	}
	return best ? best->fn : NULL;
}

static void substitute(const char *symbol, void **pfn, int version, cuuint64_t flags)
{
	if (!symbol || !*symbol || !pfn || !*pfn)
		return;
	int ptds = (flags & CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM) != 0;
	void *own = by_identity(*pfn, symbol, ptds);
	if (!own)
		own = by_table(symbol, version, ptds);
	if (own)
		*pfn = own;
}

/* cuGetProcAddress (CUDA 11.3 ABI): the real lookup, then the shim's export of the same ABI. */
GMX_EXPORT CUresult CUDAAPI cuGetProcAddress(const char *symbol, void **pfn, int cudaVersion,
					     cuuint64_t flags)
{
	GMX_REAL_OR_RETURN(real, cuGetProcAddress);
	CUresult r = real(symbol, pfn, cudaVersion, flags);
	if (r == CUDA_SUCCESS)
		substitute(symbol, pfn, cudaVersion, flags);
	return r;
}

/* cuGetProcAddress_v2 (CUDA 12.0 ABI, with the query status): as cuGetProcAddress. */
GMX_EXPORT CUresult CUDAAPI cuGetProcAddress_v2(const char *symbol, void **pfn, int cudaVersion,
						cuuint64_t flags,
						CUdriverProcAddressQueryResult *symbolStatus)
{
	GMX_REAL_OR_RETURN(real, cuGetProcAddress_v2);
	CUresult r = real(symbol, pfn, cudaVersion, flags, symbolStatus);
	if (r == CUDA_SUCCESS && (!symbolStatus || *symbolStatus == CU_GET_PROC_ADDRESS_SUCCESS))
		substitute(symbol, pfn, cudaVersion, flags);
	return r;
}
