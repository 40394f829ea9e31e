// Memory round trip on a prioritised stream with events: host -> device, kernels, device ->
// host, checked byte for byte. Usage: roundtrip [KERNELS] [--log-launches]: with
// --log-launches each launch prints "launch t_ns=T" (CLOCK_MONOTONIC) and the program
// synchronises after each kernel (a latency-sensitive client with idle gaps).
#include "common.h"
#include <cstring>
#include <unistd.h>

__global__ void scale(float *x, float a, int n)
{
	int i = blockIdx.x * blockDim.x + threadIdx.x;
	if (i < n)
		x[i] *= a;
}

int main(int argc, char **argv)
{
	int kernels = argc > 1 ? atoi(argv[1]) : 50;
	bool log = argc > 2 && strcmp(argv[2], "--log-launches") == 0;
	const int n = 1 << 18;
	size_t bytes = n * sizeof(float);
	float *h = (float *)malloc(bytes), *g = (float *)malloc(bytes), *d = NULL;
	for (int i = 0; i < n; i++)
		h[i] = (float)i;
	CK(cudaMalloc(&d, bytes));
	int lo, hi;
	CK(cudaDeviceGetStreamPriorityRange(&lo, &hi));
	cudaStream_t s;
	CK(cudaStreamCreateWithPriority(&s, cudaStreamNonBlocking, hi));
	int prio = 0;
	CK(cudaStreamGetPriority(s, &prio));
	if (prio != hi) {
		printf("FAIL stream priority %d, asked %d\n", prio, hi);
		return 1;
	}
	cudaEvent_t e0, e1;
	CK(cudaEventCreate(&e0));
	CK(cudaEventCreate(&e1));
	CK(cudaMemcpyAsync(d, h, bytes, cudaMemcpyHostToDevice, s));
	CK(cudaEventRecord(e0, s));
	for (int k = 0; k < kernels; k++) {
		if (log)
			printf("launch t_ns=%lld\n", now_ns());
		scale<<<(n + 255) / 256, 256, 0, s>>>(d, 1.0f, n);
		if (log) {
			CK(cudaStreamSynchronize(s));
			usleep(1000);
		}
	}
	CK(cudaGetLastError());
	CK(cudaEventRecord(e1, s));
	CK(cudaMemcpyAsync(g, d, bytes, cudaMemcpyDeviceToHost, s));
	CK(cudaStreamSynchronize(s));
	CK(cudaEventQuery(e1));
	float ms = 0;
	CK(cudaEventElapsedTime(&ms, e0, e1));
	if (memcmp(g, h, bytes) != 0) {
		printf("FAIL data differs after the round trip\n");
		return 1;
	}
	CK(cudaMemset(d, 0x7f, bytes));
	CK(cudaMemcpy(g, d, bytes, cudaMemcpyDeviceToHost));
	for (size_t i = 0; i < bytes; i++)
		if (((unsigned char *)g)[i] != 0x7f) {
			printf("FAIL memset byte %zu\n", i);
			return 1;
		}
	CK(cudaEventDestroy(e0));
	CK(cudaEventDestroy(e1));
	CK(cudaStreamDestroy(s));
	CK(cudaFree(d));
	printf("ok roundtrip: %d kernels, %.3f ms between events, priority %d\n", kernels, ms, prio);
	return 0;
}
