/*
 * The stand-in's copy engines: copies (memcpy, prefetch) run beside a kernel of another
 * stream, memsets stay with kernels, and stream order and event waits still hold. The number
 * of copy engines comes from GPUMUX_STANDIN_COPY_ENGINES (default 2) and is what
 * CU_DEVICE_ATTRIBUTE_ASYNC_ENGINE_COUNT reports; with 0 every timed command serialises.
 *
 * Each case gates its commands behind a host function that returns only once all of them are
 * queued, so that they become runnable at one simulated instant; the checks read the simulated
 * start and end times from the stand-in's log (GPUMUX_STANDIN_LOG), never wall-clock durations.
 */
#define _GNU_SOURCE
#include <cuda.h>

#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cu_test.h"

static int g_fail;

/* 10 ms of compute; 24 MB moves in ~1 ms at the stand-in's 25 GB/s. */
static const char *MODULE_TEXT = "# stand-in module for the copy engine tests\n"
				 "kernel ten 10000 i32\n";
#define BYTES (24u << 20)

static CUfunction g_ten;
static CUstream g_gate, g_a, g_b;
static CUevent g_open;
static atomic_int g_release;

typedef struct {
	long long start, end;
	char engine[16];
} span_t;

static void CUDA_CB gate_fn(void *user)
{
	(void)user;
	while (!atomic_load(&g_release))
		usleep(100);
}

/* Streams a and b wait behind a host function until release(). */
static void gate(void)
{
	atomic_store(&g_release, 0);
	CU(cuLaunchHostFunc(g_gate, gate_fn, NULL));
	CU(cuEventRecord(g_open, g_gate));
	CU(cuStreamWaitEvent(g_a, g_open, 0));
	CU(cuStreamWaitEvent(g_b, g_open, 0));
}

static void release(void)
{
	atomic_store(&g_release, 1);
	CU(cuCtxSynchronize());
}

static void launch_ten(CUstream s)
{
	int n = 0;
	void *args[] = {&n};
	CU(cuLaunchKernel(g_ten, 1, 1, 1, 32, 1, 1, 0, s, args, NULL));
}

/* Empties the stand-in's log (it appends, so it writes on at the new end). */
static void log_reset(void)
{
	CHECK(truncate(getenv("GPUMUX_STANDIN_LOG"), 0) == 0);
}

/* The n-th (from 0) logged command of `kind` named `name`; 0 if found. */
static int find(const char *kind, const char *name, int nth, span_t *out)
{
	FILE *f = fopen(getenv("GPUMUX_STANDIN_LOG"), "r");
	if (!f)
		return -1;
	char line[512], want[128];
	snprintf(want, sizeof want, " kind=%s name=%s ", kind, name);
	int rc = -1;
	while (rc != 0 && fgets(line, sizeof line, f)) {
		const char *e = strstr(line, " engine=");
		if (!strstr(line, want) || !e || nth-- > 0)
			continue;
		if (sscanf(line, "start_ns=%lld end_ns=%lld", &out->start, &out->end) == 2 &&
		    sscanf(e, " engine=%15s", out->engine) == 1)
			rc = 0;
	}
	fclose(f);
	return rc;
}

static int overlap(const span_t *x, const span_t *y)
{
	return x->start < y->end && y->start < x->end;
}

/* Copies src1 to dst1 on stream a and src2 to dst2 on stream b, released at one instant; their
 * spans in *x and *y. */
static void two_copies(void *dst1, const void *src1, void *dst2, const void *src2, span_t *x, span_t *y)
{
	log_reset();
	gate();
	CU(cuMemcpyAsync((CUdeviceptr)(uintptr_t)dst1, (CUdeviceptr)(uintptr_t)src1, BYTES, g_a));
	CU(cuMemcpyAsync((CUdeviceptr)(uintptr_t)dst2, (CUdeviceptr)(uintptr_t)src2, BYTES, g_b));
	release();
	CHECK(find("copy", "copy", 0, x) == 0 && find("copy", "copy", 1, y) == 0);
}

