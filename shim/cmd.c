/*
 * One queued command: the kernel identity cache, the copy of a launch's parameters, and the
 * hand-over to the real driver when the queue releases it. Every function runs with the
 * queue lock held (queue.c), which also guards the identity cache.
 */
#define _GNU_SOURCE
#include "cmd.h"
#include "modinfo.h"
#include "tunables.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define FN_BUCKETS 1024

static fninfo_t *fn_table[FN_BUCKETS];
fninfo_t *gmx_shim__fn_last; /* the last one looked up: a loop launches the same kernel again */

/* Appends one parameter to fi's layout; 0, or -1 (layout unknown) when out of memory. */
static int add_param(fninfo_t *fi, size_t off, size_t size)
{
	size_t *o = realloc(fi->off, (fi->n + 1) * sizeof *o);
	if (o)
		fi->off = o;
	size_t *s = o ? realloc(fi->size, (fi->n + 1) * sizeof *s) : NULL;
	if (s)
		fi->size = s;
	if (!o || !s)
		return -1;
	fi->off[fi->n] = off;
	fi->size[fi->n] = size;
	fi->n++;
	if (off + size > fi->total)
		fi->total = off + size;
	return 0;
}

/* The layout the driver reports through getparam (cuFuncGetParamInfo or
 * cuKernelGetParamInfo, the same prototype but for the handle type). */
static void driver_layout(fninfo_t *fi, CUresult (*getparam)(void *, size_t, size_t *, size_t *))
{
	fi->known = 1;
	for (size_t i = 0;; i++) {
		size_t off, size;
		CUresult r = getparam(fi->f, i, &off, &size);
		if (r == CUDA_ERROR_INVALID_VALUE)
			break; /* past the last parameter */
		if (r != CUDA_SUCCESS || i >= 4096 || add_param(fi, off, size) != 0) {
			fi->known = 0;
			break;
		}
	}
}

/* The layout parsed from the kernel's image (modinfo.c). */
static void image_layout(fninfo_t *fi, const gmx_kernel_info_t *k)
{
	fi->known = 1;
	for (uint32_t i = 0; i < k->n_params && fi->known; i++)
		if (add_param(fi, k->params[i].offset, k->params[i].size) != 0)
			fi->known = 0;
}

fninfo_t *gmx_shim__fn_lookup_slow(CUfunction f, CUresult *err)
{
	size_t h = gmx_shim__ptr_hash(f, FN_BUCKETS);
	for (fninfo_t *fi = fn_table[h]; fi; fi = fi->next)
		if (fi->f == f)
			return gmx_shim__fn_last = fi;
	__typeof__(&cuFuncGetName) getname = GMX_REAL(cuFuncGetName);
	__typeof__(&cuFuncGetParamInfo) getparam = GMX_REAL(cuFuncGetParamInfo);
	__typeof__(&cuKernelGetName) kgetname = GMX_REAL(cuKernelGetName);
	__typeof__(&cuKernelGetParamInfo) kgetparam = GMX_REAL(cuKernelGetParamInfo);
	gmx_kinfo_mode_t mode = gmx_shim_kinfo_mode();
	fninfo_t *fi = calloc(1, sizeof *fi);
	if (!fi) {
		*err = CUDA_ERROR_OUT_OF_MEMORY;
		return NULL;
	}
	fi->f = f;
	const char *name = NULL;
	const gmx_kernel_info_t *k = NULL;
	*err = CUDA_SUCCESS;
	if (getname && getparam && mode != GMX_KINFO_IMAGE) {
		/* The driver's own answer; a CUkernel (cudart 13 launches them) through the kernel
		 * calls when the function calls refuse it. */
		CUresult r = getname(&name, f);
		CUresult (*param)(void *, size_t, size_t *, size_t *) =
		    (CUresult(*)(void *, size_t, size_t *, size_t *))getparam;
		if (r != CUDA_SUCCESS && kgetname && kgetparam &&
		    kgetname(&name, (CUkernel)f) == CUDA_SUCCESS) {
			r = CUDA_SUCCESS;
			param = (CUresult(*)(void *, size_t, size_t *, size_t *))kgetparam;
		}
		if (r == CUDA_SUCCESS) {
			driver_layout(fi, param);
			if (mode == GMX_KINFO_VERIFY && fi->known)
				gmx_shim_modinfo_verify(f, name, fi->n, fi->off, fi->size);
		} else if ((k = gmx_shim_modinfo_lookup(f)) == NULL) {
			free(fi);
			*err = r; /* a bad handle: report it now, as the driver would */
			return NULL;
		}
	} else {
		/* A driver before CUDA 12.4 (or GPUMUX_SHIM_KERNEL_INFO=image): the loaded images. */
		k = gmx_shim_modinfo_lookup(f);
	}
	if (k) {
		name = k->name;
		image_layout(fi, k);
	}
	fi->name = strdup(name ? name : "?");
	if (!fi->name) {
		free(fi->off);
		free(fi->size);
		free(fi);
		*err = CUDA_ERROR_OUT_OF_MEMORY;
		return NULL;
	}
	fi->name_hash = gmx_shim_name_hash(fi->name);
	if (fi->total > GMX_PARAM_BYTES_MAX)
		fi->known = 0;
	fi->next = fn_table[h];
	fn_table[h] = fi;
	gmx_shim__fn_last = fi;
	return fi;
}

