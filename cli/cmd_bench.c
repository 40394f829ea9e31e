/* gpumux bench: benchmarks that print a table (and with --json one object).
 *   calibrate  the simulator's unified-memory model against the MSched paper
 *   speed      wall time and simulated kernels per second of every shipped scenario
 */
#include <errno.h>
#include <getopt.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "commands.h"
#include "memspace.h"
#include "replay.h"
#include "bench_util.h"
#include "scenario.h"
#include "um.h"

typedef struct bench_opts {
	const char *dir;    /* scenarios folder */
	const char *traces; /* the shared traces folder */
	int json, quick;
} bench_opts_t;

/* Loads dir/name and runs it under (sched, mem); whole: measure the warm-up too
 * (the simulator's speed counts every simulated kernel). Prints the error and
 * returns non-zero on failure. */
static int run_file_as(const bench_opts_t *o, const char *name, const char *sched, const char *mem, int whole,
		       gmx_sim_result_t *res, double *seconds)
{
	char path[1024], err[1024];
	snprintf(path, sizeof(path), "%s/%s", o->dir, name);
	gmx_scenario_t sc;
	if (gmx_scenario_load(path, &sc, err, sizeof(err))) {
		fprintf(stderr, "gpumux bench: %s\n", err);
		return 1;
	}
	if (whole) {
		sc.duration_ns += sc.warmup_ns;
		sc.warmup_ns = 0;
	}
	double t0 = gmx_bench_wall_s();
	int rc = gmx_scenario_run(&sc, sched, mem, res, err, sizeof(err));
	if (seconds)
		*seconds = gmx_bench_wall_s() - t0;
	gmx_scenario_free(&sc);
	if (rc)
		fprintf(stderr, "gpumux bench: %s\n", err);
	return rc ? 1 : 0;
}

/* Runs scenario `name` as it says (its warm-up is not measured). */
static int run_file(const bench_opts_t *o, const char *name, const char *sched, const char *mem,
		    gmx_sim_result_t *res, double *seconds)
{
	return run_file_as(o, name, sched, mem, 0, res, seconds);
}

/* The fault path alone: isolated single-page faults, then a sequential sweep. */
static void fault_path_rates(const gmx_preset_t *dev, double *single_gbps, double *link_gbps, double *sweep_gbps)
{
	gmx_workload_t w;
	uint32_t b;
	gmx_workload_init(&w, "fault-path");
	gmx_workload_add_buffer(&w, 0, 1ull << 30, NULL, &b);
	const gmx_workload_t *ws[1] = {&w};
	gmx_memspace_t m;
	gmx_memspace_init(&m, ws, 1, 4ull << 30);
	/* One 4 KB page per 2 MB block: every fault is alone, and the prefetcher
	 * never sees a block over half present. */
	int64_t cost = 0;
	uint64_t moved = 0, n = 0;
	for (uint64_t off = 0; off < (1ull << 30); off += GMX_CHUNK_SIZE, n++) {
		gmx_region_t r = {.buffer = 0, .offset = off, .length = GMX_PAGE_SIZE};
		gmx_access_cursor_t at = {0, 0};
		gmx_um_batch_t bt;
		gmx_um_service(&m, dev, 0, &r, 1, at, n + 1, 0, &bt);
		cost += bt.cost_ns;
		moved += bt.in_bytes;
	}
	*single_gbps = (double)(n * GMX_PAGE_SIZE) / (double)cost;
	*link_gbps = (double)moved / (double)cost;
	gmx_memspace_free(&m);
	gmx_memspace_init(&m, ws, 1, 4ull << 30);
	gmx_region_t r = {.buffer = 0, .offset = 0, .length = 1ull << 30};
	gmx_access_cursor_t cur = {0, 0};
	cost = 0;
	for (uint64_t stamp = 1;; stamp++) {
		int done;
		gmx_um_seek_missing(&m, 0, &r, 1, &cur, &done);
		if (done)
			break;
		gmx_um_batch_t bt;
		gmx_um_service(&m, dev, 0, &r, 1, cur, stamp, 0, &bt);
		cost += bt.cost_ns;
	}
	*sweep_gbps = (double)(1ull << 30) / (double)cost;
	gmx_memspace_free(&m);
	gmx_workload_free(&w);
}

