/* Writer of the native workload format (docs/workload-format.md): refuses a
 * workload the reader (workload_read.c) could not read back exactly, and
 * writes the target as io/outfile.c does (a regular file replaced atomically). */
#include "gpumux/workload_io.h"

#include "gpumux/outfile.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Whether a rest-of-line string survives a round trip: no newline or '#',
 * no surrounding blanks, not empty. */
static int line_string_ok(const char *s)
{
	size_t len = strlen(s);
	if (!len || s[0] == ' ' || s[0] == '\t' || s[len - 1] == ' ' || s[len - 1] == '\t')
		return 0;
	return strpbrk(s, "#\n\r") == NULL;
}

/* A buffer name is one token: no blanks, '#', ',' or line breaks. */
static int token_ok(const char *s)
{
	return *s && strpbrk(s, " \t#\n\r") == NULL;
}

/* A kernel name runs to the end of the line, blanks, commas and '#'
 * included; only line breaks cannot round-trip. */
static int kname_ok(const char *s)
{
	return *s && strpbrk(s, "\n\r") == NULL;
}

/* Checks that every string can be written so that it reads back unchanged. */
static int writable(const gmx_workload_t *w, char *err, size_t err_len)
{
	char why[256];
	if (gmx_workload_validate(w, why, sizeof(why))) {
		snprintf(err, err_len, "cannot write an inconsistent workload: %s", why);
		return -EINVAL;
	}
	const char *fields[3] = {w->name, w->device, w->unit};
	const char *names[3] = {"name", "device", "unit"};
	for (int i = 0; i < 3; i++)
		if (fields[i] && !line_string_ok(fields[i])) {
			snprintf(err, err_len, "workload %s '%.60s' cannot be written: it is empty, holds '#' or a line break, or starts/ends with a blank",
				 names[i], fields[i]);
			return -EINVAL;
		}
	for (uint32_t i = 0; i < w->n_buffers; i++)
		if (w->buffers[i].name && !token_ok(w->buffers[i].name)) {
			snprintf(err, err_len, "buffer %u name '%.60s' cannot be written: it must be one word without '#'", i,
				 w->buffers[i].name);
			return -EINVAL;
		}
	for (uint32_t i = 0; i < w->n_names; i++)
		if (!kname_ok(w->names[i])) {
			snprintf(err, err_len, "kernel name %u cannot be written: it is empty or holds a line break", i);
			return -EINVAL;
		}
	for (uint32_t i = 0; i < w->n_args; i++)
		if (w->args[i].is_pointer && w->args[i].size != 8) {
			snprintf(err, err_len, "argument %u: a pointer argument must be 8 bytes", i);
			return -EINVAL;
		}
	for (uint32_t i = 0; i < w->n_ops; i++) {
		const gmx_op_t *o = &w->ops[i];
		if (o->kind == GMX_OP_KERNEL && (o->klass < GMX_CLASS_UNKNOWN || o->klass > GMX_CLASS_COMPUTE)) {
			snprintf(err, err_len, "op %u: kernel class %d is not compute, memory or unknown", i, o->klass);
			return -EINVAL;
		}
		if ((o->kind == GMX_OP_COPY_H2D || o->kind == GMX_OP_COPY_D2H || o->kind == GMX_OP_MEMSET ||
		     o->kind == GMX_OP_COPY_D2D) &&
		    (o->bytes == 0 || o->stream < 0)) {
			snprintf(err, err_len, "op %u: a copy or memset needs bytes > 0 and a stream", i);
			return -EINVAL;
		}
	}
	return 0;
}

static void put_think(FILE *out, const gmx_op_t *o)
{
	if (o->think_ns)
		fprintf(out, " think=%llu", (unsigned long long)o->think_ns);
}

static const char *class_name(int8_t k)
{
	return k == GMX_CLASS_COMPUTE ? "compute" : k == GMX_CLASS_MEMORY ? "memory" : "unknown";
}

