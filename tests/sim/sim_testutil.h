/* Small workloads built by hand for the simulator's tests. */
#ifndef GMX_SIM_TESTUTIL_H
#define GMX_SIM_TESTUTIL_H

#include <stdarg.h>
#include <setjmp.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <cmocka.h>

#include "gpumux/workload.h"
#include "sim.h"

/* A workload of `kernels` kernels, each `dur_ns` long, kernel i touching
 * `touch` bytes of one `size`-byte buffer at offset (i * touch) % size. */
static inline void tu_sweep(gmx_workload_t *w, const char *name, uint64_t size, uint32_t kernels, uint64_t touch,
			    uint64_t dur_ns, uint64_t think_ns)
{
	uint32_t buf, nm;
	assert_int_equal(gmx_workload_init(w, name), 0);
	assert_int_equal(gmx_workload_add_buffer(w, 0, size, "data", &buf), 0);
	assert_int_equal(gmx_workload_intern_name(w, "sweep", &nm), 0);
	for (uint32_t i = 0; i < kernels; i++) {
		gmx_op_t op = {.kind = GMX_OP_KERNEL, .klass = GMX_CLASS_MEMORY, .name = nm, .think_ns = think_ns,
			       .duration_ns = dur_ns, .buffer = UINT32_MAX};
		assert_int_equal(gmx_workload_add_op(w, &op, NULL), 0);
		uint64_t off = ((uint64_t)i * touch) % size;
		uint64_t len = touch < size - off ? touch : size - off;
		assert_int_equal(gmx_workload_add_arg(w, w->buffers[buf].addr + off, 1, 8), 0);
		assert_int_equal(gmx_workload_add_region(w, buf, off, len), 0);
	}
	gmx_op_t sync = {.kind = GMX_OP_SYNC, .stream = -1, .buffer = UINT32_MAX};
	assert_int_equal(gmx_workload_add_op(w, &sync, NULL), 0);
}

/* Runs w alone on an RTX 5080 with `capacity` bytes under `mem` (um under timeslice,
 * the other modes under timeline) for duration_ns; fails the test on an error.
 * Returns the result, for the caller to free. */
static inline gmx_sim_result_t *tu_run_alone(gmx_workload_t *w, gmx_mem_mode_t mem, uint64_t capacity,
					     int64_t duration_ns)
{
	gmx_sim_task_t t = {.name = w->name ? w->name : "t", .workload = w};
	gmx_sim_config_t c = {
	    .device = gmx_preset_find("rtx5080"),
	    .capacity_bytes = capacity,
	    .mem = mem,
	    .policy = gmx_sched_find(mem == GMX_MEM_UM ? "timeslice" : "timeline"),
	    .duration_ns = duration_ns,
	    .seed = 1,
	    .tasks = &t,
	    .n_tasks = 1,
	};
	gmx_sched_params_default(&c.sched);
	gmx_sim_result_t *r = calloc(1, sizeof(*r));
	assert_non_null(r);
	char err[512];
	if (gmx_sim_run(&c, r, err, sizeof(err)))
		fail_msg("%s: %s", gmx_mem_mode_name(mem), err);
	return r;
}

#endif
