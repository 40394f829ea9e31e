/* Charts of runs and benchmarks (cairo; SVG or PNG by the file name's extension). */
#ifndef GMX_CLI_CHART_H
#define GMX_CLI_CHART_H

#include <stdint.h>

#include "sim.h"

typedef struct {
	const char *name;
	int priority;
} gmx_chart_task_t;

/* Draws the Gantt chart of a recorded run between from_ns and to_ns: one row per task with its
 * kernels, copies, waits for pages (stalls), commands waiting to start, migrations in and out,
 * and a band for its turns on the execution engine. 0, or a negative errno with the reason. */
int gmx_chart_timeline(const char *path, const gmx_sim_timeline_t *tl, const gmx_chart_task_t *tasks,
		       uint32_t n_tasks, int64_t from_ns, int64_t to_ns, const char *title, char *err,
		       size_t err_len);

/* Draws a grouped bar chart: values[g * n_series + k] is series k in group g (negative or NaN:
 * no bar); ref > 0 draws a dashed reference line there. 0, or a negative errno with the reason. */
int gmx_chart_bars(const char *path, const char *title, const char *y_label, const char *const *groups,
		   uint32_t n_groups, const char *const *series, uint32_t n_series, const double *values,
		   double ref, char *err, size_t err_len);

/* Draws labelled points (x[i], y[i]); series[i] picks the colour (NULL: one per point). 0, or a
 * negative errno with the reason. */
int gmx_chart_points(const char *path, const char *title, const char *x_label, const char *y_label,
		     const char *const *labels, uint32_t n, const double *x, const double *y, const double *series,
		     char *err, size_t err_len);

#endif
