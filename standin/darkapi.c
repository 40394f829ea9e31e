/*
 * The stand-in driver: cuGetExportTable, the private tables the CUDA runtime asks the driver
 * for before it does anything else ("dark API"; ../shared/brief/real-stack.md lists them with
 * the runtimes that request them). The UUIDs, slot numbers and the integrity hash are facts of
 * NVIDIA's undocumented interface as the open-source ZLUDA project has described them; this is
 * our own implementation of them, pinned to the runtimes the tests use (11.8 from Debian, 13.0
 * from the toolkit).
 *
 * A table is an array of pointers; most begin with their own size in bytes. A slot the runtime
 * is not known to call holds a function that reports the table and slot on stderr and returns
 * CUDA_ERROR_NOT_SUPPORTED, so a new runtime that needs more fails loudly, never silently.
 * An unknown UUID is reported (named) on stderr and answered CUDA_ERROR_NOT_FOUND.
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "gpumux/ihash.h"
#include "standin_internal.h"

#define SIZE_SLOT(n) ((void *)(uintptr_t)(sizeof(void *) * (n)))

/* ---- slots that are not implemented: each names itself ---- */

static CUresult unimplemented(const char *table, int slot)
{
	fprintf(stderr,
		"gpumux stand-in: the CUDA runtime called slot %d of export table %s, which the stand-in "
		"does not implement (docs/standin.md lists the slots it answers)\n",
		slot, table);
	return CUDA_ERROR_NOT_SUPPORTED;
}

