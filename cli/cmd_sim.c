/* gpumux sim: run a scenario on the simulated GPU. */
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "chart.h"
#include "commands.h"
#include "msched.h"
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
		"                   link time only), msched (proactive: templates; Belady's rule on the\n"
		"                   predicted timeline at every kernel, the coming turns streaming\n"
		"                   in during a turn), msched-switch (its former planner: each\n"
		"                   turn's pages loaded at its switch),\n"
		"                   msched-wholealloc|msched-serial|msched-fifo (msched-switch's ablations),\n"
		"                   gpumux (msched-switch with priorities: HP pages never evicted for LP;\n"
		"                   with --sched gpumux, docs/combined.md)\n"
		"                   (default: the scenario's, else inmem)\n"
		"  --seed N         random seed for arrivals (default: the scenario's, else 1)\n"
		"  --only TASK      run only this task, alone (its 'alone' figures)\n"
		"  --duration S     simulated seconds to measure (default: the scenario's, else 10)\n"
		"  --warmup S       simulated seconds to run first, not measured (default: the\n"
		"                   scenario's warmup_s, else 0)\n"
		"  --slice-ms MS    timeslice length (default: the scenario's, else 2)\n"
		"  --mem-slice-ms MS  one fixed slice for the msched modes (default: the scenario's\n"
		"                   mem_slice_ms; without one, msched picks each turn's slice by its\n"
		"                   rule: migration <= 10%% of the turn, within the tasks'\n"
		"                   latency_target_ms); ideal keeps the scenario's schedule\n"
		"  --mem-forgo-turns  msched: forgo a turn the link cannot feed, its pages behind\n"
		"                   the next turn's (more work done, the worst task may get less;\n"
		"                   default: the scenario's mem_forgo_turns, else every turn served)\n"
		"  --profile FILE   kernel profiles for fikit (gpumux profile record); default:\n"
		"                   measure each task alone first\n"
		"  --compare        inmem and um at the native slice; inmem, um, ideal and msched at\n"
		"                   msched's slice; each as a share of inmem under the same schedule,\n"
		"                   with per-task p99 latency and the worst task's share\n"
		"  --timeline FILE  also draw the run as a Gantt chart, FILE.svg or FILE.png: per task\n"
		"                   its kernels, copies, waits, migrations in/out and turns\n"
		"  --timeline-ms MS the chart's window (default 100 ms)\n"
		"  --timeline-from MS  where it starts (default: the end of the warm-up)\n"
		"  --json           print one JSON object instead of a table (with --compare:\n"
		"                   {scenario, device, seed, compare, native_slice_ms, msched_slice_ms, runs: [one report per run]})\n"
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

/* Runs one mode under `sched` at slice `slice_ns` (the msched modes at
 * their own slice, the others at the given one). */
static int run_at(gmx_scenario_t *sc, const char *sched, const char *mem, int64_t slice_ns, gmx_sim_result_t *res)
{
	gmx_scenario_t copy = *sc;
	copy.params.slice_ns = slice_ns;
	return run(&copy, sched, mem, res);
}

/* A share of a reference, per task and over tasks. */
static double share(const gmx_sim_result_t *a, const gmx_sim_result_t *ref, uint32_t i)
{
	double b = ref->tasks[i].throughput_per_s;
	return b > 0 ? a->tasks[i].throughput_per_s / b : 0;
}

static void share_stats(const gmx_sim_result_t *a, const gmx_sim_result_t *ref, double *mean, double *worst)
{
	double s = 0, w = 1e300;
	for (uint32_t i = 0; i < a->n_tasks; i++) {
		double x = share(a, ref, i);
		s += x;
		if (x < w)
			w = x;
	}
	*mean = a->n_tasks ? s / a->n_tasks : 0;
	*worst = a->n_tasks ? w : 0;
}

static void print_p99(double s)
{
	if (s < 0)
		printf(" %12s", "-");
	else if (s < 1)
		printf(" %10.0fms", s * 1e3);
	else
		printf(" %11.2fs", s);
}

/* Every memory mode side by side, each divided by unlimited memory (inmem)
 * under the same schedule and slice: the GPU's native time slicing for inmem
 * and um, msched's slice (under the timeline scheduler) for inmem, um, ideal
 * and msched; and what the schedule change alone does to inmem. */
