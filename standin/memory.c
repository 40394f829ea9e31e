/* The stand-in driver: allocations, copies, memsets, prefetch and pointer attributes. */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "standin_internal.h"

/* ---- memory ---- */

static void *map_bytes(size_t n)
{
	void *p =
	    mmap(NULL, n ? n : 1, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	return p == MAP_FAILED ? NULL : p;
}

SI_EXPORT CUresult CUDAAPI cuMemAlloc_v2(CUdeviceptr *dptr, size_t bytesize)
{
	REQUIRE_CTX(c);
	(void)c;
	if (!dptr || bytesize == 0)
		return CUDA_ERROR_INVALID_VALUE;
	if (si_mem_reserve(bytesize) != 0)
		return CUDA_ERROR_OUT_OF_MEMORY;
	void *p = map_bytes(bytesize);
	pthread_mutex_lock(&S.lock);
	alloc_t *a = p ? si__alloc_add((uintptr_t)p, bytesize, CU_MEMORYTYPE_DEVICE) : NULL;
	pthread_mutex_unlock(&S.lock);
	if (!a) {
		if (p)
			munmap(p, bytesize);
		si_mem_release(bytesize);
		return CUDA_ERROR_OUT_OF_MEMORY;
	}
	*dptr = (CUdeviceptr)(uintptr_t)p;
	si__record_alloc((uintptr_t)p, bytesize);
	return CUDA_SUCCESS;
}

SI_EXPORT CUresult CUDAAPI cuMemAllocManaged(CUdeviceptr *dptr, size_t bytesize, unsigned int flags)
{
	REQUIRE_CTX(c);
	(void)c;
	(void)flags;
	if (!dptr || bytesize == 0)
		return CUDA_ERROR_INVALID_VALUE;
	void *p = map_bytes(bytesize);
	unsigned char *res = calloc(si__chunks(bytesize), 1);
	pthread_mutex_lock(&S.lock);
	alloc_t *a = p && res ? si__alloc_add((uintptr_t)p, bytesize, KIND_MANAGED) : NULL;
	if (a)
		a->resident = res;
	pthread_mutex_unlock(&S.lock);
	if (!a) {
		if (p)
			munmap(p, bytesize);
		free(res);
		return CUDA_ERROR_OUT_OF_MEMORY;
	}
	*dptr = (CUdeviceptr)(uintptr_t)p;
	si__record_alloc((uintptr_t)p, bytesize);
	// cppcheck-suppress memleak ; res is owned by the allocation record (a->resident)
	return CUDA_SUCCESS;
}

static CUresult host_alloc(void **pp, size_t bytesize, unsigned flags)
{
	REQUIRE_CTX(c);
	(void)c;
	if (!pp)
		return CUDA_ERROR_INVALID_VALUE;
	void *p = map_bytes(bytesize);
	pthread_mutex_lock(&S.lock);
	alloc_t *a = p ? si__alloc_add((uintptr_t)p, bytesize, CU_MEMORYTYPE_HOST) : NULL;
	if (a)
		a->host_flags = flags;
	pthread_mutex_unlock(&S.lock);
	if (!a) {
		if (p)
			munmap(p, bytesize);
		return CUDA_ERROR_OUT_OF_MEMORY;
	}
	*pp = p;
	return CUDA_SUCCESS;
}

SI_EXPORT CUresult CUDAAPI cuMemAllocHost_v2(void **pp, size_t bytesize)
{
	return host_alloc(pp, bytesize, 0);
}

SI_EXPORT CUresult CUDAAPI cuMemHostAlloc(void **pp, size_t bytesize, unsigned int Flags)
{
	return host_alloc(pp, bytesize, Flags);
}

SI_EXPORT CUresult CUDAAPI cuMemHostGetFlags(unsigned int *pFlags, void *p)
{
	REQUIRE_INIT();
	if (!pFlags)
		return CUDA_ERROR_INVALID_VALUE;
	pthread_mutex_lock(&S.lock);
	alloc_t *a = si__alloc_find((uintptr_t)p);
	int ok = a && a->kind == CU_MEMORYTYPE_HOST;
	if (ok)
		*pFlags = a->host_flags;
	pthread_mutex_unlock(&S.lock);
	return ok ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

static CUresult free_kind(uintptr_t p, int host)
{
	REQUIRE_INIT();
	if (p == 0)
		return CUDA_SUCCESS;
	si_wait_ctx(-1); /* freeing synchronises the device, as the driver does */
	pthread_mutex_lock(&S.lock);
	alloc_t *a = si__alloc_find(p);
	if (!a || a->base != p || (host != (a->kind == CU_MEMORYTYPE_HOST))) {
		pthread_mutex_unlock(&S.lock);
		return CUDA_ERROR_INVALID_VALUE;
	}
	if (a->kind == CU_MEMORYTYPE_DEVICE)
		si_mem_release(a->size);
	if (a->kind == KIND_MANAGED)
		for (size_t i = 0; i < si__chunks(a->size); i++)
			if (a->resident[i])
				si_mem_release(si__chunk_bytes(a, i));
	munmap((void *)a->base, a->size ? a->size : 1);
	si__alloc_remove(a);
	pthread_mutex_unlock(&S.lock);
	return CUDA_SUCCESS;
}

SI_EXPORT CUresult CUDAAPI cuMemFree_v2(CUdeviceptr dptr)
{
	return free_kind((uintptr_t)dptr, 0);
}

SI_EXPORT CUresult CUDAAPI cuMemFreeHost(void *p)
{
	return free_kind((uintptr_t)p, 1);
}

SI_EXPORT CUresult CUDAAPI cuMemGetInfo_v2(size_t *free_b, size_t *total_b)
{
	REQUIRE_CTX(c);
	(void)c;
	if (!free_b || !total_b)
		return CUDA_ERROR_INVALID_VALUE;
	uint64_t f, t;
	si_mem_info(&f, &t);
	*free_b = f;
	*total_b = t;
	return CUDA_SUCCESS;
}

SI_EXPORT CUresult CUDAAPI cuPointerGetAttribute(void *data, CUpointer_attribute attribute, CUdeviceptr ptr)
{
	REQUIRE_INIT();
	if (!data)
		return CUDA_ERROR_INVALID_VALUE;
	pthread_mutex_lock(&S.lock);
	alloc_t *a = si__alloc_find((uintptr_t)ptr);
	CUresult r = CUDA_SUCCESS;
	if (!a) {
		r = CUDA_ERROR_INVALID_VALUE; /* pageable host memory or garbage, as the driver says */
	} else if (attribute == CU_POINTER_ATTRIBUTE_MEMORY_TYPE) {
		*(unsigned *)data = a->kind == KIND_MANAGED ? CU_MEMORYTYPE_UNIFIED : (unsigned)a->kind;
	} else if (attribute == CU_POINTER_ATTRIBUTE_IS_MANAGED) {
		*(unsigned *)data = a->kind == KIND_MANAGED;
	} else if (attribute == CU_POINTER_ATTRIBUTE_RANGE_START_ADDR) {
		*(CUdeviceptr *)data = a->base;
	} else if (attribute == CU_POINTER_ATTRIBUTE_RANGE_SIZE) {
		*(size_t *)data = a->size;
	} else {
		r = CUDA_ERROR_NOT_SUPPORTED;
	}
	pthread_mutex_unlock(&S.lock);
	return r;
}

/* Checks [p, p+n) lies in one allocation (any kind when host_ok). */
static int range_ok(uintptr_t p, size_t n, int host_ok)
{
	pthread_mutex_lock(&S.lock);
	alloc_t *a = si__alloc_find(p);
	int ok = a && p + n <= a->base + a->size && (host_ok || a->kind != CU_MEMORYTYPE_HOST);
	pthread_mutex_unlock(&S.lock);
	return ok;
}

static int64_t copy_ns(size_t n)
{
	return (int64_t)(n / LINK_BYTES_PER_US) * 1000 + 1000;
}

/* Device memory (device or managed allocations) rather than host memory (pinned or pageable). */
static int on_device(const void *p)
{
	pthread_mutex_lock(&S.lock);
	const alloc_t *a = si__alloc_find((uintptr_t)p);
	int dev = a && a->kind != CU_MEMORYTYPE_HOST;
	pthread_mutex_unlock(&S.lock);
	return dev;
}

/* The copy engine direction of a copy from src to dst (host to host goes with on-device). */
static int copy_dir(const void *dst, const void *src)
{
	int d = on_device(dst), s = on_device(src);
	return d && !s ? SI_DIR_H2D : s && !d ? SI_DIR_D2H : SI_DIR_D2D;
}

/* Copies now (the data is visible at once) and occupies a copy engine of the simulated GPU for
 * the transfer time on the stream, so ordering and timing follow the stream; the stream seq,
 * or 0. */
static uint64_t copy_now(void *dst, const void *src, size_t n, int si)
{
	int dir = copy_dir(dst, src);
	if (n)
		memmove(dst, src, n);
	si_submit_t s = {
	    .kind = SI_K_COPY, .stream = si, .dur_ns = copy_ns(n), .name = "copy", .bytes = n, .dir = dir};
	return si_submit(&s);
}

CUresult si__copy_submit(void *dst, const void *src, size_t n, int si)
{
	return copy_now(dst, src, n, si) ? CUDA_SUCCESS : CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES;
}

static CUresult copy_async(void *dst, const void *src, size_t n, CUstream h, int ptsz, int sync)
{
	int si;
	CUresult r = si__resolve_stream(h, ptsz, &si);
	if (r != CUDA_SUCCESS)
		return r;
	if (si__capturing(si)) {
		if (sync) /* a synchronous copy cannot be captured */
			return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
		return si__capture(si, &(si_cap_t){.kind = SI_CAP_COPY, .dst = dst, .src = src, .n = n},
				   NULL);
	}
	uint64_t seq = copy_now(dst, src, n, si);
	if (!seq)
		return CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES;
	if (sync)
		si_wait_stream(si, seq);
	return CUDA_SUCCESS;
}

#define DEV(p) ((void *)(uintptr_t)(p))

SI_EXPORT CUresult CUDAAPI cuMemcpyHtoD_v2(CUdeviceptr dstDevice, const void *srcHost, size_t ByteCount)
{
	REQUIRE_CTX(c);
	(void)c;
	if (!range_ok(dstDevice, ByteCount, 0) || !srcHost)
		return CUDA_ERROR_INVALID_VALUE;
	return copy_async(DEV(dstDevice), srcHost, ByteCount, NULL, 0, 1);
}

SI_EXPORT CUresult CUDAAPI cuMemcpyDtoH_v2(void *dstHost, CUdeviceptr srcDevice, size_t ByteCount)
{
	REQUIRE_CTX(c);
	(void)c;
	if (!range_ok(srcDevice, ByteCount, 0) || !dstHost)
		return CUDA_ERROR_INVALID_VALUE;
	return copy_async(dstHost, DEV(srcDevice), ByteCount, NULL, 0, 1);
}

SI_EXPORT CUresult CUDAAPI cuMemcpyDtoD_v2(CUdeviceptr dstDevice, CUdeviceptr srcDevice, size_t ByteCount)
{
	REQUIRE_CTX(c);
	(void)c;
	if (!range_ok(dstDevice, ByteCount, 0) || !range_ok(srcDevice, ByteCount, 0))
		return CUDA_ERROR_INVALID_VALUE;
	return copy_async(DEV(dstDevice), DEV(srcDevice), ByteCount, NULL, 0, 1);
}

SI_EXPORT CUresult CUDAAPI cuMemcpy(CUdeviceptr dst, CUdeviceptr src, size_t ByteCount)
{
	REQUIRE_CTX(c);
	(void)c;
	if (!dst || !src)
		return CUDA_ERROR_INVALID_VALUE;
	return copy_async(DEV(dst), DEV(src), ByteCount, NULL, 0, 1);
}

#define COPY_ASYNC_PAIR(NAME, DT, ST, DCHK, SCHK)                                                            \
	static CUresult NAME##_impl(DT dst, ST src, size_t n, CUstream h, int ptsz)                          \
	{                                                                                                    \
		REQUIRE_CTX(c);                                                                              \
		(void)c;                                                                                     \
		if (!(DCHK) || !(SCHK))                                                                      \
			return CUDA_ERROR_INVALID_VALUE;                                                     \
		return copy_async((void *)(uintptr_t)dst, (const void *)(uintptr_t)src, n, h, ptsz, 0);      \
	}

COPY_ASYNC_PAIR(htod, CUdeviceptr, const void *, range_ok(dst, n, 0), src != NULL)
COPY_ASYNC_PAIR(dtoh, void *, CUdeviceptr, dst != NULL, range_ok(src, n, 0))
COPY_ASYNC_PAIR(dtod, CUdeviceptr, CUdeviceptr, range_ok(dst, n, 0), range_ok(src, n, 0))
COPY_ASYNC_PAIR(any, CUdeviceptr, CUdeviceptr, dst != 0, src != 0)

SI_EXPORT CUresult CUDAAPI cuMemcpyHtoDAsync_v2(CUdeviceptr d, const void *s, size_t n, CUstream h)
{
	return htod_impl(d, s, n, h, 0);
}
SI_EXPORT CUresult CUDAAPI cuMemcpyHtoDAsync_v2_ptsz(CUdeviceptr d, const void *s, size_t n, CUstream h)
{
	return htod_impl(d, s, n, h, 1);
}
SI_EXPORT CUresult CUDAAPI cuMemcpyDtoHAsync_v2(void *d, CUdeviceptr s, size_t n, CUstream h)
{
	return dtoh_impl(d, s, n, h, 0);
}
SI_EXPORT CUresult CUDAAPI cuMemcpyDtoHAsync_v2_ptsz(void *d, CUdeviceptr s, size_t n, CUstream h)
{
	return dtoh_impl(d, s, n, h, 1);
}
SI_EXPORT CUresult CUDAAPI cuMemcpyDtoDAsync_v2(CUdeviceptr d, CUdeviceptr s, size_t n, CUstream h)
{
	return dtod_impl(d, s, n, h, 0);
}
SI_EXPORT CUresult CUDAAPI cuMemcpyDtoDAsync_v2_ptsz(CUdeviceptr d, CUdeviceptr s, size_t n, CUstream h)
{
	return dtod_impl(d, s, n, h, 1);
}
SI_EXPORT CUresult CUDAAPI cuMemcpyAsync(CUdeviceptr d, CUdeviceptr s, size_t n, CUstream h)
{
	return any_impl(d, s, n, h, 0);
}
SI_EXPORT CUresult CUDAAPI cuMemcpyAsync_ptsz(CUdeviceptr d, CUdeviceptr s, size_t n, CUstream h)
{
	return any_impl(d, s, n, h, 1);
}

/* Fills now and occupies the stream for the time on the compute engine (as a GPU's memset
 * kernels do); the stream seq, or 0. */
static uint64_t memset_now(CUdeviceptr d, unsigned v, size_t n, int width, int si)
{
	unsigned char *p = DEV(d);
	for (size_t i = 0; i < n; i++) {
		if (width == 1)
			p[i] = (unsigned char)v;
		else if (width == 2) {
			unsigned short x = (unsigned short)v;
			memcpy(p + 2 * i, &x, 2);
		} else {
			memcpy(p + 4 * i, &v, 4);
		}
	}
	si_submit_t s = {.kind = SI_K_COPY,
			 .stream = si,
			 .dur_ns = copy_ns(n * (size_t)width),
			 .name = "memset",
			 .bytes = n * (size_t)width};
	return si_submit(&s);
}

CUresult si__memset_submit(uintptr_t d, unsigned v, size_t n, int width, int si)
{
	return memset_now((CUdeviceptr)d, v, n, width, si) ? CUDA_SUCCESS
							   : CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES;
}

static CUresult memset_impl(CUdeviceptr d, unsigned v, size_t n, int width, CUstream h, int ptsz, int sync)
{
	REQUIRE_CTX(c);
	(void)c;
	if (!range_ok(d, n * (size_t)width, 0))
		return CUDA_ERROR_INVALID_VALUE;
	int si;
	CUresult r = si__resolve_stream(h, ptsz, &si);
	if (r != CUDA_SUCCESS)
		return r;
	if (si__capturing(si)) {
		if (sync)
			return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
		si_cap_t cap = {.kind = SI_CAP_MEMSET, .dst = DEV(d), .n = n, .value = v, .width = width};
		return si__capture(si, &cap, NULL);
	}
	uint64_t seq = memset_now(d, v, n, width, si);
	if (!seq)
		return CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES;
	if (sync)
		si_wait_stream(si, seq);
	return CUDA_SUCCESS;
}

SI_EXPORT CUresult CUDAAPI cuMemsetD16_v2(CUdeviceptr d, unsigned short us, size_t N)
{
	return memset_impl(d, us, N, 2, NULL, 0, 1);
}

SI_EXPORT CUresult CUDAAPI cuMemsetD8_v2(CUdeviceptr d, unsigned char uc, size_t N)
{
	return memset_impl(d, uc, N, 1, NULL, 0, 1);
}
SI_EXPORT CUresult CUDAAPI cuMemsetD32_v2(CUdeviceptr d, unsigned int ui, size_t N)
{
	return memset_impl(d, ui, N, 4, NULL, 0, 1);
}
SI_EXPORT CUresult CUDAAPI cuMemsetD8Async(CUdeviceptr d, unsigned char uc, size_t N, CUstream h)
{
	return memset_impl(d, uc, N, 1, h, 0, 0);
}
SI_EXPORT CUresult CUDAAPI cuMemsetD8Async_ptsz(CUdeviceptr d, unsigned char uc, size_t N, CUstream h)
{
	return memset_impl(d, uc, N, 1, h, 1, 0);
}
SI_EXPORT CUresult CUDAAPI cuMemsetD16Async(CUdeviceptr d, unsigned short us, size_t N, CUstream h)
{
	return memset_impl(d, us, N, 2, h, 0, 0);
}
SI_EXPORT CUresult CUDAAPI cuMemsetD16Async_ptsz(CUdeviceptr d, unsigned short us, size_t N, CUstream h)
{
	return memset_impl(d, us, N, 2, h, 1, 0);
}
SI_EXPORT CUresult CUDAAPI cuMemsetD32Async(CUdeviceptr d, unsigned int ui, size_t N, CUstream h)
{
	return memset_impl(d, ui, N, 4, h, 0, 0);
}
SI_EXPORT CUresult CUDAAPI cuMemsetD32Async_ptsz(CUdeviceptr d, unsigned int ui, size_t N, CUstream h)
{
	return memset_impl(d, ui, N, 4, h, 1, 0);
}

/* Prefetch to the device makes the range resident (evicting this process's oldest managed
 * chunks if the device is full); to the host makes it non-resident. The transfer occupies
 * the stream and a copy engine of its direction for its link time. */
static CUresult prefetch(CUdeviceptr p, size_t n, CUmemLocation loc, CUstream h, int ptsz)
{
	REQUIRE_CTX(c);
	(void)c;
	pthread_mutex_lock(&S.lock);
	alloc_t *a = si__alloc_find((uintptr_t)p);
	if (!a || a->kind != KIND_MANAGED || (uintptr_t)p + n > a->base + a->size) {
		pthread_mutex_unlock(&S.lock);
		return CUDA_ERROR_INVALID_VALUE;
	}
	size_t c0 = ((uintptr_t)p - a->base) / CHUNK, c1 = ((uintptr_t)p + n - a->base + CHUNK - 1) / CHUNK;
	uint64_t moved = 0;
	if (loc.type == CU_MEM_LOCATION_TYPE_DEVICE && loc.id == 0) {
		moved = si__make_resident(a, c0, c1);
	} else if (loc.type == CU_MEM_LOCATION_TYPE_HOST) {
		for (size_t i = c0; i < c1; i++)
			if (a->resident[i]) {
				a->resident[i] = 0;
				si_mem_release(si__chunk_bytes(a, i));
				moved += si__chunk_bytes(a, i);
			}
	} else {
		pthread_mutex_unlock(&S.lock);
		return CUDA_ERROR_INVALID_DEVICE;
	}
	pthread_mutex_unlock(&S.lock);
	int si;
	CUresult r = si__resolve_stream(h, ptsz, &si);
	if (r != CUDA_SUCCESS)
		return r;
	si_submit_t s = {.kind = SI_K_COPY,
			 .stream = si,
			 .dur_ns = copy_ns(moved),
			 .name = "prefetch",
			 .bytes = moved,
			 .dir = loc.type == CU_MEM_LOCATION_TYPE_HOST ? SI_DIR_D2H : SI_DIR_H2D};
	return si_submit(&s) ? CUDA_SUCCESS : CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES;
}

SI_EXPORT CUresult CUDAAPI cuMemPrefetchAsync_v2(CUdeviceptr devPtr, size_t count, CUmemLocation location,
						 unsigned int flags, CUstream hStream)
{
	(void)flags;
	return prefetch(devPtr, count, location, hStream, 0);
}

SI_EXPORT CUresult CUDAAPI cuMemPrefetchAsync_v2_ptsz(CUdeviceptr devPtr, size_t count,
						      CUmemLocation location, unsigned int flags,
						      CUstream hStream)
{
	(void)flags;
	return prefetch(devPtr, count, location, hStream, 1);
}

SI_EXPORT CUresult CUDAAPI cuMemGetAddressRange_v2(CUdeviceptr *pbase, size_t *psize, CUdeviceptr dptr)
{
	REQUIRE_INIT();
	pthread_mutex_lock(&S.lock);
	alloc_t *a = si__alloc_find((uintptr_t)dptr);
	if (a) {
		if (pbase)
			*pbase = a->base;
		if (psize)
			*psize = a->size;
	}
	pthread_mutex_unlock(&S.lock);
	return a ? CUDA_SUCCESS : CUDA_ERROR_NOT_FOUND;
}

/* Host memory is device-visible at the same address (unified addressing). */
SI_EXPORT CUresult CUDAAPI cuMemHostGetDevicePointer_v2(CUdeviceptr *pdptr, void *p, unsigned int Flags)
{
	REQUIRE_INIT();
	if (!pdptr || Flags)
		return CUDA_ERROR_INVALID_VALUE;
	pthread_mutex_lock(&S.lock);
	alloc_t *a = si__alloc_find((uintptr_t)p);
	int ok = a && a->kind == CU_MEMORYTYPE_HOST;
	pthread_mutex_unlock(&S.lock);
	if (!ok)
		return CUDA_ERROR_INVALID_VALUE;
	*pdptr = (CUdeviceptr)(uintptr_t)p;
	return CUDA_SUCCESS;
}

SI_EXPORT CUresult CUDAAPI cuPointerGetAttributes(unsigned int numAttributes, CUpointer_attribute *attributes,
						  void **data, CUdeviceptr ptr)
{
	REQUIRE_INIT();
	if (!attributes || !data)
		return CUDA_ERROR_INVALID_VALUE;
	for (unsigned i = 0; i < numAttributes; i++) {
		CUresult r = cuPointerGetAttribute(data[i], attributes[i], ptr);
		if (r == CUDA_ERROR_INVALID_VALUE && attributes[i] == CU_POINTER_ATTRIBUTE_MEMORY_TYPE)
			*(unsigned *)data[i] =
			    0; /* not a CUDA allocation: no memory type, as the driver says */
		else if (r == CUDA_ERROR_INVALID_VALUE || r == CUDA_ERROR_NOT_SUPPORTED)
			memset(data[i], 0,
			       attributes[i] == CU_POINTER_ATTRIBUTE_RANGE_SIZE		? sizeof(size_t)
			       : attributes[i] == CU_POINTER_ATTRIBUTE_RANGE_START_ADDR ? sizeof(CUdeviceptr)
											: sizeof(unsigned));
	}
	return CUDA_SUCCESS;
}
