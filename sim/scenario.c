/* Scenario reader: inih for the syntax, strict checking of every key here. */
#include "scenario.h"

#include <errno.h>
#include <ini.h>
#include <jansson.h>
#include <libgen.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "gpumux/gen.h"
#include "gpumux/numparse.h"
#include "gpumux/workload_io.h"
#include "msched.h"
#include "profile.h"
#include "trace.h"

#define SCENARIO_DURATION_S_DEFAULT 10.0
#define SCENARIO_DURATION_S_MAX 86400.0
#define SCENARIO_SEED_DEFAULT 1
#define SCENARIO_MAX_PARAMS 32
#define SCENARIO_MAX_COUNT 64

typedef struct task_spec {
	char *name;
	int line;                 /* the section's line */
	char *workload;
	int workload_line;
	int priority;
	uint64_t units, count;
	char *arrival;
	int arrival_line;
	double rate;
	double latency_target_ms;
	char *arrivals_path;
	int arrivals_line;
	int count_line;
	gmx_param_t params[SCENARIO_MAX_PARAMS];
	int param_line[SCENARIO_MAX_PARAMS];
	size_t n_params;
} task_spec_t;

typedef struct parse_state {
	gmx_scenario_t *sc;
	const char *path;
	FILE *file;
	int line;
	task_spec_t *task; /* the [task NAME] section being read; NULL in any other */
	char *err;
	size_t err_len;
	int failed;
	task_spec_t *specs;
	uint32_t n_specs, cap_specs;
	double duration_s, warmup_s, slice_ms, capacity_gb;
	double mem_slice_ms; /* msched* and ideal */
	int64_t inflight;
} parse_state_t;

static int bad(parse_state_t *st, const char *fmt, const char *a, const char *b)
{
	if (!st->failed) {
		char msg[384];
		snprintf(msg, sizeof(msg), fmt, a, b);
		snprintf(st->err, st->err_len, "%s:%d: %s", st->path, st->line, msg);
		st->failed = 1;
	}
	return 0;
}

static int parse_double(const char *v, double lo, double hi, double *out)
{
	return gmx_parse_real(v, lo, hi, out);
}

static int parse_u64(const char *v, uint64_t hi, uint64_t *out)
{
	return gmx_parse_uint(v, 0, hi, out);
}

static int set_str(char **field, const char *v)
{
	char *c = strdup(v);
	if (!c)
		return -1;
	free(*field);
	*field = c;
	return 0;
}

