/*
 * The interposer reached by dlopen("libcuda.so.1") + dlsym, as programs that load the driver
 * at run time do (this program does not link against any libcuda).
 */
#define _GNU_SOURCE
#include <cuda.h>

#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

#define CHECK(cond)                                                                                          \
	do {                                                                                                 \
		if (!(cond)) {                                                                               \
			fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond);             \
			return 1;                                                                            \
		}                                                                                            \
	} while (0)

typedef CUresult (*launch_fn)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
			      unsigned, CUstream, void **, void **);

int main(void)
{
	void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
	CHECK(h != NULL);
	Dl_info info;
	CHECK(dladdr(dlsym(h, "cuInit"), &info) && strstr(info.dli_fname, "shim") != NULL);
	CUresult (*init)(unsigned) = (CUresult(*)(unsigned))dlsym(h, "cuInit");
	CUresult (*retain)(CUcontext *, CUdevice) =
	    (CUresult(*)(CUcontext *, CUdevice))dlsym(h, "cuDevicePrimaryCtxRetain");
	CUresult (*setcur)(CUcontext) = (CUresult(*)(CUcontext))dlsym(h, "cuCtxSetCurrent");
	CUresult (*load)(CUmodule *, const void *) =
	    (CUresult(*)(CUmodule *, const void *))dlsym(h, "cuModuleLoadData");
	CUresult (*getfn)(CUfunction *, CUmodule, const char *) =
	    (CUresult(*)(CUfunction *, CUmodule, const char *))dlsym(h, "cuModuleGetFunction");
	launch_fn lk = (launch_fn)dlsym(h, "cuLaunchKernel");
	CUresult (*csync)(void) = (CUresult(*)(void))dlsym(h, "cuCtxSynchronize");
	CHECK(init && retain && setcur && load && getfn && lk && csync);
	CUcontext ctx;
	CUmodule mod;
	CUfunction f;
	CHECK(init(0) == CUDA_SUCCESS);
	CHECK(retain(&ctx, 0) == CUDA_SUCCESS);
	CHECK(setcur(ctx) == CUDA_SUCCESS);
	CHECK(load(&mod, "kernel marker 10 i32\n") == CUDA_SUCCESS);
	CHECK(getfn(&f, mod, "marker") == CUDA_SUCCESS);
	for (int i = 0; i < 5; i++) {
		void *args[] = {&i};
		CHECK(lk(f, 1, 1, 1, 1, 1, 1, 0, NULL, args, NULL) == CUDA_SUCCESS);
	}
	CHECK(csync() == CUDA_SUCCESS);
	printf("dlopen: ok\n");
	return 0;
}
