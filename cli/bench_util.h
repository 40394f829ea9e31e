/* Helpers the benchmarks share. */
#ifndef GMX_CLI_BENCH_UTIL_H
#define GMX_CLI_BENCH_UTIL_H

#include <time.h>

#include "sim.h"

/* gpumux bench msched (bench_msched.c): the scenarios under dir; 0, or 1 when a run failed
 * (each named on standard error). plot: also its charts there (gpumux bench --plot), or NULL. */
int gmx_bench_msched(const char *dir, int quick, int json, const char *plot);

/* gpumux bench calibrate (bench_calibrate.c): the unified-memory model against the paper;
 * plot: also its chart there (gpumux bench --plot), or NULL. Exit code. */
int gmx_bench_calibrate(const char *dir, int quick, int json, const char *plot);

/* gpumux bench frontier (bench_frontier.c): um, ideal, msched and msched-switch over a slice sweep; plot: also
 * its chart there, or NULL. Exit code. */
int gmx_bench_frontier(const char *dir, int quick, int json, const char *plot);

/* gpumux bench fikit (bench_fikit.c): the pairs under dir/fikit; 0, or 1 on the first failure.
 * plot: also its charts there (gpumux bench --plot), or NULL. */
int gmx_bench_fikit(const char *dir, int quick, int json, const char *plot);

/* gpumux bench combined (bench_combined.c): an HP service beside oversubscribed LP work, every
 * scenario under dir/combined under every policy and baseline; plot: also its chart there, or
 * NULL. 0, or 1 when a run failed. */
int gmx_bench_combined(const char *dir, int quick, int json, const char *plot);

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

/* Lowest over tasks of throughput(a) / throughput(b): the worst-served task's
 * share (tasks whose b throughput is 0 are skipped; 0 when none is left). */
static inline double gmx_bench_worst_share(const gmx_sim_result_t *a, const gmx_sim_result_t *b)
{
	double w = -1;
	for (uint32_t i = 0; i < a->n_tasks; i++)
		if (b->tasks[i].throughput_per_s > 0) {
			double x = a->tasks[i].throughput_per_s / b->tasks[i].throughput_per_s;
			if (w < 0 || x < w)
				w = x;
		}
	return w < 0 ? 0 : w;
}

/* Highest per-task p99 unit latency in seconds (tasks that completed no unit
 * in the window count as the window's length: they waited at least that). */
static inline double gmx_bench_worst_p99(const gmx_sim_result_t *r)
{
	double w = 0;
	for (uint32_t i = 0; i < r->n_tasks; i++) {
		double x = r->tasks[i].lat_p99_s >= 0 ? r->tasks[i].lat_p99_s : r->tasks[i].active_s;
		if (x > w)
			w = x;
	}
	return w;
}

/* Bytes moved to the device per unit of work done (units completed, with the fraction of the
 * current one): compares modes that get through different amounts of work in the same time. */
static inline double gmx_bench_bytes_per_unit(const gmx_sim_result_t *r)
{
	double u = 0;
	for (uint32_t i = 0; i < r->n_tasks; i++)
		u += r->tasks[i].progress;
	return u > 0 ? (double)r->h2d_bytes / u : 0;
}

/* a's bytes per unit of work over b's (0 when b moved nothing). */
static inline double gmx_bench_bytes_ratio(const gmx_sim_result_t *a, const gmx_sim_result_t *b)
{
	double y = gmx_bench_bytes_per_unit(b);
	return y > 0 ? gmx_bench_bytes_per_unit(a) / y : 0;
}

#endif
