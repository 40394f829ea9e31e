/* gpumux bench combined: a latency-critical (HP) service beside oversubscribed
 * best-effort (LP) work, every scenario of scenarios/combined under every
 * policy of the table below. Per scenario and policy: HP p50/p99 against HP
 * alone, LP throughput against LP alone, both alone figures under the same
 * policy (scheduler, memory mode, slice) and device memory, and the bytes
 * moved. docs/combined.md. */
#include <dirent.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_plot.h"
#include "bench_util.h"
#include "scenario.h"

/* Every policy compared: a row each. Baselines add rows here (name, scheduler,
 * memory mode, what it is and where it comes from). */
typedef struct comb_policy {
	const char *name, *sched, *mem, *what;
	const char *fit_only; /* when set, the policy runs only where every task's memory fits: why */
} comb_policy_t;

static const comb_policy_t policies[] = {
	{"gpumux", "gpumux", "gpumux",
	 "the combined policy: HP first, immediate preemption, HP pages never evicted for LP, LP in "
	 "pieces over msched's timeline (docs/combined.md)",
	 NULL},
	{"xsched-um", "hpf", "um",
	 "XSched-like highest-priority-first at the scenario's slice over demand paging (the MSched "
	 "paper's baseline, section 7)",
	 NULL},
	{"tgs", "tgs", "um",
	 "TGS (NSDI'23): the GPU's time slicing with LP's launch rate adapted to HP's measured rate; "
	 "unified memory with LP pages evicted first (docs/baselines.md)",
	 NULL},
	{"reef", "reef", "um",
	 "REEF (OSDI'22): BE held while an RT request runs, BE kernels killed and re-run on an RT "
	 "arrival (reset-based preemption); over demand paging (docs/baselines.md)",
	 NULL},
	{"orion", "orion", "inmem",
	 "Orion (EuroSys'24): a BE kernel beside HP only when its SMs fit and its compute/memory "
	 "class differs (docs/baselines.md)",
	 "Orion runs its clients as threads of one process with every allocation resident: it "
	 "cannot oversubscribe"},
};
#define N_POLICIES (sizeof(policies) / sizeof(policies[0]))

/* One policy's figures on one scenario. */
typedef struct comb_row {
	double hp_p50, hp_p99, hp_alone_p50, hp_alone_p99;
	double lp, lp_alone;
	double h2d_gib, d2h_gib;
} comb_row_t;

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The best priority among the scenario's tasks. */
static int hp_level(const gmx_scenario_t *sc)
{
	int hp = GMX_PRIORITY_LEVELS;
	for (uint32_t i = 0; i < sc->n_tasks; i++)
		if (sc->tasks[i].priority < hp)
			hp = sc->tasks[i].priority;
	return hp;
}

/* Runs the tasks of sc selected by `which` (1 HP only, 2 LP only, 3 all) under p. */
static int run_subset(const gmx_scenario_t *sc, const comb_policy_t *p, int which, gmx_sim_result_t *r, char *err,
		      size_t err_len)
{
	int hp = hp_level(sc);
	gmx_scenario_t sub = *sc;
	gmx_sim_task_t tasks[GMX_MAX_TASKS];
	sub.tasks = tasks;
	sub.n_tasks = 0;
	for (uint32_t i = 0; i < sc->n_tasks; i++) {
		int is_hp = sc->tasks[i].priority == hp;
		if ((which & 1 && is_hp) || (which & 2 && !is_hp))
			tasks[sub.n_tasks++] = sc->tasks[i];
	}
	return gmx_scenario_run(&sub, p->sched, p->mem, r, err, err_len);
}

/* HP: the worst p50 and p99 over the HP tasks; LP: units per second summed. */
static void figures(const gmx_sim_result_t *r, int hp, double *p50, double *p99, double *lp)
{
	*p50 = *p99 = 0;
	*lp = 0;
	for (uint32_t i = 0; i < r->n_tasks; i++) {
		const gmx_task_result_t *t = &r->tasks[i];
		if (t->priority == hp) {
			double a = t->lat_p50_s >= 0 ? t->lat_p50_s : t->active_s;
			double b = t->lat_p99_s >= 0 ? t->lat_p99_s : t->active_s;
			*p50 = a > *p50 ? a : *p50;
			*p99 = b > *p99 ? b : *p99;
		} else {
			*lp += t->throughput_per_s;
		}
	}
}