static int scenario_key(parse_state_t *st, const char *name, const char *value)
{
	gmx_scenario_t *sc = st->sc;
	uint64_t u;
	if (!strcmp(name, "name"))
		return set_str(&sc->name, value) ? bad(st, "out of memory%s%s", "", "") : 1;
	if (!strcmp(name, "device")) {
		sc->device = gmx_preset_find(value);
		if (!sc->device) {
			char names[256];
			gmx_preset_names(names, sizeof(names));
			return bad(st, "unknown device preset '%s' (expected one of: %s)", value, names);
		}
		return 1;
	}
	if (!strcmp(name, "sched")) {
		if (!gmx_sched_find(value)) {
			char names[128];
			gmx_sched_names(names, sizeof(names));
			return bad(st, "unknown scheduler '%s' (expected %s)", value, names);
		}
		return set_str(&sc->sched, value) ? bad(st, "out of memory%s%s", "", "") : 1;
	}
	if (!strcmp(name, "mem")) {
		if (gmx_mem_mode_parse(value) < 0)
			return bad(st, "unknown memory mode '%s' (expected %s)", value, GMX_MEM_MODE_NAMES);
		return set_str(&sc->mem, value) ? bad(st, "out of memory%s%s", "", "") : 1;
	}
	if (!strcmp(name, "mem_slice_ms") && !strcmp(value, "auto")) {
		st->mem_slice_ms = 0;
		return 1;
	}
	if (!strcmp(name, "slice_ms") || !strcmp(name, "mem_slice_ms")) {
		char what[160];
		snprintf(what, sizeof(what), "%s '%%s' is not a number of milliseconds in [%g, %g]%%s", name,
			 GMX_SLICE_MS_MIN, GMX_SLICE_MS_MAX);
		if (parse_double(value, GMX_SLICE_MS_MIN, GMX_SLICE_MS_MAX,
				 name[0] == 's' ? &st->slice_ms : &st->mem_slice_ms))
			return bad(st, what, value, "");
		return 1;
	}
	if (!strcmp(name, "mem_forgo_turns")) {
		if (strcmp(value, "0") && strcmp(value, "1"))
			return bad(st, "mem_forgo_turns '%s' is not 0 or 1%s", value, "");
		sc->mem_forgo_turns = value[0] == '1';
		return 1;
	}
	if (!strcmp(name, "inflight")) {
		if (gmx_parse_uint(value, GMX_INFLIGHT_MIN, GMX_INFLIGHT_MAX, &u)) {
			char what[96];
			snprintf(what, sizeof(what), "inflight '%%s' is not an integer in [%u, %u]%%s", GMX_INFLIGHT_MIN,
				 GMX_INFLIGHT_MAX);
			return bad(st, what, value, "");
		}
		st->inflight = (int64_t)u;
		return 1;
	}
	if (!strcmp(name, "duration_s")) {
		if (parse_double(value, 1e-6, SCENARIO_DURATION_S_MAX, &st->duration_s))
			return bad(st, "duration_s '%s' is not a positive number of seconds (at most 86400)%s", value,
				   "");
		return 1;
	}
	if (!strcmp(name, "warmup_s")) {
		if (parse_double(value, 0, SCENARIO_DURATION_S_MAX, &st->warmup_s))
			return bad(st, "warmup_s '%s' is not a number of seconds in [0, 86400]%s", value, "");
		return 1;
	}
	if (!strcmp(name, "seed")) {
		if (parse_u64(value, UINT64_MAX, &sc->seed))
			return bad(st, "seed '%s' is not a non-negative integer%s", value, "");
		return 1;
	}
	if (!strcmp(name, "capacity_gb")) {
		if (parse_double(value, 0.002, 1e6, &st->capacity_gb))
			return bad(st, "capacity_gb '%s' is not a positive number of GiB%s", value, "");
		return 1;
	}
	if (!strcmp(name, "description"))
		return 1;
	return bad(st, "unknown key '%s' in [scenario] (expected name, description, device, sched, mem, slice_ms, "
		       "mem_slice_ms, mem_forgo_turns, inflight, duration_s, warmup_s, seed, capacity_gb)%s",
		   name, "");
}

/* A [task NAME] header at the parser's current line: a new task, refused when NAME is empty
 * or already used (with the lines of both). */
static void task_section(parse_state_t *st, const char *name)
{
	while (*name == ' ' || *name == '\t')
		name++;
	st->task = NULL;
	if (!*name) {
		bad(st, "a task section needs a name: [task NAME]%s%s", "", "");
		return;
	}
	for (uint32_t i = 0; i < st->n_specs; i++)
		if (!strcmp(st->specs[i].name, name)) {
			snprintf(st->err, st->err_len, "%s:%d: [task %s] is defined twice (first at %s:%d)", st->path,
				 st->line, name, st->path, st->specs[i].line);
			st->failed = 1;
			return;
		}
	if (st->n_specs == st->cap_specs) {
		uint32_t ncap = st->cap_specs ? st->cap_specs * 2 : 8;
		task_spec_t *p = realloc(st->specs, ncap * sizeof(*p));
		if (!p) {
			bad(st, "out of memory%s%s", "", "");
			return;
		}
		st->specs = p;
		st->cap_specs = ncap;
	}
	task_spec_t *t = &st->specs[st->n_specs];
	memset(t, 0, sizeof(*t));
	t->name = strdup(name);
	t->line = st->line;
	t->count = 1;
	if (!t->name) {
		bad(st, "out of memory%s%s", "", "");
		return;
	}
	st->n_specs++;
	st->task = t;
}

/* Line source for inih: counts lines, and notes each section header as it goes by (inih
 * reports keys, not headers, so two [task a] sections would otherwise read as one). */
static char *reader(char *str, int num, void *stream)
{
	parse_state_t *st = stream;
	if (st->failed || !fgets(str, num, st->file))
		return NULL;
	st->line++;
	size_t n = strlen(str);
	if (n && str[n - 1] != '\n' && !feof(st->file)) {
		char what[64];
		snprintf(what, sizeof(what), "%d", num - 2);
		bad(st, "line longer than %s characters%s", what, "");
		return NULL;
	}
	const char *p = str;
	while (*p == ' ' || *p == '\t')
		p++;
	const char *close = *p == '[' ? strchr(p, ']') : NULL;
	if (close) {
		char section[256];
		snprintf(section, sizeof(section), "%.*s", (int)(close - p - 1), p + 1);
		st->task = NULL;
		if (!strncmp(section, "task", 4) && (section[4] == ' ' || section[4] == '\t' || !section[4]))
			task_section(st, section + 4);
	}
	return st->failed ? NULL : str;
}

