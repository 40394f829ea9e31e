// An ordinary CUDA runtime program (nvcc, <<<>>>): each call's result is printed, so a run on
// NVIDIA's driver alone and one behind gpumux's interposer can be compared line by line.
#include <cstdio>
#include <cuda_runtime.h>

__global__ void vecadd(const float *a, const float *b, float *c, int n)
{
	int i = blockIdx.x * blockDim.x + threadIdx.x;
	if (i < n)
		c[i] = a[i] + b[i];
}

static void show(const char *what, cudaError_t e)
{
	printf("%s: %d %s\n", what, (int)e, cudaGetErrorName(e));
}

int main()
{
	int n = -1, v = -1;
	show("cudaDriverGetVersion", cudaDriverGetVersion(&v));
	printf("driver version %d\n", v);
	show("cudaGetDeviceCount", cudaGetDeviceCount(&n));
	float *a = nullptr;
	show("cudaMalloc", cudaMalloc(&a, 1024 * sizeof(float)));
	cudaStream_t s = nullptr;
	show("cudaStreamCreate", cudaStreamCreate(&s));
	vecadd<<<4, 256, 0, s>>>(a, a, a, 1024);
	show("launch", cudaGetLastError());
	show("cudaStreamSynchronize", cudaStreamSynchronize(s));
	show("cudaDeviceSynchronize", cudaDeviceSynchronize());
	show("cudaFree", cudaFree(a));
	return 0;
}
