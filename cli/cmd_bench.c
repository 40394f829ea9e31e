/* gpumux bench: benchmarks that print a table (and with --json one object).
 *   calibrate  (bench_calibrate.c) the unified-memory model against the MSched paper
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
#include "replay.h"
#include "bench_plot.h"
#include "bench_util.h"
#include "progress.h"
#include "scenario.h"

typedef struct bench_opts {
	const char *dir;    /* scenarios folder */
	const char *traces; /* the shared traces folder */
	int json, quick;
	const char *plot; /* --plot DIR: charts there, or NULL */
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
	int rc = gmx_progress_run(&sc, sched, mem, res, err, sizeof(err));
	if (seconds)
		*seconds = gmx_bench_wall_s() - t0;
	gmx_scenario_free(&sc);
	if (rc)
		fprintf(stderr, "gpumux bench: %s\n", err);
	return rc ? 1 : 0;
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
	if (o->plot && gmx_bench_plot(o->plot, "speed", root)) {
		json_decref(root);
		return 1;
	}
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
		printf("%-52s %-5s %7s %6s %6s %11s %11s %7s  %-22s %-22s\n", "trace", "dev", "kernels", "waits", "d2d",
		       "recorded s", "replayed s", "ratio", "gap us p50/p90 rec", "gap us p50/p90 sim");
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
			printf("%-52s %-5s %7llu %6llu %6llu %11.4f %11.4f %7.3f  %9.2f / %-10.2f %9.2f / %-10.2f\n",
			       replay_traces[i], r.device, (unsigned long long)r.kernels, (unsigned long long)r.waits,
			       (unsigned long long)r.d2d, r.recorded_span_s,
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
		json_object_set_new(row, "waits", json_integer((json_int_t)r.waits));
		json_object_set_new(row, "d2d_copies", json_integer((json_int_t)r.d2d));
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
	int prc = o->plot ? gmx_bench_plot(o->plot, "replay", root) : 0;
	json_decref(root);
	return prc;
}

static int bench_calibrate(const bench_opts_t *o)
{
	return gmx_bench_calibrate(o->dir, o->quick, o->json, o->plot);
}

static int bench_msched(const bench_opts_t *o)
{
	return gmx_bench_msched(o->dir, o->quick, o->json, o->plot);
}

static int bench_frontier(const bench_opts_t *o)
{
	return gmx_bench_frontier(o->dir, o->quick, o->json, o->plot);
}

static int bench_combined(const bench_opts_t *o)
{
	return gmx_bench_combined(o->dir, o->quick, o->json, o->plot);
}

static int bench_fikit(const bench_opts_t *o)
{
	return gmx_bench_fikit(o->dir, o->quick, o->json, o->plot);
}

/* Every benchmark, by name (the usage text describes each). */
static const struct {
	const char *name;
	int (*run)(const bench_opts_t *o);
} benches[] = {
	{"calibrate", bench_calibrate}, {"msched", bench_msched}, {"frontier", bench_frontier}, {"fikit", bench_fikit},
	{"speed", bench_speed},         {"replay", bench_replay},       {"combined", bench_combined},
};

static void usage(FILE *out)
{
	fprintf(out, "usage: gpumux bench NAME [--quick] [--json] [--scenarios DIR] [--traces DIR]\n"
		     "\n"
		     "benchmarks:\n"
		     "  calibrate  the unified-memory model against the MSched paper's measurements:\n"
		     "             the fault path's rates, um's share of same-schedule inmem against each\n"
		     "             of the paper's 15 bars (A-D, micro at 150/200/300%%), fault batches per\n"
		     "             Llama3-8B step and per micro task, pipelining gain, whole-allocation bytes\n"
		     "  msched     proactive memory scheduling: mixes A-D at 150/200/300%% under um,\n"
		     "             msched, its ablations and ideal (also at msched's slice); micro; slice sweep;\n"
		     "             template accuracy\n"
		     "  frontier   um, ideal, msched and msched-switch at slices 2 ms .. 2 s on mixes A-D and\n"
		     "             micro at 200%%:\n"
		     "             share of same-slice inmem against the worst task's p99 latency\n"
		     "             (--quick: 5 s warm-up, 5 s measured)\n"
		     "  fikit      priority kernel scheduling: each scenarios/fikit pair under fikit,\n"
		     "             timeslice (default sharing), hpf, streamprio and mps against alone; BestPrioFit decision cost\n"
		     "  combined   an HP service beside oversubscribed LP work (scenarios/combined): per\n"
		     "             policy (gpumux, xsched-um and the other baselines) HP p50/p99 against\n"
		     "             HP alone, LP units/s against LP alone (same policy and memory), bytes\n"
		     "             moved; --plot: HP p99 against LP throughput, one point per policy\n"
		     "             (--quick: half the windows)\n"
		     "  speed      wall time and simulated kernels per second of every shipped scenario\n"
		     "             under um and ideal\n"
		     "  replay     each shipped profiler trace replayed alone on its recorded device:\n"
		     "             recorded against replayed span and same-stream gaps, with the\n"
		     "             cross-stream waits and device-to-device copies it replays\n"
		     "\n"
		     "options:\n"
		     "  --quick          only the 150%% scenarios\n"
		     "  --json           print only the JSON object (a table and the JSON otherwise)\n"
		     "  --plot DIR       also draw the table as bar charts (SVG, PNG) in DIR (every benchmark)\n"
		     "  --scenarios DIR  where the shipped scenarios are (default: scenarios)\n"
		     "  --traces DIR     where the shared traces are (default: ../shared/traces)\n"
		     "  -h, --help       show this help\n");
}

int gmx_cmd_bench(int argc, char **argv)
{
	static const struct option longopts[] = {
		{"quick", no_argument, 0, 'q'}, {"json", no_argument, 0, 'j'},
		{"scenarios", required_argument, 0, 's'}, {"traces", required_argument, 0, 't'},
		{"plot", required_argument, 0, 'P'},
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
		case 'P': o.plot = optarg; break;
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
	/* Every row reaches a pipe or a file as soon as it is printed. */
	setvbuf(stdout, NULL, _IOLBF, 0);
	for (size_t i = 0; i < sizeof(benches) / sizeof(benches[0]); i++)
		if (!strcmp(name, benches[i].name))
			return benches[i].run(&o);
	fprintf(stderr, "gpumux bench: unknown benchmark '%s' (expected", name);
	for (size_t i = 0; i < sizeof(benches) / sizeof(benches[0]); i++)
		fprintf(stderr, "%s %s", i ? "," : "", benches[i].name);
	fprintf(stderr, ")\n");
	return 2;
}