#define UNIMPL(tbl, n)                                                                                       \
	static CUresult tbl##_unimpl_##n(void)                                                               \
	{                                                                                                    \
		return unimplemented(#tbl, n);                                                               \
	}

/* ---- CUDART_INTERFACE 6BD5FB6C-5BF4-E74A-8987-D93912FD9DF9 ---- */

/* Slot 1: loads the module of a fatbin wrapper (no status returned). */
static void rt_module_from_wrapper(CUmodule *mod, const void *wrapper)
{
	if (mod)
		si__module_load_image(mod, wrapper, "CUDART_INTERFACE[1]");
}

/* Slot 2: the primary context of a device (retained). */
static CUresult rt_primary_ctx(CUcontext *pctx, CUdevice dev)
{
	return cuDevicePrimaryCtxRetain(pctx, dev);
}

/* Slot 6 (cudart 11.8, at the first launch): loads the fatbin a program registered. */
static CUresult rt_module_from_wrapper_ext1(CUmodule *mod, const void *wrapper, void *a3, void *a4,
					    unsigned a5)
{
	(void)a3;
	(void)a4;
	(void)a5;
	if (!mod)
		return CUDA_ERROR_INVALID_VALUE;
	return si__module_load_image(mod, wrapper, "CUDART_INTERFACE[6]");
}

/* Slot 7 (cudart 11.8, at __cudaUnregisterFatBinary): nothing to release here. */
static CUresult rt_unregister(uintptr_t a1)
{
	(void)a1;
	return CUDA_SUCCESS;
}

/* Slot 8: as slot 6 with the arguments swapped. */
static CUresult rt_module_from_wrapper_ext2(const void *wrapper, CUmodule *mod, void *a3, void *a4,
					    unsigned a5)
{
	return rt_module_from_wrapper_ext1(mod, wrapper, a3, a4, a5);
}

UNIMPL(CUDART_INTERFACE, 3)
UNIMPL(CUDART_INTERFACE, 4)
UNIMPL(CUDART_INTERFACE, 5)
UNIMPL(CUDART_INTERFACE, 9)

static void *t_cudart[10] = {
    SIZE_SLOT(10),
    (void *)rt_module_from_wrapper,
    (void *)rt_primary_ctx,
    (void *)CUDART_INTERFACE_unimpl_3,
    (void *)CUDART_INTERFACE_unimpl_4,
    (void *)CUDART_INTERFACE_unimpl_5,
    (void *)rt_module_from_wrapper_ext1,
    (void *)rt_unregister,
    (void *)rt_module_from_wrapper_ext2,
    (void *)CUDART_INTERFACE_unimpl_9,
};

/* ---- TOOLS_RUNTIME_CALLBACK_HOOKS A094798C-2E74-2E74-93F2-0800200C0A66 ---- */

/* Slots 2 and 6 hand the runtime two zeroed buffers (callback tables a profiler would fill). */
static uint32_t g_hooks_a[1024], g_hooks_b[14];

static void hooks_buffer_a(void **p, size_t *n)
{
	*p = g_hooks_a;
	*n = sizeof g_hooks_a / sizeof g_hooks_a[0];
}

static void hooks_buffer_b(void **p, size_t *n)
{
	*p = g_hooks_b;
	*n = sizeof g_hooks_b / sizeof g_hooks_b[0];
}

UNIMPL(TOOLS_RUNTIME_CALLBACK_HOOKS, 1)
UNIMPL(TOOLS_RUNTIME_CALLBACK_HOOKS, 3)
UNIMPL(TOOLS_RUNTIME_CALLBACK_HOOKS, 4)
UNIMPL(TOOLS_RUNTIME_CALLBACK_HOOKS, 5)

static void *t_hooks[7] = {
    SIZE_SLOT(7),
    (void *)TOOLS_RUNTIME_CALLBACK_HOOKS_unimpl_1,
    (void *)hooks_buffer_a,
    (void *)TOOLS_RUNTIME_CALLBACK_HOOKS_unimpl_3,
    (void *)TOOLS_RUNTIME_CALLBACK_HOOKS_unimpl_4,
    (void *)TOOLS_RUNTIME_CALLBACK_HOOKS_unimpl_5,
    (void *)hooks_buffer_b,
};

/* ---- TOOLS_TLS 42D85A81-23F6-CB47-8298-F6E78A3AECDC: fetched, no slot called ---- */

UNIMPL(TOOLS_TLS, 1)
UNIMPL(TOOLS_TLS, 2)
UNIMPL(TOOLS_TLS, 3)

static void *t_tools_tls[4] = {SIZE_SLOT(4), (void *)TOOLS_TLS_unimpl_1, (void *)TOOLS_TLS_unimpl_2,
			       (void *)TOOLS_TLS_unimpl_3};

/* ---- CONTEXT_LOCAL_STORAGE C693336E-1121-DF11-A8C3-68F355D89593 (no size slot) ----
 * The runtime keeps its per-context state here: put, delete, get by (context, key). */

#define CLS_MAX 256
static struct {
	CUcontext ctx;
	void *key, *value;
} g_cls[CLS_MAX];

static CUcontext cls_ctx(CUcontext c)
{
	return c ? c : si__cur_ctx();
}

static CUresult cls_put(CUcontext ctx, void *key, void *value, void *dtor)
{
	(void)dtor;
	ctx = cls_ctx(ctx);
	if (!ctx)
		return CUDA_ERROR_INVALID_CONTEXT;
	pthread_mutex_lock(&S.lock);
	int free_i = -1, i;
	for (i = 0; i < CLS_MAX; i++) {
		if (g_cls[i].ctx == ctx && g_cls[i].key == key)
			break;
		if (!g_cls[i].ctx && free_i < 0)
			free_i = i;
	}
	if (i == CLS_MAX)
		i = free_i;
	if (i >= 0) {
		g_cls[i].ctx = ctx;
		g_cls[i].key = key;
		g_cls[i].value = value;
	}
	pthread_mutex_unlock(&S.lock);
	return i >= 0 ? CUDA_SUCCESS : CUDA_ERROR_OUT_OF_MEMORY;
}

static CUresult cls_delete(CUcontext ctx, void *key)
{
	ctx = cls_ctx(ctx);
	pthread_mutex_lock(&S.lock);
	for (int i = 0; i < CLS_MAX; i++)
		if (g_cls[i].ctx == ctx && g_cls[i].key == key)
			g_cls[i].ctx = NULL;
	pthread_mutex_unlock(&S.lock);
	return CUDA_SUCCESS;
}

/* A miss is an error: the runtime then creates its state and puts it. */
static CUresult cls_get(void **value, CUcontext ctx, void *key)
{
	ctx = cls_ctx(ctx);
	CUresult r = CUDA_ERROR_INVALID_HANDLE;
	pthread_mutex_lock(&S.lock);
	for (int i = 0; i < CLS_MAX; i++)
		if (ctx && g_cls[i].ctx == ctx && g_cls[i].key == key) {
			*value = g_cls[i].value;
			r = CUDA_SUCCESS;
		}
	pthread_mutex_unlock(&S.lock);
	return r;
}

void si__cls_forget(CUcontext ctx)
{
	for (int i = 0; i < CLS_MAX; i++)
		if (!ctx || g_cls[i].ctx == ctx)
			g_cls[i].ctx = NULL;
}

UNIMPL(CONTEXT_LOCAL_STORAGE, 3)

static void *t_cls[4] = {(void *)cls_put, (void *)cls_delete, (void *)cls_get,
			 (void *)CONTEXT_LOCAL_STORAGE_unimpl_3};

/* ---- CONTEXT_CHECKS 263E8860-7CD2-6143-92F6-BBD5006DFA7E (cudart 13) ---- */

static CUresult ctx_check(CUcontext ctx, uint32_t *flags, const void **out)
{
	(void)ctx;
	(void)out;
	if (flags)
		*flags = 0;
	return CUDA_SUCCESS;
}

static uint32_t ctx_check_global(void)
{
	return 0;
}

UNIMPL(CONTEXT_CHECKS, 1)

static void *t_ctx_checks[4] = {SIZE_SLOT(4), (void *)CONTEXT_CHECKS_unimpl_1, (void *)ctx_check,
				(void *)ctx_check_global};

/* ---- INTEGRITY_CHECK D4082055-BDE6-704B-8D34-BA123C66E1F2 ----
 * The runtime checks the driver with a keyed hash over the driver and runtime versions, the
 * process and thread, the addresses of this table, of CUDART_INTERFACE and of slot 1, the
 * time it passes in, and every device's UUID and PCI location. A wrong answer makes the
 * runtime fail with cudaErrorSystemNotReady (103). */

static CUresult integrity_check(uint32_t rt_version, uint64_t unix_seconds, uint64_t result[2]);
UNIMPL(INTEGRITY_CHECK, 2)
static void *t_integrity[3] = {SIZE_SLOT(3), (void *)integrity_check, (void *)INTEGRITY_CHECK_unimpl_2};

static CUresult integrity_check(uint32_t rt_version, uint64_t unix_seconds, uint64_t result[2])
{
	if (!result)
		return CUDA_ERROR_INVALID_VALUE;
	gmx_ihash_facts_t f = {(uint32_t)si__driver_version(),
			       rt_version,
			       (uint32_t)getpid(),
			       (uint32_t)(uintptr_t)pthread_self(),
			       t_cudart,
			       t_integrity,
			       t_integrity[1],
			       unix_seconds};
	gmx_ihash_device_t dev = {.domain = 0, .bus = SI_PCI_BUS, .device = 0}; /* one device */
	CUuuid u;
	si__device_uuid(&u);
	memcpy(dev.uuid, u.bytes, 16);
	gmx_ihash_answer(&f, &dev, 1, result);
	return CUDA_SUCCESS;
}

/* ---- the lookup ---- */

typedef struct {
	const char *name;
	uint8_t uuid[16];
	void **table;
} table_t;

static const table_t g_tables[] = {
    {"CUDART_INTERFACE",
     {0x6B, 0xD5, 0xFB, 0x6C, 0x5B, 0xF4, 0xE7, 0x4A, 0x89, 0x87, 0xD9, 0x39, 0x12, 0xFD, 0x9D, 0xF9},
     t_cudart},
    {"TOOLS_RUNTIME_CALLBACK_HOOKS",
     {0xA0, 0x94, 0x79, 0x8C, 0x2E, 0x74, 0x2E, 0x74, 0x93, 0xF2, 0x08, 0x00, 0x20, 0x0C, 0x0A, 0x66},
     t_hooks},
    {"TOOLS_TLS",
     {0x42, 0xD8, 0x5A, 0x81, 0x23, 0xF6, 0xCB, 0x47, 0x82, 0x98, 0xF6, 0xE7, 0x8A, 0x3A, 0xEC, 0xDC},
     t_tools_tls},
    {"CONTEXT_LOCAL_STORAGE",
     {0xC6, 0x93, 0x33, 0x6E, 0x11, 0x21, 0xDF, 0x11, 0xA8, 0xC3, 0x68, 0xF3, 0x55, 0xD8, 0x95, 0x93},
     t_cls},
    {"INTEGRITY_CHECK",
     {0xD4, 0x08, 0x20, 0x55, 0xBD, 0xE6, 0x70, 0x4B, 0x8D, 0x34, 0xBA, 0x12, 0x3C, 0x66, 0xE1, 0xF2},
     t_integrity},
    {"CONTEXT_CHECKS",
     {0x26, 0x3E, 0x88, 0x60, 0x7C, 0xD2, 0x61, 0x43, 0x92, 0xF6, 0xBB, 0xD5, 0x00, 0x6D, 0xFA, 0x7E},
     t_ctx_checks},
};

/* cudart 13 asks for this one first and carries on without it when the driver is >= 13.0. */
static const uint8_t g_quiet[16] = {0xF8, 0xCF, 0xF9, 0x51, 0x21, 0x46, 0x8B, 0x4E,
				    0xB9, 0xE2, 0xFB, 0x46, 0x9E, 0x7C, 0x0D, 0xD9};

SI_EXPORT CUresult CUDAAPI cuGetExportTable(const void **ppExportTable, const CUuuid *pExportTableId)
{
	if (!ppExportTable || !pExportTableId)
		return CUDA_ERROR_INVALID_VALUE;
	*ppExportTable = NULL;
	const uint8_t *u = (const uint8_t *)pExportTableId->bytes;
	for (size_t i = 0; i < sizeof g_tables / sizeof g_tables[0]; i++)
		if (memcmp(g_tables[i].uuid, u, 16) == 0) {
			*ppExportTable = g_tables[i].table;
			return CUDA_SUCCESS;
		}
	if (memcmp(u, g_quiet, 16) != 0)
		fprintf(stderr,
			"gpumux stand-in: cuGetExportTable: unknown export table "
			"%02X%02X%02X%02X-%02X%02X-%02X%02X-%02X%02X-%02X%02X%02X%02X%02X%02X "
			"(CUDA_ERROR_NOT_FOUND; the stand-in answers the tables of cudart 11.8 and 13.0)\n",
			u[0], u[1], u[2], u[3], u[4], u[5], u[6], u[7], u[8], u[9], u[10], u[11], u[12], u[13],
			u[14], u[15]);
	return CUDA_ERROR_NOT_FOUND;
}
