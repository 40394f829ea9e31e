/* Working-set prediction in the interposer (see wset.c). */
#ifndef GMX_SHIM_WSET_H
#define GMX_SHIM_WSET_H

#include <stdint.h>

#include "gmx_grant.h"
#include "gpumux/template.h"

/* Loads the templates file at path (docs/msched.md); on error prints why to stderr and
 * leaves prediction off. 0 or a negative errno. Call once, before any launch. */
int gmx_shim_wset_load(const char *path);

/* Predicts cmd's working set as at most GMX_RANGES_MAX page-aligned spans in access order
 * (out must hold that many). 1 when predicted, 0 when no template applies. */
int gmx_shim_wset_predict(const gmx_shim_cmd_t *cmd, gmx_tpl_range_t *out, uint32_t *n);

#endif
