/* Reports of a simulation: one JSON object (the documented schema) or a table. */
#ifndef GMX_SIM_REPORT_H
#define GMX_SIM_REPORT_H

#include <jansson.h>
#include <stdio.h>

#include "sim.h"

/* Identifies a run in its report. */
typedef struct gmx_run_info {
	const char *scenario, *sched, *mem, *device;
	uint64_t seed;
} gmx_run_info_t;

/* The JSON report of one run as an object (the caller owns it), or NULL when out of memory. */
json_t *gmx_report_object(const gmx_run_info_t *info, const gmx_sim_result_t *r);

/* Writes root compactly and a newline, and releases it. 0, -ENOMEM (root NULL) or -EIO. */
int gmx_report_print(FILE *out, json_t *root);

/* Writes the JSON report (one object and a newline). 0 or -EIO/-ENOMEM. */
int gmx_report_json(FILE *out, const gmx_run_info_t *info, const gmx_sim_result_t *r);

/* Writes a human-readable table. */
void gmx_report_table(FILE *out, const gmx_run_info_t *info, const gmx_sim_result_t *r);

#endif
