/*
 * The stand-in driver: modules and libraries from real images (fatbin wrappers, fatbins, ELF
 * cubins, PTX), read with the project's one fatbin parser (include/gpumux/fatbin.h), and the
 * cuLibrary / cuKernel calls the CUDA 12+ runtime uses. A kernel's duration comes from the
 * file GPUMUX_STANDIN_KERNEL_TIMES ("NAME MICROSECONDS" lines; "* US" sets the default), else
 * SI_DEFAULT_KERNEL_US. A library is a module; a CUkernel is the same handle as its CUfunction.
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpumux/fatbin.h"
#include "standin_internal.h"

/* ---- kernel durations ---- */

typedef struct {
	char *name;
	double us;
} ktime_t;

static ktime_t *g_times;
static size_t g_ntimes;
static double g_default_us = SI_DEFAULT_KERNEL_US;
static pthread_once_t g_times_once = PTHREAD_ONCE_INIT;

static void times_load(void)
{
	const char *path = getenv("GPUMUX_STANDIN_KERNEL_TIMES");
	if (!path || !*path)
		return;
	FILE *fp = fopen(path, "r");
	if (!fp) {
		fprintf(stderr,
			"gpumux stand-in: GPUMUX_STANDIN_KERNEL_TIMES=%s cannot be opened; every kernel "
			"takes the default %.0f us\n",
			path, g_default_us);
		return;
	}
	char line[1024];
	int lineno = 0;
	while (fgets(line, sizeof line, fp)) {
		lineno++;
		char name[900];
		double us;
		char *p = line + strspn(line, " \t");
		if (*p == '#' || *p == '\n' || *p == '\0')
			continue;
		if (sscanf(p, "%899s %lf", name, &us) != 2 || us < 0) {
			fprintf(stderr, "gpumux stand-in: %s:%d: expected \"KERNEL_NAME MICROSECONDS\"\n", path,
				lineno);
			continue;
		}
		if (strcmp(name, "*") == 0) {
			g_default_us = us;
			continue;
		}
		ktime_t *n = realloc(g_times, (g_ntimes + 1) * sizeof *n);
		if (!n)
			break;
		g_times = n;
		g_times[g_ntimes].name = strdup(name);
		g_times[g_ntimes].us = us;
		if (g_times[g_ntimes].name)
			g_ntimes++;
	}
	fclose(fp);
}

/* Duration of a kernel of that (mangled) name, ns. */
static int64_t kernel_ns(const char *name)
{
	pthread_once(&g_times_once, times_load);
	for (size_t i = 0; i < g_ntimes; i++)
		if (strcmp(g_times[i].name, name) == 0)
			return (int64_t)(g_times[i].us * 1000.0);
	return (int64_t)(g_default_us * 1000.0);
}

/* ---- images ---- */

/* Nonzero when the image is one the fatbin parser reads (not a text module). */
static int is_binary_image(const void *image)
{
	uint32_t magic;
	memcpy(&magic, image, 4);
	if (magic == GMX_FATBIN_WRAPPER_MAGIC || magic == GMX_FATBIN_MAGIC || memcmp(image, "\x7f"
											    "ELF",
										     4) == 0)
		return 1;
	/* PTX text: a module of the text format never declares an .entry */
	return strstr((const char *)image, ".entry") != NULL;
}

CUresult si__module_load_image(CUmodule *module, const void *image, const char *origin)
{
	REQUIRE_INIT();
	if (!module || !image)
		return CUDA_ERROR_INVALID_VALUE;
	if (!is_binary_image(image))
		return si__module_load_text(module, image, origin);
	char err[256] = "";
	gmx_fatbin_t *fb = NULL;
	if (gmx_fatbin_parse(image, SIZE_MAX, &fb, err, sizeof err) != 0) {
		fprintf(stderr, "gpumux stand-in: %s: the image cannot be read: %s\n", origin, err);
		return CUDA_ERROR_INVALID_IMAGE;
	}
	pthread_mutex_lock(&S.lock);
	struct CUmod_st *m = NULL;
	for (int i = 0; i < MAX_MOD && !m; i++)
		if (!S.mods[i].in_use)
			m = &S.mods[i];
	CUresult r = m ? CUDA_SUCCESS : CUDA_ERROR_OUT_OF_MEMORY;
	for (size_t k = 0; r == CUDA_SUCCESS && k < gmx_fatbin_count(fb); k++) {
		const gmx_kernel_info_t *ki = gmx_fatbin_kernel(fb, k);
		struct CUfunc_st *f = NULL;
		for (int i = 0; i < MAX_FN && !f; i++)
			if (!S.fns[i].in_use)
				f = &S.fns[i];
		if (!f || ki->n_params > MAX_PARAMS || strlen(ki->name) >= sizeof f->name) {
			fprintf(stderr, "gpumux stand-in: %s: kernel %s: %s\n", origin, ki->name,
				!f			     ? "too many kernels (1024 per process)"
				: ki->n_params > MAX_PARAMS ? "more than 64 parameters"
							    : "name longer than 255 characters");
			r = CUDA_ERROR_OUT_OF_MEMORY;
			break;
		}
		memset(f, 0, sizeof *f);
		snprintf(f->name, sizeof f->name, "%s", ki->name);
		f->mod = m;
		f->dur_ns = kernel_ns(ki->name);
		f->nparams = (int)ki->n_params;
		for (uint32_t p = 0; p < ki->n_params; p++) {
			f->off[p] = ki->params[p].offset;
			f->size[p] = ki->params[p].size;
			/* any 8-byte parameter may be a pointer; launch_cost checks its value */
			f->ptr[p] = ki->params[p].size == 8;
			f->ext_arg[p] = -1;
			f->ext_mul[p] = 1;
		}
		f->in_use = 1;
	}
	if (r != CUDA_SUCCESS) {
		for (int i = 0; m && i < MAX_FN; i++)
			if (S.fns[i].mod == m)
				S.fns[i].in_use = 0;
	} else {
		m->in_use = 1;
		*module = m;
	}
	pthread_mutex_unlock(&S.lock);
	gmx_fatbin_free(fb);
	return r;
}

