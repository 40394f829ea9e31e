// Shared by the tests/cuda programs: an error check that prints "FAIL file:line call: reason"
// and exits 1, and a monotonic clock for launch timestamps (compared with the stand-in's log).
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <cuda_runtime.h>
#define CK(x)                                                                                            \
	do {                                                                                             \
		cudaError_t e_ = (x);                                                                    \
		if (e_ != cudaSuccess) {                                                                 \
			printf("FAIL %s:%d %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_));   \
			exit(1);                                                                         \
		}                                                                                        \
	} while (0)

static inline long long now_ns()
{
	timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}