int main(void)
{
	const char *env = getenv("GPUMUX_STANDIN_COPY_ENGINES");
	int want = env && *env ? atoi(env) : 2;
	CUcontext ctx;
	CUmodule mod;
	cu_test_open(MODULE_TEXT, &ctx, &mod);
	CUdevice dev;
	CU(cuCtxGetDevice(&dev));
	CU(cuModuleGetFunction(&g_ten, mod, "ten"));
	int engines = -1, overlap_attr = -1;
	CU(cuDeviceGetAttribute(&engines, CU_DEVICE_ATTRIBUTE_ASYNC_ENGINE_COUNT, dev));
	CU(cuDeviceGetAttribute(&overlap_attr, CU_DEVICE_ATTRIBUTE_GPU_OVERLAP, dev));
	fprintf(stderr, "copy engines: %d (GPU_OVERLAP %d)\n", engines, overlap_attr);
	CHECK(engines == want);
	CHECK(overlap_attr == (engines > 0));
	CU(cuStreamCreate(&g_gate, CU_STREAM_NON_BLOCKING));
	CU(cuStreamCreate(&g_a, CU_STREAM_NON_BLOCKING));
	CU(cuStreamCreate(&g_b, CU_STREAM_NON_BLOCKING));
	CU(cuEventCreate(&g_open, CU_EVENT_DISABLE_TIMING));
	CUdeviceptr d, d2, m;
	CU(cuMemAlloc(&d, BYTES));
	CU(cuMemAlloc(&d2, BYTES));
	CU(cuMemAllocManaged(&m, BYTES, CU_MEM_ATTACH_GLOBAL));
	void *h = calloc(1, BYTES);
	CHECK(h != NULL);
	span_t k, c, c2, k2;

	/* A copy to the device on another stream runs during the kernel; without copy engines
	 * after it. */
	log_reset();
	gate();
	launch_ten(g_a);
	CU(cuMemcpyHtoDAsync(d, h, BYTES, g_b));
	release();
	CHECK(find("kernel", "ten", 0, &k) == 0 && find("copy", "copy", 0, &c) == 0);
	fprintf(stderr, "streams: kernel %lld..%lld, copy %lld..%lld on %s\n", 0LL, k.end - k.start,
		c.start - k.start, c.end - k.start, c.engine);
	CHECK(!strcmp(k.engine, "compute"));
	if (engines > 0) {
		CHECK(!strcmp(c.engine, "copy1"));
		CHECK(c.start == k.start && c.end < k.end);
	} else {
		CHECK(!strcmp(c.engine, "compute"));
		CHECK(c.start >= k.end);
	}

	/* On one stream the copy waits for the kernel, and the next command for the copy. */
	log_reset();
	launch_ten(g_a);
	CU(cuMemcpyHtoDAsync(d, h, BYTES, g_a));
	launch_ten(g_a);
	CU(cuCtxSynchronize());
	CHECK(find("kernel", "ten", 0, &k) == 0 && find("copy", "copy", 0, &c) == 0 &&
	      find("kernel", "ten", 1, &k2) == 0);
	CHECK(c.start >= k.end && k2.start >= c.end);

	/* A copy waiting on an event recorded after a kernel of another stream starts after it. */
	log_reset();
	gate();
	launch_ten(g_a);
	CUevent done;
	CU(cuEventCreate(&done, CU_EVENT_DISABLE_TIMING));
	CU(cuEventRecord(done, g_a));
	CU(cuStreamWaitEvent(g_b, done, 0));
	CU(cuMemcpyDtoHAsync(h, d, BYTES, g_b));
	release();
	CHECK(find("kernel", "ten", 0, &k) == 0 && find("copy", "copy", 0, &c) == 0);
	CHECK(c.start >= k.end);
	CU(cuEventDestroy(done));

	/* A memset is the compute engine's work: never beside a kernel. */
	log_reset();
	gate();
	launch_ten(g_a);
	CU(cuMemsetD8Async(d, 1, BYTES, g_b));
	release();
	CHECK(find("kernel", "ten", 0, &k) == 0 && find("copy", "memset", 0, &c) == 0);
	CHECK(!strcmp(c.engine, "compute") && !overlap(&k, &c));

	/* A prefetch to the device runs on the copy engine to the device, beside the kernel. */
	log_reset();
	gate();
	launch_ten(g_a);
	CUmemLocation to_dev = {.type = CU_MEM_LOCATION_TYPE_DEVICE, .id = 0};
	CU(cuMemPrefetchAsync_v2(m, BYTES, to_dev, 0, g_b));
	release();
	CHECK(find("kernel", "ten", 0, &k) == 0 && find("copy", "prefetch", 0, &c) == 0);
	CHECK(engines > 0 ? c.start == k.start && c.end < k.end : c.start >= k.end);

	/* Copies of the two directions overlap each other with two engines or more; with one they
	 * share it; copies of one direction share their engine. */
	two_copies((void *)(uintptr_t)d, h, h, (void *)(uintptr_t)d2, &c, &c2);
	fprintf(stderr, "directions: %s %lld..%lld, %s %lld..%lld\n", c.engine, 0LL, c.end - c.start,
		c2.engine, c2.start - c.start, c2.end - c.start);
	CHECK(engines >= 2 ? overlap(&c, &c2) : !overlap(&c, &c2));
	two_copies((void *)(uintptr_t)d, h, (void *)(uintptr_t)d2, h, &c, &c2);
	CHECK(!overlap(&c, &c2));

	free(h);
	CU(cuMemFree(m));
	CU(cuMemFree(d2));
	CU(cuMemFree(d));
	if (!g_fail)
		printf("copy engines (%d): ok\n", engines);
	return g_fail;
}
