/* JSON and table reports. Numbers are printed with a fixed precision so that
 * the same run gives byte-identical output. */
#include "report.h"

#include <errno.h>
#include <jansson.h>
#include <string.h>

static json_t *num_or_null(double v, int applies)
{
	return applies ? json_real(v) : json_null();
}

json_t *gmx_report_object(const gmx_run_info_t *info, const gmx_sim_result_t *r)
{
	json_t *root = json_object();
	json_t *tasks = json_array();
	json_t *mem = json_object();
	if (!root || !tasks || !mem) {
		json_decref(root);
		json_decref(tasks);
		json_decref(mem);
		return NULL;
	}
	json_object_set_new(root, "scenario", json_string(info->scenario));
	json_object_set_new(root, "sched", json_string(info->sched));
	json_object_set_new(root, "mem", json_string(info->mem));
	json_object_set_new(root, "device", json_string(info->device));
	json_object_set_new(root, "seed", json_integer((json_int_t)info->seed));
	json_object_set_new(root, "sim_time_s", json_real(r->sim_time_s));
	json_object_set_new(root, "warmup_s", json_real(r->warmup_s));
	int paging = !strcmp(info->mem, "um") || r->msched.valid; /* msched: the fallback's batches */
	for (uint32_t i = 0; i < r->n_tasks; i++) {
		const gmx_task_result_t *t = &r->tasks[i];
		json_t *o = json_object(), *lat = json_object();
		int has_lat = t->lat_p50_s >= 0;
		json_object_set_new(lat, "p50", num_or_null(t->lat_p50_s, has_lat));
		json_object_set_new(lat, "p95", num_or_null(t->lat_p95_s, has_lat));
		json_object_set_new(lat, "p99", num_or_null(t->lat_p99_s, has_lat));
		json_object_set_new(o, "name", json_string(t->name));
		json_object_set_new(o, "priority", json_integer(t->priority));
		json_object_set_new(o, "units", json_integer((json_int_t)t->units));
		json_object_set_new(o, "throughput_per_s", json_real(t->throughput_per_s));
		json_object_set_new(o, "jct_s", num_or_null(t->jct_s, t->jct_s >= 0));
		json_object_set_new(o, "latency_s", lat);
		json_object_set_new(o, "gpu_s", json_real(t->gpu_s));
		if (paging) {
			json_t *tm = json_object();
			json_object_set_new(tm, "faults", json_integer((json_int_t)t->faults));
			json_object_set_new(tm, "fault_entries", json_integer((json_int_t)t->fault_entries));
			json_object_set_new(tm, "stall_s", json_real(t->stall_s));
			json_object_set_new(tm, "h2d_bytes", json_integer((json_int_t)t->h2d_bytes));
			json_object_set_new(tm, "d2h_bytes", json_integer((json_int_t)t->d2h_bytes));
			json_object_set_new(o, "memory", tm);
		}
		json_array_append_new(tasks, o);
	}
	json_object_set_new(root, "tasks", tasks);
	int moves = strcmp(info->mem, "inmem") != 0;
	json_object_set_new(mem, "capacity_bytes", json_integer((json_int_t)r->capacity_bytes));
	json_object_set_new(mem, "footprint_bytes", json_integer((json_int_t)r->footprint_bytes));
	json_object_set_new(mem, "faults", paging ? json_integer((json_int_t)r->faults) : json_null());
	json_object_set_new(mem, "fault_entries",
			    paging ? json_integer((json_int_t)r->fault_entries) : json_null());
	json_object_set_new(mem, "h2d_bytes",
			    moves ? json_integer((json_int_t)r->h2d_bytes) : json_integer(0));
	json_object_set_new(mem, "d2h_bytes",
			    moves ? json_integer((json_int_t)r->d2h_bytes) : json_integer(0));
	json_object_set_new(root, "memory", mem);
	json_object_set_new(root, "kernels", json_integer((json_int_t)r->kernels));
	if (r->limit_valid) {
		json_t *l = json_object();
		json_object_set_new(l, "bound", json_real(r->limit_bound));
		json_object_set_new(l, "rotations_per_block", json_integer(r->limit_rotations));
		json_object_set_new(l, "block_rate", json_real(r->limit_block_rate));
		json_object_set_new(l, "edges", json_real(r->limit_edges));
		json_object_set_new(l, "rotation_bound", json_real(r->limit_rotation_bound));
		json_object_set_new(l, "reuse_bound", json_real(r->limit_reuse_bound));
		json_object_set_new(root, "limit", l);
	}
	if (r->msched.valid) {
		const gmx_sim_msched_stats_t *m = &r->msched;
		json_t *p = json_object(), *k = json_object(), *ms = json_object();
		json_object_set_new(p, "false_negative_pct", json_real(m->false_negative_pct));
		json_object_set_new(p, "false_positive_pct", json_real(m->false_positive_pct));
		static const char *const kinds[4] = {"other", "T1", "T2", "T3"};
		for (int i = 0; i < 4; i++)
			json_object_set_new(k, kinds[i], json_integer((json_int_t)m->launches[i]));
		json_object_set_new(p, "launches_per_unit", k);
		json_object_set_new(root, "prediction", p);
		json_object_set_new(ms, "switches", json_integer((json_int_t)m->switches));
		json_object_set_new(ms, "forgone_turns", json_integer((json_int_t)m->forgone_turns));
		json_object_set_new(ms, "planned_in_bytes", json_integer((json_int_t)m->planned_in_bytes));
		json_object_set_new(ms, "topup_in_bytes", json_integer((json_int_t)m->topup_in_bytes));
		json_object_set_new(ms, "prefetch_in_bytes", json_integer((json_int_t)m->prefetch_in_bytes));
		json_object_set_new(ms, "predicted_missing_pages",
				    json_integer((json_int_t)m->predicted_missing));
		json_object_set_new(ms, "slice_rule", json_boolean(m->slice_auto));
		if (m->slice_auto) {
			json_object_set_new(ms, "slice_mean_ms", json_real(m->slice_mean_ms));
			json_object_set_new(ms, "slice_min_ms", json_real(m->slice_min_ms));
			json_object_set_new(ms, "slice_max_ms", json_real(m->slice_max_ms));
		}
		json_object_set_new(root, "msched", ms);
	}
	return root;
}

