/*
 * Kernel identity from loaded images (drivers without cuFuncGetName/cuFuncGetParamInfo), on
 * the stand-in. Its module text carries the same kernels as PTX `.entry` declarations in
 * comment lines, so the interposer's parser reads them while the stand-in reads its own lines;
 * GPUMUX_SHIM_KERNEL_INFO=image makes the interposer ignore the stand-in's cuFuncGetName/
 * ParamInfo, as on a 12.2 driver. Loads through cuModuleLoadData, cuModuleLoad (a file) and
 * again after an unload; one module has no PTX, so its kernel stays unidentified. The launches'
 * parameters are distinct values; modules.sh checks the logs.
 * Usage: shimtest_modules DIR (writes DIR/module.txt)
 */
#include <cuda.h>

#include <stdio.h>
#include <stdlib.h>

#include "cu_test.h"

static const char *const MODULE_TEXT =
    "# the same kernels as PTX, for the interposer's parser:\n"
    "# .version 8.0\n"
    "# .entry fast( .param .u64 p, .param .u32 n )\n"
    "# .entry slow( .param .u64 .ptr .global .align 16 a, .param .u64 b, .param .u32 n )\n"
    "kernel fast 20 p,i32\n"
    "kernel slow 40 p,p,i32\n";
static const char *const BLIND_TEXT = "# no PTX here: the interposer cannot read this module\n"
				      "kernel blind 20 p,i32\n";

static void launch2(CUfunction f, CUstream s, CUdeviceptr p, int n)
{
	void *args[] = {&p, &n};
	CU(cuLaunchKernel(f, 1, 1, 1, 32, 1, 1, 0, s, args, NULL));
}

static void launch3(CUfunction f, CUstream s, CUdeviceptr a, CUdeviceptr b, int n)
{
	void *args[] = {&a, &b, &n};
	CU(cuLaunchKernel(f, 2, 1, 1, 64, 1, 1, 0, s, args, NULL));
}

int main(int argc, char **argv)
{
	if (argc != 2) {
		fprintf(stderr, "usage: shimtest_modules DIR\n");
		return 2;
	}
	char path[4096];
	snprintf(path, sizeof path, "%s/module.txt", argv[1]);
	FILE *f = fopen(path, "w");
	if (!f || fputs(MODULE_TEXT, f) < 0 || fclose(f) != 0) {
		perror(path);
		return 1;
	}
	CUdevice dev;
	CUcontext ctx;
	CU(cuInit(0));
	CU(cuDeviceGet(&dev, 0));
	CU(cuDevicePrimaryCtxRetain(&ctx, dev));
	CU(cuCtxSetCurrent(ctx));
	CUstream s;
	CU(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
	CUdeviceptr a, b;
	CU(cuMemAlloc(&a, 4096));
	CU(cuMemAlloc(&b, 4096));

	CUmodule m1, m2, m3;
	CUfunction fast, slow, fast2, blind;
	CU(cuModuleLoadData(&m1, MODULE_TEXT));
	CU(cuModuleGetFunction(&fast, m1, "fast"));
	CU(cuModuleGetFunction(&slow, m1, "slow"));
	CU(cuModuleLoad(&m2, path));
	CU(cuModuleGetFunction(&fast2, m2, "fast"));
	CU(cuModuleLoadData(&m3, BLIND_TEXT));
	CU(cuModuleGetFunction(&blind, m3, "blind"));
	for (int i = 0; i < 3; i++) {
		launch2(fast, s, a, 0x1100 + i);
		launch3(slow, s, a, b, 0x2200 + i);
		launch2(fast2, NULL, b, 0x3300 + i);
		launch2(blind, s, a, 0x4400 + i);
	}
	CU(cuCtxSynchronize());
	/* Unloaded and loaded again: the new handles are identified, the old ones forgotten. */
	CU(cuModuleUnload(m1));
	CU(cuModuleLoadData(&m1, MODULE_TEXT));
	CU(cuModuleGetFunction(&slow, m1, "slow"));
	launch3(slow, s, b, a, 0x5500);
	CU(cuCtxSynchronize());
	CU(cuModuleUnload(m1));
	CU(cuModuleUnload(m2));
	CU(cuModuleUnload(m3));
	printf("ok\n");
	return 0;
}
