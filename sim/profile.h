/* Kernel profiles for the simulator: the measurement phase (each task run
 * alone while the fikit policy records) and the profile file (docs/fikit.md). */
#ifndef GMX_SIM_PROFILE_H
#define GMX_SIM_PROFILE_H

#include <stddef.h>
#include <stdint.h>

#include "gpumux/kprofile.h"
#include "kprof_file.h"
#include "sim.h"

/* The kernel ID of a kernel op of w. Orion profiles record no launch
 * geometry but the SMs a wave needs, which follows from the grid: it stands
 * in for an unknown grid. */
uint64_t gmx_sim_kernel_id(const gmx_workload_t *w, const gmx_op_t *op);

/* Measures a profile for each of cfg's tasks: runs it alone for cfg's duration
 * under `fikit` with recording on, with seed cfg->seed + 1 (so that a run is
 * not profiled on its own arrivals). out[i] is initialised here; free each with
 * gmx_kprof_free. 0 or a negative errno with one line in err. */
int gmx_profile_measure(const gmx_sim_config_t *cfg, gmx_kprof_t *out, char *err, size_t err_len);

/* Runs cfg, giving policies that use profiles (GMX_POLICY_PROFILES) the
 * profiles of the tasks: from `file` by task name when file is not NULL, else
 * measured with gmx_profile_measure. Other policies run as gmx_sim_run. */
int gmx_sim_run_profiled(const gmx_sim_config_t *cfg, const char *file, gmx_sim_result_t *res, char *err,
			 size_t err_len);

#endif
