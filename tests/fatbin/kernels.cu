// Kernels whose parameter layouts tests/fatbin checks (each layout is mirrored by a C struct in
// test_fatbin_nvcc.c). Built by nvcc at build time into fatbins, cubins and PTX of every kind.
#include <cuda_fp16.h>

struct S { double a; char b; int c[3]; };
struct __align__(16) A16 { float x, y, z, w; };
struct Big { char x[5000]; };
struct Edge { char x[4084]; };
struct Huge { char x[32000]; };

__global__ void vecadd(const float *a, const float *b, float *c, int n)
{
	int i = blockIdx.x * blockDim.x + threadIdx.x;
	if (i < n)
		c[i] = a[i] + b[i];
}
__global__ void mixed(char c, short s, S st, A16 v, double d, unsigned long long u) {}
__global__ void noargs() {}
__global__ void big(Big b, int k) {}
__global__ void edge(Edge e, int k, double *q) {}
__global__ void huge(float *p, Huge h, int k, double d) {}
__global__ void vectors(char3 a, float4 b, bool flag, double2 c, __half h, short2 s) {}
template <typename T> __global__ void fill(T *p, T v, int n) { if (threadIdx.x < n) p[threadIdx.x] = v; }
template __global__ void fill<double>(double *, double, int);
template __global__ void fill<char>(char *, char, int);
extern "C" __global__ void cfun(int a, void *p) {}
__device__ __noinline__ float helper(float x) { return x * 2.0f; }
__global__ void calls(float *p) { p[0] = helper(p[1]); }