static int run_policy(const gmx_scenario_t *sc, const comb_policy_t *p, comb_row_t *row, char *err, size_t err_len)
{
	int hp = hp_level(sc);
	gmx_sim_result_t *r = calloc(1, sizeof(*r));
	if (!r)
		return -1;
	double dummy;
	int rc = run_subset(sc, p, 3, r, err, err_len);
	if (!rc) {
		figures(r, hp, &row->hp_p50, &row->hp_p99, &row->lp);
		row->h2d_gib = (double)r->h2d_bytes / GMX_GIB;
		row->d2h_gib = (double)r->d2h_bytes / GMX_GIB;
		rc = run_subset(sc, p, 1, r, err, err_len);
	}
	if (!rc) {
		figures(r, hp, &row->hp_alone_p50, &row->hp_alone_p99, &dummy);
		rc = run_subset(sc, p, 2, r, err, err_len);
	}
	if (!rc)
		figures(r, hp, &dummy, &dummy, &row->lp_alone);
	free(r);
	return rc;
}

static json_t *row_json(const comb_policy_t *p, const comb_row_t *w)
{
	json_t *o = json_object();
	json_object_set_new(o, "policy", json_string(p->name));
	json_object_set_new(o, "sched", json_string(p->sched));
	json_object_set_new(o, "mem", json_string(p->mem));
	json_object_set_new(o, "hp_p50_s", json_real(w->hp_p50));
	json_object_set_new(o, "hp_p99_s", json_real(w->hp_p99));
	json_object_set_new(o, "hp_alone_p50_s", json_real(w->hp_alone_p50));
	json_object_set_new(o, "hp_alone_p99_s", json_real(w->hp_alone_p99));
	json_object_set_new(o, "lp_units_per_s", json_real(w->lp));
	json_object_set_new(o, "lp_alone_units_per_s", json_real(w->lp_alone));
	json_object_set_new(o, "h2d_gib", json_real(w->h2d_gib));
	json_object_set_new(o, "d2h_gib", json_real(w->d2h_gib));
	return o;
}

/* The scenario files under dir/combined, sorted; NULL-terminated, or NULL. */
static char **list_scenarios(const char *dir, uint32_t *n)
{
	char path[1024];
	snprintf(path, sizeof(path), "%s/combined", dir);
	DIR *d = opendir(path);
	*n = 0;
	if (!d)
		return NULL;
	char **v = NULL;
	uint32_t cap = 0;
	struct dirent *e;
	while ((e = readdir(d))) {
		size_t l = strlen(e->d_name);
		if (l < 5 || strcmp(e->d_name + l - 4, ".ini") != 0)
			continue;
		if (*n + 1 >= cap) {
			cap = cap ? 2 * cap : 16;
			char **q = realloc(v, cap * sizeof(*q));
			if (!q)
				break;
			v = q;
		}
		size_t need = strlen(path) + l + 2;
		v[*n] = malloc(need);
		if (!v[*n])
			break;
		snprintf(v[*n], need, "%s/%s", path, e->d_name);
		(*n)++;
	}
	closedir(d);
	if (v) {
		qsort(v, *n, sizeof(*v), cmp_str);
		v[*n] = NULL;
	}
	return v;
}

