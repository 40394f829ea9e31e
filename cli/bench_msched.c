/* gpumux bench msched: the MSched paper's table on the shipped mixes, the
 * ablations, the slice sweep, template accuracy on every workload kind, and
 * the predictor's speed. Called from cmd_bench.c. */
#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "gpumux/gen.h"
#include "gpumux/template.h"
#include "msched.h"
#include "bench_plot.h"
#include "bench_util.h"
#include "progress.h"
#include "scenario.h"

/* Memory modes of the table. "inmem" and "um" run under the GPU's native time
 * slicing (the scenario's slice_ms, 2 ms); every "-long" mode and the msched
 * modes run under the timeline scheduler at msched's slice, and are divided by
 * "inmem-long", unlimited memory under that same schedule. "ideal-long" is the
 * physical limit at that slice, the one msched is held to. */
static const char *const modes[] = {"inmem", "um", "inmem-long", "um-long", "msched", "msched-wholealloc",
				    "msched-serial", "msched-fifo", "ideal-long"};
enum { M_INMEM, M_UM, M_INLONG, M_UMLONG, M_MS, M_WHOLE, M_SERIAL, M_FIFO, M_IDEALLONG, M_COUNT };

static int run_mode(gmx_scenario_t *sc, int mode, int64_t mem_slice, gmx_sim_result_t *r)
{
	char err[1024];
	gmx_scenario_t copy = *sc;
	copy.mem_slice_ns = mem_slice;
	int rc;
	if (mode == M_INLONG || mode == M_UMLONG || mode == M_IDEALLONG) {
		static const char *const base[] = {[M_INLONG] = "inmem", [M_UMLONG] = "um", [M_IDEALLONG] = "ideal"};
		copy.params.slice_ns = mem_slice;
		rc = gmx_progress_run(&copy, "timeline", base[mode], r, err, sizeof(err));
	} else {
		rc = gmx_progress_run(&copy, "timeslice", modes[mode], r, err, sizeof(err));
	}
	if (rc)
		fprintf(stderr, "gpumux bench msched: %s\n", err);
	return rc;
}

/* Notes a run that failed (its message is already on standard error) under a name. */
static void failed_run(json_t *failed, const char *fmt, const char *what)
{
	char name[128];
	snprintf(name, sizeof(name), fmt, what);
	json_array_append_new(failed, json_string(name));
}

/* ns per gmx_tpl_predict over every kernel of w, with templates learned from w. */
static double predict_ns(const gmx_workload_t *w)
{
	gmx_tpl_set_t set;
	if (gmx_msched_learn(w, &set))
		return -1;
	gmx_tpl_range_t out[256];
	uint64_t calls = 0;
	volatile uint64_t sink = 0;
	double t0 = gmx_bench_wall_s();
	for (int rep = 0; rep < 200; rep++)
		for (uint32_t i = 0; i < w->n_ops; i++) {
			const gmx_op_t *op = &w->ops[i];
			if (op->kind != GMX_OP_KERNEL)
				continue;
			const gmx_tpl_t *t = gmx_tpl_find(&set, w->names[op->name]);
			uint32_t n = 0;
			if (t)
				gmx_tpl_predict(t, &w->args[op->arg_first], op->arg_count, op->grid, op->block, out, 256, &n);
			sink += n;
			calls++;
		}
	double dt = gmx_bench_wall_s() - t0;
	(void)sink;
	gmx_tpl_set_free(&set);
	return calls ? dt * 1e9 / (double)calls : 0;
}

static json_t *accuracy_row(const char *what, const gmx_sim_msched_stats_t *a, int print)
{
	uint64_t n = a->launches[0] + a->launches[1] + a->launches[2] + a->launches[3];
	double sh[4];
	for (int i = 0; i < 4; i++)
		sh[i] = n ? 100.0 * (double)a->launches[i] / (double)n : 0;
	if (print)
		printf("%-34s %8llu %7.3f%% %7.3f%% %6.1f %6.1f %6.1f %6.1f\n", what, (unsigned long long)n,
		       a->false_negative_pct, a->false_positive_pct, sh[1], sh[2], sh[3], sh[0]);
	json_t *o = json_object();
	json_object_set_new(o, "workload", json_string(what));
	json_object_set_new(o, "launches", json_integer((json_int_t)n));
	json_object_set_new(o, "false_negative_pct", json_real(a->false_negative_pct));
	json_object_set_new(o, "false_positive_pct", json_real(a->false_positive_pct));
	json_object_set_new(o, "t1_pct", json_real(sh[1]));
	json_object_set_new(o, "t2_pct", json_real(sh[2]));
	json_object_set_new(o, "t3_pct", json_real(sh[3]));
	json_object_set_new(o, "other_pct", json_real(sh[0]));
	return o;
}

