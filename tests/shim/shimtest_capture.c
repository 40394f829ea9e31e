/*
 * Launches into a stream being captured go straight to the driver (into the graph) under a
 * policy that holds everything (hold, its file present), through each launch entry point the
 * interposer hooks (cuLaunchKernel, its _ptsz form, cuLaunchCooperativeKernel, cuLaunchKernelEx);
 * once the capture ends, a launch is held again. The launch hooks ask the queue whether a launch
 * goes straight only while gmx_shim_maybe_direct() says it may (shim/queue.h): a capture begun
 * must count there, or these launches would wait in the queue, outside the graph. Assertions
 * are on node counts and query results, never on durations.
 */
#define _GNU_SOURCE
#include <cuda.h>

#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "cu_test.h"

static int g_fail;

/* cuda.h declares the _ptsz form only for per-thread default stream builds; the interposer
 * exports both. */
CUresult CUDAAPI cuLaunchKernel_ptsz(CUfunction f, unsigned int gridDimX, unsigned int gridDimY,
				     unsigned int gridDimZ, unsigned int blockDimX, unsigned int blockDimY,
				     unsigned int blockDimZ, unsigned int sharedMemBytes, CUstream hStream,
				     void **kernelParams, void **extra);

static const char *MODULE_TEXT = "# stand-in module for the capture test\n"
				 "kernel marker 10 i32\n";

/* Nodes in the graph the capture of s ends with (-1 when it cannot be ended). */
static long end_capture_nodes(CUstream s)
{
	CUgraph g = NULL;
	size_t n = 0;
	if (cuStreamEndCapture(s, &g) != CUDA_SUCCESS || !g)
		return -1;
	CU(cuGraphGetNodes(g, NULL, &n));
	CU(cuGraphDestroy(g));
	return (long)n;
}

int main(void)
{
	const char *hold = getenv("GPUMUX_SHIM_HOLD_FILE");
	CHECK(hold != NULL);
	if (!hold)
		return 1;
	FILE *f = fopen(hold, "w");
	CHECK(f != NULL);
	if (f)
		fclose(f);
	CUcontext ctx;
	CUmodule mod;
	CUfunction k;
	CUstream s;
	cu_test_open_stream(MODULE_TEXT, "marker", &ctx, &mod, &k, &s);
	int id = 1;
	void *args[] = {&id};

	CU(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_RELAXED));
	CU(cuLaunchKernel(k, 1, 1, 1, 32, 1, 1, 0, s, args, NULL));
	CU(cuLaunchKernel_ptsz(k, 1, 1, 1, 32, 1, 1, 0, s, args, NULL));
	CU(cuLaunchCooperativeKernel(k, 1, 1, 1, 32, 1, 1, 0, s, args));
	CUlaunchConfig cfg = {.gridDimX = 1,
			      .gridDimY = 1,
			      .gridDimZ = 1,
			      .blockDimX = 32,
			      .blockDimY = 1,
			      .blockDimZ = 1,
			      .hStream = s};
	CU(cuLaunchKernelEx(&cfg, k, args, NULL));
	long nodes = end_capture_nodes(s);
	if (nodes != 4)
		fprintf(stderr, "captured %ld nodes, expected 4\n", nodes);
	CHECK(nodes == 4);

	/* The capture ended: the policy holds launches again. */
	CU(cuLaunchKernel(k, 1, 1, 1, 32, 1, 1, 0, s, args, NULL));
	usleep(20000);
	CHECK(cuStreamQuery(s) == CUDA_ERROR_NOT_READY);
	unlink(hold);
	CU(cuStreamSynchronize(s));
	CHECK(cuStreamQuery(s) == CUDA_SUCCESS);
	if (!g_fail)
		printf("capture: ok\n");
	return g_fail;
}
