/* gpumux bench --plot: charts of the benchmarks' tables. */
#ifndef GMX_CLI_BENCH_PLOT_H
#define GMX_CLI_BENCH_PLOT_H

#include <jansson.h>

/* Draws benchmark `bench`'s charts from the JSON object it prints (root) into dir (created if
 * missing) as SVG and PNG files: fikit, msched and calibrate. 0, or 1 with the reason on stderr. */
int gmx_bench_plot(const char *dir, const char *bench, json_t *root);

#endif