static int task_key(parse_state_t *st, task_spec_t *t, const char *name, const char *value)
{
	uint64_t u;
	if (!strcmp(name, "workload")) {
		t->workload_line = st->line;
		return set_str(&t->workload, value) ? 0 : 1;
	}
	if (!strcmp(name, "priority")) {
		if (parse_u64(value, GMX_PRIORITY_LEVELS - 1, &u))
			return bad(st, "priority '%s' is not an integer from 0 (highest) to 9%s", value, "");
		t->priority = (int)u;
		return 1;
	}
	if (!strcmp(name, "units")) {
		if (parse_u64(value, UINT64_MAX, &t->units))
			return bad(st, "units '%s' is not a non-negative integer (0 = run until the end)%s", value, "");
		return 1;
	}
	if (!strcmp(name, "count")) {
		if (gmx_parse_uint(value, 1, SCENARIO_MAX_COUNT, &t->count))
			return bad(st, "count '%s' is not an integer in [1, 64]%s", value, "");
		t->count_line = st->line;
		return 1;
	}
	if (!strcmp(name, "arrival")) {
		if (strcmp(value, "closed") != 0 && strcmp(value, "poisson") != 0 && strcmp(value, "trace") != 0)
			return bad(st, "arrival '%s' is not one of closed, poisson, trace%s", value, "");
		t->arrival_line = st->line;
		return set_str(&t->arrival, value) ? 0 : 1;
	}
	if (!strcmp(name, "rate")) {
		if (parse_double(value, 1e-6, 1e9, &t->rate))
			return bad(st, "rate '%s' is not a positive number of requests per second%s", value, "");
		return 1;
	}
	if (!strcmp(name, "arrivals")) {
		t->arrivals_line = st->line;
		return set_str(&t->arrivals_path, value) ? bad(st, "out of memory%s%s", "", "") : 1;
	}
	if (!strcmp(name, "latency_target_ms")) {
		if (parse_double(value, 0.01, 3600000, &t->latency_target_ms))
			return bad(st, "latency_target_ms '%s' is not a number of milliseconds in [0.01, 3600000]%s",
				   value, "");
		return 1;
	}
	/* Anything else is the generator's; it checks its own keys. */
	if (t->n_params == SCENARIO_MAX_PARAMS)
		return bad(st, "too many workload parameters (at most 32)%s%s", "", "");
	char *k = strdup(name), *v = strdup(value);
	if (!k || !v) {
		free(k);
		free(v);
		return bad(st, "out of memory%s%s", "", "");
	}
	t->params[t->n_params].key = k;
	t->params[t->n_params].value = v;
	t->param_line[t->n_params++] = st->line;
	return 1;
}

static int handler(void *user, const char *section, const char *name, const char *value)
{
	parse_state_t *st = user;
	if (st->failed)
		return 0;
	if (!strcmp(section, "scenario"))
		return scenario_key(st, name, value);
	if (st->task)
		return task_key(st, st->task, name, value);
	return bad(st, "unknown section [%s] (expected [scenario] or [task NAME])%s", section, "");
}

static void free_specs(parse_state_t *st)
{
	for (uint32_t i = 0; i < st->n_specs; i++) {
		task_spec_t *t = &st->specs[i];
		free(t->name);
		free(t->workload);
		free(t->arrival);
		free(t->arrivals_path);
		for (size_t k = 0; k < t->n_params; k++) {
			free((char *)t->params[k].key);
			free((char *)t->params[k].value);
		}
	}
	free(st->specs);
}

static int resolve(const char *dir, const char *rel, char *out, size_t len)
{
	int n = rel[0] == '/' ? snprintf(out, len, "%s", rel) : snprintf(out, len, "%s/%s", dir, rel);
	return n < 0 || (size_t)n >= len ? -ENAMETOOLONG : 0;
}

