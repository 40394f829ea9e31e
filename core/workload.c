/* Workload builder: growable pools for buffers, ops, args, regions and names. */
#include "gpumux/workload.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define GMX_WORKLOAD_FIRST_ADDR 0x200000000ull /* first default buffer address */
#define GMX_WORKLOAD_ADDR_ALIGN (2ull << 20)    /* buffers start on 2 MB chunks */

static int grow(void **array, uint32_t *cap, uint32_t need, size_t elem)
{
	if (need <= *cap)
		return 0;
	uint32_t ncap = *cap ? *cap : 16;
	while (ncap < need) {
		if (ncap > UINT32_MAX / 2)
			return -ENOMEM;
		ncap *= 2;
	}
	void *p = realloc(*array, (size_t)ncap * elem);
	if (!p)
		return -ENOMEM;
	*array = p;
	*cap = ncap;
	return 0;
}

int gmx_workload_set_str(char **field, const char *value)
{
	char *copy = NULL;
	if (value) {
		copy = strdup(value);
		if (!copy)
			return -ENOMEM;
	}
	free(*field);
	*field = copy;
	return 0;
}

int gmx_workload_init(gmx_workload_t *w, const char *name)
{
	memset(w, 0, sizeof(*w));
	return gmx_workload_set_str(&w->name, name ? name : "workload");
}

void gmx_workload_free(gmx_workload_t *w)
{
	if (!w)
		return;
	for (uint32_t i = 0; i < w->n_buffers; i++)
		free(w->buffers[i].name);
	for (uint32_t i = 0; i < w->n_names; i++)
		free(w->names[i]);
	free(w->buffers);
	free(w->ops);
	free(w->args);
	free(w->regions);
	free(w->names);
	free(w->name);
	free(w->device);
	free(w->unit);
	memset(w, 0, sizeof(*w));
}

int gmx_workload_add_buffer(gmx_workload_t *w, uint64_t addr, uint64_t size, const char *name,
			    uint32_t *index)
{
	if (size == 0)
		return -EINVAL;
	if (addr == 0) {
		addr = GMX_WORKLOAD_FIRST_ADDR;
		if (w->n_buffers) {
			const gmx_buffer_t *last = &w->buffers[w->n_buffers - 1];
			uint64_t end = last->addr + last->size;
			addr = (end + GMX_WORKLOAD_ADDR_ALIGN - 1) & ~(GMX_WORKLOAD_ADDR_ALIGN - 1);
		}
	}
	if (addr + size < addr)
		return -EINVAL;
	int rc = grow((void **)&w->buffers, &w->cap_buffers, w->n_buffers + 1, sizeof(*w->buffers));
	if (rc)
		return rc;
	gmx_buffer_t *b = &w->buffers[w->n_buffers];
	b->addr = addr;
	b->size = size;
	b->name = NULL;
	if (name && !(b->name = strdup(name)))
		return -ENOMEM;
	if (index)
		*index = w->n_buffers;
	w->n_buffers++;
	return 0;
}

int gmx_workload_intern_name(gmx_workload_t *w, const char *name, uint32_t *index)
{
	/* Linear search from the end: generators repeat the last few names. */
	for (uint32_t i = w->n_names; i-- > 0;) {
		if (strcmp(w->names[i], name) == 0) {
			*index = i;
			return 0;
		}
		if (w->n_names - i > 64)
			break;
	}
	int rc = grow((void **)&w->names, &w->cap_names, w->n_names + 1, sizeof(*w->names));
	if (rc)
		return rc;
	char *copy = strdup(name);
	if (!copy)
		return -ENOMEM;
	w->names[w->n_names] = copy;
	*index = w->n_names++;
	return 0;
}

int gmx_workload_add_op(gmx_workload_t *w, const gmx_op_t *op, gmx_op_t **out)
{
	int rc = grow((void **)&w->ops, &w->cap_ops, w->n_ops + 1, sizeof(*w->ops));
	if (rc)
		return rc;
	gmx_op_t *o = &w->ops[w->n_ops++];
	*o = *op;
	o->arg_first = w->n_args;
	o->arg_count = 0;
	o->region_first = w->n_regions;
	o->region_count = 0;
	if (out)
		*out = o;
	return 0;
}