void gmx_shim__fn_clear(void)
{
	gmx_shim__fn_last = NULL;
	for (size_t i = 0; i < FN_BUCKETS; i++) {
		fninfo_t *fi = fn_table[i];
		while (fi) {
			fninfo_t *nx = fi->next;
			free(fi->name);
			free(fi->off);
			free(fi->size);
			free(fi);
			fi = nx;
		}
		fn_table[i] = NULL;
	}
}

void gmx_shim__fn_abandon(void)
{
	gmx_shim__fn_last = NULL;
	memset(fn_table, 0, sizeof fn_table);
}

int gmx_shim__reserve(void **p, size_t *cap, size_t n, size_t elem)
{
	if (*cap >= n)
		return 0;
	void *np = realloc(*p, n * elem);
	if (!np)
		return -1;
	*p = np;
	*cap = n;
	return 0;
}

/* Copies the launch's parameter values (they live on the caller's stack). 0, or -1 when the
 * layout is unknown and the launch must go to the driver directly. */
int gmx_shim__cmd_copy_params(gmx_cmd *c, void **params, void **extra)
{
	fninfo_t *fi = c->fi;
	if (params) {
		if (!fi->known) {
			gmx_shim_modinfo_unidentified(fi->f, fi->name);
			return -1;
		}
		if (gmx_shim__reserve((void **)&c->buf, &c->bufcap, fi->total ? fi->total : 1, 1) ||
		    gmx_shim__reserve((void **)&c->pv, &c->pvcap, fi->n ? fi->n : 1, sizeof(void *)))
			return -1;
		for (size_t i = 0; i < fi->n; i++) {
			memcpy(c->buf + fi->off[i], params[i], fi->size[i]);
			c->pv[i] = c->buf + fi->off[i];
		}
		c->info.nparams = fi->n;
		c->info.param_offset = fi->off;
		c->info.param_size = fi->size;
		c->info.param_data = c->buf;
		return 0;
	}
	if (extra) {
		void *ptr = NULL;
		size_t size = 0;
		int have_size = 0;
		for (size_t i = 0; extra[i] != CU_LAUNCH_PARAM_END; i += 2) {
			if (extra[i] == CU_LAUNCH_PARAM_BUFFER_POINTER)
				ptr = extra[i + 1];
			else if (extra[i] == CU_LAUNCH_PARAM_BUFFER_SIZE) {
				size = *(size_t *)extra[i + 1];
				have_size = 1;
			} else
				return -1; /* an option the shim does not know how to copy */
		}
		if (!ptr || !have_size || size > GMX_PARAM_BYTES_MAX ||
		    gmx_shim__reserve((void **)&c->buf, &c->bufcap, size ? size : 1, 1))
			return -1;
		memcpy(c->buf, ptr, size);
		c->info.bytes = size;
		c->r.n = size;
		c->extra[0] = CU_LAUNCH_PARAM_BUFFER_POINTER;
		c->extra[1] = c->buf;
		c->extra[2] = CU_LAUNCH_PARAM_BUFFER_SIZE;
		c->extra[3] = &c->r.n;
		c->extra[4] = CU_LAUNCH_PARAM_END;
		c->info.param_data = c->buf;
	}
	return 0;
}

/* The release line of one command (params: each value's address by index, or NULL). */
static void release_log(const gmx_shim_cmd_t *info, const fninfo_t *fi, const void *const *params,
			const unsigned char *buf, CUresult r)
{
	static const char *const kinds[] = {"launch", "launch_ex", "launch_coop",  "hostfn",	 "graph",
					    "copy",   "memset",	   "event_record", "stream_wait"};
	char text[1024] = "";
	size_t p = 0;
	if (fi && fi->known && (buf || params)) {
		for (size_t i = 0; i < fi->n && p + 40 < sizeof text; i++) {
			const unsigned char *v = buf ? buf + fi->off[i] : (const unsigned char *)params[i];
			p += (size_t)snprintf(text + p, sizeof text - p, "%s%zu:%zu:", i ? "," : "",
					      fi->off[i], fi->size[i]);
			for (size_t b = 0; b < fi->size[i] && b < 8 && p + 3 < sizeof text; b++)
				p += (size_t)snprintf(text + p, sizeof text - p, "%02x", v[b]);
		}
	}
	gmx_shim_log("release seq=%llu kind=%s stream=%#lx name=%s grid=%u,%u,%u block=%u,%u,%u "
		     "shmem=%u params=[%s] bytes=%zu rc=%d",
		     (unsigned long long)info->seq, kinds[info->kind], (unsigned long)info->stream,
		     info->name ? info->name : "-", info->grid[0], info->grid[1], info->grid[2],
		     info->block[0], info->block[1], info->block[2], info->shared_mem, text, info->bytes,
		     (int)r);
}