static int bench_calibrate(const bench_opts_t *o)
{
	static const char *const mixes[] = {"a", "b", "c", "d"};
	static const char *const pcts[] = {"150", "200", "300"};
	const gmx_preset_t *dev = gmx_preset_find("rtx5080");
	double single, link, sweep;
	fault_path_rates(dev, &single, &link, &sweep);
	json_t *root = json_object(), *rows = json_array();
	double sum_abc = 0, sum_d = 0, steps = 0, faults = 0;
	int n_abc = 0, n_d = 0;
	if (!o->json) {
		printf("fault path (rtx5080): isolated 4 KB faults %.3f GB/s of demanded data (%.2f GB/s on the "
		       "link with 64 KB growth); sequential sweep %.2f GB/s; bulk %.1f GB/s serial, %.1f GB/s "
		       "pipelined\n\n",
		       single, link, sweep, dev->link_serial_gbps, dev->link_in_gbps + dev->link_out_gbps);
		printf("um and inmem both under the GPU's native time slicing (the scenario's slice_ms, 2 ms): the\n"
		       "same schedule; worst = the worst-served task's um/inmem, p99 = um's worst task p99 latency\n");
		printf("%-12s %12s %12s %10s %9s %9s %14s\n", "scenario", "inmem u/s", "um u/s", "um/inmem", "worst",
		       "p99", "faults/unit");
	}
	for (int m = 0; m < 4; m++)
		for (int p = 0; p < 3; p++) {
			if (o->quick && p)
				continue;
			char name[64];
			snprintf(name, sizeof(name), "msched/%s-%s.ini", mixes[m], pcts[p]);
			gmx_sim_result_t *r = calloc(2, sizeof(*r));
			if (!r || run_file(o, name, "timeslice", "inmem", &r[0], NULL) ||
			    run_file(o, name, "timeslice", "um", &r[1], NULL)) {
				free(r);
				json_decref(root);
				json_decref(rows);
				return 1;
			}
			double ret = gmx_bench_retained(&r[1], &r[0]), units = 0;
			for (uint32_t i = 0; i < r[1].n_tasks; i++)
				units += r[1].tasks[i].progress;
			double fpu = units > 0 ? (double)r[1].faults / units : 0;
			if (m == 3) {
				sum_d += ret;
				n_d++;
				steps += units;
				faults += (double)r[1].faults;
			} else {
				sum_abc += ret;
				n_abc++;
			}
			double ti = 0, tu = 0;
			for (uint32_t i = 0; i < r[0].n_tasks; i++) {
				ti += r[0].tasks[i].throughput_per_s;
				tu += r[1].tasks[i].throughput_per_s;
			}
			if (!o->json)
				printf("%-12.*s %12.3f %12.4f %9.2f%% %8.2f%% %8.2fs %14.0f\n", (int)strlen(name) - 11, name + 7,
				       ti, tu, 100 * ret, 100 * gmx_bench_worst_share(&r[1], &r[0]),
				       gmx_bench_worst_p99(&r[1]), fpu);
			json_t *row = json_object();
			json_object_set_new(row, "scenario", json_string(name));
			json_object_set_new(row, "um_retained", json_real(ret));
			json_object_set_new(row, "um_worst_share", json_real(gmx_bench_worst_share(&r[1], &r[0])));
			json_object_set_new(row, "um_p99_s", json_real(gmx_bench_worst_p99(&r[1])));
			json_object_set_new(row, "faults_per_unit", json_real(fpu));
			json_array_append_new(rows, row);
			free(r);
		}
	gmx_sim_result_t *mi = calloc(2, sizeof(*mi));
	double collapse[4] = {0};
	static const char *const micro[] = {"100", "150", "200", "300"};
	for (int p = 0; p < 4 && mi; p++) {
		char name[64];
		snprintf(name, sizeof(name), "msched/micro-%s.ini", micro[p]);
		if (run_file(o, name, "timeslice", "inmem", &mi[0], NULL) ||
		    run_file(o, name, "timeslice", "um", &mi[1], NULL)) {
			free(mi);
			json_decref(root);
			json_decref(rows);
			return 1;
		}
		double ret = gmx_bench_retained(&mi[1], &mi[0]);
		collapse[p] = ret > 0 ? 1 / ret : 0;
	}
	free(mi);
	double abc = n_abc ? sum_abc / n_abc : 0, d = n_d ? sum_d / n_d : 0, fps = steps > 0 ? faults / steps : 0;
	if (!o->json) {
		printf("\n%-46s %10s %10s %8s\n", "figure", "gpumux", "paper", "ratio");
		printf("%-46s %9.2f%% %9.2f%% %8.2f\n", "um keeps of inmem, mixes A-C (mean)", 100 * abc, 6.19,
		       abc / 0.0619);
		printf("%-46s %9.2f%% %9.2f%% %8.2f\n", "um keeps of inmem, mix D (mean)", 100 * d, 1.29, d / 0.0129);
		printf("%-46s %10.0f %10.0f %8.2f\n", "Llama3-8B fault batches per decode step (D)", fps, 9210.0,
		       fps / 9210);
		printf("%-46s %9.1fx %9.1fx %8.2f\n", "microbenchmark collapse at 150%", collapse[1], 16.2,
		       collapse[1] / 16.2);
		char rest[64];
		snprintf(rest, sizeof(rest), "%.1fx / %.1fx / %.1fx", collapse[0], collapse[2], collapse[3]);
		printf("%-46s %s (no paper figure)\n", "microbenchmark collapse at 100/200/300%", rest);
		printf("%-46s %6.3fGB/s %6.2fGB/s %8.2f\n", "single-page fault stream", single, 0.12, single / 0.12);
		if (o->quick)
			printf("(--quick: 150%% scenarios only)\n");
	}
	json_object_set_new(root, "fault_single_gbps", json_real(single));
	json_object_set_new(root, "fault_link_gbps", json_real(link));
	json_object_set_new(root, "fault_sweep_gbps", json_real(sweep));
	json_object_set_new(root, "um_retained_abc", json_real(abc));
	json_object_set_new(root, "um_retained_d", json_real(d));
	json_object_set_new(root, "faults_per_llama_step", json_real(fps));
	json_t *col = json_array();
	for (int p = 0; p < 4; p++)
		json_array_append_new(col, json_real(collapse[p]));
	json_object_set_new(root, "micro_collapse_100_150_200_300", col);
	json_object_set_new(root, "scenarios", rows);
	json_object_set_new(root, "quick", json_boolean(o->quick));
	char *s = json_dumps(root, JSON_COMPACT | JSON_REAL_PRECISION(6) | JSON_PRESERVE_ORDER);
	printf("%s%s\n", o->json ? "" : "\n", s ? s : "{}");
	free(s);
	json_decref(root);
	return 0;
}