int gmx_workload_add_arg(gmx_workload_t *w, uint64_t value, int is_pointer, int size)
{
	if (!w->n_ops || (size != 4 && size != 8))
		return -EINVAL;
	int rc = grow((void **)&w->args, &w->cap_args, w->n_args + 1, sizeof(*w->args));
	if (rc)
		return rc;
	w->args[w->n_args++] = (gmx_arg_t){.value = value, .is_pointer = !!is_pointer, .size = (uint8_t)size};
	w->ops[w->n_ops - 1].arg_count++;
	return 0;
}

int gmx_workload_add_region(gmx_workload_t *w, uint32_t buffer, uint64_t offset, uint64_t length)
{
	if (!w->n_ops || buffer >= w->n_buffers || length == 0)
		return -EINVAL;
	uint64_t size = w->buffers[buffer].size;
	if (offset >= size || length > size - offset)
		return -EINVAL;
	int rc = grow((void **)&w->regions, &w->cap_regions, w->n_regions + 1, sizeof(*w->regions));
	if (rc)
		return rc;
	w->regions[w->n_regions++] = (gmx_region_t){.buffer = buffer, .offset = offset, .length = length};
	w->ops[w->n_ops - 1].region_count++;
	return 0;
}

uint64_t gmx_workload_footprint(const gmx_workload_t *w)
{
	uint64_t total = 0;
	for (uint32_t i = 0; i < w->n_buffers; i++) {
		if (w->buffers[i].size > UINT64_MAX - total)
			return UINT64_MAX; /* a wrapped sum would pass every memory check */
		total += w->buffers[i].size;
	}
	return total;
}

uint64_t gmx_workload_gpu_ns(const gmx_workload_t *w)
{
	uint64_t total = 0;
	for (uint32_t i = 0; i < w->n_ops; i++) {
		uint8_t k = w->ops[i].kind;
		if (k == GMX_OP_KERNEL || k == GMX_OP_COPY_H2D || k == GMX_OP_COPY_D2H || k == GMX_OP_MEMSET ||
		    k == GMX_OP_COPY_D2D)
			total += w->ops[i].duration_ns;
	}
	return total;
}

int gmx_workload_validate(const gmx_workload_t *w, char *msg, size_t msg_len)
{
	char scratch[8];
	if (!msg) {
		msg = scratch;
		msg_len = sizeof(scratch);
	}
	uint32_t next_arg = 0, next_region = 0;
	for (uint32_t i = 0; i < w->n_ops; i++) {
		const gmx_op_t *o = &w->ops[i];
		if (o->kind >= GMX_OP_KIND_COUNT) {
			snprintf(msg, msg_len, "op %u: unknown kind %u", i, o->kind);
			return -EINVAL;
		}
		if (o->arg_first != next_arg || o->arg_first + o->arg_count > w->n_args ||
		    o->region_first != next_region || o->region_first + o->region_count > w->n_regions) {
			snprintf(msg, msg_len, "op %u: argument or region slice out of order", i);
			return -EINVAL;
		}
		next_arg += o->arg_count;
		next_region += o->region_count;
		if (o->kind == GMX_OP_KERNEL && o->name >= w->n_names) {
			snprintf(msg, msg_len, "op %u: kernel name %u not defined", i, o->name);
			return -EINVAL;
		}
		if ((o->kind == GMX_OP_ALLOC || o->kind == GMX_OP_FREE) && o->buffer >= w->n_buffers) {
			snprintf(msg, msg_len, "op %u: buffer %u not defined", i, o->buffer);
			return -EINVAL;
		}
		if (o->kind != GMX_OP_SYNC && o->stream < 0) {
			snprintf(msg, msg_len, "op %u: negative stream", i);
			return -EINVAL;
		}
	}
	for (uint32_t r = 0; r < w->n_regions; r++) {
		const gmx_region_t *g = &w->regions[r];
		if (g->buffer >= w->n_buffers || g->length == 0 || g->offset >= w->buffers[g->buffer].size ||
		    g->length > w->buffers[g->buffer].size - g->offset) {
			snprintf(msg, msg_len, "region %u lies outside buffer %u", r, g->buffer);
			return -EINVAL;
		}
	}
	return 0;
}

int64_t gmx_workload_find_buffer(const gmx_workload_t *w, uint64_t addr)
{
	for (uint32_t i = 0; i < w->n_buffers; i++) {
		const gmx_buffer_t *b = &w->buffers[i];
		if (addr >= b->addr && addr - b->addr < b->size)
			return i;
	}
	return -1;
}