void gmx_shim__cmd_log(const gmx_cmd *c, CUresult r)
{
	if (gmx_shim_log_fd < 0)
		return;
	release_log(&c->info, c->fi, NULL, c->buf, r);
}

void gmx_shim__req_log(const gmx_shim_cmd_t *info, const fninfo_t *fi, void *const *params, CUresult r)
{
	if (gmx_shim_log_fd < 0)
		return;
	release_log(info, fi, (const void *const *)params, NULL, r);
}

/* Hands the command to the real driver (non-_ptsz entry points with explicit handles). */
CUresult gmx_shim__cmd_call_driver(gmx_cmd *c, CUstream s)
{
	gmx_shim_req_t *r = &c->r;
	void **params = c->fi && c->fi->known && r->params ? c->pv : NULL;
	void **extra = r->extra ? c->extra : NULL;
	switch (c->info.kind) {
	case GMX_CMD_LAUNCH: {
		GMX_REAL_OR_RETURN(fn, cuLaunchKernel);
		return fn(r->f, r->grid[0], r->grid[1], r->grid[2], r->block[0], r->block[1], r->block[2],
			  r->shmem, s, params, extra);
	}
	case GMX_CMD_LAUNCH_COOP: {
		GMX_REAL_OR_RETURN(fn, cuLaunchCooperativeKernel);
		return fn(r->f, r->grid[0], r->grid[1], r->grid[2], r->block[0], r->block[1], r->block[2],
			  r->shmem, s, params);
	}
	case GMX_CMD_LAUNCH_EX: {
		GMX_REAL_OR_RETURN(fn, cuLaunchKernelEx);
		c->cfg.hStream = s;
		return fn(&c->cfg, r->f, params, extra);
	}
	case GMX_CMD_HOSTFN: {
		GMX_REAL_OR_RETURN(fn, cuLaunchHostFunc);
		return fn(s, r->fn, r->user);
	}
	case GMX_CMD_GRAPH: {
		GMX_REAL_OR_RETURN(fn, cuGraphLaunch);
		return fn(r->gexec, s);
	}
	case GMX_CMD_COPY:
		switch (r->copy_kind) {
		case 1: {
			GMX_REAL_OR_RETURN(fn, cuMemcpyHtoDAsync_v2);
			return fn(r->dst, r->hsrc, r->n, s);
		}
		case 2: {
			GMX_REAL_OR_RETURN(fn, cuMemcpyDtoHAsync_v2);
			return fn(r->hdst, r->src, r->n, s);
		}
		case 3: {
			GMX_REAL_OR_RETURN(fn, cuMemcpyDtoDAsync_v2);
			return fn(r->dst, r->src, r->n, s);
		}
		default: {
			GMX_REAL_OR_RETURN(fn, cuMemcpyAsync);
			return fn(r->dst, r->src, r->n, s);
		}
		}
	case GMX_CMD_MEMSET:
		if (r->width == 1) {
			GMX_REAL_OR_RETURN(fn, cuMemsetD8Async);
			return fn(r->dst, (unsigned char)r->value, r->n, s);
		} else if (r->width == 2) {
			GMX_REAL_OR_RETURN(fn, cuMemsetD16Async);
			return fn(r->dst, (unsigned short)r->value, r->n, s);
		} else {
			GMX_REAL_OR_RETURN(fn, cuMemsetD32Async);
			return fn(r->dst, r->value, r->n, s);
		}
	case GMX_CMD_EVENT_RECORD:
		if (r->with_flags) {
			GMX_REAL_OR_RETURN(fn, cuEventRecordWithFlags);
			return fn(r->ev, s, r->flags);
		} else {
			GMX_REAL_OR_RETURN(fn, cuEventRecord);
			return fn(r->ev, s);
		}
	case GMX_CMD_STREAM_WAIT: {
		GMX_REAL_OR_RETURN(fn, cuStreamWaitEvent);
		return fn(s, r->ev, r->flags);
	}
	default:
		return CUDA_ERROR_UNKNOWN;
	}
}

CUresult gmx_shim__req_call_driver(const gmx_shim_req_t *r, CUstream s)
{
	switch (r->kind) {
	case GMX_CMD_LAUNCH: {
		GMX_REAL_OR_RETURN(fn, cuLaunchKernel);
		return fn(r->f, r->grid[0], r->grid[1], r->grid[2], r->block[0], r->block[1], r->block[2],
			  r->shmem, s, r->params, r->extra);
	}
	case GMX_CMD_LAUNCH_COOP: {
		GMX_REAL_OR_RETURN(fn, cuLaunchCooperativeKernel);
		return fn(r->f, r->grid[0], r->grid[1], r->grid[2], r->block[0], r->block[1], r->block[2],
			  r->shmem, s, r->params);
	}
	case GMX_CMD_LAUNCH_EX: {
		GMX_REAL_OR_RETURN(fn, cuLaunchKernelEx);
		CUlaunchConfig cfg = *r->cfg;
		cfg.hStream = s;
		return fn(&cfg, r->f, r->params, r->extra);
	}
	default:
		return GMX_SHIM_DIRECT;
	}
}