static int bench_speed(const bench_opts_t *o)
{
	static const char *const files[] = {
		"demo.ini",           "msched/a-150.ini",   "msched/a-200.ini",   "msched/a-300.ini",
		"msched/b-150.ini",   "msched/b-200.ini",   "msched/b-300.ini",   "msched/c-150.ini",
		"msched/c-200.ini",   "msched/c-300.ini",   "msched/d-150.ini",   "msched/d-200.ini",
		"msched/d-300.ini",   "msched/micro-100.ini", "msched/micro-150.ini", "msched/micro-200.ini",
		"msched/micro-300.ini",
	};
	static const char *const modes[] = {"um", "ideal"};
	json_t *rows = json_array();
	double worst = 0;
	if (!o->json)
		printf("%-22s %6s %9s %12s %14s %12s\n", "scenario", "mem", "wall s", "kernels", "kernels/s",
		       "sim s/wall s");
	for (size_t f = 0; f < sizeof(files) / sizeof(files[0]); f++)
		for (int m = 0; m < 2; m++) {
			if (o->quick && f > 0 && !strstr(files[f], "150"))
				continue;
			gmx_sim_result_t *r = calloc(1, sizeof(*r));
			double secs = 0;
			if (!r || run_file_as(o, files[f], "timeslice", modes[m], 1, r, &secs)) {
				free(r);
				json_decref(rows);
				return 1;
			}
			if (secs > worst)
				worst = secs;
			if (!o->json)
				printf("%-22s %6s %9.2f %12llu %14.0f %12.2f\n", files[f], modes[m], secs,
				       (unsigned long long)r->kernels, (double)r->kernels / secs, r->sim_time_s / secs);
			json_t *row = json_object();
			json_object_set_new(row, "scenario", json_string(files[f]));
			json_object_set_new(row, "mem", json_string(modes[m]));
			json_object_set_new(row, "wall_s", json_real(secs));
			json_object_set_new(row, "kernels", json_integer((json_int_t)r->kernels));
			json_object_set_new(row, "kernels_per_s", json_real((double)r->kernels / secs));
			json_array_append_new(rows, row);
			free(r);
		}
	json_t *root = json_object();
	json_object_set_new(root, "worst_wall_s", json_real(worst));
	json_object_set_new(root, "runs", rows);
	char *s = json_dumps(root, JSON_COMPACT | JSON_REAL_PRECISION(6) | JSON_PRESERVE_ORDER);
	if (!o->json)
		printf("\nslowest run: %.2f s (target: under 10 s)\n", worst);
	printf("%s\n", s ? s : "{}");
	free(s);
	json_decref(root);
	return 0;
}

