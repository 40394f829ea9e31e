// A program that forks: the child, forked before CUDA is initialised, runs its own round trip
// beside the parent; after the parent used CUDA it forks again and the child exits without
// touching CUDA (the driver's fork handlers must not disturb either side).
#include "common.h"
#include <cstring>
#include <sys/wait.h>
#include <unistd.h>

__global__ void inc(int *x, int n)
{
	int i = blockIdx.x * blockDim.x + threadIdx.x;
	if (i < n)
		x[i] += 0;
}

static int round_trip(const char *who)
{
	const int n = 4096;
	int h[n], g[n], *d;
	for (int i = 0; i < n; i++)
		h[i] = i ^ getpid();
	CK(cudaMalloc(&d, sizeof h));
	CK(cudaMemcpy(d, h, sizeof h, cudaMemcpyHostToDevice));
	for (int k = 0; k < 10; k++)
		inc<<<n / 256, 256>>>(d, n);
	CK(cudaMemcpy(g, d, sizeof g, cudaMemcpyDeviceToHost));
	CK(cudaFree(d));
	if (memcmp(g, h, sizeof h) != 0) {
		printf("FAIL %s: data differs\n", who);
		return 1;
	}
	return 0;
}

int main()
{
	pid_t child = fork();
	if (child == 0)
		_exit(round_trip("child"));
	if (round_trip("parent"))
		return 1;
	int st;
	if (waitpid(child, &st, 0) != child || !WIFEXITED(st) || WEXITSTATUS(st) != 0) {
		printf("FAIL the child's round trip failed\n");
		return 1;
	}
	pid_t late = fork();
	if (late == 0)
		_exit(0);
	if (waitpid(late, &st, 0) != late || !WIFEXITED(st) || WEXITSTATUS(st) != 0) {
		printf("FAIL the late child did not exit cleanly\n");
		return 1;
	}
	if (round_trip("parent after fork"))
		return 1;
	printf("ok forks: parent and child ran their own round trips\n");
	return 0;
}
