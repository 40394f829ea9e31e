/* Scenario files (INI): a device, the default scheduler and memory mode, and
 * the tasks that share the device. Documented in docs/scenarios.md. */
#ifndef GMX_SIM_SCENARIO_H
#define GMX_SIM_SCENARIO_H

#include <stddef.h>

#include "sim.h"

typedef struct gmx_scenario {
	char *path;
	char *name;
	char *sched;           /* default scheduler name */
	char *mem;             /* default memory mode name */
	const gmx_preset_t *device;
	uint64_t capacity_bytes;
	gmx_sched_params_t params;
	int64_t mem_slice_ns;  /* slice of the memory-scheduled modes (msched*, ideal) */
	int mem_forgo_turns;   /* msched: forgo the turns the link cannot feed (0: serve every turn) */
	const struct gmx_tpl_set *templates; /* msched working-set profile, NULL: learn (not owned) */
	int64_t duration_ns;   /* measured */
	int64_t warmup_ns;     /* run before the measured window, 0 by default */
	uint64_t seed;
	gmx_sim_task_t *tasks;
	uint32_t n_tasks;
	const char *profile;   /* kernel profile file for fikit, NULL: measure (not owned) */
	struct gmx_sim_timeline *timeline; /* when set, runs record their timeline there (not owned) */
	void (*progress)(void *ctx, double done); /* passed to the runs (gmx_sim_config_t) */
	void *progress_ctx;
} gmx_scenario_t;

/* Reads and builds a scenario (workloads included). 0, or a negative errno
 * with one line "FILE:LINE: what was expected" in err; *sc is freed on error. */
int gmx_scenario_load(const char *path, gmx_scenario_t *sc, char *err, size_t err_len);

/* Runs the scenario's tasks under scheduler `sched` and memory mode `mem`
 * (names). 0; -EINVAL for an unknown name or a bad parameter; or the
 * simulation's error. err gets one line. */
int gmx_scenario_run(const gmx_scenario_t *sc, const char *sched, const char *mem, gmx_sim_result_t *res, char *err,
		     size_t err_len);

/* Frees the scenario and its workloads. */
void gmx_scenario_free(gmx_scenario_t *sc);

#endif
