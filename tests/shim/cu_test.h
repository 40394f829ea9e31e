/*
 * What the interposer's and the stand-in's test programs share: CU() stops the program at a
 * failed driver call (naming it and its result), CHECK() records a failed check in g_fail,
 * which the including program defines, and cu_test_open() makes the device's primary context
 * current and loads a module.
 */
#ifndef GMX_TESTS_SHIM_CU_TEST_H
#define GMX_TESTS_SHIM_CU_TEST_H

#include <cuda.h>

#include <stdio.h>
#include <stdlib.h>

#define CHECK(cond)                                                                                          \
	do {                                                                                                 \
		if (!(cond)) {                                                                               \
			fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond);             \
			g_fail = 1;                                                                          \
		}                                                                                            \
	} while (0)
#define CU(call)                                                                                             \
	do {                                                                                                 \
		CUresult r_ = (call);                                                                        \
		if (r_ != CUDA_SUCCESS) {                                                                    \
			fprintf(stderr, "%s:%d: %s returned %d\n", __FILE__, __LINE__, #call, (int)r_);      \
			exit(1);                                                                             \
		}                                                                                            \
	} while (0)

/* Initialises the driver, makes device 0's primary context current (*ctx) and loads the
 * module text (*mod); exits on failure. */
static inline void cu_test_open(const char *module, CUcontext *ctx, CUmodule *mod)
{
	CUdevice dev;
	CU(cuInit(0));
	CU(cuDeviceGet(&dev, 0));
	CU(cuDevicePrimaryCtxRetain(ctx, dev));
	CU(cuCtxSetCurrent(*ctx));
	CU(cuModuleLoadData(mod, module));
}

/* cu_test_open, then the module's kernel `name` (*f) and a non-blocking stream (*s). */
static inline void cu_test_open_stream(const char *module, const char *name, CUcontext *ctx, CUmodule *mod,
				       CUfunction *f, CUstream *s)
{
	cu_test_open(module, ctx, mod);
	CU(cuModuleGetFunction(f, *mod, name));
	CU(cuStreamCreate(s, CU_STREAM_NON_BLOCKING));
}

#endif
