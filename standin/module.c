/* The stand-in driver: text modules (docs/standin.md), their kernels, and launches; images
 * (fatbins, cubins, PTX) and libraries are in library.c. */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "standin_internal.h"

/* ---- modules: the text format of docs/standin.md ---- */

/* Parses "p,i32,f64,b16" into the function's layout (natural alignment, as nvcc lays out). */
static int parse_params(struct CUfunc_st *f, char *spec)
{
	f->nparams = 0;
	if (!spec || strcmp(spec, "-") == 0)
		return 0;
	size_t off = 0;
	for (char *tok = strtok(spec, ","); tok; tok = strtok(NULL, ",")) {
		size_t size;
		int ptr = 0, ext_arg = -1;
		uint64_t ext_mul = 1;
		if (strcmp(tok, "p") == 0) {
			size = 8;
			ptr = 1;
		} else if (strncmp(tok, "p@", 2) == 0) {
			char *end;
			long k = strtol(tok + 2, &end, 10);
			if (end == tok + 2 || k < 0 || k >= MAX_PARAMS)
				return -1;
			if (*end == '*') {
				char *e2;
				unsigned long long mul = strtoull(end + 1, &e2, 10);
				if (e2 == end + 1 || mul == 0 || mul > (1ull << 32))
					return -1;
				ext_mul = mul;
				end = e2;
			}
			if (*end)
				return -1;
			size = 8;
			ptr = 1;
			ext_arg = (int)k;
		} else if (!strcmp(tok, "i32") || !strcmp(tok, "u32") || !strcmp(tok, "f32")) {
			size = 4;
		} else if (!strcmp(tok, "i64") || !strcmp(tok, "u64") || !strcmp(tok, "f64")) {
			size = 8;
		} else if (!strcmp(tok, "i8") || !strcmp(tok, "u8")) {
			size = 1;
		} else if (!strcmp(tok, "i16") || !strcmp(tok, "u16")) {
			size = 2;
		} else if (tok[0] == 'b' && atoi(tok + 1) > 0) {
			size = (size_t)atoi(tok + 1);
		} else {
			return -1;
		}
		if (f->nparams == MAX_PARAMS)
			return -1;
		size_t align = size >= 8 ? 8 : size >= 4 ? 4 : size >= 2 ? 2 : 1;
		off = (off + align - 1) / align * align;
		f->off[f->nparams] = off;
		f->size[f->nparams] = size;
		f->ptr[f->nparams] = ptr;
		f->ext_arg[f->nparams] = ext_arg;
		f->ext_mul[f->nparams] = ext_mul;
		f->nparams++;
		off += size;
	}
	/* An extent names an integer parameter of at most 8 bytes. */
	for (int i = 0; i < f->nparams; i++) {
		int k = f->ext_arg[i];
		if (k >= 0 && (k >= f->nparams || f->ptr[k] || f->size[k] > 8))
			return -1;
	}
	return 0;
}

