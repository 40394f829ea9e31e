/* Times trace import on the shared traces, smallest to largest, so the cost
 * per event can be read as the input grows; the headline is
 * hta/df_index_resolver.json.gz (target: under 2 s). Prints a table and one
 * JSON line. Usage: bench_trace [runs] (default 5; the median is reported). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "trace.h"

#ifndef GMX_SHARED_DIR
#define GMX_SHARED_DIR "../shared"
#endif

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

int main(int argc, char **argv)
{
	int runs = argc > 1 ? atoi(argv[1]) : 5;
	if (runs < 1 || runs > 100)
		runs = 5;
	static const char *files[] = {
		"hta/benchmark_result_2869224_1695835535_trace.json.gz", "hta/nccl_data.json.gz",
		"hta/rank-0.Apr_03_18_51_38.1102.pt.trace.json.gz",     "kineto/worker0.1623143089861.pt.trace.json.gz",
		"hta/df_index_resolver.json.gz",
	};
	const size_t nf = sizeof(files) / sizeof(files[0]);
	char tmpl[] = "/tmp/gmx-bench-trace-XXXXXX";
	if (!mkdtemp(tmpl)) {
		perror("mkdtemp");
		return 1;
	}
	char out[256];
	snprintf(out, sizeof(out), "%s/out.gmxw", tmpl);
	printf("%-52s %9s %8s %9s %9s %9s %10s\n", "trace", "gz MB", "kernels", "import s", "write s", "min s",
	       "ns/kernel");
	double head_import = 0, head_write = 0, head_min = 0;
	unsigned long head_kernels = 0;
	int status = 0;
	for (size_t f = 0; f < nf; f++) {
		char path[1024], err[512];
		snprintf(path, sizeof(path), "%s/traces/%s", GMX_SHARED_DIR, files[f]);
		struct stat sb;
		if (stat(path, &sb)) {
			fprintf(stderr, "bench_trace: %s: missing (set GMX_SHARED_DIR)\n", path);
			return 1;
		}
		double *ti = calloc((size_t)runs, sizeof(double)), *tw = calloc((size_t)runs, sizeof(double));
		unsigned long kernels = 0;
		for (int r = 0; r < runs; r++) {
			gmx_workload_t w;
			double t0 = now();
			if (gmx_trace_import(path, NULL, &w, NULL, err, sizeof(err))) {
				fprintf(stderr, "bench_trace: %s\n", err);
				status = 1;
				break;
			}
			double t1 = now();
			if (gmx_trace_write(&w, out, err, sizeof(err))) {
				fprintf(stderr, "bench_trace: %s\n", err);
				status = 1;
			}
			double t2 = now();
			kernels = 0;
			for (uint32_t i = 0; i < w.n_ops; i++)
				kernels += w.ops[i].kind == GMX_OP_KERNEL;
			gmx_workload_free(&w);
			ti[r] = t1 - t0;
			tw[r] = t2 - t1;
		}
		qsort(ti, (size_t)runs, sizeof(double), cmp_d);
		qsort(tw, (size_t)runs, sizeof(double), cmp_d);
		double mi = ti[runs / 2], mw = tw[runs / 2];
		printf("%-52s %9.2f %8lu %9.3f %9.3f %9.3f %10.0f\n", files[f], (double)sb.st_size / 1e6, kernels, mi, mw,
		       ti[0], kernels ? mi * 1e9 / (double)kernels : 0.0);
		if (f == nf - 1) {
			head_import = mi;
			head_write = mw;
			head_min = ti[0];
			head_kernels = kernels;
		}
		free(ti);
		free(tw);
	}
	unlink(out);
	rmdir(tmpl);
	printf("{\"bench\":\"trace_import\",\"trace\":\"hta/df_index_resolver.json.gz\",\"runs\":%d,\"kernels\":%lu,"
	       "\"import_s_median\":%.3f,\"import_s_min\":%.3f,\"write_s_median\":%.3f,\"total_s_median\":%.3f,"
	       "\"limit_s\":2.0,\"within_limit\":%s}\n",
	       runs, head_kernels, head_import, head_min, head_write, head_import + head_write,
	       head_import + head_write < 2.0 ? "true" : "false");
	return status;
}