static int load_gaps(const char *path, gmx_sim_task_t *t, char *err, size_t err_len, const char *where)
{
	json_error_t je;
	json_t *root = json_load_file(path, 0, &je);
	if (!root) {
		if (je.line < 1) /* not opened or not read: jansson's text says why */
			snprintf(err, err_len, "%s: arrivals file: %s", where, je.text);
		else
			snprintf(err, err_len, "%s: arrivals file %s:%d:%d: %s", where, path, je.line, je.column,
				 je.text);
		return -EINVAL;
	}
	if (!json_is_array(root) || json_array_size(root) == 0) {
		json_decref(root);
		snprintf(err, err_len, "%s: arrivals file %s: expected a non-empty JSON array of seconds", where, path);
		return -EINVAL;
	}
	size_t n = json_array_size(root);
	t->gaps_s = calloc(n, sizeof(double));
	if (!t->gaps_s) {
		json_decref(root);
		return -ENOMEM;
	}
	for (size_t i = 0; i < n; i++) {
		json_t *v = json_array_get(root, i);
		double d = json_is_number(v) ? json_number_value(v) : -1;
		if (!(d > 0)) {
			json_decref(root);
			free(t->gaps_s);
			t->gaps_s = NULL;
			snprintf(err, err_len, "%s: arrivals file %s: element %zu is not a positive number of seconds",
				 where, path, i);
			return -EINVAL;
		}
		t->gaps_s[i] = d;
	}
	t->n_gaps = (uint32_t)n;
	json_decref(root);
	return 0;
}

/* workload = trace: a recorded timeline imported as the scenario loads
 * (file = PATH, and optionally format, tokens, device as for gpumux trace import). */
static int import_trace(const char *dir, const task_spec_t *t, gmx_workload_t *w, char *msg, size_t len)
{
	gmx_trace_opts_t opts = {.pack = 1}; /* the device holds the allocator's segments */
	const char *file = NULL;
	for (size_t k = 0; k < t->n_params; k++) {
		const char *key = t->params[k].key, *v = t->params[k].value;
		if (!strcmp(key, "file")) {
			file = v;
		} else if (!strcmp(key, "format")) {
			opts.format = gmx_trace_format_parse(v);
			if (opts.format == GMX_TRACE_UNKNOWN) {
				snprintf(msg, len, "trace: format '%s' (expected auto, kineto, orion, vidur, native)", v);
				return -EINVAL;
			}
		} else if (!strcmp(key, "tokens")) {
			uint64_t x;
			if (gmx_parse_uint(v, 1, 1000000, &x)) {
				snprintf(msg, len, "trace: tokens '%s' is not an integer in [1, 1000000]", v);
				return -EINVAL;
			}
			opts.tokens = (uint32_t)x;
		} else if (!strcmp(key, "device")) {
			opts.device = v;
		} else {
			snprintf(msg, len, "trace: unknown parameter '%s' (expected file, format, tokens, device)", key);
			return -EINVAL;
		}
	}
	if (!file) {
		snprintf(msg, len, "trace: file = PATH is required (a profiler trace, Orion or Vidur CSV)");
		return -EINVAL;
	}
	char p[PATH_MAX];
	if (resolve(dir, file, p, sizeof(p))) {
		snprintf(msg, len, "trace: file = %.64s...: the path is too long", file);
		return -EINVAL;
	}
	return gmx_trace_import(p, &opts, w, NULL, msg, len);
}

/* The name of replica c of spec t: NAME, or NAMEc when count > 1. */
static void replica_name(const task_spec_t *t, uint64_t c, char *out, size_t len)
{
	if (t->count > 1)
		snprintf(out, len, "%s%llu", t->name, (unsigned long long)c);
	else
		snprintf(out, len, "%s", t->name);
}

/* The line that makes spec t's task names: its count = N line, else its section. */
static int names_line(const task_spec_t *t)
{
	return t->count > 1 && t->count_line ? t->count_line : t->line;
}

/* Refuses two tasks of one name: [task a0] beside [task a] count = 2 (a0, a1). */
static int check_names(parse_state_t *st, char *err, size_t err_len)
{
	for (uint32_t i = 0; i < st->n_specs; i++)
		for (uint64_t c = 0; c < st->specs[i].count; c++) {
			char a[256];
			replica_name(&st->specs[i], c, a, sizeof(a));
			for (uint32_t j = 0; j < i; j++)
				for (uint64_t d = 0; d < st->specs[j].count; d++) {
					char b[256];
					replica_name(&st->specs[j], d, b, sizeof(b));
					if (strcmp(a, b))
						continue;
					const task_spec_t *x = &st->specs[i], *y = &st->specs[j];
					snprintf(err, err_len, "%s:%d: [task %s]%s names a task '%s' that [task %s]%s at %s:%d "
						 "names too: task names must differ", st->path, names_line(x), x->name,
						 x->count > 1 ? " with count" : "", a, y->name, y->count > 1 ? " with count" : "",
						 st->path, names_line(y));
					return -EINVAL;
				}
		}
	return 0;
}

