/*
 * The stand-in driver: cuGetProcAddress and _v2. Each row maps (base name, the CUDA version
 * that introduced this variant, per-thread-default-stream flag) to an entry point; a request
 * gets the newest variant not newer than its version. Rows newer than the driver version the
 * stand-in plays (GPUMUX_STANDIN_DRIVER_VERSION) do not exist for it: a 12.2-like stand-in has
 * no cuFuncGetName (12.3) or cuFuncGetParamInfo (12.4), as NVIDIA's 535 driver has not.
 */
#define _GNU_SOURCE
#include <string.h>

#include "standin_internal.h"

typedef struct {
	const char *base;
	int version, ptds;
	void *fn;
} proc_t;

#define P(base, ver, ptds, fn) {#base, ver, ptds, (void *)&fn},
/* clang-format off */
static const proc_t g_procs[] = {
	P(cuInit, 2000, 0, cuInit)
	P(cuDriverGetVersion, 2020, 0, cuDriverGetVersion)
	P(cuGetErrorString, 6000, 0, cuGetErrorString)
	P(cuGetErrorName, 6000, 0, cuGetErrorName)
	P(cuGetExportTable, 3000, 0, cuGetExportTable)
	P(cuGetProcAddress, 11030, 0, cuGetProcAddress)
	P(cuGetProcAddress, 12000, 0, cuGetProcAddress_v2)
	/* devices */
	P(cuDeviceGet, 2000, 0, cuDeviceGet)
	P(cuDeviceGetCount, 2000, 0, cuDeviceGetCount)
	P(cuDeviceGetName, 2000, 0, cuDeviceGetName)
	P(cuDeviceGetUuid, 9020, 0, cuDeviceGetUuid)
	P(cuDeviceGetUuid, 11040, 0, cuDeviceGetUuid_v2)
	P(cuDeviceTotalMem, 3020, 0, cuDeviceTotalMem_v2)
	P(cuDeviceGetAttribute, 2000, 0, cuDeviceGetAttribute)
	P(cuDeviceGetPCIBusId, 4010, 0, cuDeviceGetPCIBusId)
	P(cuDeviceCanAccessPeer, 4000, 0, cuDeviceCanAccessPeer)
	/* contexts */
	P(cuDevicePrimaryCtxRetain, 7000, 0, cuDevicePrimaryCtxRetain)
	P(cuDevicePrimaryCtxRelease, 7000, 0, cuDevicePrimaryCtxRelease_v2)
	P(cuDevicePrimaryCtxRelease, 11000, 0, cuDevicePrimaryCtxRelease_v2)
	P(cuDevicePrimaryCtxGetState, 7000, 0, cuDevicePrimaryCtxGetState)
	P(cuDevicePrimaryCtxSetFlags, 7000, 0, cuDevicePrimaryCtxSetFlags_v2)
	P(cuDevicePrimaryCtxSetFlags, 11000, 0, cuDevicePrimaryCtxSetFlags_v2)
	P(cuDevicePrimaryCtxReset, 7000, 0, cuDevicePrimaryCtxReset_v2)
	P(cuDevicePrimaryCtxReset, 11000, 0, cuDevicePrimaryCtxReset_v2)
	P(cuCtxCreate, 3020, 0, cuCtxCreate_v2)
	P(cuCtxCreate, 12050, 0, cuCtxCreate_v4)
	P(cuCtxDestroy, 4000, 0, cuCtxDestroy_v2)
	P(cuCtxSetCurrent, 4000, 0, cuCtxSetCurrent)
	P(cuCtxGetCurrent, 4000, 0, cuCtxGetCurrent)
	P(cuCtxPushCurrent, 4000, 0, cuCtxPushCurrent_v2)
	P(cuCtxPopCurrent, 4000, 0, cuCtxPopCurrent_v2)
	P(cuCtxGetDevice, 2000, 0, cuCtxGetDevice)
	P(cuCtxGetDevice, 13000, 0, cuCtxGetDevice_v2)
	P(cuCtxSynchronize, 2000, 0, cuCtxSynchronize)
	P(cuCtxSynchronize, 13000, 0, cuCtxSynchronize_v2)
	P(cuCtxGetFlags, 7000, 0, cuCtxGetFlags)
	P(cuCtxGetApiVersion, 3020, 0, cuCtxGetApiVersion)
	P(cuCtxGetStreamPriorityRange, 5050, 0, cuCtxGetStreamPriorityRange)
	P(cuCtxGetLimit, 3010, 0, cuCtxGetLimit)
	P(cuCtxSetLimit, 3010, 0, cuCtxSetLimit)
	P(cuCtxGetCacheConfig, 3020, 0, cuCtxGetCacheConfig)
	P(cuCtxSetCacheConfig, 3020, 0, cuCtxSetCacheConfig)
	/* modules, libraries, kernels */
	P(cuModuleLoad, 2000, 0, cuModuleLoad)
	P(cuModuleLoadData, 2000, 0, cuModuleLoadData)
	P(cuModuleLoadDataEx, 2010, 0, cuModuleLoadDataEx)
	P(cuModuleLoadFatBinary, 2000, 0, cuModuleLoadFatBinary)
	P(cuModuleUnload, 2000, 0, cuModuleUnload)
	P(cuModuleGetFunction, 2000, 0, cuModuleGetFunction)
	P(cuModuleGetLoadingMode, 11070, 0, cuModuleGetLoadingMode)
	P(cuLibraryLoadData, 12000, 0, cuLibraryLoadData)
	P(cuLibraryLoadFromFile, 12000, 0, cuLibraryLoadFromFile)
	P(cuLibraryUnload, 12000, 0, cuLibraryUnload)
	P(cuLibraryGetKernel, 12000, 0, cuLibraryGetKernel)
	P(cuLibraryGetModule, 12000, 0, cuLibraryGetModule)
	P(cuLibraryGetKernelCount, 12040, 0, cuLibraryGetKernelCount)
	P(cuKernelGetFunction, 12000, 0, cuKernelGetFunction)
	P(cuKernelGetAttribute, 12000, 0, cuKernelGetAttribute)
	P(cuKernelSetAttribute, 12000, 0, cuKernelSetAttribute)
	P(cuKernelSetCacheConfig, 12000, 0, cuKernelSetCacheConfig)
	P(cuKernelGetName, 12030, 0, cuKernelGetName)
	P(cuKernelGetParamInfo, 12040, 0, cuKernelGetParamInfo)
	P(cuFuncGetName, 12030, 0, cuFuncGetName)
	P(cuFuncGetParamInfo, 12040, 0, cuFuncGetParamInfo)
	P(cuFuncGetAttribute, 2020, 0, cuFuncGetAttribute)
	P(cuFuncSetAttribute, 9000, 0, cuFuncSetAttribute)
	P(cuFuncSetCacheConfig, 3000, 0, cuFuncSetCacheConfig)
	P(cuFuncGetModule, 11000, 0, cuFuncGetModule)
	/* launches */
	P(cuLaunchKernel, 4000, 0, cuLaunchKernel)
	P(cuLaunchKernel, 7000, 1, cuLaunchKernel_ptsz)
	P(cuLaunchKernelEx, 11060, 0, cuLaunchKernelEx)
	P(cuLaunchKernelEx, 11060, 1, cuLaunchKernelEx_ptsz)
	P(cuLaunchCooperativeKernel, 9000, 0, cuLaunchCooperativeKernel)
	P(cuLaunchCooperativeKernel, 9000, 1, cuLaunchCooperativeKernel_ptsz)
	P(cuLaunchHostFunc, 10000, 0, cuLaunchHostFunc)
	P(cuLaunchHostFunc, 10000, 1, cuLaunchHostFunc_ptsz)
	/* streams */
	P(cuStreamCreate, 2000, 0, cuStreamCreate)
	P(cuStreamCreateWithPriority, 5050, 0, cuStreamCreateWithPriority)
	P(cuStreamDestroy, 4000, 0, cuStreamDestroy_v2)
	P(cuStreamSynchronize, 2000, 0, cuStreamSynchronize)
	P(cuStreamSynchronize, 7000, 1, cuStreamSynchronize_ptsz)
	P(cuStreamQuery, 2000, 0, cuStreamQuery)
	P(cuStreamQuery, 7000, 1, cuStreamQuery_ptsz)
	P(cuStreamWaitEvent, 3020, 0, cuStreamWaitEvent)
	P(cuStreamWaitEvent, 7000, 1, cuStreamWaitEvent_ptsz)
	P(cuStreamGetFlags, 5050, 0, cuStreamGetFlags)
	P(cuStreamGetFlags, 7000, 1, cuStreamGetFlags_ptsz)
	P(cuStreamGetPriority, 5050, 0, cuStreamGetPriority)
	P(cuStreamGetPriority, 7000, 1, cuStreamGetPriority_ptsz)
	P(cuStreamGetId, 12000, 0, cuStreamGetId)
	P(cuStreamGetId, 12000, 1, cuStreamGetId_ptsz)
	P(cuStreamGetCtx, 9020, 0, cuStreamGetCtx)
	P(cuStreamGetCtx, 9020, 1, cuStreamGetCtx_ptsz)
	/* capture and graphs */
	P(cuStreamIsCapturing, 10000, 0, cuStreamIsCapturing)
	P(cuStreamIsCapturing, 10000, 1, cuStreamIsCapturing_ptsz)
	P(cuStreamBeginCapture, 10000, 0, cuStreamBeginCapture)
	P(cuStreamBeginCapture, 10000, 1, cuStreamBeginCapture_ptsz)
	P(cuStreamBeginCapture, 10010, 0, cuStreamBeginCapture_v2)
	P(cuStreamBeginCapture, 10010, 1, cuStreamBeginCapture_v2_ptsz)
	P(cuStreamEndCapture, 10000, 0, cuStreamEndCapture)
	P(cuStreamEndCapture, 10000, 1, cuStreamEndCapture_ptsz)
	P(cuStreamGetCaptureInfo, 10010, 0, cuStreamGetCaptureInfo)
	P(cuStreamGetCaptureInfo, 10010, 1, cuStreamGetCaptureInfo_ptsz)
	P(cuStreamGetCaptureInfo, 11030, 0, cuStreamGetCaptureInfo_v2)
	P(cuStreamGetCaptureInfo, 11030, 1, cuStreamGetCaptureInfo_v2_ptsz)
	P(cuStreamGetCaptureInfo, 12030, 0, cuStreamGetCaptureInfo_v3)
	P(cuStreamGetCaptureInfo, 12030, 1, cuStreamGetCaptureInfo_v3_ptsz)
	P(cuStreamUpdateCaptureDependencies, 11030, 0, cuStreamUpdateCaptureDependencies)
	P(cuThreadExchangeStreamCaptureMode, 10010, 0, cuThreadExchangeStreamCaptureMode)
	P(cuGraphCreate, 10000, 0, cuGraphCreate)
	P(cuGraphDestroy, 10000, 0, cuGraphDestroy)
	P(cuGraphGetNodes, 10000, 0, cuGraphGetNodes)
	P(cuGraphGetRootNodes, 10000, 0, cuGraphGetRootNodes)
	P(cuGraphNodeGetType, 10000, 0, cuGraphNodeGetType)
	P(cuGraphInstantiate, 10000, 0, cuGraphInstantiate)
	P(cuGraphInstantiate, 11000, 0, cuGraphInstantiate_v2)
	P(cuGraphInstantiateWithFlags, 11040, 0, cuGraphInstantiateWithFlags)
	P(cuGraphInstantiateWithParams, 12000, 0, cuGraphInstantiateWithParams)
	P(cuGraphInstantiateWithParams, 12000, 1, cuGraphInstantiateWithParams_ptsz)
	P(cuGraphExecDestroy, 10000, 0, cuGraphExecDestroy)
	P(cuGraphLaunch, 10000, 0, cuGraphLaunch)
	P(cuGraphLaunch, 10000, 1, cuGraphLaunch_ptsz)
	P(cuGraphUpload, 11010, 0, cuGraphUpload)
	P(cuGraphUpload, 11010, 1, cuGraphUpload_ptsz)
	/* events */
	P(cuEventCreate, 2000, 0, cuEventCreate)
	P(cuEventDestroy, 4000, 0, cuEventDestroy_v2)
	P(cuEventRecord, 2000, 0, cuEventRecord)
	P(cuEventRecord, 7000, 1, cuEventRecord_ptsz)
	P(cuEventRecordWithFlags, 11010, 0, cuEventRecordWithFlags)
	P(cuEventRecordWithFlags, 11010, 1, cuEventRecordWithFlags_ptsz)
	P(cuEventQuery, 2000, 0, cuEventQuery)
	P(cuEventSynchronize, 2000, 0, cuEventSynchronize)
	P(cuEventElapsedTime, 2000, 0, cuEventElapsedTime)
	P(cuEventElapsedTime, 12080, 0, cuEventElapsedTime_v2)
	/* memory */
	P(cuMemAlloc, 3020, 0, cuMemAlloc_v2)
	P(cuMemFree, 3020, 0, cuMemFree_v2)
	P(cuMemAllocManaged, 6000, 0, cuMemAllocManaged)
	P(cuMemAllocHost, 3020, 0, cuMemAllocHost_v2)
	P(cuMemHostAlloc, 2020, 0, cuMemHostAlloc)
	P(cuMemFreeHost, 2000, 0, cuMemFreeHost)
	P(cuMemHostGetFlags, 2030, 0, cuMemHostGetFlags)
	P(cuMemHostGetDevicePointer, 3020, 0, cuMemHostGetDevicePointer_v2)
	P(cuMemGetInfo, 3020, 0, cuMemGetInfo_v2)
	P(cuMemGetAddressRange, 3020, 0, cuMemGetAddressRange_v2)
	P(cuPointerGetAttribute, 4000, 0, cuPointerGetAttribute)
	P(cuPointerGetAttributes, 7000, 0, cuPointerGetAttributes)
	P(cuMemcpyHtoD, 3020, 0, cuMemcpyHtoD_v2)
	P(cuMemcpyDtoH, 3020, 0, cuMemcpyDtoH_v2)
	P(cuMemcpyDtoD, 3020, 0, cuMemcpyDtoD_v2)
	P(cuMemcpy, 4000, 0, cuMemcpy)
	P(cuMemcpyAsync, 4000, 0, cuMemcpyAsync)
	P(cuMemcpyAsync, 7000, 1, cuMemcpyAsync_ptsz)
	P(cuMemcpyHtoDAsync, 3020, 0, cuMemcpyHtoDAsync_v2)
	P(cuMemcpyHtoDAsync, 7000, 1, cuMemcpyHtoDAsync_v2_ptsz)
	P(cuMemcpyDtoHAsync, 3020, 0, cuMemcpyDtoHAsync_v2)
	P(cuMemcpyDtoHAsync, 7000, 1, cuMemcpyDtoHAsync_v2_ptsz)
	P(cuMemcpyDtoDAsync, 3020, 0, cuMemcpyDtoDAsync_v2)
	P(cuMemcpyDtoDAsync, 7000, 1, cuMemcpyDtoDAsync_v2_ptsz)
	P(cuMemsetD8, 3020, 0, cuMemsetD8_v2)
	P(cuMemsetD16, 3020, 0, cuMemsetD16_v2)
	P(cuMemsetD32, 3020, 0, cuMemsetD32_v2)
	P(cuMemsetD8Async, 3020, 0, cuMemsetD8Async)
	P(cuMemsetD8Async, 7000, 1, cuMemsetD8Async_ptsz)
	P(cuMemsetD16Async, 3020, 0, cuMemsetD16Async)
	P(cuMemsetD16Async, 7000, 1, cuMemsetD16Async_ptsz)
	P(cuMemsetD32Async, 3020, 0, cuMemsetD32Async)
	P(cuMemsetD32Async, 7000, 1, cuMemsetD32Async_ptsz)
	P(cuMemPrefetchAsync, 12020, 0, cuMemPrefetchAsync_v2)
	P(cuMemPrefetchAsync, 12020, 1, cuMemPrefetchAsync_v2_ptsz)
};
/* clang-format on */

static CUresult proc_lookup(const char *symbol, void **pfn, int ver, cuuint64_t flags,
			    CUdriverProcAddressQueryResult *st)
{
	if (!pfn)
		return CUDA_ERROR_INVALID_VALUE;
	*pfn = NULL;
	int driver = si__driver_version();
	const proc_t *best = NULL;
	int found = 0, have_ptds = 0;
	if (symbol)
		for (size_t i = 0; i < sizeof g_procs / sizeof g_procs[0]; i++)
			if (g_procs[i].version <= driver && strcmp(g_procs[i].base, symbol) == 0) {
				found = 1;
				have_ptds |= g_procs[i].ptds;
			}
	int want = (flags & CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM) && have_ptds;
	for (size_t i = 0; found && i < sizeof g_procs / sizeof g_procs[0]; i++) {
		const proc_t *p = &g_procs[i];
		if (p->version <= driver && strcmp(p->base, symbol) == 0 && p->ptds == want && p->version <= ver &&
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
