/*
 * Working-set prediction in the interposer: a launch's predicted memory, from working-set
 * templates (gpumux/template.h) loaded from the file named by GPUMUX_TEMPLATES.
 *
 * The daemon plans migrations in GMX_MIG_CHUNK units of each allocation, so predicted
 * ranges less than a chunk apart are merged before they go up the ring: a strided template
 * that touches a thousand rows becomes a few spans, never a thousand ring entries. Merging
 * only adds memory (a page predicted that is not touched costs a transfer; a page missed
 * costs a demand fault). A launch with more spans than GMX_RANGES_MAX keeps the first ones
 * in access order and merges the rest into the last.
 *
 * The templates are read once, before the first launch, and never change: prediction takes
 * no lock.
 */
#define _GNU_SOURCE
#include "wset.h"
#include "shim_internal.h"

#include "gmx_proto.h"
#include "gpumux/template.h"
#include "tpl_file.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define WSET_RAW_MAX 65536u /* predicted ranges of one launch, before merging */

static gmx_tpl_set_t g_set;
static int g_loaded;

int gmx_shim_wset_load(const char *path)
{
	char err[512];
	int rc = gmx_templates_read(path, &g_set, err, sizeof err);
	if (rc) {
		/* err starts with the path: "GPUMUX_TEMPLATES=PATH: line N: ..." */
		fprintf(stderr,
			"gpumux shim: GPUMUX_TEMPLATES=%s; launches are predicted by whole "
			"allocations\n",
			err);
		gmx_tpl_set_free(&g_set);
		return rc;
	}
	g_loaded = 1;
	gmx_shim_log("templates: %u kernels from %s", g_set.n, path);
	return 0;
}

/* Splits the launch buffer into the 4- and 8-byte words templates are written against: an
 * argument of 1..4 bytes is one 4-byte word, of 8 one 8-byte word, a larger one (a struct)
 * its 8-byte words and a 4-byte tail. 0, or -1 if there are too many words. */
static int split_args(const gmx_shim_cmd_t *cmd, gmx_arg_t *args, uint32_t *n)
{
	*n = 0;
	for (size_t i = 0; i < cmd->nparams; i++) {
		size_t off = cmd->param_offset[i], size = cmd->param_size[i];
		for (size_t at = 0, take; at < size; at += take) {
			size_t left = size - at, w = left > 4 ? 8 : 4;
			take = left < w ? left : w;
			if (*n >= GMX_TPL_MAX_ARGS)
				return -1;
			uint64_t v = 0;
			memcpy(&v, cmd->param_data + off + at, take); /* little-endian: low bytes first */
			args[(*n)++] = (gmx_arg_t){.value = v, .is_pointer = 0, .size = (uint8_t)w};
		}
	}
	return 0;
}

/* Nonzero when a and b overlap or lie less than a chunk apart (the daemon would move the
 * chunk between them anyway). */
static int near(gmx_tpl_range_t a, gmx_tpl_range_t b)
{
	return a.addr <= b.addr + b.length + GMX_MIG_CHUNK && b.addr <= a.addr + a.length + GMX_MIG_CHUNK;
}

static gmx_tpl_range_t span_union(gmx_tpl_range_t a, gmx_tpl_range_t b)
{
	uint64_t lo = a.addr < b.addr ? a.addr : b.addr;
	uint64_t ha = a.addr + a.length, hb = b.addr + b.length;
	return (gmx_tpl_range_t){lo, (ha > hb ? ha : hb) - lo};
}

int gmx_shim_wset_predict(const gmx_shim_cmd_t *cmd, gmx_tpl_range_t *out, uint32_t *n)
{
	*n = 0;
	if (!g_loaded || !cmd->name || !cmd->param_offset)
		return 0;
	const gmx_tpl_t *t = gmx_tpl_find(&g_set, cmd->name);
	if (!t)
		return 0;
	gmx_arg_t args[GMX_TPL_MAX_ARGS];
	uint32_t nargs;
	if (split_args(cmd, args, &nargs))
		return 0;
	uint32_t grid[3] = {cmd->grid[0], cmd->grid[1], cmd->grid[2]};
	uint32_t block[3] = {cmd->block[0], cmd->block[1], cmd->block[2]};
	gmx_tpl_range_t small[256], *raw = small;
	uint32_t nraw = 0;
	int rc = gmx_tpl_predict(t, args, nargs, grid, block, raw, 256, &nraw);
	if (rc == -ENOSPC) {
		if (nraw > WSET_RAW_MAX)
			return 0; /* a template listing this many ranges predicts by whole allocations */
		raw = malloc((size_t)nraw * sizeof *raw);
		if (!raw)
			return 0;
		rc = gmx_tpl_predict(t, args, nargs, grid, block, raw, nraw, &nraw);
	}
	if (rc == 0) {
		for (uint32_t i = 0; i < nraw; i++) {
			if (!raw[i].length)
				continue;
			gmx_tpl_range_t s = raw[i];
			if (s.addr + s.length < s.addr)
				s.length = UINT64_MAX - s.addr; /* a wrapping prediction: clamp */
			uint32_t j = 0;
			while (j < *n && !near(out[j], s))
				j++;
			if (j < *n)
				out[j] = span_union(out[j], s);
			else if (*n < GMX_RANGES_MAX)
				out[(*n)++] = s;
			else
				out[GMX_RANGES_MAX - 1] = span_union(out[GMX_RANGES_MAX - 1], s);
		}
	}
	if (raw != small)
		free(raw);
	return rc == 0 && *n > 0;
}
