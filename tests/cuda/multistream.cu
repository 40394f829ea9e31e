// Several streams with cross-stream event waits: a producer stream fills a buffer, consumer
// streams wait on its event and copy it out; the copies must see the producer's data.
#include "common.h"
#include <cstring>

__global__ void touch(int *x, int n)
{
	int i = blockIdx.x * blockDim.x + threadIdx.x;
	if (i < n)
		x[i] += 0;
}

int main()
{
	const int n = 1 << 16, S = 4;
	size_t bytes = n * sizeof(int);
	int *d, *out[S], *h;
	CK(cudaMallocHost(&h, bytes));
	CK(cudaMalloc(&d, bytes));
	cudaStream_t prod, cons[S];
	CK(cudaStreamCreateWithFlags(&prod, cudaStreamNonBlocking));
	cudaEvent_t ready;
	CK(cudaEventCreateWithFlags(&ready, cudaEventDisableTiming));
	for (int round = 0; round < 5; round++) {
		for (int i = 0; i < n; i++)
			h[i] = i * 7 + round;
		CK(cudaMemcpyAsync(d, h, bytes, cudaMemcpyHostToDevice, prod));
		touch<<<n / 256, 256, 0, prod>>>(d, n);
		CK(cudaEventRecord(ready, prod));
		for (int c = 0; c < S; c++) {
			if (round == 0) {
				CK(cudaStreamCreateWithFlags(&cons[c], cudaStreamNonBlocking));
				CK(cudaMallocHost(&out[c], bytes));
			}
			CK(cudaStreamWaitEvent(cons[c], ready, 0));
			touch<<<n / 256, 256, 0, cons[c]>>>(d, n);
			CK(cudaMemcpyAsync(out[c], d, bytes, cudaMemcpyDeviceToHost, cons[c]));
		}
		for (int c = 0; c < S; c++) {
			CK(cudaStreamSynchronize(cons[c]));
			if (memcmp(out[c], h, bytes) != 0) {
				printf("FAIL round %d stream %d saw stale data\n", round, c);
				return 1;
			}
		}
		CK(cudaStreamSynchronize(prod)); // h is rewritten next round
	}
	for (int c = 0; c < S; c++) {
		CK(cudaStreamDestroy(cons[c]));
		CK(cudaFreeHost(out[c]));
	}
	CK(cudaStreamDestroy(prod));
	CK(cudaEventDestroy(ready));
	CK(cudaFree(d));
	CK(cudaFreeHost(h));
	printf("ok multistream: %d consumer streams waited on the producer's event 5 times\n", S);
	return 0;
}
