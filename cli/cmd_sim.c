/* gpumux sim: run a scenario on the simulated GPU. */
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "chart.h"
#include "commands.h"
#include "progress.h"
#include "gpumux/numparse.h"
#include "report.h"
#include "scenario.h"

static void usage(FILE *out)
{
	char scheds[128];
	gmx_sched_names(scheds, sizeof(scheds));
	fprintf(out,
		"usage: gpumux sim SCENARIO.ini [options]\n"
		"\n"
		"Runs the scenario's tasks together on a simulated GPU and reports each task's\n"
		"throughput, job completion time and unit latency, and the memory traffic.\n"
		"\n"
		"options:\n"
		"  --sched NAME     scheduler: %s (default: the scenario's, else timeslice)\n"
		"  --mem MODE       memory: inmem (unlimited device memory, the reference), um (CUDA\n"
		"                   unified memory, demand paging), ideal (Belady over the future,\n"
		"                   link time only), msched (proactive: templates + timeline planner),\n"
		"                   msched-wholealloc|msched-serial|msched-fifo (its ablations)\n"
		"                   (default: the scenario's, else inmem)\n"
		"  --seed N         random seed for arrivals (default: the scenario's, else 1)\n"
		"  --only TASK      run only this task, alone (its 'alone' figures)\n"
		"  --duration S     simulated seconds to measure (default: the scenario's, else 10)\n"
		"  --warmup S       simulated seconds to run first, not measured (default: the\n"
		"                   scenario's warmup_s, else 0)\n"
		"  --slice-ms MS    timeslice length (default: the scenario's, else 2)\n"
		"  --mem-slice-ms MS  slice of the msched modes (default: the scenario's\n"
		"                   mem_slice_ms, else 200); ideal keeps the scenario's schedule\n"
		"  --profile FILE   kernel profiles for fikit (gpumux profile record); default:\n"
		"                   measure each task alone first\n"
		"  --compare        run inmem, um, ideal and msched and print them side by side\n"
		"  --timeline FILE  also draw the run as a Gantt chart, FILE.svg or FILE.png: per task\n"
		"                   its kernels, copies, waits, migrations in/out and turns\n"
		"  --timeline-ms MS the chart's window (default 100 ms)\n"
		"  --timeline-from MS  where it starts (default: the end of the warm-up)\n"
		"  --json           print one JSON object instead of a table (with --compare:\n"
		"                   {scenario, device, seed, compare, runs: [one report per mode]})\n"
		"  -h, --help       show this help\n"
		"\n"
		"Same scenario, options and seed give byte-identical output. See gpumux-sim(1)\n"
		"and docs/scenarios.md.\n",
		scheds);
}

static int parse_num(const char *opt, const char *v, double lo, double hi, double *out)
{
	if (gmx_parse_real(v, lo, hi, out)) {
		fprintf(stderr, "gpumux sim: %s '%s': expected a decimal number in [%g, %g]\n", opt, v, lo, hi);
		return -1;
	}
	return 0;
}

static int run(gmx_scenario_t *sc, const char *sched, const char *mem, gmx_sim_result_t *res)
{
	char err[1024];
	int rc = gmx_progress_run(sc, sched, mem, res, err, sizeof(err));
	if (rc)
		fprintf(stderr, "gpumux sim: %s\n", err);
	return rc ? 1 : 0;
}

/* --timeline: where, and which window of the run (ms from its start; from < 0: the warm-up's end). */
typedef struct {
	const char *path;
	double from_ms, span_ms;
} tl_opts_t;

