/*
 * A CUDA 11.8 runtime program (libcudart.so.11.0, from Debian; nvcc 13 cannot build for it) as
 * nvcc's host code would be: it registers a fatbin with __cudaRegisterFatBinary and a kernel
 * with __cudaRegisterFunction, then uses the runtime API: device memory, a prioritised stream,
 * events, cudaLaunchKernel, copies checked byte for byte. The runtime loads the fatbin through
 * the driver's private CUDART_INTERFACE table at the first launch.
 * Usage: rt118 FATBIN [KERNELS] [--log-launches]   prints "ok ..." on success.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

typedef struct {
	unsigned x, y, z;
} dim3_t;
typedef struct {
	int magic, version;
	const void *data;
	void *filename_or_fatbins;
} wrapper_t;

static void *rt;
static void *sym(const char *name)
{
	void *p = dlsym(rt, name);
	if (!p) {
		printf("FAIL libcudart.so.11.0 has no %s\n", name);
		exit(1);
	}
	return p;
}

static const char *(*err_str)(int);
#define CK(call)                                                                                             \
	do {                                                                                                 \
		int e_ = (call);                                                                             \
		if (e_) {                                                                                    \
			printf("FAIL %s:%d %s: %d %s\n", __FILE__, __LINE__, #call, e_, err_str(e_));        \
			exit(1);                                                                             \
		}                                                                                            \
	} while (0)

static long long now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static char host_stub; /* the kernel's host-side handle, as nvcc's stub function would be */

int main(int argc, char **argv)
{
	if (argc < 2) {
		fprintf(stderr, "usage: rt118 FATBIN [KERNELS] [--log-launches]\n");
		return 2;
	}
	int kernels = argc > 2 ? atoi(argv[2]) : 20;
	int log = argc > 3 && strcmp(argv[3], "--log-launches") == 0;
	FILE *fp = fopen(argv[1], "rb");
	if (!fp) {
		printf("FAIL cannot open %s\n", argv[1]);
		return 1;
	}
	static unsigned long long fatbin[1 << 17];
	size_t got = fread(fatbin, 1, sizeof fatbin, fp);
	fclose(fp);
	if (got == 0 || got == sizeof fatbin) {
		printf("FAIL %s is empty or larger than 1 MB\n", argv[1]);
		return 1;
	}
	rt = dlopen("libcudart.so.11.0", RTLD_NOW);
	if (!rt) {
		printf("SKIPPED: no libcudart.so.11.0 (%s)\n", dlerror());
		return 77;
	}
	err_str = (const char *(*)(int))sym("cudaGetErrorString");
	void **(*reg_fatbin)(void *) = (void **(*)(void *))sym("__cudaRegisterFatBinary");
	void (*reg_end)(void **) = (void (*)(void **))sym("__cudaRegisterFatBinaryEnd");
	void (*reg_fn)(void **, const char *, char *, const char *, int, void *, void *, void *, void *, int *) =
	    (void (*)(void **, const char *, char *, const char *, int, void *, void *, void *, void *, int *))sym(
		"__cudaRegisterFunction");
	int (*rt_malloc)(void **, size_t) = (int (*)(void **, size_t))sym("cudaMalloc");
	int (*rt_free)(void *) = (int (*)(void *))sym("cudaFree");
	int (*rt_memcpy_async)(void *, const void *, size_t, int, void *) =
	    (int (*)(void *, const void *, size_t, int, void *))sym("cudaMemcpyAsync");
	int (*prio_range)(int *, int *) = (int (*)(int *, int *))sym("cudaDeviceGetStreamPriorityRange");
	int (*stream_create)(void **, unsigned, int) = (int (*)(void **, unsigned, int))sym("cudaStreamCreateWithPriority");
	int (*stream_sync)(void *) = (int (*)(void *))sym("cudaStreamSynchronize");
	int (*stream_destroy)(void *) = (int (*)(void *))sym("cudaStreamDestroy");
	int (*event_create)(void **) = (int (*)(void **))sym("cudaEventCreate");
	int (*event_record)(void *, void *) = (int (*)(void *, void *))sym("cudaEventRecord");
	int (*elapsed)(float *, void *, void *) = (int (*)(float *, void *, void *))sym("cudaEventElapsedTime");
	int (*launch)(const void *, dim3_t, dim3_t, void **, size_t, void *) =
	    (int (*)(const void *, dim3_t, dim3_t, void **, size_t, void *))sym("cudaLaunchKernel");
	int (*count)(int *) = (int (*)(int *))sym("cudaGetDeviceCount");

	static wrapper_t w = {0x466243b1, 1, NULL, NULL};
	w.data = fatbin;
	void **h = reg_fatbin(&w);
	reg_fn(h, &host_stub, "scale118", "scale118", -1, NULL, NULL, NULL, NULL, NULL);
	reg_end(h);

	int ndev = 0;
	CK(count(&ndev));
	const int n = 1 << 16;
	size_t bytes = n * sizeof(float);
	float *src = malloc(bytes), *back = malloc(bytes), *d = NULL;
	for (int i = 0; i < n; i++)
		src[i] = (float)i;
	CK(rt_malloc((void **)&d, bytes));
	printf("dptr=%p\n", (void *)d);
	int lo, hi;
	CK(prio_range(&lo, &hi));
	void *s, *e0, *e1;
	CK(stream_create(&s, 1 /* cudaStreamNonBlocking */, hi));
	CK(event_create(&e0));
	CK(event_create(&e1));
	CK(rt_memcpy_async(d, src, bytes, 1 /* HostToDevice */, s));
	CK(event_record(e0, s));
	float a = 1.0f;
	int nn = n;
	void *args[] = {&d, &a, &nn};
	dim3_t grid = {(unsigned)(n + 255) / 256, 1, 1}, block = {256, 1, 1};
	for (int k = 0; k < kernels; k++) {
		if (log)
			printf("launch t_ns=%lld\n", now_ns());
		CK(launch(&host_stub, grid, block, args, 0, s));
		if (log) {
			CK(stream_sync(s));
			usleep(1000);
		}
	}
	CK(event_record(e1, s));
	CK(rt_memcpy_async(back, d, bytes, 2 /* DeviceToHost */, s));
	CK(stream_sync(s));
	float ms = 0;
	CK(elapsed(&ms, e0, e1));
	if (memcmp(back, src, bytes) != 0) {
		printf("FAIL data differs after the round trip\n");
		return 1;
	}
	CK(stream_destroy(s));
	CK(rt_free(d));
	printf("ok rt118: cudart 11.8, %d devices, %d kernels, %.3f ms between events\n", ndev, kernels, ms);
	return 0;
}
