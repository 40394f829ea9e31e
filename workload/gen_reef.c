/* Placeholder: the reef generator lands next. */
#include "gen_internal.h"

static const struct gen_pspec none[] = {{NULL, 0, NULL, 0, 0, NULL, NULL}};
static int todo(struct gen_ctx *g)
{
	return gen_fail(g, "not implemented in this build");
}
const struct gen_kind gen_reef = {"reef", "not implemented yet", none, todo};