static void write_body(const gmx_workload_t *w, FILE *out)
{
	fprintf(out, "gpumux-workload %d\n", GMX_WORKLOAD_FORMAT_VERSION);
	if (w->name)
		fprintf(out, "name %s\n", w->name);
	if (w->device)
		fprintf(out, "device %s\n", w->device);
	if (w->unit)
		fprintf(out, "unit %s\n", w->unit);
	for (uint32_t i = 0; i < w->n_buffers; i++) {
		const gmx_buffer_t *b = &w->buffers[i];
		fprintf(out, "buffer id=%u size=0x%llx addr=0x%llx", i, (unsigned long long)b->size,
			(unsigned long long)b->addr);
		if (b->name)
			fprintf(out, " name=%s", b->name);
		fputc('\n', out);
	}
	for (uint32_t i = 0; i < w->n_names; i++)
		fprintf(out, "kname %u %s\n", i, w->names[i]);
	for (uint32_t i = 0; i < w->n_ops; i++) {
		const gmx_op_t *o = &w->ops[i];
		switch ((gmx_op_kind_t)o->kind) {
		case GMX_OP_KERNEL:
			fprintf(out, "kernel s=%d", o->stream);
			put_think(out, o);
			fprintf(out, " dur=%llu name=%u grid=%u,%u,%u block=%u,%u,%u", (unsigned long long)o->duration_ns,
				o->name, o->grid[0], o->grid[1], o->grid[2], o->block[0], o->block[1], o->block[2]);
			if (o->shared_mem)
				fprintf(out, " shm=%u", o->shared_mem);
			if (o->sm_demand)
				fprintf(out, " sm=%u", o->sm_demand);
			fprintf(out, " class=%s", class_name(o->klass));
			for (uint32_t a = 0; a < o->arg_count; a++) {
				const gmx_arg_t *g = &w->args[o->arg_first + a];
				fputs(a ? "," : " args=", out);
				if (g->is_pointer)
					fprintf(out, "p:0x%llx", (unsigned long long)g->value);
				else
					fprintf(out, "i%u:%llu", g->size, (unsigned long long)g->value);
			}
			for (uint32_t k = 0; k < o->region_count; k++) {
				const gmx_region_t *g = &w->regions[o->region_first + k];
				fprintf(out, "%s%u+0x%llx:0x%llx", k ? "," : " touch=", g->buffer, (unsigned long long)g->offset,
					(unsigned long long)g->length);
			}
			fputc('\n', out);
			break;
		case GMX_OP_COPY_H2D:
		case GMX_OP_COPY_D2H:
		case GMX_OP_COPY_D2D:
		case GMX_OP_MEMSET:
			fprintf(out, "%s s=%d",
				o->kind == GMX_OP_COPY_H2D   ? "h2d"
				: o->kind == GMX_OP_COPY_D2H ? "d2h"
				: o->kind == GMX_OP_COPY_D2D ? "d2d"
							     : "memset",
				o->stream);
			put_think(out, o);
			fprintf(out, " bytes=0x%llx", (unsigned long long)o->bytes);
			if (o->buffer != UINT32_MAX)
				fprintf(out, " buf=%u", o->buffer);
			if (o->duration_ns)
				fprintf(out, " dur=%llu", (unsigned long long)o->duration_ns);
			fputc('\n', out);
			break;
		case GMX_OP_SYNC:
			if (o->stream < 0)
				fputs("sync s=all", out);
			else
				fprintf(out, "sync s=%d", o->stream);
			put_think(out, o);
			fputc('\n', out);
			break;
		case GMX_OP_ALLOC:
		case GMX_OP_FREE:
			fprintf(out, "%s buf=%u", o->kind == GMX_OP_ALLOC ? "alloc" : "free", o->buffer);
			put_think(out, o);
			fputc('\n', out);
			break;
		case GMX_OP_RECORD:
		case GMX_OP_WAIT:
			fprintf(out, "%s s=%d event=%u", o->kind == GMX_OP_RECORD ? "record" : "wait", o->stream, o->event);
			put_think(out, o);
			fputc('\n', out);
			break;
		case GMX_OP_KIND_COUNT:
			break;
		}
	}
	fprintf(out, "end buffers=%u knames=%u ops=%u\n", w->n_buffers, w->n_names, w->n_ops);
}

int gmx_workload_write_stream(const gmx_workload_t *w, FILE *out)
{
	char err[256];
	if (writable(w, err, sizeof(err)))
		return -EINVAL;
	write_body(w, out);
	return ferror(out) ? -EIO : 0;
}

int gmx_workload_write(const gmx_workload_t *w, const char *path, char *err, size_t err_len)
{
	char scratch[256];
	if (!err || !err_len) {
		err = scratch;
		err_len = sizeof(scratch);
	}
	err[0] = '\0';
	int rc = writable(w, err, err_len);
	if (rc)
		return rc;
	gmx_outfile_t o;
	rc = gmx_outfile_open(&o, path, err, err_len);
	if (rc)
		return rc;
	write_body(w, o.f);
	return gmx_outfile_commit(&o, err, err_len);
}
