/*
 * A fake CUDA driver for tests/shim/shimtest_images.c: enough of the driver API for the
 * interposer's queue (a context, events that complete at once) and module, library and
 * kernel handles that only carry a name. It never reads an image: what the interposer learns,
 * it learns from its own parser. Each launch is logged (FAKECUDA_LOG) with a hash of each
 * parameter's bytes, sized by the kernels' known layouts below, so the test can check that
 * the values the program passed are what reached the driver.
 * Built twice: with FAKE_FUNCINFO (a 12.4+ driver: cuFuncGetName/ParamInfo, cuKernelGet*;
 * FAKECUDA_LIE=1 makes it misdescribe one kernel) and without (a 12.2 driver).
 */
#define _GNU_SOURCE
#include <cuda.h>

#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define EXPORT __attribute__((visibility("default")))

typedef struct handle {
	char kind; /* 'm' module, 'l' library, 'f' function, 'k' kernel */
	char name[128];
	struct handle *next; /* every handle ever made, freed when the program ends */
} handle_t;

static handle_t *g_handles;
static pthread_mutex_t g_handles_lock = PTHREAD_MUTEX_INITIALIZER;

static const struct {
	const char *name;
	int n;
	size_t off[6], size[6];
} g_kernels[] = {
    {"_Z6vecaddPKfS0_Pfi", 4, {0, 8, 16, 24}, {8, 8, 8, 4}},
    {"_Z5mixedcs1S3A16dy", 6, {0, 2, 8, 32, 48, 56}, {1, 2, 24, 16, 8, 8}},
    {"cfun", 2, {0, 8}, {4, 8}},
    {"_Z3big3Bigi", 2, {0, 5000}, {5000, 4}},
    {"nowhere", 1, {0}, {8}},
};
#define N_KERNELS (sizeof g_kernels / sizeof g_kernels[0])

static int layout_of(const char *name)
{
	for (size_t i = 0; i < N_KERNELS; i++)
		if (strcmp(g_kernels[i].name, name) == 0)
			return (int)i;
	return -1;
}

static handle_t *handle(char kind, const char *name)
{
	handle_t *h = calloc(1, sizeof *h);
	if (!h)
		abort(); /* a test driver: no way to report it through every caller */
	h->kind = kind;
	snprintf(h->name, sizeof h->name, "%s", name ? name : "");
	pthread_mutex_lock(&g_handles_lock);
	h->next = g_handles;
	g_handles = h;
	pthread_mutex_unlock(&g_handles_lock);
	return h;
}

/* Handles outlive unloads (as the real driver's may): they are freed only at exit, so that
 * LeakSanitizer sees what the interposer leaks and not what this fake keeps on purpose. */
__attribute__((destructor)) static void free_handles(void)
{
	pthread_mutex_lock(&g_handles_lock);
	while (g_handles) {
		handle_t *h = g_handles;
		g_handles = h->next;
		free(h);
	}
	pthread_mutex_unlock(&g_handles_lock);
}