/* Draws the recorded run's chart; 0 or 1 with the reason on stderr. */
static int draw_timeline(const tl_opts_t *o, const gmx_sim_timeline_t *tl, const gmx_scenario_t *sc,
			 const gmx_sim_result_t *res, const char *sched, const char *mem, int64_t from)
{
	gmx_chart_task_t tasks[GMX_MAX_TASKS];
	for (uint32_t i = 0; i < sc->n_tasks; i++)
		tasks[i] = (gmx_chart_task_t){sc->tasks[i].name, sc->tasks[i].priority};
	int64_t to = from + (int64_t)llround(o->span_ms * 1e6), end = (int64_t)llround(res->sim_time_s * 1e9);
	if (to > end)
		to = end;
	char title[256], err[512];
	snprintf(title, sizeof title, "%s on %s: %s, memory %s (%.0f ms from %.0f ms)", sc->name, sc->device->name,
		 sched, mem, (to - from) / 1e6, from / 1e6);
	if (gmx_chart_timeline(o->path, tl, tasks, sc->n_tasks, from, to, title, err, sizeof err)) {
		fprintf(stderr, "gpumux sim: --timeline %s\n", err);
		return 1;
	}
	fprintf(stderr, "gpumux sim: timeline of %.4g ms written to %s\n", (to - from) / 1e6, o->path);
	return 0;
}

static int report(gmx_scenario_t *sc, const char *sched, const char *mem, int json, const tl_opts_t *tlo)
{
	gmx_sim_result_t *res = calloc(1, sizeof(*res));
	if (!res)
		return 1;
	gmx_sim_timeline_t tl = {0};
	int64_t from = tlo->from_ms >= 0 ? (int64_t)llround(tlo->from_ms * 1e6) : sc->warmup_ns;
	if (tlo->path) {
		tl.until_ns = from + (int64_t)llround(tlo->span_ms * 1e6);
		sc->timeline = &tl;
	}
	int rc = run(sc, sched, mem, res);
	sc->timeline = NULL;
	if (!rc && tlo->path)
		rc = draw_timeline(tlo, &tl, sc, res, sched, mem, from);
	free(tl.spans);
	if (!rc) {
		gmx_run_info_t info = {sc->name, sched, mem, sc->device->name, sc->seed};
		if (json)
			rc = gmx_report_json(stdout, &info, res) ? 1 : 0;
		else
			gmx_report_table(stdout, &info, res);
	}
	free(res);
	return rc;
}

/* Every memory mode side by side: inmem, um and ideal under the scenario's
 * timeslice, msched at its own slice. */