SI_EXPORT CUresult CUDAAPI cuModuleLoadDataEx(CUmodule *module, const void *image, unsigned int numOptions,
					      CUjit_option *options, void **optionValues)
{
	(void)numOptions;
	(void)options;
	(void)optionValues;
	return si__module_load_image(module, image, "cuModuleLoadDataEx");
}

SI_EXPORT CUresult CUDAAPI cuModuleLoadFatBinary(CUmodule *module, const void *fatCubin)
{
	return si__module_load_image(module, fatCubin, "cuModuleLoadFatBinary");
}

SI_EXPORT CUresult CUDAAPI cuModuleGetLoadingMode(CUmoduleLoadingMode *mode)
{
	if (!mode)
		return CUDA_ERROR_INVALID_VALUE;
	*mode = CU_MODULE_EAGER_LOADING;
	return CUDA_SUCCESS;
}

/* ---- libraries ---- */

SI_EXPORT CUresult CUDAAPI cuLibraryLoadData(CUlibrary *library, const void *code, CUjit_option *jitOptions,
					     void **jitOptionsValues, unsigned int numJitOptions,
					     CUlibraryOption *libraryOptions, void **libraryOptionValues,
					     unsigned int numLibraryOptions)
{
	(void)jitOptions;
	(void)jitOptionsValues;
	(void)numJitOptions;
	(void)libraryOptions;
	(void)libraryOptionValues;
	(void)numLibraryOptions;
	if (!library)
		return CUDA_ERROR_INVALID_VALUE;
	return si__module_load_image((CUmodule *)library, code, "cuLibraryLoadData");
}

/* Reads a whole file, NUL-terminated; NULL with *err set when it cannot. */
static char *read_file(const char *path, CUresult *err)
{
	FILE *fp = fopen(path, "rb");
	if (!fp) {
		*err = CUDA_ERROR_FILE_NOT_FOUND;
		return NULL;
	}
	char *buf = NULL;
	size_t n = 0, cap = 0, got;
	do {
		if (n + 65536 + 1 > cap) {
			cap = cap * 2 + 65536 + 1;
			char *nb = realloc(buf, cap);
			if (!nb) {
				free(buf);
				fclose(fp);
				*err = CUDA_ERROR_OUT_OF_MEMORY;
				return NULL;
			}
			buf = nb;
		}
		got = fread(buf + n, 1, 65536, fp);
		n += got;
	} while (got > 0);
	fclose(fp);
	buf[n] = '\0';
	if (n < 4) {
		free(buf);
		*err = CUDA_ERROR_INVALID_IMAGE;
		return NULL;
	}
	return buf;
}

CUresult si__module_load_file(CUmodule *module, const char *path)
{
	REQUIRE_INIT();
	if (!module || !path)
		return CUDA_ERROR_INVALID_VALUE;
	CUresult r = CUDA_SUCCESS;
	char *buf = read_file(path, &r);
	if (!buf)
		return r;
	r = si__module_load_image(module, buf, path);
	free(buf);
	return r;
}

SI_EXPORT CUresult CUDAAPI cuLibraryLoadFromFile(CUlibrary *library, const char *fileName,
						 CUjit_option *jitOptions, void **jitOptionsValues,
						 unsigned int numJitOptions, CUlibraryOption *libraryOptions,
						 void **libraryOptionValues, unsigned int numLibraryOptions)
{
	(void)jitOptions;
	(void)jitOptionsValues;
	(void)numJitOptions;
	(void)libraryOptions;
	(void)libraryOptionValues;
	(void)numLibraryOptions;
	return si__module_load_file((CUmodule *)library, fileName);
}

SI_EXPORT CUresult CUDAAPI cuLibraryUnload(CUlibrary library)
{
	return cuModuleUnload((CUmodule)library);
}

