// The kernel rt118 registers with the CUDA 11.8 runtime by hand (built with nvcc -fatbin).
extern "C" __global__ void scale118(float *x, float a, int n)
{
	int i = blockIdx.x * blockDim.x + threadIdx.x;
	if (i < n)
		x[i] *= a;
}