static int build_tasks(parse_state_t *st, const char *dir, char *err, size_t err_len)
{
	gmx_scenario_t *sc = st->sc;
	uint64_t total = 0;
	for (uint32_t i = 0; i < st->n_specs; i++) {
		total += st->specs[i].count;
		if (total > GMX_MAX_TASKS) {
			snprintf(err, err_len, "%s:%d: [task %s] brings the scenario to %llu tasks; at most %d are supported",
				 st->path, names_line(&st->specs[i]), st->specs[i].name, (unsigned long long)total,
				 GMX_MAX_TASKS);
			return -EINVAL;
		}
	}
	if (total == 0) {
		snprintf(err, err_len, "%s: no [task NAME] section: a scenario needs at least one task", st->path);
		return -EINVAL;
	}
	int rc = check_names(st, err, err_len);
	if (rc)
		return rc;
	sc->tasks = calloc(total, sizeof(*sc->tasks));
	if (!sc->tasks)
		return -ENOMEM;
	for (uint32_t i = 0; i < st->n_specs; i++) {
		task_spec_t *t = &st->specs[i];
		char where[PATH_MAX + 16];
		snprintf(where, sizeof(where), "%s:%d", st->path, t->workload_line ? t->workload_line : t->line);
		if (!t->workload) {
			snprintf(err, err_len, "%s:%d: task '%s' has no workload (a generator name or a .gmxw file)",
				 st->path, t->line, t->name);
			return -EINVAL;
		}
		gmx_sim_task_t proto = {.priority = t->priority, .units = t->units,
					.latency_target_s = t->latency_target_ms / 1e3};
		if (!t->arrival || !strcmp(t->arrival, "closed")) {
			proto.arrival = GMX_ARRIVAL_CLOSED;
		} else if (!strcmp(t->arrival, "poisson")) {
			proto.arrival = GMX_ARRIVAL_POISSON;
			proto.rate_per_s = t->rate;
			if (!(t->rate > 0)) {
				snprintf(err, err_len, "%s:%d: task '%s': poisson arrival needs rate = REQUESTS_PER_S",
					 st->path, t->arrival_line, t->name);
				return -EINVAL;
			}
		} else {
			proto.arrival = GMX_ARRIVAL_TRACE;
			if (!t->arrivals_path) {
				snprintf(err, err_len, "%s:%d: task '%s': trace arrival needs arrivals = FILE.json",
					 st->path, t->arrival_line, t->name);
				return -EINVAL;
			}
		}
		const gmx_sim_task_t *first = &sc->tasks[sc->n_tasks];
		for (uint64_t c = 0; c < t->count; c++) {
			gmx_sim_task_t *out = &sc->tasks[sc->n_tasks];
			*out = proto;
			/* Each replica owns its copy of the arrival list. */
			if (proto.arrival == GMX_ARRIVAL_TRACE && c == 0) {
				char p[PATH_MAX], at[PATH_MAX + 16];
				if (resolve(dir, t->arrivals_path, p, sizeof(p))) {
					snprintf(err, err_len, "%s:%d: task '%s': arrivals: the path is too long", st->path,
						 t->arrivals_line, t->name);
					return -EINVAL;
				}
				snprintf(at, sizeof(at), "%s:%d: task '%s'", st->path, t->arrivals_line, t->name);
				rc = load_gaps(p, out, err, err_len, at);
				if (rc)
					return rc;
			} else if (proto.arrival == GMX_ARRIVAL_TRACE) {
				out->gaps_s = malloc(first->n_gaps * sizeof(double));
				if (!out->gaps_s)
					return -ENOMEM;
				memcpy(out->gaps_s, first->gaps_s, first->n_gaps * sizeof(double));
				out->n_gaps = first->n_gaps;
			}
			char nm[256];
			replica_name(t, c, nm, sizeof(nm));
			out->name = strdup(nm);
			out->workload = calloc(1, sizeof(gmx_workload_t));
			sc->n_tasks++;
			if (!out->name || !out->workload)
				return -ENOMEM;
			char msg[512];
			const char *wl = t->workload;
			size_t len = strlen(wl);
			if (strchr(wl, '/') || (len > 5 && !strcmp(wl + len - 5, ".gmxw"))) {
				char p[PATH_MAX];
				if (resolve(dir, wl, p, sizeof(p))) {
					snprintf(err, err_len, "%s:%d: task '%s': workload: the path is too long", st->path,
						 t->workload_line, t->name);
					return -EINVAL;
				}
				if (t->n_params) {
					snprintf(err, err_len, "%s:%d: unknown key '%s' for task '%s' (a workload file takes "
						 "no parameters)", st->path, t->param_line[0], t->params[0].key, t->name);
					return -EINVAL;
				}
				rc = gmx_workload_read(p, out->workload, msg, sizeof(msg));
			} else if (!strcmp(wl, "trace")) {
				rc = import_trace(dir, t, out->workload, msg, sizeof(msg));
			} else if (!gmx_gen_exists(wl)) {
				snprintf(err, err_len, "%s: task '%s': unknown workload '%s' (expected a generator, see "
					 "`gpumux gen --list`, or a .gmxw file)", where, t->name, wl);
				return -EINVAL;
			} else {
				rc = gmx_gen_build(wl, t->params, t->n_params, dir, out->workload, msg, sizeof(msg));
			}
			if (rc) {
				/* Point at the parameter the message names, when it names one. */
				int line = t->workload_line ? t->workload_line : t->line;
				for (size_t k = 0; k < t->n_params; k++) {
					char a[80], b[80];
					snprintf(a, sizeof(a), "%s=", t->params[k].key);
					snprintf(b, sizeof(b), "'%s'", t->params[k].key);
					if (strstr(msg, a) || strstr(msg, b) ||
					    (!strcmp(wl, "trace") && !strcmp(t->params[k].key, "file")))
						line = t->param_line[k];
				}
				snprintf(err, err_len, "%s:%d: task '%s': %s", st->path, line, t->name, msg);
				return rc;
			}
			if (!out->workload->n_ops) {
				snprintf(err, err_len, "%s: task '%s': the workload has no operations", where, t->name);
				return -EINVAL;
			}
		}
	}
	return 0;
}

