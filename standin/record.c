/*
 * The stand-in driver: GPUMUX_STANDIN_RECORD=FILE records the process's run as a workload
 * (docs/workload-format.md), written when the process exits: its device and managed
 * allocations as buffers, and every kernel it ran with its name, stream, grid, block, duration,
 * arguments and the memory each pointer argument reaches (from the pointer to the end of its
 * allocation, or the extent its text module declares with p@K). `gpumux profile templates`
 * learns working-set templates from such recordings of the same program at two sizes.
 * Arguments are split as the interposer's template matcher splits a launch buffer: a parameter
 * of 1..4 bytes is one 4-byte word, 8 bytes one 8-byte word (a pointer when it lies in a
 * recorded buffer), a larger one its 8-byte words.
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "gpumux/workload.h"
#include "gpumux/workload_io.h"
#include "standin_internal.h"

static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static gmx_workload_t g_w;
static int g_on = -1; /* -1 not decided, 0 off, 1 recording */
static pid_t g_pid;
static char *g_path;

static void write_out(void)
{
	pthread_mutex_lock(&g_lock);
	if (g_on == 1 && getpid() == g_pid) {
		char err[256];
		if (gmx_workload_write(&g_w, g_path, err, sizeof err) != 0)
			fprintf(stderr, "gpumux stand-in: GPUMUX_STANDIN_RECORD: %s\n", err);
	}
	pthread_mutex_unlock(&g_lock);
}

/* Decides once (per process) whether to record; S.lock-free. */
static int on(void)
{
	if (g_on >= 0 && getpid() == g_pid)
		return g_on;
	const char *p = getenv("GPUMUX_STANDIN_RECORD");
	if (g_on == 1) /* a forked child: the parent's recording is not its own */
		gmx_workload_free(&g_w);
	g_on = 0;
	g_pid = getpid();
	if (!p || !*p)
		return 0;
	char name[64];
	snprintf(name, sizeof name, "recorded-%d", (int)g_pid);
	if (gmx_workload_init(&g_w, name) != 0 || gmx_workload_set_str(&g_w.unit, "run") != 0)
		return 0;
	free(g_path);
	g_path = strdup(p);
	static int registered;
	if (!registered && g_path) {
		atexit(write_out);
		registered = 1;
	}
	g_on = g_path != NULL;
	return g_on;
}

void si__record_alloc(uintptr_t base, size_t size)
{
	pthread_mutex_lock(&g_lock);
	uint32_t idx;
	if (on() && gmx_workload_add_buffer(&g_w, base, size, NULL, &idx) != 0)
		fprintf(stderr, "gpumux stand-in: GPUMUX_STANDIN_RECORD: out of memory\n");
	pthread_mutex_unlock(&g_lock);
}

void si__record_kernel(const struct CUfunc_st *f, void **params, int stream, int64_t dur_ns, const unsigned grid[3],
		       const unsigned block[3], unsigned shmem)
{
	pthread_mutex_lock(&g_lock);
	if (!on()) {
		pthread_mutex_unlock(&g_lock);
		return;
	}
	gmx_op_t op = {.kind = GMX_OP_KERNEL,
		       .klass = GMX_CLASS_UNKNOWN,
		       .stream = (int16_t)stream,
		       .duration_ns = (uint64_t)dur_ns,
		       .shared_mem = shmem,
		       .buffer = UINT32_MAX};
	memcpy(op.grid, grid, sizeof op.grid);
	memcpy(op.block, block, sizeof op.block);
	gmx_op_t *out;
	int r = gmx_workload_intern_name(&g_w, f->name, &op.name);
	if (r == 0)
		r = gmx_workload_add_op(&g_w, &op, &out);
	for (int i = 0; r == 0 && params && i < f->nparams; i++) {
		const unsigned char *p = params[i];
		if (f->size[i] <= 4) {
			uint32_t v = 0;
			memcpy(&v, p, f->size[i]);
			r = gmx_workload_add_arg(&g_w, v, 0, 4);
			continue;
		}
		for (size_t w = 0; r == 0 && w + 8 <= f->size[i]; w += 8) {
			uint64_t v;
			memcpy(&v, p + w, 8);
			int64_t b = f->size[i] == 8 ? gmx_workload_find_buffer(&g_w, v) : -1;
			r = gmx_workload_add_arg(&g_w, v, b >= 0, 8);
		}
	}
	/* what each pointer reaches: its declared extent, else the rest of its allocation */
	for (int i = 0; r == 0 && params && i < f->nparams; i++) {
		if (f->size[i] != 8)
			continue;
		uint64_t v;
		memcpy(&v, params[i], 8);
		int64_t b = gmx_workload_find_buffer(&g_w, v);
		if (b < 0)
			continue;
		const gmx_buffer_t *buf = &g_w.buffers[b];
		uint64_t off = v - buf->addr, len = buf->size - off;
		int k = f->ext_arg[i];
		if (k >= 0) {
			uint64_t n = 0;
			memcpy(&n, params[k], f->size[k]);
			if (n * f->ext_mul[i] < len)
				len = n * f->ext_mul[i];
		}
		if (len)
			r = gmx_workload_add_region(&g_w, (uint32_t)b, off, len);
	}
	if (r != 0)
		fprintf(stderr, "gpumux stand-in: GPUMUX_STANDIN_RECORD: cannot record %s (%d)\n", f->name, r);
	pthread_mutex_unlock(&g_lock);
}
