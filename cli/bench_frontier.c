/* gpumux bench frontier: throughput kept against latency as the slice grows,
 * for um, the physical limit (ideal), msched and its former switch-time planner
 * (msched-switch), on mixes A-D and the
 * microbenchmark at 200%. Every point runs every mode under the timeline
 * scheduler at one slice and divides by inmem under that same schedule.
 * Called from cmd_bench.c. */
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "bench_plot.h"
#include "bench_util.h"
#include "scenario.h"

enum { F_INMEM, F_UM, F_IDEAL, F_MS, F_MB, F_COUNT };
static const char *const fmodes[F_COUNT] = {"inmem", "um", "ideal", "msched", "msched-switch"};

/* Runs one mode at one slice under the timeline scheduler (the msched modes
 * pick it from mem_slice_ns). */
static int frontier_run(const gmx_scenario_t *sc, int mode, int64_t slice, gmx_sim_result_t *r)
{
	char err[1024];
	gmx_scenario_t copy = *sc;
	copy.params.slice_ns = slice;
	copy.mem_slice_ns = slice;
	int rc = gmx_scenario_run(&copy, "timeline", fmodes[mode], r, err, sizeof(err));
	if (rc)
		fprintf(stderr, "gpumux bench frontier: %s\n", err);
	return rc;
}


/* Prints the table (unless json) and one JSON object; 0, or 1 on an error. */
int gmx_bench_frontier(const char *dir, int quick, int json, const char *plot)
{
	static const char *const scen[] = {"a-200", "b-200", "c-200", "d-200", "micro-200"};
	static const double slices_ms[] = {2, 20, 200, 1000, 2000};
	int print = !json;
	json_t *root = json_object(), *pts = json_array();
	gmx_sim_result_t *r = calloc(F_COUNT, sizeof(*r));
	if (!r)
		return 1;
	if (print)
		printf("frontier: each mode's throughput as a share of inmem under the same slice (timeline scheduler),\n"
		       "against the worst task's p99 unit latency; ms/idl = msched of the ideal (target >= 95%% where\n"
		       "the ideal keeps >= 20%%); switch = msched-switch, the former planner; sw/idl = it of the ideal%s\n"
		       "%-10s %7s | %7s %8s | %7s %8s | %7s %8s | %7s %8s | %6s | %7s %8s | %6s\n",
		       quick ? " (--quick: 5 s warm-up, 5 s measured)" : "", "scenario", "slice", "inmem", "p99", "um",
		       "p99", "ideal", "p99", "msched", "p99", "ms/idl", "switch", "p99", "sw/idl");
	int n_target = 0, n_met = 0, n_met_b = 0, rc = 0;
	double worst_fi = 9, worst_bi = 9;
	for (size_t k = 0; k < sizeof(scen) / sizeof(scen[0]) && !rc; k++) {
		char path[1024], err[1024];
		snprintf(path, sizeof(path), "%s/msched/%s.ini", dir, scen[k]);
		gmx_scenario_t sc;
		if (gmx_scenario_load(path, &sc, err, sizeof(err))) {
			fprintf(stderr, "gpumux bench frontier: %s\n", err);
			rc = 1;
			break;
		}
		if (quick) {
			sc.warmup_ns = 5000000000LL;
			sc.duration_ns = 5000000000LL;
		}
		for (size_t q = 0; q < sizeof(slices_ms) / sizeof(slices_ms[0]) && !rc; q++) {
			int64_t sl = (int64_t)llround(slices_ms[q] * 1e6);
			for (int m = 0; m < F_COUNT && !rc; m++)
				rc = frontier_run(&sc, m, sl, &r[m]);
			if (rc)
				break;
			double ret[F_COUNT], p99[F_COUNT];
			for (int m = 0; m < F_COUNT; m++) {
				ret[m] = gmx_bench_retained(&r[m], &r[F_INMEM]);
				p99[m] = gmx_bench_worst_p99(&r[m]);
			}
			double fi = ret[F_IDEAL] > 0 ? ret[F_MS] / ret[F_IDEAL] : 0;
			double bi = ret[F_IDEAL] > 0 ? ret[F_MB] / ret[F_IDEAL] : 0;
			int target = ret[F_IDEAL] >= 0.20;
			if (target) {
				n_target++;
				n_met += fi >= 0.95 && fi <= 1.005;
				n_met_b += bi >= 0.95 && bi <= 1.005;
				if (fi < worst_fi)
					worst_fi = fi;
				if (bi < worst_bi)
					worst_bi = bi;
			}
			if (print)
				printf("%-10s %5.0fms | %6.1f%% %7.3fs | %6.2f%% %7.3fs | %6.1f%% %7.3fs | %6.1f%% %7.3fs | "
				       "%5.1f%% | %6.1f%% %7.3fs | %5.1f%%%s\n",
				       scen[k], slices_ms[q], 100 * ret[F_INMEM], p99[F_INMEM], 100 * ret[F_UM], p99[F_UM],
				       100 * ret[F_IDEAL], p99[F_IDEAL], 100 * ret[F_MS], p99[F_MS], 100 * fi,
				       100 * ret[F_MB], p99[F_MB], 100 * bi,
				       target ? (fi >= 0.95 ? "" : " ms<95%") : " (ideal < 20%)");
			json_t *o = json_object();
			json_object_set_new(o, "scenario", json_string(scen[k]));
			json_object_set_new(o, "slice_ms", json_real(slices_ms[q]));
			for (int m = 0; m < F_COUNT; m++) {
				json_t *v = json_object();
				json_object_set_new(v, "of_inmem", json_real(ret[m]));
				json_object_set_new(v, "worst_share", json_real(gmx_bench_worst_share(&r[m], &r[F_INMEM])));
				json_object_set_new(v, "p99_s", json_real(p99[m]));
				json_object_set_new(v, "h2d_bytes", json_integer((json_int_t)r[m].h2d_bytes));
				json_object_set_new(o, fmodes[m], v);
			}
			json_object_set_new(o, "msched_of_ideal", json_real(fi));
			json_object_set_new(o, "msched_switch_of_ideal", json_real(bi));
			json_array_append_new(pts, o);
		}
		gmx_scenario_free(&sc);
	}
	free(r);
	if (rc) {
		json_decref(root);
		json_decref(pts);
		return 1;
	}
	if (print)
		printf("\nmsched within 5%% of the ideal at %d of the %d points where the ideal keeps >= 20%% "
		       "(lowest: %.1f%%)\n",
		       n_met, n_target, n_target ? 100 * worst_fi : 0);
	if (print)
		printf("msched-switch within 5%% of the ideal at %d of those %d points (lowest: %.1f%%)\n\n",
		       n_met_b, n_target, n_target ? 100 * worst_bi : 0);
	json_object_set_new(root, "points", pts);
	json_object_set_new(root, "target_points", json_integer(n_target));
	json_object_set_new(root, "target_met", json_integer(n_met));
	json_object_set_new(root, "switch_target_met", json_integer(n_met_b));
	json_object_set_new(root, "quick", json_boolean(quick));
	char *s = json_dumps(root, JSON_COMPACT | JSON_REAL_PRECISION(6) | JSON_PRESERVE_ORDER);
	printf("%s\n", s ? s : "{}");
	free(s);
	int prc = plot ? gmx_bench_plot(plot, "frontier", root) : 0;
	json_decref(root);
	return prc;
}