int gmx_scenario_load(const char *path, gmx_scenario_t *sc, char *err, size_t err_len)
{
	memset(sc, 0, sizeof(*sc));
	FILE *f = fopen(path, "r");
	if (!f) {
		int e = errno;
		snprintf(err, err_len, "%s: cannot open: %s", path, strerror(e));
		return -e;
	}
	struct stat fst;
	if (fstat(fileno(f), &fst) == 0 && S_ISDIR(fst.st_mode)) {
		fclose(f);
		snprintf(err, err_len, "%s: is a directory, not a scenario file (scenarios are .ini files)", path);
		return -EISDIR;
	}
	parse_state_t st = {.sc = sc, .path = path, .file = f, .err = err, .err_len = err_len, .duration_s = -1,
			    .slice_ms = -1, .mem_slice_ms = -1, .capacity_gb = -1, .inflight = -1};
	sc->seed = SCENARIO_SEED_DEFAULT;
	int rc = ini_parse_stream(reader, &st, handler, &st);
	fclose(f);
	if (rc != 0 && !st.failed) {
		snprintf(err, err_len, "%s:%d: expected [section], key = value, or a ; comment", path, rc > 0 ? rc : 0);
		st.failed = 1;
	}
	if (!st.failed) {
		if (!sc->device)
			sc->device = gmx_preset_find("rtx5080");
		gmx_sched_params_default(&sc->params);
		if (st.slice_ms > 0)
			sc->params.slice_ns = (int64_t)llround(st.slice_ms * 1e6);
		sc->mem_slice_ns = st.mem_slice_ms > 0 ? (int64_t)llround(st.mem_slice_ms * 1e6) : 0; /* 0: the rule */
		if (st.inflight > 0)
			sc->params.inflight_max = (uint32_t)st.inflight;
		sc->duration_ns = (int64_t)llround((st.duration_s > 0 ? st.duration_s : SCENARIO_DURATION_S_DEFAULT) * 1e9);
		sc->warmup_ns = (int64_t)llround(st.warmup_s * 1e9);
		sc->capacity_bytes = st.capacity_gb > 0 ? (uint64_t)(st.capacity_gb * 1073741824.0) /* GiB */
							: sc->device->hbm_bytes - sc->device->reserved_bytes;
		if ((!sc->sched && set_str(&sc->sched, "timeslice")) || (!sc->mem && set_str(&sc->mem, "inmem")) ||
		    (!sc->name && set_str(&sc->name, path)) || set_str(&sc->path, path)) {
			snprintf(err, err_len, "out of memory");
			st.failed = 1;
		}
	}
	if (!st.failed) {
		char *copy = strdup(path);
		if (!copy) {
			snprintf(err, err_len, "out of memory");
			st.failed = 1;
		} else {
			rc = build_tasks(&st, dirname(copy), err, err_len);
			free(copy);
			if (rc) {
				if (rc == -ENOMEM)
					snprintf(err, err_len, "%s: out of memory building the tasks", path);
				st.failed = 1;
			}
		}
	}
	free_specs(&st);
	if (st.failed) {
		gmx_scenario_free(sc);
		return -EINVAL;
	}
	return 0;
}