static int compare(gmx_scenario_t *sc, int json)
{
	static const char *const modes[] = {"inmem", "um", "ideal", "msched"};
	enum { N = sizeof(modes) / sizeof(modes[0]) };
	gmx_sim_result_t *r = calloc(N, sizeof(*r));
	if (!r)
		return 1;
	for (int m = 0; m < N; m++) {
		int rc = run(sc, "timeslice", modes[m], &r[m]);
		if (rc) {
			free(r);
			return rc;
		}
	}
	if (json) {
		/* {"scenario", "device", "seed", "runs": [one report per mode, as --json prints it]} */
		json_t *root = json_object(), *runs = json_array();
		if (root && runs) {
			json_object_set_new(root, "scenario", json_string(sc->name));
			json_object_set_new(root, "device", json_string(sc->device->name));
			json_object_set_new(root, "seed", json_integer((json_int_t)sc->seed));
			json_object_set_new(root, "compare", json_true());
			for (int m = 0; m < N; m++) {
				gmx_run_info_t info = {sc->name, "timeslice", modes[m], sc->device->name, sc->seed};
				json_array_append_new(runs, gmx_report_object(&info, &r[m]));
			}
			json_object_set_new(root, "runs", runs);
			runs = NULL;
		}
		json_decref(runs);
		free(r);
		return gmx_report_print(stdout, root) ? 1 : 0;
	}
	printf("%s on %s: %u tasks, %.2f GiB of memory on %.2f GiB; timeslice %.1f ms, msched slice %.0f ms\n",
	       sc->name, sc->device->name, sc->n_tasks, r[0].footprint_bytes / GMX_GIB, sc->capacity_bytes / GMX_GIB,
	       sc->params.slice_ns / 1e6, sc->mem_slice_ns / 1e6);
	if (sc->warmup_ns > 0)
		printf("measured over %.1f simulated s after a %.1f s warm-up\n", sc->duration_ns / 1e9,
		       sc->warmup_ns / 1e9);
	else
		printf("measured over %.1f simulated s from the start\n", sc->duration_ns / 1e9);
	putchar('\n');
	printf("%-12s %10s %10s %10s %10s %9s %9s %9s\n", "task", "inmem u/s", "um u/s", "ideal u/s", "msched u/s",
	       "um", "ideal", "msched");
	double sum[N] = {0};
	for (uint32_t i = 0; i < sc->n_tasks; i++) {
		double base = r[0].tasks[i].throughput_per_s, rel[N];
		for (int m = 0; m < N; m++) {
			rel[m] = base > 0 ? r[m].tasks[i].throughput_per_s / base : 0;
			sum[m] += rel[m];
		}
		printf("%-12s %10.3f %10.3f %10.3f %10.3f %8.1f%% %8.1f%% %8.1f%%\n", r[0].tasks[i].name, base,
		       r[1].tasks[i].throughput_per_s, r[2].tasks[i].throughput_per_s, r[3].tasks[i].throughput_per_s,
		       100 * rel[1], 100 * rel[2], 100 * rel[3]);
	}
	printf("%-12s %10s %10s %10s %10s %8.1f%% %8.1f%% %8.1f%%  (of inmem)\n\n", "mean", "", "", "", "",
	       100 * sum[1] / sc->n_tasks, 100 * sum[2] / sc->n_tasks, 100 * sum[3] / sc->n_tasks);
	printf("um: demand paging; ideal: Belady's optimal eviction at link speed, the limit of the %.0f ms\n"
	       "schedule; msched: proactive migration at each switch of its %.0f ms slices (gpumux bench msched\n"
	       "holds it to the ideal of its own slice).\n",
	       sc->params.slice_ns / 1e6, sc->mem_slice_ns / 1e6);
	printf("memory traffic in / out: um %.1f / %.1f GiB (%llu fault batches), ideal %.1f / %.1f GiB, msched %.1f / "
	       "%.1f GiB\n",
	       r[1].h2d_bytes / GMX_GIB, r[1].d2h_bytes / GMX_GIB, (unsigned long long)r[1].faults,
	       r[2].h2d_bytes / GMX_GIB, r[2].d2h_bytes / GMX_GIB, r[3].h2d_bytes / GMX_GIB, r[3].d2h_bytes / GMX_GIB);
	free(r);
	return 0;
}

