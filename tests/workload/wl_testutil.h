/* Helpers shared by the workload tests: deep equality and a write/read trip. */
#ifndef GMX_TESTS_WL_TESTUTIL_H
#define GMX_TESTS_WL_TESTUTIL_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "gpumux/workload.h"
#include "gpumux/workload_io.h"

static int wl_str_eq(const char *a, const char *b)
{
	return (!a && !b) || (a && b && !strcmp(a, b));
}

/* Returns NULL when a and b are equal field by field, else what differs. */
static const char *wl_diff(const gmx_workload_t *a, const gmx_workload_t *b)
{
	static char why[256];
	if (!wl_str_eq(a->name, b->name) || !wl_str_eq(a->device, b->device) || !wl_str_eq(a->unit, b->unit))
		return "name/device/unit";
	if (a->n_buffers != b->n_buffers || a->n_ops != b->n_ops || a->n_args != b->n_args ||
	    a->n_regions != b->n_regions || a->n_names != b->n_names)
		return "counts";
	for (uint32_t i = 0; i < a->n_buffers; i++)
		if (a->buffers[i].addr != b->buffers[i].addr || a->buffers[i].size != b->buffers[i].size ||
		    !wl_str_eq(a->buffers[i].name, b->buffers[i].name)) {
			snprintf(why, sizeof(why), "buffer %u", i);
			return why;
		}
	for (uint32_t i = 0; i < a->n_names; i++)
		if (strcmp(a->names[i], b->names[i])) {
			snprintf(why, sizeof(why), "name %u", i);
			return why;
		}
	for (uint32_t i = 0; i < a->n_ops; i++) {
		const gmx_op_t *x = &a->ops[i], *y = &b->ops[i];
		if (x->kind != y->kind || x->klass != y->klass || x->stream != y->stream || x->name != y->name ||
		    x->think_ns != y->think_ns || x->duration_ns != y->duration_ns || x->bytes != y->bytes ||
		    memcmp(x->grid, y->grid, sizeof(x->grid)) || memcmp(x->block, y->block, sizeof(x->block)) ||
		    x->shared_mem != y->shared_mem || x->sm_demand != y->sm_demand || x->buffer != y->buffer ||
		    x->event != y->event ||
		    x->arg_first != y->arg_first || x->arg_count != y->arg_count || x->region_first != y->region_first ||
		    x->region_count != y->region_count) {
			snprintf(why, sizeof(why), "op %u", i);
			return why;
		}
	}
	for (uint32_t i = 0; i < a->n_args; i++)
		if (a->args[i].value != b->args[i].value || a->args[i].is_pointer != b->args[i].is_pointer ||
		    a->args[i].size != b->args[i].size) {
			snprintf(why, sizeof(why), "arg %u", i);
			return why;
		}
	for (uint32_t i = 0; i < a->n_regions; i++)
		if (a->regions[i].buffer != b->regions[i].buffer || a->regions[i].offset != b->regions[i].offset ||
		    a->regions[i].length != b->regions[i].length) {
			snprintf(why, sizeof(why), "region %u", i);
			return why;
		}
	return NULL;
}

/* Writes w to a temporary file, reads it back into *back. 0 or the error. */
static int wl_round_trip(const gmx_workload_t *w, gmx_workload_t *back, char *err, size_t err_len)
{
	char path[] = "/tmp/gmx-wl-test-XXXXXX";
	int fd = mkstemp(path);
	if (fd < 0)
		return -1;
	close(fd);
	int rc = gmx_workload_write(w, path, err, err_len);
	if (!rc)
		rc = gmx_workload_read(path, back, err, err_len);
	unlink(path);
	return rc;
}

#endif
