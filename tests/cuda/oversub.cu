// Oversubscribes device memory with managed allocations: more than the device holds in total
// (GPUMUX_STANDIN_MEM_MB, or the size argument), each touched by kernels in turn and checked.
// Usage: oversub [DEVICE_MB]
#include "common.h"

__global__ void fill(int *x, int v, size_t n)
{
	size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
	if (i < n)
		x[i] = v;
}

int main(int argc, char **argv)
{
	size_t free_b, total_b;
	CK(cudaMemGetInfo(&free_b, &total_b));
	size_t dev = argc > 1 ? (size_t)atol(argv[1]) << 20 : total_b;
	const int parts = 3;
	size_t each = dev / 2, n = each / sizeof(int); // 3 x half the device: 150 %
	int *p[parts];
	for (int k = 0; k < parts; k++) {
		CK(cudaMallocManaged(&p[k], each));
		for (size_t i = 0; i < n; i += 1024)
			p[k][i] = -1;
	}
	for (int round = 0; round < 2; round++)
		for (int k = 0; k < parts; k++) {
			cudaMemLocation loc = {cudaMemLocationTypeDevice, 0};
			CK(cudaMemPrefetchAsync(p[k], each, loc, 0, 0));
			fill<<<(unsigned)((n + 255) / 256), 256>>>(p[k], k, n);
			CK(cudaDeviceSynchronize());
		}
	for (int k = 0; k < parts; k++)
		CK(cudaFree(p[k]));
	printf("ok oversub: %d managed allocations of %zu MB on a %zu MB device\n", parts, each >> 20,
	       total_b >> 20);
	return 0;
}
