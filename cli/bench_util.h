/* Helpers the benchmarks share. */
#ifndef GMX_CLI_BENCH_UTIL_H
#define GMX_CLI_BENCH_UTIL_H

#include <time.h>

#include "sim.h"

/* Monotonic wall-clock seconds. */
static inline double gmx_bench_wall_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* Mean over tasks of throughput(a) / throughput(b), tasks matched by index
 * (tasks whose b throughput is 0 are skipped). */
static inline double gmx_bench_retained(const gmx_sim_result_t *a, const gmx_sim_result_t *b)
{
	double s = 0;
	uint32_t n = 0;
	for (uint32_t i = 0; i < a->n_tasks; i++)
		if (b->tasks[i].throughput_per_s > 0) {
			s += a->tasks[i].throughput_per_s / b->tasks[i].throughput_per_s;
			n++;
		}
	return n ? s / n : 0;
}

#endif