int gmx_report_print(FILE *out, json_t *root)
{
	if (!root)
		return -ENOMEM;
	int rc = json_dumpf(root, out, JSON_REAL_PRECISION(9) | JSON_PRESERVE_ORDER | JSON_COMPACT);
	json_decref(root);
	if (rc || fputc('\n', out) == EOF)
		return -EIO;
	return 0;
}

int gmx_report_json(FILE *out, const gmx_run_info_t *info, const gmx_sim_result_t *r)
{
	return gmx_report_print(out, gmx_report_object(info, r));
}

static void fmt_lat(char *buf, size_t len, double s)
{
	if (s < 0)
		snprintf(buf, len, "-");
	else if (s < 1e-3)
		snprintf(buf, len, "%.1fus", s * 1e6);
	else if (s < 1)
		snprintf(buf, len, "%.2fms", s * 1e3);
	else
		snprintf(buf, len, "%.2fs", s);
}

void gmx_report_table(FILE *out, const gmx_run_info_t *info, const gmx_sim_result_t *r)
{
	fprintf(out, "%s  sched=%s mem=%s device=%s seed=%llu  simulated %.3f s", info->scenario, info->sched,
		info->mem, info->device, (unsigned long long)info->seed, r->sim_time_s);
	if (r->warmup_s > 0)
		fprintf(out, " (measured after %.3f s of warm-up)", r->warmup_s);
	fputc('\n', out);
	fprintf(out, "  %-16s %4s %9s %12s %10s %10s %10s\n", "task", "prio", "units", "units/s", "p50",
		"p95", "p99");
	for (uint32_t i = 0; i < r->n_tasks; i++) {
		const gmx_task_result_t *t = &r->tasks[i];
		char a[32], b[32], c[32];
		fmt_lat(a, sizeof(a), t->lat_p50_s);
		fmt_lat(b, sizeof(b), t->lat_p95_s);
		fmt_lat(c, sizeof(c), t->lat_p99_s);
		fprintf(out, "  %-16s %4d %9llu %12.3f %10s %10s %10s\n", t->name, t->priority,
			(unsigned long long)t->units, t->throughput_per_s, a, b, c);
	}
	fprintf(out, "  memory: footprint %.2f GiB on %.2f GiB", r->footprint_bytes / GMX_GIB,
		r->capacity_bytes / GMX_GIB);
	if (strcmp(info->mem, "inmem") != 0)
		fprintf(out, "; moved in %.2f GiB, out %.2f GiB", r->h2d_bytes / GMX_GIB, r->d2h_bytes / GMX_GIB);
	if (r->msched.valid)
		fprintf(out, "; prediction FN %.3f%% FP %.3f%%; %llu switches", r->msched.false_negative_pct,
			r->msched.false_positive_pct, (unsigned long long)r->msched.switches);
	if (r->msched.slice_auto)
		fprintf(out, "; slices by the rule %.1f-%.1f ms (mean %.1f)", r->msched.slice_min_ms,
			r->msched.slice_max_ms, r->msched.slice_mean_ms);
	if (!strcmp(info->mem, "um") || r->msched.valid)
		fprintf(out, "; %llu fault batches (%llu pages)", (unsigned long long)r->faults,
			(unsigned long long)r->fault_entries);
	fprintf(out, "\n");
}