int gmx_cmd_sim(int argc, char **argv)
{
	static const struct option longopts[] = {
		{"sched", required_argument, 0, 's'}, {"mem", required_argument, 0, 'm'},
		{"seed", required_argument, 0, 'S'},  {"only", required_argument, 0, 'o'},
		{"duration", required_argument, 0, 'd'}, {"warmup", required_argument, 0, 'w'},
		{"slice-ms", required_argument, 0, 'l'}, {"mem-slice-ms", required_argument, 0, 'L'},
		{"json", no_argument, 0, 'j'},        {"compare", no_argument, 0, 'c'},
		{"profile", required_argument, 0, 'p'},
		{"timeline", required_argument, 0, 'T'}, {"timeline-ms", required_argument, 0, 'M'},
		{"timeline-from", required_argument, 0, 'F'},
		{"help", no_argument, 0, 'h'},        {0, 0, 0, 0},
	};
	const char *sched = NULL, *mem = NULL, *only = NULL, *profile = NULL;
	double duration = -1, warmup = -1, slice = -1, mem_slice = -1;
	uint64_t seed = 0;
	int have_seed = 0;
	int json = 0, cmp = 0, c;
	tl_opts_t tlo = {NULL, -1, 100};
	optind = 1;
	opterr = 0;
	while ((c = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
		switch (c) {
		case 's':
			sched = optarg;
			if (!gmx_sched_find(sched)) {
				char names[128];
				gmx_sched_names(names, sizeof(names));
				fprintf(stderr, "gpumux sim: --sched: unknown scheduler '%s' (expected %s)\n", sched, names);
				return 2;
			}
			break;
		case 'm':
			mem = optarg;
			if (gmx_mem_mode_parse(mem) < 0) {
				fprintf(stderr, "gpumux sim: --mem: unknown memory mode '%s' (expected %s)\n", mem,
					GMX_MEM_MODE_NAMES);
				return 2;
			}
			break;
		case 'o': only = optarg; break;
		case 'p': profile = optarg; break;
		case 'j': json = 1; break;
		case 'c': cmp = 1; break;
		case 'T': tlo.path = optarg; break;
		case 'M':
			if (parse_num("--timeline-ms", optarg, 0.001, 86400e3, &tlo.span_ms))
				return 2;
			break;
		case 'F':
			if (parse_num("--timeline-from", optarg, 0, 86400e3, &tlo.from_ms))
				return 2;
			break;
		case 'S':
			if (gmx_parse_uint(optarg, 0, UINT64_MAX, &seed)) {
				fprintf(stderr, "gpumux sim: --seed '%s': expected a non-negative decimal integer\n", optarg);
				return 2;
			}
			have_seed = 1;
			break;
		case 'd':
			if (parse_num("--duration", optarg, 1e-6, 86400, &duration))
				return 2;
			break;
		case 'w':
			if (parse_num("--warmup", optarg, 0, 86400, &warmup))
				return 2;
			break;
		case 'l':
			if (parse_num("--slice-ms", optarg, GMX_SLICE_MS_MIN, GMX_SLICE_MS_MAX, &slice))
				return 2;
			break;
		case 'L':
			if (parse_num("--mem-slice-ms", optarg, GMX_SLICE_MS_MIN, GMX_SLICE_MS_MAX, &mem_slice))
				return 2;
			break;
		case 'h': usage(stdout); return 0;
		default:
			fprintf(stderr, "gpumux sim: unknown or incomplete option '%s' (try gpumux sim --help)\n",
				argv[optind - 1]);
			return 2;
		}
	}
	if (tlo.path) {
		size_t l = strlen(tlo.path);
		if (l < 5 || (strcmp(tlo.path + l - 4, ".svg") && strcmp(tlo.path + l - 4, ".png"))) {
			fprintf(stderr, "gpumux sim: --timeline %s: expected a file name ending in .svg or .png\n", tlo.path);
			return 2;
		}
	}
	if (optind != argc - 1) {
		fprintf(stderr, "gpumux sim: expected exactly one scenario file (try gpumux sim --help)\n");
		return 2;
	}
	gmx_scenario_t sc;
	char err[1024];
	if (gmx_scenario_load(argv[optind], &sc, err, sizeof(err))) {
		fprintf(stderr, "gpumux sim: %s\n", err);
		return 1;
	}
	sc.profile = profile;
	if (have_seed)
		sc.seed = seed;
	if (duration > 0)
		sc.duration_ns = (int64_t)llround(duration * 1e9);
	if (warmup >= 0)
		sc.warmup_ns = (int64_t)llround(warmup * 1e9);
	if (slice > 0)
		sc.params.slice_ns = (int64_t)llround(slice * 1e6);
	if (mem_slice > 0)
		sc.mem_slice_ns = (int64_t)llround(mem_slice * 1e6);
	uint32_t all = sc.n_tasks;
	if (only) {
		uint32_t k = 0;
		while (k < sc.n_tasks && strcmp(sc.tasks[k].name, only))
			k++;
		if (k == sc.n_tasks) {
			fprintf(stderr, "gpumux sim: --only %s: no such task in %s (tasks:", only, sc.path);
			for (uint32_t i = 0; i < sc.n_tasks; i++)
				fprintf(stderr, " %s", sc.tasks[i].name);
			fprintf(stderr, ")\n");
			gmx_scenario_free(&sc);
			return 2;
		}
		/* The chosen task runs alone; the others stay allocated past
		 * n_tasks so that gmx_scenario_free still frees them. */
		gmx_sim_task_t keep = sc.tasks[k];
		sc.tasks[k] = sc.tasks[0];
		sc.tasks[0] = keep;
		sc.n_tasks = 1;
	}
	int rc = cmp ? compare(&sc, json) : report(&sc, sched ? sched : sc.sched, mem ? mem : sc.mem, json, &tlo);
	sc.n_tasks = all;
	gmx_scenario_free(&sc);
	return rc;
}
