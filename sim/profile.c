/* Kernel profiles for the simulator: the measurement phase, and runs that
 * give profile-driven policies their profiles (the file is profile/kprof_file.c). */
#include "profile.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

extern const gmx_policy_ops_t gmx_sched_fikit_ops;

uint64_t gmx_sim_kernel_id(const gmx_workload_t *w, const gmx_op_t *op)
{
	uint32_t g[3] = {op->grid[0], op->grid[1], op->grid[2]};
	if (g[0] <= 1 && g[1] <= 1 && g[2] <= 1 && op->block[0] <= 1 && op->block[1] <= 1 && op->block[2] <= 1)
		g[0] = op->sm_demand; /* geometry not recorded (the importer writes 1 or 0) */
	return gmx_kernel_id(op->name < w->n_names ? w->names[op->name] : NULL, g, op->block, op->shared_mem);
}

/* Names the entries by the kernels of the task's workload. */
static int name_entries(gmx_kprof_t *p, const gmx_workload_t *w)
{
	for (uint32_t k = 0; k < w->n_ops; k++) {
		const gmx_op_t *op = &w->ops[k];
		if (op->kind != GMX_OP_KERNEL || op->name >= w->n_names)
			continue;
		uint64_t id = gmx_sim_kernel_id(w, op);
		gmx_kprof_entry_t *e = (gmx_kprof_entry_t *)gmx_kprof_find(p, id, 0);
		if (e && !e->name) {
			size_t len = strnlen(w->names[op->name], GMX_KPROF_NAME_MAX - 1);
			if (!(e->name = malloc(len + 1)))
				return -ENOMEM;
			memcpy(e->name, w->names[op->name], len);
			e->name[len] = 0;
		}
	}
	return 0;
}

int gmx_profile_measure(const gmx_sim_config_t *cfg, gmx_kprof_t *out, char *err, size_t err_len)
{
	memset(out, 0, cfg->n_tasks * sizeof(*out));
	for (uint32_t i = 0; i < cfg->n_tasks; i++) {
		gmx_kprof_t *p = &out[i];
		int rc = gmx_kprof_init(p, cfg->tasks[i].name);
		gmx_sim_config_t one = *cfg;
		one.tasks = &cfg->tasks[i];
		one.n_tasks = 1;
		one.policy = &gmx_sched_fikit_ops;
		one.seed = cfg->seed + 1;
		one.mem = GMX_MEM_INMEM;
		one.sched.profiles = &p;
		one.sched.n_profiles = 1;
		one.sched.profile_learn = 1;
		gmx_sim_result_t *r = calloc(1, sizeof(*r));
		if (!rc && !r)
			rc = -ENOMEM;
		char msg[512];
		if (!rc && (rc = gmx_sim_run(&one, r, msg, sizeof(msg))))
			snprintf(err, err_len, "measuring task '%s': %s", cfg->tasks[i].name, msg);
		if (!rc) {
			p->units = r->tasks[0].units;
			gmx_kprof_finish(p);
			rc = name_entries(p, cfg->tasks[i].workload);
		}
		free(r);
		if (rc) {
			if (rc == -ENOMEM)
				snprintf(err, err_len, "out of memory measuring task '%s'", cfg->tasks[i].name);
			for (uint32_t k = 0; k <= i; k++)
				gmx_kprof_free(&out[k]);
			return rc;
		}
	}
	return 0;
}


int gmx_sim_run_profiled(const gmx_sim_config_t *cfg, const char *file, gmx_sim_result_t *res, char *err,
			 size_t err_len)
{
	if (!(cfg->policy->flags & GMX_POLICY_PROFILES) || cfg->sched.profiles)
		return gmx_sim_run(cfg, res, err, err_len);
	gmx_kprof_t *own = NULL, *loaded = NULL;
	uint32_t n_loaded = 0;
	gmx_kprof_t *ptr[GMX_MAX_TASKS] = {0};
	int rc = 0;
	if (file) {
		rc = gmx_profile_read(file, &loaded, &n_loaded, err, err_len);
		for (uint32_t i = 0; !rc && i < cfg->n_tasks && i < GMX_MAX_TASKS; i++) {
			for (uint32_t k = 0; k < n_loaded; k++)
				if (!strcmp(loaded[k].task, cfg->tasks[i].name))
					ptr[i] = &loaded[k];
			if (!ptr[i]) {
				snprintf(err, err_len, "%s: no profile for task '%s' (record one with gpumux profile record)",
					 file, cfg->tasks[i].name);
				rc = -ENOENT;
			}
		}
	} else {
		own = calloc(cfg->n_tasks ? cfg->n_tasks : 1, sizeof(*own));
		rc = own ? gmx_profile_measure(cfg, own, err, err_len) : -ENOMEM;
		for (uint32_t i = 0; !rc && i < cfg->n_tasks && i < GMX_MAX_TASKS; i++)
			ptr[i] = &own[i];
		if (rc) {
			free(own);
			own = NULL;
		}
	}
	if (!rc) {
		gmx_sim_config_t run = *cfg;
		run.sched.profiles = ptr;
		run.sched.n_profiles = cfg->n_tasks;
		run.sched.profile_learn = 0;
		rc = gmx_sim_run(&run, res, err, err_len);
	}
	if (own)
		gmx_profile_free(own, cfg->n_tasks);
	gmx_profile_free(loaded, n_loaded);
	return rc;
}
