/* Placeholder: the Rodinia-like generators land next. */
#include "gen_internal.h"

static const struct gen_pspec none[] = {{NULL, 0, NULL, 0, 0, NULL, NULL}};
static int todo(struct gen_ctx *g)
{
	return gen_fail(g, "not implemented in this build");
}
const struct gen_kind gen_dwt2d = {"dwt2d", "not implemented yet", none, todo};
const struct gen_kind gen_hotspot = {"hotspot", "not implemented yet", none, todo};
const struct gen_kind gen_cfd = {"cfd", "not implemented yet", none, todo};
const struct gen_kind gen_nn = {"nn", "not implemented yet", none, todo};
const struct gen_kind gen_reef = {"reef", "not implemented yet", none, todo};