/* Every shipped trace replayed alone on its recorded device. */
static const char *const replay_traces[] = {
	"hta/benchmark_result_2869224_1695835535_trace.json.gz",
	"hta/rank-0.Apr_03_18_51_38.1102.pt.trace.json.gz",
	"hta/nccl_data.json.gz",
	"hta/df_index_resolver.json.gz",
	"kineto/worker0.1623143089861.pt.trace.json.gz",
};

static int bench_replay(const bench_opts_t *o)
{
	json_t *rows = json_array();
	double worst = 0;
	if (!o->json)
		printf("%-52s %-5s %7s %11s %11s %7s  %-22s %-22s\n", "trace", "dev", "kernels", "recorded s",
		       "replayed s", "ratio", "gap us p50/p90 rec", "gap us p50/p90 sim");
	for (size_t i = 0; i < sizeof(replay_traces) / sizeof(replay_traces[0]); i++) {
		char path[1024], err[1024];
		snprintf(path, sizeof(path), "%s/%s", o->traces, replay_traces[i]);
		gmx_replay_result_t r;
		if (gmx_replay_compare(path, &r, err, sizeof(err))) {
			fprintf(stderr, "gpumux bench: %s\n", err);
			json_decref(rows);
			return 1;
		}
		double ratio = r.recorded_span_s > 0 ? r.replay_span_s / r.recorded_span_s : 0;
		double off = fabs(ratio - 1);
		if (off > worst)
			worst = off;
		if (!o->json)
			printf("%-52s %-5s %7llu %11.4f %11.4f %7.3f  %9.2f / %-10.2f %9.2f / %-10.2f\n",
			       replay_traces[i], r.device, (unsigned long long)r.kernels, r.recorded_span_s,
			       r.replay_span_s, ratio, r.recorded_gap_us[0], r.recorded_gap_us[1], r.replay_gap_us[0],
			       r.replay_gap_us[1]);
		json_t *row = json_object(), *rg = json_array(), *sg = json_array();
		for (int q = 0; q < 3; q++) {
			json_array_append_new(rg, json_real(r.recorded_gap_us[q]));
			json_array_append_new(sg, json_real(r.replay_gap_us[q]));
		}
		json_object_set_new(row, "trace", json_string(replay_traces[i]));
		json_object_set_new(row, "device", json_string(r.device));
		json_object_set_new(row, "kernels", json_integer((json_int_t)r.kernels));
		json_object_set_new(row, "recorded_span_s", json_real(r.recorded_span_s));
		json_object_set_new(row, "replay_span_s", json_real(r.replay_span_s));
		json_object_set_new(row, "recorded_gap_us_p50_p90_p99", rg);
		json_object_set_new(row, "replay_gap_us_p50_p90_p99", sg);
		json_array_append_new(rows, row);
	}
	json_t *root = json_object();
	json_object_set_new(root, "worst_span_error", json_real(worst));
	json_object_set_new(root, "traces", rows);
	char *s = json_dumps(root, JSON_COMPACT | JSON_REAL_PRECISION(6) | JSON_PRESERVE_ORDER);
	if (!o->json)
		printf("\nworst span error: %.1f%% (target: within 10%%)\n", 100 * worst);
	printf("%s\n", s ? s : "{}");
	free(s);
	json_decref(root);
	return 0;
}