/* Template accuracy on every workload kind, and cross-size generalisation. */
static json_t *bench_accuracy(const char *shared, int print, json_t *failed)
{
	json_t *rows = json_array();
	if (print)
		printf("\nprediction accuracy (templates learned from one unit, or two at two sizes: A+B -> C; 4 KB pages;\n"
		       "launches per unit)\n"
		       "%-34s %8s %8s %8s %6s %6s %6s %6s\n", "workload", "kernels", "FN", "FP", "T1%", "T2%", "T3%",
		       "other%");
	/* Learn at v1 (and v2: two profiling runs), apply to v3 (default: v1 itself). */
	struct {
		const char *label, *kind, *key, *v1, *v2, *v3;
	} cases[] = {
		{"llm-decode (llama3-8b-int8)", "llm-decode", "model", "llama3-8b-int8", NULL, NULL},
		{"llm-decode ctx 1024 -> 2048", "llm-decode", "context", "1024", NULL, "2048"},
		{"llm-decode ctx 1024+1536 -> 2048", "llm-decode", "context", "1024", "1536", "2048"},
		{"vector-add", "vector-add", "footprint", "2G", NULL, NULL},
		{"vector-add n 1M -> 4M", "vector-add", "n", "1048576", NULL, "4194304"},
		{"vector-add n 1M+2M -> 4M", "vector-add", "n", "1048576", "2097152", "4194304"},
		{"matmul n 1024 -> 2048", "matmul", "n", "1024", NULL, "2048"},
		{"matmul n 1024+1536 -> 2048", "matmul", "n", "1024", "1536", "2048"},
		{"dwt2d", "dwt2d", "footprint", "1G", NULL, NULL},
		{"dwt2d 256M -> 1G", "dwt2d", "footprint", "256M", NULL, "1G"},
		{"dwt2d 256M+512M -> 1G", "dwt2d", "footprint", "256M", "512M", "1G"},
		{"hotspot", "hotspot", "footprint", "1G", NULL, NULL},
		{"cfd", "cfd", "footprint", "1G", NULL, NULL},
		{"nn", "nn", "footprint", "1G", NULL, NULL},
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		gmx_workload_t w[3] = {{0}};
		const char *v[3] = {cases[i].v1, cases[i].v2, cases[i].v3};
		char msg[256] = "";
		int rc = 0;
		for (int k = 0; k < 3 && !rc; k++)
			if (v[k]) {
				gmx_param_t p = {cases[i].key, v[k]};
				rc = gmx_gen_build(cases[i].kind, &p, 1, ".", &w[k], msg, sizeof(msg));
			}
		const gmx_workload_t *learn[2] = {&w[0], &w[1]};
		gmx_sim_msched_stats_t st;
		if (!rc && !gmx_msched_accuracy_many(learn, v[1] ? 2 : 1, v[2] ? &w[2] : &w[0], 0, &st)) {
			json_array_append_new(rows, accuracy_row(cases[i].label, &st, print));
			/* The paper's comparison (its Table 1): whole allocations instead of templates. */
			char label[80];
			snprintf(label, sizeof(label), "%s, whole allocations", cases[i].label);
			if (!v[2] && !gmx_msched_accuracy(&w[0], &w[0], 1, &st))
				json_array_append_new(rows, accuracy_row(label, &st, print));
		} else {
			fprintf(stderr, "gpumux bench msched: accuracy of %s: %s\n", cases[i].label,
				msg[0] ? msg : "could not be measured");
			failed_run(failed, "accuracy %s", cases[i].label);
		}
		for (int k = 0; k < 3; k++)
			gmx_workload_free(&w[k]);
	}
	static const char *const reef[] = {"resnet152", "resnet", "resnet18", "vgg", "alexnet", "mobilenet", "bert"};
	for (size_t i = 0; i < sizeof(reef) / sizeof(reef[0]); i++) {
		char path[2200], label[64], msg[256];
		snprintf(path, sizeof(path), "%s/traces/reef/%s/%s.json", shared, reef[i], reef[i]);
		snprintf(label, sizeof(label), "reef %s", reef[i]);
		gmx_workload_t a = {0};
		gmx_param_t p = {"graph", path};
		gmx_sim_msched_stats_t st, wa;
		if (!gmx_gen_build("reef", &p, 1, ".", &a, msg, sizeof(msg)) && !gmx_msched_accuracy(&a, &a, 0, &st)) {
			json_array_append_new(rows, accuracy_row(label, &st, print));
			if (!gmx_msched_accuracy(&a, &a, 1, &wa)) {
				snprintf(label, sizeof(label), "reef %s, whole allocations", reef[i]);
				json_array_append_new(rows, accuracy_row(label, &wa, print));
			}
		} else if (print) {
			printf("%-34s (not available: %s)\n", label, msg);
		}
		gmx_workload_free(&a);
	}
	if (print)
		printf("%-34s imported traces record no launch arguments: templates cannot apply (all launches "
		       "fall back to demand paging)\n", "imported traces (kineto, hta)");
	return rows;
}

