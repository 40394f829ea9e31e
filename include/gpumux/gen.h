/* Workload generators: llm-decode, the Rodinia-like kernels (dwt2d, hotspot,
 * cfd, nn), vector-add and matmul (the MSched microbenchmark), and DNN
 * inference from the REEF graphs. Each builds one unit of work with launch
 * arguments consistent with the memory its kernels touch. */
#ifndef GPUMUX_GEN_H
#define GPUMUX_GEN_H

#include <stddef.h>
#include <stdio.h>

#include "gpumux/workload.h"

/* One generator parameter, as written in a scenario (key = value). */
typedef struct gmx_param {
	const char *key;
	const char *value;
} gmx_param_t;

/* Builds the workload of generator `kind` from `params` into *out (initialised
 * here). Relative paths in params resolve against base_dir (the scenario's
 * folder; NULL = current directory). Returns 0, or -EINVAL with one line in err
 * naming the bad parameter and what was expected (unknown generator, unknown
 * key, value out of range, malformed input file), the negative errno of an input
 * file that cannot be opened (-ENOENT, -EACCES, ...), or -ENOMEM. *out is freed
 * (and zeroed) on error. */
int gmx_gen_build(const char *kind, const gmx_param_t *params, size_t n_params, const char *base_dir,
		  gmx_workload_t *out, char *err, size_t err_len);

/* Non-zero when `kind` names a generator. */
int gmx_gen_exists(const char *kind);

/* Prints every generator with its parameters, defaults and bounds to `out`. */
void gmx_gen_describe(FILE *out);

#endif