static void usage(FILE *out)
{
	fprintf(out, "usage: gpumux bench NAME [--quick] [--json] [--scenarios DIR] [--traces DIR]\n"
		     "\n"
		     "benchmarks:\n"
		     "  calibrate  the unified-memory model against the MSched paper's measurements:\n"
		     "             the fault path's rates, um's share of inmem throughput on mixes A-D,\n"
		     "             fault batches per Llama3-8B step, the microbenchmark's collapse\n"
		     "  msched     proactive memory scheduling: mixes A-D at 150/200/300%% under um,\n"
		     "             msched, its ablations and ideal (also at msched's slice); micro; slice sweep;\n"
		     "             template accuracy\n"
		     "  frontier   um, ideal and msched at slices 2 ms .. 2 s on mixes A-D and micro at 200%%:\n"
		     "             share of same-slice inmem against the worst task's p99 latency\n"
		     "             (--quick: 5 s warm-up, 5 s measured)\n"
		     "  fikit      priority kernel scheduling: each scenarios/fikit pair under fikit,\n"
		     "             timeslice, streamprio and mps against alone; BestPrioFit decision cost\n"
		     "  speed      wall time and simulated kernels per second of every shipped scenario\n"
		     "             under um and ideal\n"
		     "  replay     each shipped profiler trace replayed alone on its recorded device:\n"
		     "             recorded against replayed span and same-stream gaps\n"
		     "\n"
		     "options:\n"
		     "  --quick          only the 150%% scenarios\n"
		     "  --json           print only the JSON object (a table and the JSON otherwise)\n"
		     "  --scenarios DIR  where the shipped scenarios are (default: scenarios)\n"
		     "  --traces DIR     where the shared traces are (default: ../shared/traces)\n"
		     "  -h, --help       show this help\n");
}

int gmx_cmd_bench(int argc, char **argv)
{
	static const struct option longopts[] = {
		{"quick", no_argument, 0, 'q'}, {"json", no_argument, 0, 'j'},
		{"scenarios", required_argument, 0, 's'}, {"traces", required_argument, 0, 't'},
		{"help", no_argument, 0, 'h'}, {0, 0, 0, 0},
	};
	bench_opts_t o = {.dir = "scenarios", .traces = "../shared/traces"};
	int c;
	optind = 1;
	opterr = 0;
	while ((c = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
		switch (c) {
		case 'q': o.quick = 1; break;
		case 'j': o.json = 1; break;
		case 's': o.dir = optarg; break;
		case 't': o.traces = optarg; break;
		case 'h': usage(stdout); return 0;
		default:
			fprintf(stderr, "gpumux bench: unknown or incomplete option '%s' (try gpumux bench --help)\n",
				argv[optind - 1]);
			return 2;
		}
	}
	if (optind != argc - 1) {
		fprintf(stderr, "gpumux bench: expected one benchmark name (try gpumux bench --help)\n");
		return 2;
	}
	const char *name = argv[optind];
	if (!strcmp(name, "calibrate"))
		return bench_calibrate(&o);
	if (!strcmp(name, "msched")) {
		int gmx_bench_msched(const char *dir, int quick, int json); /* bench_msched.c */
		return gmx_bench_msched(o.dir, o.quick, o.json);
	}
	if (!strcmp(name, "frontier")) {
		int gmx_bench_frontier(const char *dir, int quick, int json); /* bench_frontier.c */
		return gmx_bench_frontier(o.dir, o.quick, o.json);
	}
	if (!strcmp(name, "fikit")) {
		int gmx_bench_fikit(const char *dir, int quick, int json); /* bench_fikit.c */
		return gmx_bench_fikit(o.dir, o.quick, o.json);
	}
	if (!strcmp(name, "speed"))
		return bench_speed(&o);
	if (!strcmp(name, "replay"))
		return bench_replay(&o);
	fprintf(stderr, "gpumux bench: unknown benchmark '%s' (expected calibrate, msched, frontier, fikit, speed or replay)\n", name);
	return 2;
}
