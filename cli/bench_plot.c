/* gpumux bench --plot DIR: each benchmark's table as bar charts (SVG), drawn from the JSON
 * object the benchmark prints. */
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "bench_plot.h"
#include "chart.h"

#define MAX_GROUPS 64
#define MAX_SERIES 12

typedef struct {
	const char *groups[MAX_GROUPS], *series[MAX_SERIES];
	uint32_t ng, ns;
	double v[MAX_GROUPS * MAX_SERIES];
} table_t;

static uint32_t slot(const char **names, uint32_t *n, uint32_t max, const char *name)
{
	for (uint32_t i = 0; i < *n; i++)
		if (!strcmp(names[i], name))
			return i;
	if (*n == max)
		return max;
	names[*n] = name;
	return (*n)++;
}

static void table_init(table_t *t)
{
	memset(t, 0, sizeof *t);
	for (uint32_t i = 0; i < MAX_GROUPS * MAX_SERIES; i++)
		t->v[i] = NAN;
}

static void table_set(table_t *t, const char *group, const char *series, double v)
{
	uint32_t g = slot(t->groups, &t->ng, MAX_GROUPS, group),
		 k = slot(t->series, &t->ns, MAX_SERIES, series);
	if (g < MAX_GROUPS && k < MAX_SERIES)
		t->v[g * MAX_SERIES + k] = v;
}

/* Draws t (groups x series) to DIR/name.svg and DIR/name.png; 0 or 1 with the reason on stderr. */
static int draw(const char *dir, const char *name, const char *title, const char *y_label, const table_t *t,
		double ref)
{
	double v[MAX_GROUPS * MAX_SERIES];
	for (uint32_t g = 0; g < t->ng; g++)
		for (uint32_t k = 0; k < t->ns; k++)
			v[g * t->ns + k] = t->v[g * MAX_SERIES + k];
	char path[4096], err[512];
	for (int png = 0; png < 2; png++) {
		snprintf(path, sizeof path, "%s/%s.%s", dir, name, png ? "png" : "svg");
		if (gmx_chart_bars(path, title, y_label, t->groups, t->ng, t->series, t->ns, v, ref, err,
				   sizeof err)) {
			fprintf(stderr, "gpumux bench: --plot: %s\n", err);
			return 1;
		}
		fprintf(stderr, "gpumux bench: chart written to %s\n", path);
	}
	return 0;
}

static const char *str(json_t *o, const char *k)
{
	const char *s = json_string_value(json_object_get(o, k));
	return s ? s : "?";
}

/* A scenario path's short name: msched/mix-a-150.ini -> mix-a-150. */
static const char *short_name(const char *s, char *buf, size_t len)
{
	const char *b = strrchr(s, '/');
	snprintf(buf, len, "%s", b ? b + 1 : s);
	char *dot = strrchr(buf, '.');
	if (dot && !strcmp(dot, ".ini"))
		*dot = 0;
	return buf;
}