void gmx_scenario_free(gmx_scenario_t *sc)
{
	for (uint32_t i = 0; i < sc->n_tasks; i++) {
		free(sc->tasks[i].name);
		free(sc->tasks[i].gaps_s);
		if (sc->tasks[i].workload) {
			gmx_workload_free(sc->tasks[i].workload);
			free(sc->tasks[i].workload);
		}
	}
	free(sc->tasks);
	free(sc->path);
	free(sc->name);
	free(sc->sched);
	free(sc->mem);
	memset(sc, 0, sizeof(*sc));
}

int gmx_scenario_run(const gmx_scenario_t *sc, const char *sched, const char *mem, gmx_sim_result_t *res, char *err,
		     size_t err_len)
{
	const gmx_policy_ops_t *ops = gmx_sched_find(sched);
	if (!ops) {
		char names[128];
		gmx_sched_names(names, sizeof(names));
		snprintf(err, err_len, "unknown scheduler '%s' (expected %s)", sched, names);
		return -EINVAL;
	}
	int mode = gmx_mem_mode_parse(mem);
	if (mode < 0) {
		snprintf(err, err_len, "unknown memory mode '%s' (expected %s)", mem, GMX_MEM_MODE_NAMES);
		return -EINVAL;
	}
	char why[256];
	if (gmx_sched_params_check(&sc->params, why, sizeof(why))) {
		snprintf(err, err_len, "%s: %s", sc->path, why);
		return -EINVAL;
	}
	gmx_sim_config_t cfg = {
		.device = sc->device,
		.capacity_bytes = sc->capacity_bytes,
		.mem = (gmx_mem_mode_t)mode,
		.policy = ops,
		.sched = sc->params,
		.duration_ns = sc->duration_ns,
		.warmup_ns = sc->warmup_ns,
		.seed = sc->seed,
		.tasks = sc->tasks,
		.n_tasks = sc->n_tasks,
		.templates = sc->templates,
		.timeline = sc->timeline,
		.progress = sc->progress,
		.progress_ctx = sc->progress_ctx,
	};
	/* The memory-scheduled modes rotate at their own, longer slice: each
	 * rotation must amortise the migration it causes (docs/msched.md). ideal
	 * keeps the scenario's schedule: it is the limit of that schedule (run it
	 * with --sched timeline --slice-ms for the limit at msched's slice). */
	if (mode >= GMX_MEM_MSCHED) {
		cfg.mem_slice_auto = sc->mem_slice_ns <= 0;
		cfg.mem_forgo_turns = sc->mem_forgo_turns;
		cfg.sched.slice_ns = cfg.mem_slice_auto ? GMX_MSCHED_SLICE_NS_MAX : sc->mem_slice_ns;
		/* ... under the scheduler whose timeline the planner knows. */
		if (!strcmp(ops->name, "timeslice"))
			cfg.policy = gmx_sched_find("timeline");
		if (gmx_sched_params_check(&cfg.sched, why, sizeof(why))) {
			snprintf(err, err_len, "%s: mem_slice_ms: %s", sc->path, why);
			return -EINVAL;
		}
	}
	char msg[512];
	int rc = gmx_sim_run_profiled(&cfg, sc->profile, res, msg, sizeof(msg));
	if (rc)
		snprintf(err, err_len, "%s: %s", sc->path, msg);
	return rc;
}