SI_EXPORT CUresult CUDAAPI cuLibraryGetModule(CUmodule *pMod, CUlibrary library)
{
	REQUIRE_INIT();
	if (!pMod)
		return CUDA_ERROR_INVALID_VALUE;
	if (!si__mod_of((CUmodule)library))
		return CUDA_ERROR_INVALID_HANDLE;
	*pMod = (CUmodule)library;
	return CUDA_SUCCESS;
}

SI_EXPORT CUresult CUDAAPI cuLibraryGetKernel(CUkernel *pKernel, CUlibrary library, const char *name)
{
	return cuModuleGetFunction((CUfunction *)pKernel, (CUmodule)library, name);
}

SI_EXPORT CUresult CUDAAPI cuLibraryGetKernelCount(unsigned int *count, CUlibrary lib)
{
	REQUIRE_INIT();
	if (!count)
		return CUDA_ERROR_INVALID_VALUE;
	if (!si__mod_of((CUmodule)lib))
		return CUDA_ERROR_INVALID_HANDLE;
	unsigned n = 0;
	for (int i = 0; i < MAX_FN; i++)
		n += S.fns[i].in_use && S.fns[i].mod == (struct CUmod_st *)lib;
	*count = n;
	return CUDA_SUCCESS;
}

SI_EXPORT CUresult CUDAAPI cuKernelGetFunction(CUfunction *pFunc, CUkernel kernel)
{
	REQUIRE_CTX(c);
	(void)c;
	if (!pFunc)
		return CUDA_ERROR_INVALID_VALUE;
	if (!si__func_of((CUfunction)kernel))
		return CUDA_ERROR_INVALID_HANDLE;
	*pFunc = (CUfunction)kernel;
	return CUDA_SUCCESS;
}

SI_EXPORT CUresult CUDAAPI cuKernelGetName(const char **name, CUkernel hfunc)
{
	return cuFuncGetName(name, (CUfunction)hfunc);
}

SI_EXPORT CUresult CUDAAPI cuKernelGetParamInfo(CUkernel kernel, size_t paramIndex, size_t *paramOffset,
						size_t *paramSize)
{
	return cuFuncGetParamInfo((CUfunction)kernel, paramIndex, paramOffset, paramSize);
}

/* Attributes a runtime asks before launching: realistic limits, no registers or local memory. */
static CUresult func_attr(int *pi, CUfunction_attribute attrib, CUfunction f)
{
	REQUIRE_INIT();
	if (!pi)
		return CUDA_ERROR_INVALID_VALUE;
	struct CUfunc_st *fn = si__func_of(f);
	if (!fn)
		return CUDA_ERROR_INVALID_HANDLE;
	switch (attrib) {
	case CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK:
		*pi = 1024;
		break;
	case CU_FUNC_ATTRIBUTE_NUM_REGS:
		*pi = 16;
		break;
	case CU_FUNC_ATTRIBUTE_PTX_VERSION:
	case CU_FUNC_ATTRIBUTE_BINARY_VERSION:
		*pi = 75;
		break;
	case CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES:
		*pi = 48 * 1024;
		break;
	case CU_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT:
		*pi = -1;
		break;
	default:
		*pi = 0;
		break;
	}
	return CUDA_SUCCESS;
}

SI_EXPORT CUresult CUDAAPI cuFuncGetAttribute(int *pi, CUfunction_attribute attrib, CUfunction hfunc)
{
	return func_attr(pi, attrib, hfunc);
}

SI_EXPORT CUresult CUDAAPI cuKernelGetAttribute(int *pi, CUfunction_attribute attrib, CUkernel kernel,
						CUdevice dev)
{
	(void)dev;
	return func_attr(pi, attrib, (CUfunction)kernel);
}

SI_EXPORT CUresult CUDAAPI cuFuncSetAttribute(CUfunction hfunc, CUfunction_attribute attrib, int value)
{
	(void)attrib;
	(void)value;
	REQUIRE_INIT();
	return si__func_of(hfunc) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE;
}

SI_EXPORT CUresult CUDAAPI cuKernelSetAttribute(CUfunction_attribute attrib, int val, CUkernel kernel,
						CUdevice dev)
{
	(void)dev;
	return cuFuncSetAttribute((CUfunction)kernel, attrib, val);
}

SI_EXPORT CUresult CUDAAPI cuFuncSetCacheConfig(CUfunction hfunc, CUfunc_cache config)
{
	(void)config;
	REQUIRE_INIT();
	return si__func_of(hfunc) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE;
}

SI_EXPORT CUresult CUDAAPI cuKernelSetCacheConfig(CUkernel kernel, CUfunc_cache config, CUdevice dev)
{
	(void)dev;
	return cuFuncSetCacheConfig((CUfunction)kernel, config);
}

SI_EXPORT CUresult CUDAAPI cuFuncGetModule(CUmodule *hmod, CUfunction hfunc)
{
	REQUIRE_INIT();
	if (!hmod)
		return CUDA_ERROR_INVALID_VALUE;
	struct CUfunc_st *f = si__func_of(hfunc);
	if (!f)
		return CUDA_ERROR_INVALID_HANDLE;
	*hmod = f->mod;
	return CUDA_SUCCESS;
}