static int compare(gmx_scenario_t *sc, int json)
{
	enum { IN_N, UM_N, IN_L, UM_L, ID_L, MS_L, N };
	static const char *const label[N] = {"inmem", "um", "inmem", "um", "ideal", "msched"};
	gmx_sim_result_t *r = calloc(N, sizeof(*r));
	if (!r)
		return 1;
	int64_t nat = sc->params.slice_ns, ms = sc->mem_slice_ns;
	/* msched first: under its slice rule (no fixed mem_slice_ms), the others
	 * run at the mean slice it picked. */
	int rc = run_at(sc, "timeslice", "msched", nat, &r[MS_L]);
	int rule = !rc && r[MS_L].msched.slice_auto;
	if (rule)
		ms = (int64_t)llround(r[MS_L].msched.slice_mean_ms * 1e6);
	if (!rc)
		rc = run_at(sc, "timeslice", "inmem", nat, &r[IN_N]);
	if (!rc)
		rc = run_at(sc, "timeslice", "um", nat, &r[UM_N]);
	if (!rc)
		rc = run_at(sc, "timeline", "inmem", ms, &r[IN_L]);
	if (!rc)
		rc = run_at(sc, "timeline", "um", ms, &r[UM_L]);
	if (!rc)
		rc = run_at(sc, "timeline", "ideal", ms, &r[ID_L]);
	if (rc) {
		free(r);
		return rc;
	}
	if (json) {
		/* {"scenario", "device", "seed", "compare", "slices", "runs": [one report per run, as --json
		 * prints it, with its sched and slice]} */
		json_t *root = json_object(), *runs = json_array();
		if (root && runs) {
			json_object_set_new(root, "scenario", json_string(sc->name));
			json_object_set_new(root, "device", json_string(sc->device->name));
			json_object_set_new(root, "seed", json_integer((json_int_t)sc->seed));
			json_object_set_new(root, "compare", json_true());
			json_object_set_new(root, "native_slice_ms", json_real((double)nat / 1e6));
			json_object_set_new(root, "msched_slice_ms", json_real((double)ms / 1e6));
			for (int m = 0; m < N; m++) {
				gmx_run_info_t info = {sc->name, m == IN_N || m == UM_N || m == MS_L ? "timeslice" : "timeline",
						       label[m], sc->device->name, sc->seed};
				json_t *o = gmx_report_object(&info, &r[m]);
				json_object_set_new(o, "slice_ms", json_real((double)(m < IN_L ? nat : ms) / 1e6));
				json_array_append_new(runs, o);
			}
			json_object_set_new(root, "runs", runs);
			runs = NULL;
		}
		json_decref(runs);
		free(r);
		return gmx_report_print(stdout, root) ? 1 : 0;
	}
	double n_ms = nat / 1e6, l_ms = ms / 1e6;
	printf("%s on %s: %u tasks, %.2f GiB of memory on %.2f GiB\n", sc->name, sc->device->name, sc->n_tasks,
	       r[0].footprint_bytes / GMX_GIB, sc->capacity_bytes / GMX_GIB);
	if (sc->warmup_ns > 0)
		printf("measured over %.1f simulated s after a %.1f s warm-up\n", sc->duration_ns / 1e9,
		       sc->warmup_ns / 1e9);
	else
		printf("measured over %.1f simulated s from the start\n", sc->duration_ns / 1e9);
	if (rule)
		printf("msched picks each turn's slice by its rule (migration <= %.0f%% of the turn, latency targets):\n"
		       "%.0f-%.0f ms, mean %.0f ms; the other modes run at that mean\n",
		       100 * GMX_MSCHED_MIGRATION_SHARE, r[MS_L].msched.slice_min_ms, r[MS_L].msched.slice_max_ms,
		       r[MS_L].msched.slice_mean_ms);
	printf("every %% is of unlimited memory (inmem) under the same schedule and slice\n\n");
	char hn[48], hl[96];
	snprintf(hn, sizeof(hn), "native %g ms", n_ms);
	snprintf(hl, sizeof(hl), "msched's slice, %g ms (timeline scheduler)", l_ms);
	printf("%-12s %-21s | %s\n", "", hn, hl);
	printf("%-12s %10s %10s | %10s %7s %7s %7s %7s\n", "task", "inmem u/s", "um", "inmem u/s", "slice", "um",
	       "ideal", "msched");
	int above = 0;
	for (uint32_t i = 0; i < sc->n_tasks; i++) {
		double sl = share(&r[IN_L], &r[IN_N], i);
		printf("%-12s %10.3f %9.1f%% | %10.3f %6.0f%% %6.1f%% %6.1f%% %6.1f%%\n", r[0].tasks[i].name,
		       r[IN_N].tasks[i].throughput_per_s, 100 * share(&r[UM_N], &r[IN_N], i),
		       r[IN_L].tasks[i].throughput_per_s, 100 * sl, 100 * share(&r[UM_L], &r[IN_L], i),
		       100 * share(&r[ID_L], &r[IN_L], i), 100 * share(&r[MS_L], &r[IN_L], i));
		for (int m = UM_L; m <= MS_L; m++)
			above |= share(&r[m], &r[IN_L], i) > 1.0005;
	}
	double mean[N], worst[N];
	for (int m = 0; m < N; m++)
		share_stats(&r[m], m < IN_L ? &r[IN_N] : &r[IN_L], &mean[m], &worst[m]);
	double sm, sw;
	share_stats(&r[IN_L], &r[IN_N], &sm, &sw);
	printf("%-12s %10s %9.1f%% | %10s %6.0f%% %6.1f%% %6.1f%% %6.1f%%\n", "mean", "", 100 * mean[UM_N], "", 100 * sm,
	       100 * mean[UM_L], 100 * mean[ID_L], 100 * mean[MS_L]);
	printf("%-12s %10s %9.1f%% | %10s %6.0f%% %6.1f%% %6.1f%% %6.1f%%\n\n", "worst task", "", 100 * worst[UM_N], "",
	       100 * sw, 100 * worst[UM_L], 100 * worst[ID_L], 100 * worst[MS_L]);
	printf("p99 of each task's unit latency (a decode step, an inference):\n%-12s", "task");
	for (int m = 0; m < N; m++) {
		char h[32];
		snprintf(h, sizeof(h), "%s %gms", label[m], m < IN_L ? n_ms : l_ms);
		printf(" %12s", h);
	}
	putchar('\n');
	for (uint32_t i = 0; i < sc->n_tasks; i++) {
		printf("%-12s", r[0].tasks[i].name);
		for (int m = 0; m < N; m++)
			print_p99(r[m].tasks[i].lat_p99_s);
		putchar('\n');
	}
	putchar('\n');
	printf("slice: inmem at %.0f ms over inmem at %.0f ms, what the longer slice alone does with unlimited\n"
	       "memory (above 100%%: fewer context switches, and the timeline scheduler holds a turn through\n"
	       "host gaps under 1 ms; below: a task waits longer for its turn). um, ideal and msched divide\n"
	       "by inmem at %.0f ms. ideal: the memory limit, a proven upper bound on the mean share any\n"
	       "memory policy keeps at that slice (docs/simulator.md), shown for every task; it may exceed\n"
	       "100%%, as far as its relaxations leave room.\n",
	       l_ms, n_ms, l_ms);
	if (above)
		printf("a share above 100%% of same-schedule inmem: the slices are the same, but a turn ends when its\n"
		       "kernel does, and a kernel that waited for pages ends later; so that mode's turns (and the\n"
		       "order tasks catch their next turn) shift a little from inmem's, which can favour a task.\n");
	double ms_nat, ms_nat_worst; /* msched as a share of inmem at the native slice */
	share_stats(&r[MS_L], &r[IN_N], &ms_nat, &ms_nat_worst);
	printf("msched over um at equal %.0f ms slices: %.2fx; over um at the GPU's native %.0f ms slicing (both of\n"
	       "inmem at that slice): %.2fx\n",
	       l_ms, mean[UM_L] > 0 ? mean[MS_L] / mean[UM_L] : 0, n_ms, mean[UM_N] > 0 ? ms_nat / mean[UM_N] : 0);
	printf("memory traffic in / out: um %.1f / %.1f GiB (%llu fault batches) at %.0f ms; at %.0f ms: msched\n"
	       "%.1f / %.1f GiB\n",
	       r[UM_N].h2d_bytes / GMX_GIB, r[UM_N].d2h_bytes / GMX_GIB, (unsigned long long)r[UM_N].faults, n_ms, l_ms,
	       r[MS_L].h2d_bytes / GMX_GIB, r[MS_L].d2h_bytes / GMX_GIB);
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
		{"mem-forgo-turns", no_argument, 0, 'g'},
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
	int json = 0, cmp = 0, forgo = 0, c;
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
		case 'g': forgo = 1; break;
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
	if (forgo)
		sc.mem_forgo_turns = 1;
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