int gmx_bench_combined(const char *dir, int quick, int json, const char *plot)
{
	uint32_t n = 0;
	char **files = list_scenarios(dir, &n);
	if (!n) {
		fprintf(stderr, "gpumux bench combined: no scenarios in %s/combined\n", dir);
		free(files);
		return 1;
	}
	int failed = 0;
	json_t *scen = json_array();
	if (!json) {
		printf("HP = the best priority's tasks (worst p99 over them); LP = every other task (units/s summed).\n"
		       "alone = the same tasks without the others, under the same policy and device memory.\n\n");
		printf("%-22s %-10s %9s %9s %7s %9s %9s %7s %8s %8s\n", "scenario", "policy", "HPp50", "HPp99",
		       "p99/al", "LP/s", "LPal/s", "LP/al", "inGiB", "outGiB");
	}
	for (uint32_t f = 0; f < n; f++) {
		gmx_scenario_t sc;
		char err[512];
		if (gmx_scenario_load(files[f], &sc, err, sizeof(err))) {
			fprintf(stderr, "gpumux bench combined: %s\n", err);
			failed = 1;
			continue;
		}
		if (quick) {
			sc.warmup_ns /= 2;
			sc.duration_ns /= 2;
		}
		uint64_t footprint = 0;
		for (uint32_t i = 0; i < sc.n_tasks; i++)
			footprint += gmx_workload_footprint(sc.tasks[i].workload);
		json_t *pol = json_array();
		for (size_t k = 0; k < N_POLICIES; k++) {
			comb_row_t w = {0};
			if (policies[k].fit_only && footprint > sc.capacity_bytes) {
				json_t *o = json_object();
				json_object_set_new(o, "policy", json_string(policies[k].name));
				json_object_set_new(o, "sched", json_string(policies[k].sched));
				json_object_set_new(o, "mem", json_string(policies[k].mem));
				json_object_set_new(o, "skipped", json_string(policies[k].fit_only));
				json_array_append_new(pol, o);
				if (!json)
					printf("%-22s %-10s n/a: %.1f GiB on %.1f GiB, and %s\n", k ? "" : sc.name,
					       policies[k].name, footprint / GMX_GIB, sc.capacity_bytes / GMX_GIB,
					       policies[k].fit_only);
				continue;
			}
			if (run_policy(&sc, &policies[k], &w, err, sizeof(err))) {
				fprintf(stderr, "gpumux bench combined: %s under %s: %s\n", sc.name, policies[k].name, err);
				failed = 1;
				continue;
			}
			json_array_append_new(pol, row_json(&policies[k], &w));
			if (!json)
				printf("%-22s %-10s %8.3fs %8.3fs %6.2fx %9.3f %9.3f %6.1f%% %8.1f %8.1f\n",
				       k ? "" : sc.name, policies[k].name, w.hp_p50, w.hp_p99,
				       w.hp_alone_p99 > 0 ? w.hp_p99 / w.hp_alone_p99 : NAN, w.lp, w.lp_alone,
				       w.lp_alone > 0 ? 100 * w.lp / w.lp_alone : NAN, w.h2d_gib, w.d2h_gib);
		}
		json_t *o = json_object();
		json_object_set_new(o, "name", json_string(sc.name));
		json_object_set_new(o, "device", json_string(sc.device->name));
		json_object_set_new(o, "capacity_gib", json_real((double)sc.capacity_bytes / GMX_GIB));
		json_object_set_new(o, "policies", pol);
		json_array_append_new(scen, o);
		gmx_scenario_free(&sc);
	}
	for (uint32_t f = 0; f < n; f++)
		free(files[f]);
	free(files);
	json_t *root = json_object();
	json_t *pl = json_array();
	for (size_t k = 0; k < N_POLICIES; k++) {
		json_t *o = json_object();
		json_object_set_new(o, "policy", json_string(policies[k].name));
		json_object_set_new(o, "sched", json_string(policies[k].sched));
		json_object_set_new(o, "mem", json_string(policies[k].mem));
		json_object_set_new(o, "what", json_string(policies[k].what));
		json_array_append_new(pl, o);
	}
	json_object_set_new(root, "policies", pl);
	json_object_set_new(root, "scenarios", scen);
	if (json) {
		char *s = json_dumps(root, JSON_COMPACT | JSON_REAL_PRECISION(6) | JSON_PRESERVE_ORDER);
		if (s)
			puts(s);
		free(s);
	} else {
		printf("\npolicies:\n");
		for (size_t k = 0; k < N_POLICIES; k++)
			printf("  %-10s --sched %s --mem %s: %s\n", policies[k].name, policies[k].sched, policies[k].mem,
			       policies[k].what);
	}
	if (plot && gmx_bench_plot(plot, "combined", root))
		failed = 1;
	json_decref(root);
	return failed;
}
