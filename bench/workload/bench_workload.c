/* Times the .gmxw reader on generated files of N and 2N kernel lines, side by side, and
 * prints lines per second and the 2N/N time ratio (about 2 when reading is linear). Prints a
 * table and one JSON line. Usage: bench_workload [runs] (default 3; medians reported). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "gpumux/workload.h"
#include "gpumux/workload_io.h"

static double now(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static int cmp_d(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

/* Writes a workload of n kernels (a pointer and an integer argument and one region each). */
static int make(const char *path, uint32_t n)
{
	gmx_workload_t w;
	uint32_t b, name;
	char err[512];
	if (gmx_workload_init(&w, "big") || gmx_workload_add_buffer(&w, 0, 1ull << 30, NULL, &b) ||
	    gmx_workload_intern_name(&w, "k", &name))
		return -1;
	for (uint32_t i = 0; i < n; i++) {
		gmx_op_t k = {.kind = GMX_OP_KERNEL, .name = name, .duration_ns = 1000 + i, .think_ns = 3000,
			      .grid = {64, 1, 1}, .block = {256, 1, 1}, .buffer = UINT32_MAX};
		uint64_t off = (uint64_t)(i % 1000) << 20;
		if (gmx_workload_add_op(&w, &k, NULL) || gmx_workload_add_arg(&w, w.buffers[b].addr + off, 1, 8) ||
		    gmx_workload_add_arg(&w, 4096, 0, 4) || gmx_workload_add_region(&w, b, off, 16384))
			return -1;
	}
	int rc = gmx_workload_write(&w, path, err, sizeof(err));
	if (rc)
		fprintf(stderr, "bench_workload: %s\n", err);
	gmx_workload_free(&w);
	return rc;
}

static double median_read(const char *path, int runs)
{
	double t[100];
	char err[512];
	for (int r = 0; r < runs; r++) {
		gmx_workload_t w;
		double t0 = now();
		if (gmx_workload_read(path, &w, err, sizeof(err))) {
			fprintf(stderr, "bench_workload: %s\n", err);
			return -1;
		}
		t[r] = now() - t0;
		gmx_workload_free(&w);
	}
	qsort(t, (size_t)runs, sizeof(double), cmp_d);
	return t[runs / 2];
}

int main(int argc, char **argv)
{
	int runs = argc > 1 ? atoi(argv[1]) : 3;
	if (runs < 1 || runs > 100)
		runs = 3;
	const uint32_t n[2] = {150000, 300000};
	double sec[2];
	for (int i = 0; i < 2; i++) {
		char path[] = "/tmp/gmx-bench-wl-XXXXXX";
		int fd = mkstemp(path);
		if (fd < 0) {
			perror("bench_workload: mkstemp");
			return 1;
		}
		close(fd);
		int rc = make(path, n[i]);
		sec[i] = rc ? -1 : median_read(path, runs);
		unlink(path);
		if (sec[i] < 0)
			return 1;
	}
	printf("%-12s %10s %14s\n", "kernels", "read s", "lines/s");
	for (int i = 0; i < 2; i++)
		printf("%-12u %10.3f %14.0f\n", n[i], sec[i], n[i] / sec[i]);
	printf("time ratio %u/%u: %.2f (2.00 = linear)\n", n[1], n[0], sec[1] / sec[0]);
	printf("{\"bench\":\"workload_read\",\"runs\":%d,\"kernels\":[%u,%u],\"seconds\":[%.4f,%.4f],"
	       "\"lines_per_s\":%.0f,\"ratio\":%.3f}\n",
	       runs, n[0], n[1], sec[0], sec[1], n[1] / sec[1], sec[1] / sec[0]);
	return 0;
}