int gmx_bench_plot(const char *dir, const char *bench, json_t *root)
{
	if (mkdir(dir, 0755) != 0) {
		struct stat st;
		if (stat(dir, &st) != 0 || !S_ISDIR(st.st_mode)) {
			fprintf(stderr, "gpumux bench: --plot %s: cannot create the directory\n", dir);
			return 1;
		}
	}
	static table_t a, b;
	static char names[MAX_GROUPS][64];
	table_init(&a);
	table_init(&b);
	size_t i;
	json_t *row;
	int rc = 0;
	if (!strcmp(bench, "fikit")) {
		json_array_foreach(json_object_get(root, "pairs"), i, row)
		{
			table_set(&a, str(row, "pair"), str(row, "sched"),
				  json_number_value(json_object_get(row, "hp_p99_vs_alone")));
			table_set(&b, str(row, "pair"), str(row, "sched"),
				  json_number_value(json_object_get(row, "lp_throughput_vs_alone")));
		}
		rc |= draw(dir, "fikit-hp-p99",
			   "FIKIT pairs: high-priority p99 latency / alone (lower is better)",
			   "HP p99 / alone", &a, 1);
		rc |= draw(dir, "fikit-lp-throughput",
			   "FIKIT pairs: low-priority throughput / alone (higher is better)",
			   "LP throughput / alone", &b, 1);
	} else if (!strcmp(bench, "msched")) {
		json_array_foreach(json_object_get(root, "mixes"), i, row)
		{
			const char *g = i < MAX_GROUPS
					    ? short_name(str(row, "scenario"), names[i], sizeof names[i])
					    : "?";
			const char *k;
			json_t *v;
			json_object_foreach(json_object_get(row, "of_inmem"), k, v)
			    table_set(&a, g, k, 100 * json_number_value(v));
		}
		rc |= draw(dir, "msched-of-inmem",
			   "MSched mixes: throughput kept of unlimited memory, per memory mode",
			   "% of inmem throughput", &a, 100);
	} else if (!strcmp(bench, "calibrate")) {
		json_array_foreach(json_object_get(root, "bars"), i, row)
		{
			const char *g = i < MAX_GROUPS
					    ? short_name(str(row, "scenario"), names[i], sizeof names[i])
					    : "?";
			table_set(&a, g, "um", 100 * json_number_value(json_object_get(row, "um_retained")));
			table_set(&a, g, "paper",
				  100 * json_number_value(json_object_get(row, "paper_um_retained")));
		}
		rc |= draw(dir, "calibrate-um-of-inmem",
			   "Unified memory: throughput kept of unlimited memory (MSched mixes)",
			   "% of inmem throughput", &a, 0);
	} else if (!strcmp(bench, "frontier")) {
		/* One group per scenario and slice: each memory mode's share of same-slice inmem. */
		json_array_foreach(json_object_get(root, "points"), i, row)
		{
			const char *g = "?";
			if (i < MAX_GROUPS) {
				char sn[48];
				snprintf(names[i], sizeof names[i], "%s %g ms",
					 short_name(str(row, "scenario"), sn, sizeof sn),
					 json_number_value(json_object_get(row, "slice_ms")));
				g = names[i];
			}
			static const char *const modes[] = {"um", "ideal", "msched", "msched-switch"};
			for (int m = 0; m < 4; m++)
				table_set(&a, g, modes[m],
					  100 * json_number_value(json_object_get(
						    json_object_get(row, modes[m]), "of_inmem")));
		}
		rc |= draw(dir, "frontier-of-inmem",
			   "Throughput kept of same-slice inmem, per scenario and slice",
			   "% of inmem throughput", &a, 100);
	} else if (!strcmp(bench, "combined")) {
		/* Per scenario: one point per policy, HP p99 over HP alone against LP throughput kept. */
		json_array_foreach(json_object_get(root, "scenarios"), i, row)
		{
			const char *lab[MAX_SERIES];
			double x[MAX_SERIES], y[MAX_SERIES];
			uint32_t n = 0;
			size_t k;
			json_t *p;
			json_array_foreach(json_object_get(row, "policies"), k, p)
			{
				if (n == MAX_SERIES)
					break;
				double al = json_number_value(json_object_get(p, "lp_alone_units_per_s"));
				double hp = json_number_value(json_object_get(p, "hp_alone_p99_s"));
				lab[n] = str(p, "policy");
				x[n] = al > 0 ? 100 * json_number_value(json_object_get(p, "lp_units_per_s")) / al : NAN;
				y[n] = hp > 0 ? json_number_value(json_object_get(p, "hp_p99_s")) / hp : NAN;
				n++;
			}
			char path[4096], err[512], title[160], sn[64];
			short_name(str(row, "name"), sn, sizeof sn);
			snprintf(title, sizeof title, "%s: HP p99 against LP throughput, per policy", sn);
			for (int png = 0; png < 2 && n; png++) {
				snprintf(path, sizeof path, "%s/combined-%s.%s", dir, sn, png ? "png" : "svg");
				if (gmx_chart_points(path, title, "LP throughput, % of LP alone (same policy and memory)",
						     "HP p99 / HP alone", lab, n, x, y, NULL, err, sizeof err)) {
					fprintf(stderr, "gpumux bench: --plot: %s\n", err);
					rc = 1;
					break;
				}
				fprintf(stderr, "gpumux bench: chart written to %s\n", path);
			}
		}
	} else if (!strcmp(bench, "speed")) {
		json_array_foreach(json_object_get(root, "runs"), i, row)
		{
			const char *g = i < MAX_GROUPS
					    ? short_name(str(row, "scenario"), names[i], sizeof names[i])
					    : "?";
			table_set(&a, g, str(row, "mem"), json_number_value(json_object_get(row, "wall_s")));
		}
		rc |=
		    draw(dir, "speed-wall", "Wall time to simulate each shipped scenario", "seconds", &a, 0);
	} else if (!strcmp(bench, "replay")) {
		json_array_foreach(json_object_get(root, "traces"), i, row)
		{
			const char *g =
			    i < MAX_GROUPS ? short_name(str(row, "trace"), names[i], sizeof names[i]) : "?";
			double rec = json_number_value(json_object_get(row, "recorded_span_s"));
			double rep = json_number_value(json_object_get(row, "replay_span_s"));
			table_set(&a, g, "replay / recorded", rec > 0 ? 100 * rep / rec : NAN);
		}
		rc |= draw(dir, "replay-span", "Each trace replayed alone: span as a share of its recording",
			   "% of recorded span", &a, 100);
	} else {
		fprintf(stderr, "gpumux bench: --plot: no chart for '%s'\n", bench);
		return 1;
	}
	return rc;
}