int gmx_bench_msched(const char *dir, int quick, int json, const char *plot)
{
	json_t *failed = json_array(); /* what could not run, by name */
	static const char *const mixes[] = {"a", "b", "c", "d"};
	static const char *const pcts[] = {"150", "200", "300"};
	int print = !json;
	json_t *root = json_object(), *rows = json_array();
	double sp_abc[3] = {0}, sp_d[3] = {0};
	int n_abc[3] = {0};
	if (print)
		printf("um@2ms: um at the GPU's native 2 ms slicing, of inmem at 2 ms. slice: inmem at msched's slice\n"
		       "over inmem at 2 ms (the schedule change alone). Between the bars, every mode runs at msched's\n"
		       "slice and is a share of inmem at that same slice: um, msched and its ablations (whole, serial,\n"
		       "fifo), ideal (the physical limit); ms/idl = msched of ideal; ms/um at equal slices; worst =\n"
		       "msched's worst-served task; p99 = its worst task's unit latency. After them: ms/um2 = msched over\n"
		       "um at its native 2 ms slicing; in/idl = msched's bytes in per unit of work over ideal's; whole,\n"
		       "fifo = their bytes over msched's; in2p99 = inmem's worst p99 at 2 ms.\n");
	if (print)
		printf("%-9s %6s %7s | %7s %7s %7s %7s %7s %7s %7s %7s %7s %7s | %7s %7s %7s %6s %6s\n", "scenario",
		       "um@2ms", "slice", "um", "msched", "whole", "serial", "fifo", "ideal", "ms/idl", "ms/um",
		       "worst", "p99", "ms/um2", "in/idl", "whole", "fifo", "in2p99");
	gmx_sim_result_t *r = calloc(M_COUNT, sizeof(*r));
	if (!r || !failed) {
		free(r);
		json_decref(failed);
		return 1;
	}
	int64_t mem_slice = 0;
	for (int mx = 0; mx < 4; mx++)
		for (int p = 0; p < 3; p++) {
			if (quick && p)
				continue;
			char path[1024], err[1024];
			snprintf(path, sizeof(path), "%s/msched/%s-%s.ini", dir, mixes[mx], pcts[p]);
			gmx_scenario_t sc;
			if (gmx_scenario_load(path, &sc, err, sizeof(err))) {
				fprintf(stderr, "gpumux bench msched: %s\n", err);
				free(r);
				json_decref(root);
				json_decref(rows);
				json_decref(failed);
				return 1;
			}
			mem_slice = sc.mem_slice_ns;
			int rc = 0;
			for (int m = 0; m < M_COUNT && !rc; m++)
				rc = run_mode(&sc, m, sc.mem_slice_ns, &r[m]);
			gmx_scenario_free(&sc);
			if (rc) {
				free(r);
				json_decref(root);
				json_decref(rows);
				json_decref(failed);
				return 1;
			}
			double ret[M_COUNT], worst[M_COUNT], p99[M_COUNT];
			for (int m = 0; m < M_COUNT; m++) {
				const gmx_sim_result_t *ref = m == M_UM ? &r[M_INMEM] : m == M_INMEM ? &r[M_INMEM] : &r[M_INLONG];
				ret[m] = gmx_bench_retained(&r[m], ref);
				worst[m] = gmx_bench_worst_share(&r[m], ref);
				p99[m] = gmx_bench_worst_p99(&r[m]);
			}
			double sched = gmx_bench_retained(&r[M_INLONG], &r[M_INMEM]);
			double sp = ret[M_UMLONG] > 0 ? ret[M_MS] / ret[M_UMLONG] : 0; /* at equal slices */
			double sp_nat = ret[M_UM] > 0 ? ret[M_MS] * sched / ret[M_UM] : 0; /* um at its native slice */
			double fi = ret[M_IDEALLONG] > 0 ? ret[M_MS] / ret[M_IDEALLONG] : 0;
			double ib = gmx_bench_bytes_ratio(&r[M_MS], &r[M_IDEALLONG]);
			double wb = gmx_bench_bytes_ratio(&r[M_WHOLE], &r[M_MS]);
			double fb = gmx_bench_bytes_ratio(&r[M_FIFO], &r[M_MS]);
			if (mx == 3)
				sp_d[p] = sp;
			else {
				sp_abc[p] += sp;
				n_abc[p]++;
			}
			if (print)
				printf("%s-%-7s %5.2f%% %6.1f%% | %6.2f%% %6.1f%% %6.1f%% %6.1f%% %6.1f%% %6.1f%% %6.1f%% "
				       "%6.2fx %6.1f%% %6.2fs | %6.2fx %6.2fx %6.2fx %6.2fx %5.2fs\n",
				       mixes[mx], pcts[p], 100 * ret[M_UM], 100 * sched, 100 * ret[M_UMLONG], 100 * ret[M_MS],
				       100 * ret[M_WHOLE], 100 * ret[M_SERIAL], 100 * ret[M_FIFO], 100 * ret[M_IDEALLONG],
				       100 * fi, sp, 100 * worst[M_MS], p99[M_MS], sp_nat, ib, wb, fb, p99[M_INMEM]);
			json_t *row = json_object();
			char name[16];
			snprintf(name, sizeof(name), "%s-%s", mixes[mx], pcts[p]);
			json_object_set_new(row, "scenario", json_string(name));
			json_t *rt = json_object(), *by = json_object();
			for (int m = 1; m < M_COUNT; m++) {
				json_object_set_new(rt, modes[m], json_real(ret[m]));
				json_object_set_new(by, modes[m], json_integer((json_int_t)r[m].h2d_bytes));
			}
			json_object_set_new(row, "of_inmem", rt);
			json_object_set_new(row, "h2d_bytes", by);
			json_t *wt = json_object(), *pt = json_object();
			for (int m = 0; m < M_COUNT; m++) {
				json_object_set_new(wt, modes[m], json_real(worst[m]));
				json_object_set_new(pt, modes[m], json_real(p99[m]));
			}
			json_object_set_new(row, "worst_task_share", wt);
			json_object_set_new(row, "worst_task_p99_s", pt);
			json_object_set_new(row, "slice_alone", json_real(sched));
			json_object_set_new(row, "msched_over_um", json_real(sp));
			json_object_set_new(row, "msched_over_um_native", json_real(sp_nat));
			json_object_set_new(row, "msched_of_ideal", json_real(fi));
			json_object_set_new(row, "msched_bytes_over_ideal", json_real(ib));
			json_object_set_new(row, "wholealloc_bytes_over_msched", json_real(wb));
			json_object_set_new(row, "fifo_bytes_over_msched", json_real(fb));
			json_object_set_new(row, "false_negative_pct", json_real(r[M_MS].msched.false_negative_pct));
			json_object_set_new(row, "false_positive_pct", json_real(r[M_MS].msched.false_positive_pct));
			json_object_set_new(row, "fallback_faults", json_integer((json_int_t)r[M_MS].faults));
			json_array_append_new(rows, row);
		}
	json_object_set_new(root, "mem_slice_ms", json_real((double)mem_slice / 1e6));
	json_object_set_new(root, "mixes", rows);
	static const double paper_abc[3] = {11.05, 9.35, 7.52}, paper_d[3] = {57.88, 44.79, 33.60};
	json_t *summary = json_array();
	if (print)
		printf("\n%-28s %10s %10s\n", "msched over um, equal slices", "gpumux", "paper");
	for (int p = 0; p < 3; p++) {
		if (quick && p)
			continue;
		double abc = n_abc[p] ? sp_abc[p] / n_abc[p] : 0;
		if (print) {
			printf("A-C mean at %s%%%14s %9.2fx %9.2fx\n", pcts[p], "", abc, paper_abc[p]);
			printf("D at %s%%%21s %9.2fx %9.2fx\n", pcts[p], "", sp_d[p], paper_d[p]);
		}
		json_t *o = json_object();
		json_object_set_new(o, "pct", json_integer(atoi(pcts[p])));
		json_object_set_new(o, "abc_speedup", json_real(abc));
		json_object_set_new(o, "d_speedup", json_real(sp_d[p]));
		json_object_set_new(o, "paper_abc", json_real(paper_abc[p]));
		json_object_set_new(o, "paper_d", json_real(paper_d[p]));
		json_array_append_new(summary, o);
	}
	json_object_set_new(root, "speedups", summary);
	/* The microbenchmark. */
	static const char *const micro[] = {"100", "200", "300"};
	json_t *mic = json_array();
	if (print)
		printf("\n%-10s %9s %9s %9s %9s %9s %9s\n", "micro", "um@2ms", "um", "msched", "ideal", "ms/um",
		       "p99");
	for (int p = 0; p < 3; p++) {
		char path[1024], err[1024];
		snprintf(path, sizeof(path), "%s/msched/micro-%s.ini", dir, micro[p]);
		gmx_scenario_t sc;
		if (gmx_scenario_load(path, &sc, err, sizeof(err))) {
			fprintf(stderr, "gpumux bench msched: %s\n", err);
			failed_run(failed, "micro-%s", micro[p]);
			continue;
		}
		int ms[6] = {M_INMEM, M_UM, M_INLONG, M_UMLONG, M_MS, M_IDEALLONG}, rc = 0;
		for (int k = 0; k < 6 && !rc; k++)
			rc = run_mode(&sc, ms[k], sc.mem_slice_ns, &r[ms[k]]);
		gmx_scenario_free(&sc);
		if (rc) {
			failed_run(failed, "micro-%s", micro[p]);
			continue;
		}
		double un = gmx_bench_retained(&r[M_UM], &r[M_INMEM]), u = gmx_bench_retained(&r[M_UMLONG], &r[M_INLONG]),
		       m = gmx_bench_retained(&r[M_MS], &r[M_INLONG]), i = gmx_bench_retained(&r[M_IDEALLONG], &r[M_INLONG]);
		if (print)
			printf("micro-%-4s %8.2f%% %8.2f%% %8.2f%% %8.2f%% %8.2fx %8.2fs\n", micro[p], 100 * un, 100 * u,
			       100 * m, 100 * i, u > 0 ? m / u : 0, gmx_bench_worst_p99(&r[M_MS]));
		json_t *o = json_object();
		json_object_set_new(o, "pct", json_integer(atoi(micro[p])));
		json_object_set_new(o, "um_native", json_real(un));
		json_object_set_new(o, "msched_p99_s", json_real(gmx_bench_worst_p99(&r[M_MS])));
		json_object_set_new(o, "um", json_real(u));
		json_object_set_new(o, "msched", json_real(m));
		json_object_set_new(o, "ideal", json_real(i));
		json_array_append_new(mic, o);
	}
	json_object_set_new(root, "micro", mic);
	if (print)
		printf("(paper: 9.67x at 200%%, 43.4%% of inmem kept at 300%%, 99.41%% at 100%%)\n");
	/* Slice sweep on mix D at 200%. */
	static const double slices_ms[] = {1, 10, 50, 200, 1000};
	json_t *sw = json_array();
	if (print)
		printf("\nslice sweep, mix D at 200%% (of inmem at the same slice; slice = inmem there over inmem at\n"
		       "the 2 ms GPU slice; wait = the longest a newly ready high-priority task waits for the device:\n"
		       "(tasks - 1) x slice; whole = msched-wholealloc, w/ms = its bytes moved in per unit of work over\n"
		       "msched's; p99 = msched's worst task)\n%-9s %7s %9s %9s %9s %9s %7s %10s %8s\n",
		       "slice", "slice", "um", "msched", "whole", "ideal", "w/ms", "hp wait", "p99");
	for (size_t k = 0; k < sizeof(slices_ms) / sizeof(slices_ms[0]); k++) {
		if (quick && (k == 0 || k == 4))
			continue;
		char path[1024], err[1024];
		snprintf(path, sizeof(path), "%s/msched/d-200.ini", dir);
		gmx_scenario_t sc;
		char what[32];
		snprintf(what, sizeof(what), "d-200 slice %g ms", slices_ms[k]);
		if (gmx_scenario_load(path, &sc, err, sizeof(err))) {
			fprintf(stderr, "gpumux bench msched: %s\n", err);
			failed_run(failed, "%s", what);
			continue;
		}
		int64_t sl = (int64_t)llround(slices_ms[k] * 1e6);
		int ms[6] = {M_INMEM, M_INLONG, M_UMLONG, M_MS, M_WHOLE, M_IDEALLONG}, rc = 0;
		for (int q = 0; q < 6 && !rc; q++)
			rc = run_mode(&sc, ms[q], sl, &r[ms[q]]);
		uint32_t nt = sc.n_tasks;
		gmx_scenario_free(&sc);
		if (rc) {
			failed_run(failed, "%s", what);
			continue;
		}
		double u = gmx_bench_retained(&r[M_UMLONG], &r[M_INLONG]), m = gmx_bench_retained(&r[M_MS], &r[M_INLONG]),
		       i = gmx_bench_retained(&r[M_IDEALLONG], &r[M_INLONG]), wait = (double)(nt - 1) * slices_ms[k];
		double wh = gmx_bench_retained(&r[M_WHOLE], &r[M_INLONG]), sa = gmx_bench_retained(&r[M_INLONG], &r[M_INMEM]);
		double wb = gmx_bench_bytes_ratio(&r[M_WHOLE], &r[M_MS]), p99 = gmx_bench_worst_p99(&r[M_MS]);
		if (print)
			printf("%6.0f ms %6.0f%% %8.2f%% %8.2f%% %8.2f%% %8.2f%% %6.2fx %7.0f ms %7.2fs\n", slices_ms[k],
			       100 * sa, 100 * u, 100 * m, 100 * wh, 100 * i, wb, wait, p99);
		json_t *o = json_object();
		json_object_set_new(o, "slice_ms", json_real(slices_ms[k]));
		json_object_set_new(o, "slice_alone", json_real(sa));
		json_object_set_new(o, "msched_p99_s", json_real(p99));
		json_object_set_new(o, "um", json_real(u));
		json_object_set_new(o, "msched", json_real(m));
		json_object_set_new(o, "msched_wholealloc", json_real(wh));
		json_object_set_new(o, "wholealloc_bytes_per_unit_over_msched", json_real(wb));
		json_object_set_new(o, "ideal", json_real(i));
		json_object_set_new(o, "hp_wait_ms", json_real(wait));
		json_array_append_new(sw, o);
	}
	json_object_set_new(root, "slice_sweep_d200", sw);
	free(r);
	char shared[1024];
	snprintf(shared, sizeof(shared), "%s/../../shared", dir); /* ../shared beside the repository */
	json_object_set_new(root, "accuracy", bench_accuracy(shared, print, failed));
	/* Predictor speed on the largest kernel list. */
	gmx_workload_t w = {0};
	char msg[256];
	gmx_param_t p = {"model", "llama3-8b-int8"};
	double ns = -1;
	if (!gmx_gen_build("llm-decode", &p, 1, ".", &w, msg, sizeof(msg)))
		ns = predict_ns(&w);
	gmx_workload_free(&w);
	if (print)
		printf("\ntemplate prediction: %.0f ns per launch (llama3-8b decode kernels; target < 1000 ns)\n", ns);
	json_object_set_new(root, "predict_ns_per_launch", json_real(ns));
	json_object_set_new(root, "quick", json_boolean(quick));
	size_t n_failed = json_array_size(failed);
	json_object_set_new(root, "failed", failed);
	char *s = json_dumps(root, JSON_COMPACT | JSON_REAL_PRECISION(6) | JSON_PRESERVE_ORDER);
	printf("%s%s\n", print ? "\n" : "", s ? s : "{}");
	free(s);
	if (n_failed) {
		fprintf(stderr, "gpumux bench msched: %zu run%s failed:", n_failed, n_failed == 1 ? "" : "s");
		for (size_t i = 0; i < n_failed; i++)
			fprintf(stderr, "%s %s", i ? "," : "", json_string_value(json_array_get(failed, i)));
		fprintf(stderr, " (their rows are missing)\n");
	}
	int prc = plot ? gmx_bench_plot(plot, "msched", root) : 0;
	json_decref(root);
	return n_failed ? 1 : prc;
}