static void logf_(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void logf_(const char *fmt, ...)
{
	const char *path = getenv("FAKECUDA_LOG");
	FILE *f = path ? fopen(path, "a") : NULL;
	if (!f)
		return;
	va_list ap;
	va_start(ap, fmt);
	vfprintf(f, fmt, ap);
	va_end(ap);
	fclose(f);
}

EXPORT CUresult cuInit(unsigned flags)
{
	return flags ? CUDA_ERROR_INVALID_VALUE : CUDA_SUCCESS;
}
EXPORT CUresult cuDriverGetVersion(int *v)
{
#ifdef FAKE_FUNCINFO
	*v = 13000;
#else
	*v = 12020;
#endif
	return CUDA_SUCCESS;
}
static int g_ctx_obj;
EXPORT CUresult cuCtxGetCurrent(CUcontext *c)
{
	*c = (CUcontext)&g_ctx_obj;
	return CUDA_SUCCESS;
}
EXPORT CUresult cuCtxSetCurrent(CUcontext c)
{
	return c == (CUcontext)&g_ctx_obj ? CUDA_SUCCESS : CUDA_ERROR_INVALID_CONTEXT;
}
EXPORT CUresult cuCtxSynchronize(void)
{
	return CUDA_SUCCESS;
}
EXPORT CUresult cuEventCreate(CUevent *e, unsigned flags)
{
	*e = (CUevent)handle('e', "event");
	return CUDA_SUCCESS;
}
EXPORT CUresult cuEventRecord(CUevent e, CUstream s)
{
	return CUDA_SUCCESS;
}
EXPORT CUresult cuEventQuery(CUevent e)
{
	return CUDA_SUCCESS;
}
EXPORT CUresult cuEventSynchronize(CUevent e)
{
	return CUDA_SUCCESS;
}
EXPORT CUresult cuEventDestroy_v2(CUevent e)
{
	free(e);
	return CUDA_SUCCESS;
}
EXPORT CUresult cuStreamSynchronize(CUstream s)
{
	return CUDA_SUCCESS;
}
EXPORT CUresult cuStreamQuery(CUstream s)
{
	return CUDA_SUCCESS;
}

EXPORT CUresult cuModuleLoadData(CUmodule *m, const void *image)
{
	*m = (CUmodule)handle('m', NULL);
	return CUDA_SUCCESS;
}
EXPORT CUresult cuLibraryLoadData(CUlibrary *l, const void *code, CUjit_option *o, void **ov, unsigned no,
				  CUlibraryOption *lo, void **lov, unsigned nlo)
{
	*l = (CUlibrary)handle('l', NULL);
	return CUDA_SUCCESS;
}
EXPORT CUresult cuModuleGetFunction(CUfunction *f, CUmodule m, const char *name)
{
	if (!m || ((handle_t *)m)->kind != 'm')
		return CUDA_ERROR_INVALID_HANDLE;
	*f = (CUfunction)handle('f', name);
	return CUDA_SUCCESS;
}
EXPORT CUresult cuLibraryGetKernel(CUkernel *k, CUlibrary l, const char *name)
{
	if (!l || ((handle_t *)l)->kind != 'l')
		return CUDA_ERROR_INVALID_HANDLE;
	*k = (CUkernel)handle('k', name);
	return CUDA_SUCCESS;
}
EXPORT CUresult cuKernelGetFunction(CUfunction *f, CUkernel k)
{
	*f = (CUfunction)handle('f', ((handle_t *)k)->name);
	return CUDA_SUCCESS;
}
EXPORT CUresult cuLibraryGetModule(CUmodule *m, CUlibrary l)
{
	*m = (CUmodule)handle('m', NULL);
	return CUDA_SUCCESS;
}
EXPORT CUresult cuModuleUnload(CUmodule m)
{
	return CUDA_SUCCESS;
}
EXPORT CUresult cuLibraryUnload(CUlibrary l)
{
	return CUDA_SUCCESS;
}

EXPORT CUresult cuLaunchKernel(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,
			       unsigned bz, unsigned shmem, CUstream s, void **params, void **extra)
{
	handle_t *h = (handle_t *)f;
	if (!h || (h->kind != 'f' && h->kind != 'k'))
		return CUDA_ERROR_INVALID_HANDLE;
	int k = layout_of(h->name);
	char line[512];
	int n = snprintf(line, sizeof line, "launch %c %s", h->kind, h->name);
	for (int i = 0; k >= 0 && params && i < g_kernels[k].n; i++) {
		uint64_t x = 1469598103934665603ull;
		for (size_t b = 0; b < g_kernels[k].size[i]; b++)
			x = (x ^ ((const unsigned char *)params[i])[b]) * 1099511628211ull;
		n += snprintf(line + n, sizeof line - (size_t)n, " %016llx", (unsigned long long)x);
	}
	logf_("%s\n", line);
	return CUDA_SUCCESS;
}

/* CUDART_INTERFACE: word 0 its size; slot 6 loads a module from a fatbin wrapper. */
static CUresult load6(CUmodule *m, const void *wrapper, void *a, void *b, unsigned c)
{
	*m = (CUmodule)handle('m', NULL);
	return CUDA_SUCCESS;
}
static CUresult unused_slot(void)
{
	return CUDA_ERROR_NOT_SUPPORTED;
}
static void *g_cudart[10] = {
    (void *)(10 * sizeof(void *)), (void *)unused_slot, (void *)unused_slot, (void *)unused_slot,
    (void *)unused_slot,	   (void *)unused_slot, (void *)load6,	     (void *)unused_slot,
    (void *)unused_slot,	   (void *)unused_slot};
static const unsigned char g_cudart_id[16] = {0x6b, 0xd5, 0xfb, 0x6c, 0x5b, 0xf4, 0xe7, 0x4a,
					      0x89, 0x87, 0xd9, 0x39, 0x12, 0xfd, 0x9d, 0xf9};
EXPORT CUresult cuGetExportTable(const void **t, const CUuuid *id)
{
	if (memcmp(id->bytes, g_cudart_id, 16) != 0)
		return CUDA_ERROR_NOT_SUPPORTED;
	*t = g_cudart;
	return CUDA_SUCCESS;
}

#ifdef FAKE_FUNCINFO
EXPORT CUresult cuFuncGetName(const char **name, CUfunction f)
{
	handle_t *h = (handle_t *)f;
	if (!h || h->kind != 'f') /* a kernel handle: only cuKernelGetName knows it */
		return CUDA_ERROR_INVALID_HANDLE;
	*name = h->name;
	return CUDA_SUCCESS;
}
static CUresult param_info(handle_t *h, size_t i, size_t *off, size_t *size)
{
	int k = layout_of(h->name);
	if (k < 0 || i >= (size_t)g_kernels[k].n)
		return CUDA_ERROR_INVALID_VALUE;
	*off = g_kernels[k].off[i];
	*size = g_kernels[k].size[i];
	if (getenv("FAKECUDA_LIE") && strcmp(h->name, "cfun") == 0 && i == 1)
		*off = 4; /* a driver and an image that disagree: verify must say so */
	return CUDA_SUCCESS;
}
EXPORT CUresult cuFuncGetParamInfo(CUfunction f, size_t i, size_t *off, size_t *size)
{
	handle_t *h = (handle_t *)f;
	return !h || h->kind != 'f' ? CUDA_ERROR_INVALID_HANDLE : param_info(h, i, off, size);
}
EXPORT CUresult cuKernelGetName(const char **name, CUkernel k)
{
	handle_t *h = (handle_t *)k;
	if (!h || h->kind != 'k')
		return CUDA_ERROR_INVALID_HANDLE;
	*name = h->name;
	return CUDA_SUCCESS;
}
EXPORT CUresult cuKernelGetParamInfo(CUkernel k, size_t i, size_t *off, size_t *size)
{
	handle_t *h = (handle_t *)k;
	return !h || h->kind != 'k' ? CUDA_ERROR_INVALID_HANDLE : param_info(h, i, off, size);
}
#endif
