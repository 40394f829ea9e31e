// Stream capture into a graph, instantiated once and launched repeatedly: a captured copy
// and kernels replay at every launch (the copy moves the bytes each time).
#include "common.h"
#include <cstring>

__global__ void add(float *y, const float *x, int n)
{
	int i = blockIdx.x * blockDim.x + threadIdx.x;
	if (i < n)
		y[i] += 0.0f * x[i];
}

int main(int argc, char **argv)
{
	int launches = argc > 1 ? atoi(argv[1]) : 20;
	const int n = 1 << 16;
	size_t bytes = n * sizeof(float);
	float *x, *y, *h;
	CK(cudaMalloc(&x, bytes));
	CK(cudaMalloc(&y, bytes));
	CK(cudaMallocHost(&h, bytes));
	CK(cudaMemset(y, 0, bytes));
	cudaStream_t s;
	CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
	cudaGraph_t graph;
	cudaGraphExec_t exec;
	CK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
	cudaStreamCaptureStatus st;
	CK(cudaStreamIsCapturing(s, &st));
	if (st != cudaStreamCaptureStatusActive) {
		printf("FAIL the stream is not capturing\n");
		return 1;
	}
	CK(cudaMemcpyAsync(x, h, bytes, cudaMemcpyHostToDevice, s));
	for (int k = 0; k < 8; k++)
		add<<<n / 256, 256, 0, s>>>(y, x, n);
	CK(cudaMemcpyAsync(y, x, bytes, cudaMemcpyDeviceToDevice, s));
	CK(cudaStreamEndCapture(s, &graph));
	size_t nodes = 0;
	CK(cudaGraphGetNodes(graph, NULL, &nodes));
	if (nodes != 10) {
		printf("FAIL graph of %zu nodes, 10 captured\n", nodes);
		return 1;
	}
	CK(cudaGraphInstantiate(&exec, graph, 0));
	float *back = (float *)malloc(bytes);
	for (int it = 0; it < launches; it++) {
		for (int i = 0; i < n; i++)
			h[i] = (float)(i + it);
		CK(cudaGraphLaunch(exec, s));
		CK(cudaStreamSynchronize(s));
		CK(cudaMemcpy(back, y, bytes, cudaMemcpyDeviceToHost));
		if (memcmp(back, h, bytes) != 0) {
			printf("FAIL launch %d: the replayed copies did not move this launch's data\n", it);
			return 1;
		}
	}
	CK(cudaGraphExecDestroy(exec));
	CK(cudaGraphDestroy(graph));
	CK(cudaFree(x));
	CK(cudaFree(y));
	CK(cudaFreeHost(h));
	printf("ok graph: %zu nodes launched %d times\n", nodes, launches);
	return 0;
}