CUresult si__module_load_text(CUmodule *module, const char *text, const char *origin)
{
	REQUIRE_INIT();
	if (!module || !text)
		return CUDA_ERROR_INVALID_VALUE;
	pthread_mutex_lock(&S.lock);
	struct CUmod_st *m = NULL;
	for (int i = 0; i < MAX_MOD && !m; i++)
		if (!S.mods[i].in_use)
			m = &S.mods[i];
	if (!m) {
		pthread_mutex_unlock(&S.lock);
		return CUDA_ERROR_OUT_OF_MEMORY;
	}
	char *copy = strdup(text);
	if (!copy) {
		pthread_mutex_unlock(&S.lock);
		return CUDA_ERROR_OUT_OF_MEMORY;
	}
	CUresult r = CUDA_SUCCESS;
	int lineno = 0, nk = 0;
	char *save = NULL;
	for (char *line = strtok_r(copy, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		lineno++;
		char kw[16], name[SI_NAME], spec[512] = "-";
		double us;
		while (*line == ' ' || *line == '\t')
			line++;
		if (*line == '#' || *line == '\0' || *line == '\r')
			continue;
		int n = sscanf(line, "%15s %47s %lf %511s", kw, name, &us, spec);
		struct CUfunc_st *f = NULL;
		for (int i = 0; i < MAX_FN && !f; i++)
			if (!S.fns[i].in_use)
				f = &S.fns[i];
		if (n < 3 || strcmp(kw, "kernel") != 0 || us < 0 || !f) {
			fprintf(stderr,
				"gpumux stand-in: %s:%d: expected \"kernel NAME DURATION_US [PARAMS]\"%s\n",
				origin, lineno, f ? "" : " (too many kernels)");
			r = CUDA_ERROR_INVALID_IMAGE;
			break;
		}
		memset(f, 0, sizeof *f);
		snprintf(f->name, sizeof f->name, "%s", name);
		f->dur_ns = (int64_t)(us * 1000.0);
		f->mod = m;
		if (parse_params(f, spec) != 0) {
			fprintf(stderr,
				"gpumux stand-in: %s:%d: bad parameter list \"%s\" (expected e.g. "
				"p,p,i32 or -)\n",
				origin, lineno, spec);
			r = CUDA_ERROR_INVALID_IMAGE;
			break;
		}
		f->in_use = 1;
		nk++;
	}
	free(copy);
	if (r != CUDA_SUCCESS) {
		for (int i = 0; i < MAX_FN; i++)
			if (S.fns[i].mod == m)
				S.fns[i].in_use = 0;
	} else {
		m->in_use = 1;
		*module = m;
	}
	pthread_mutex_unlock(&S.lock);
	return r;
}

SI_EXPORT CUresult CUDAAPI cuModuleLoadData(CUmodule *module, const void *image)
{
	return si__module_load_image(module, image, "(image)");
}

SI_EXPORT CUresult CUDAAPI cuModuleLoad(CUmodule *module, const char *fname)
{
	return si__module_load_file(module, fname);
}

SI_EXPORT CUresult CUDAAPI cuModuleUnload(CUmodule hmod)
{
	REQUIRE_INIT();
	pthread_mutex_lock(&S.lock);
	struct CUmod_st *m = si__mod_of(hmod);
	if (!m) {
		pthread_mutex_unlock(&S.lock);
		return CUDA_ERROR_INVALID_HANDLE;
	}
	for (int i = 0; i < MAX_FN; i++)
		if (S.fns[i].in_use && S.fns[i].mod == m)
			S.fns[i].in_use = 0;
	m->in_use = 0;
	pthread_mutex_unlock(&S.lock);
	return CUDA_SUCCESS;
}

SI_EXPORT CUresult CUDAAPI cuModuleGetFunction(CUfunction *hfunc, CUmodule hmod, const char *name)
{
	REQUIRE_INIT();
	if (!hfunc || !name)
		return CUDA_ERROR_INVALID_VALUE;
	if (!si__mod_of(hmod))
		return CUDA_ERROR_INVALID_HANDLE;
	for (int i = 0; i < MAX_FN; i++)
		if (S.fns[i].in_use && S.fns[i].mod == hmod && strcmp(S.fns[i].name, name) == 0) {
			*hfunc = &S.fns[i];
			return CUDA_SUCCESS;
		}
	return CUDA_ERROR_NOT_FOUND;
}

SI_EXPORT CUresult CUDAAPI cuFuncGetName(const char **name, CUfunction hfunc)
{
	REQUIRE_INIT();
	if (!name)
		return CUDA_ERROR_INVALID_VALUE;
	struct CUfunc_st *f = si__func_of(hfunc);
	if (!f)
		return CUDA_ERROR_INVALID_HANDLE;
	*name = f->name;
	return CUDA_SUCCESS;
}

SI_EXPORT CUresult CUDAAPI cuFuncGetParamInfo(CUfunction func, size_t paramIndex, size_t *paramOffset,
					      size_t *paramSize)
{
	REQUIRE_INIT();
	struct CUfunc_st *f = si__func_of(func);
	if (!f)
		return CUDA_ERROR_INVALID_HANDLE;
	if (paramIndex >= (size_t)f->nparams)
		return CUDA_ERROR_INVALID_VALUE;
	if (paramOffset)
		*paramOffset = f->off[paramIndex];
	if (paramSize)
		*paramSize = f->size[paramIndex];
	return CUDA_SUCCESS;
}

/* ---- launches ---- */

/* Duration of a launch: the module's figure plus demand faults on non-resident managed memory
 * its pointer parameters reach (whole allocation, migrated by the faults). */
int64_t si__launch_cost(struct CUfunc_st *f, void **params)
{
	int64_t d = f->dur_ns;
	if (!params)
		return d;
	pthread_mutex_lock(&S.lock);
	for (int i = 0; i < f->nparams; i++) {
		if (!f->ptr[i] || !params[i])
			continue;
		uintptr_t p;
		memcpy(&p, params[i], sizeof p);
		alloc_t *a = si__alloc_find(p);
		if (a && a->kind == KIND_MANAGED) {
			size_t c0 = 0, c1 = si__chunks(a->size);
			int k = f->ext_arg[i];
			if (k >= 0 && params[k]) {
				uint64_t n = 0;
				memcpy(&n, params[k], f->size[k]); /* little-endian: the low bytes */
				uint64_t len = n * f->ext_mul[i], off = p - a->base;
				uint64_t end = len > a->size - off ? a->size : off + len;
				c0 = off / CHUNK;
				c1 = (end + CHUNK - 1) / CHUNK;
			}
			uint64_t moved = si__make_resident(a, c0, c1);
			d += (int64_t)((moved + 65535) / 65536) * FAULT_NS_PER_64K;
		}
	}
	pthread_mutex_unlock(&S.lock);
	return d;
}

static CUresult launch(CUfunction fn, CUstream h, int ptsz, void **params, void **extra, unsigned gx,
		       unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz)
{
	REQUIRE_CTX(c);
	(void)c;
	struct CUfunc_st *f = si__func_of(fn);
	if (!f)
		return CUDA_ERROR_INVALID_HANDLE;
	if (!gx || !gy || !gz || !bx || !by || !bz || (uint64_t)bx * by * bz > 1024)
		return CUDA_ERROR_INVALID_VALUE;
	if (f->nparams > 0 && !params && !extra)
		return CUDA_ERROR_INVALID_VALUE;
	int si;
	CUresult r = si__resolve_stream(h, ptsz, &si);
	if (r != CUDA_SUCCESS)
		return r;
	if (si__capturing(si))
		return si__capture(
		    si, &(si_cap_t){.kind = SI_CAP_KERNEL, .f = f, .grid = {gx, gy, gz}, .block = {bx, by, bz}}, params);
	si_submit_t s = {
	    .kind = SI_K_KERNEL, .stream = si, .dur_ns = si__launch_cost(f, params), .name = f->name};
	if (!si_submit(&s))
		return CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES;
	si__record_kernel(f, params, si, f->dur_ns, (const unsigned[3]){gx, gy, gz}, (const unsigned[3]){bx, by, bz},
			  0);
	return CUDA_SUCCESS;
}

SI_EXPORT CUresult CUDAAPI cuLaunchKernel(CUfunction f, unsigned int gridDimX, unsigned int gridDimY,
					  unsigned int gridDimZ, unsigned int blockDimX,
					  unsigned int blockDimY, unsigned int blockDimZ,
					  unsigned int sharedMemBytes, CUstream hStream, void **kernelParams,
					  void **extra)
{
	(void)sharedMemBytes;
	return launch(f, hStream, 0, kernelParams, extra, gridDimX, gridDimY, gridDimZ, blockDimX, blockDimY,
		      blockDimZ);
}

SI_EXPORT CUresult CUDAAPI cuLaunchKernel_ptsz(CUfunction f, unsigned int gridDimX, unsigned int gridDimY,
					       unsigned int gridDimZ, unsigned int blockDimX,
					       unsigned int blockDimY, unsigned int blockDimZ,
					       unsigned int sharedMemBytes, CUstream hStream,
					       void **kernelParams, void **extra)
{
	(void)sharedMemBytes;
	return launch(f, hStream, 1, kernelParams, extra, gridDimX, gridDimY, gridDimZ, blockDimX, blockDimY,
		      blockDimZ);
}

SI_EXPORT CUresult CUDAAPI cuLaunchCooperativeKernel(CUfunction f, unsigned int gridDimX,
						     unsigned int gridDimY, unsigned int gridDimZ,
						     unsigned int blockDimX, unsigned int blockDimY,
						     unsigned int blockDimZ, unsigned int sharedMemBytes,
						     CUstream hStream, void **kernelParams)
{
	(void)sharedMemBytes;
	return launch(f, hStream, 0, kernelParams, NULL, gridDimX, gridDimY, gridDimZ, blockDimX, blockDimY,
		      blockDimZ);
}

SI_EXPORT CUresult CUDAAPI cuLaunchCooperativeKernel_ptsz(CUfunction f, unsigned int gridDimX,
							  unsigned int gridDimY, unsigned int gridDimZ,
							  unsigned int blockDimX, unsigned int blockDimY,
							  unsigned int blockDimZ, unsigned int sharedMemBytes,
							  CUstream hStream, void **kernelParams)
{
	(void)sharedMemBytes;
	return launch(f, hStream, 1, kernelParams, NULL, gridDimX, gridDimY, gridDimZ, blockDimX, blockDimY,
		      blockDimZ);
}

SI_EXPORT CUresult CUDAAPI cuLaunchKernelEx(const CUlaunchConfig *config, CUfunction f, void **kernelParams,
					    void **extra)
{
	if (!config)
		return CUDA_ERROR_INVALID_VALUE;
	return launch(f, config->hStream, 0, kernelParams, extra, config->gridDimX, config->gridDimY,
		      config->gridDimZ, config->blockDimX, config->blockDimY, config->blockDimZ);
}

SI_EXPORT CUresult CUDAAPI cuLaunchKernelEx_ptsz(const CUlaunchConfig *config, CUfunction f,
						 void **kernelParams, void **extra)
{
	if (!config)
		return CUDA_ERROR_INVALID_VALUE;
	return launch(f, config->hStream, 1, kernelParams, extra, config->gridDimX, config->gridDimY,
		      config->gridDimZ, config->blockDimX, config->blockDimY, config->blockDimZ);
}

static CUresult hostfn(CUstream h, int ptsz, CUhostFn fn, void *user)
{
	if (!fn)
		return CUDA_ERROR_INVALID_VALUE;
	int si;
	CUresult r = si__resolve_stream(h, ptsz, &si);
	if (r != CUDA_SUCCESS)
		return r;
	if (si__capturing(si))
		return si__capture(si, &(si_cap_t){.kind = SI_CAP_HOSTFN, .hostfn = fn, .user = user}, NULL);
	si_submit_t s = {.kind = SI_K_HOSTFN, .stream = si, .hostfn = fn, .user = user, .name = "hostfn"};
	return si_submit(&s) ? CUDA_SUCCESS : CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES;
}

SI_EXPORT CUresult CUDAAPI cuLaunchHostFunc(CUstream hStream, CUhostFn fn, void *userData)
{
	return hostfn(hStream, 0, fn, userData);
}

SI_EXPORT CUresult CUDAAPI cuLaunchHostFunc_ptsz(CUstream hStream, CUhostFn fn, void *userData)
{
	return hostfn(hStream, 1, fn, userData);
}
