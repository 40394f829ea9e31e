/*
 * The stand-in driver's internals, shared by its files: the process's handle tables, the
 * allocation table, and helpers. One mutex (S.lock) guards the tables; the simulated GPU
 * itself (engine.c; its timeline in engine_run.c) has its own process-shared lock, always
 * taken after S.lock.
 *
 *   standin.c  init, devices, contexts, cuGetProcAddress
 *   module.c   text modules, kernels and launches
 *   library.c  images read by the fatbin parser, cuLibrary*, cuKernel*, kernel durations
 *   darkapi.c  cuGetExportTable: the CUDA runtime's private tables
 *   graph.c    stream capture and graphs
 *   stream.c   streams and events
 *   memory.c   allocations, copies, memsets, prefetch, pointer attributes
 */
#ifndef GMX_STANDIN_INTERNAL_H
#define GMX_STANDIN_INTERNAL_H

#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#define __CUDA_API_VERSION_INTERNAL 1
#include <cuda.h>

#include "engine.h"

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#define SI_EXPORT __attribute__((visibility("default")))
#define MAX_CTX 16
#define MAX_MOD 64
#define MAX_FN 1024
#define MAX_PARAMS 64
#define MAX_ALLOC 4096
#define CHUNK (2u << 20)	   /* residency granularity: the driver's 2 MB root chunk */
#define FAULT_NS_PER_64K 31790	   /* ~31.79 µs per demand fault of a 64 KB big page */
#define LINK_BYTES_PER_US 25000ull /* bulk copies and prefetch: 25 GB/s */
#define SI_DEFAULT_KERNEL_US 10.0  /* a kernel of an image with no entry in the times file */
#define SI_PCI_BUS 1		   /* the simulated device's PCI bus id (domain 0, device 0) */

struct CUctx_st {
	int in_use, id, primary, refs, legacy;
};
struct CUstream_st {
	int in_use, si, ctx;
	unsigned flags;
	int priority;
};
struct CUevent_st {
	int in_use, ei;
	unsigned flags;
	int cap_from; /* engine stream + 1 whose capture last recorded it, or 0 */
};
struct CUfunc_st {
	int in_use;
	struct CUmod_st *mod;
	char name[256];
	int64_t dur_ns;
	int nparams;
	size_t off[MAX_PARAMS], size[MAX_PARAMS];
	int ptr[MAX_PARAMS];
	/* A pointer's extent: ext_mul x the value of parameter ext_arg bytes (ext_arg -1: the
	 * rest of its allocation). */
	int ext_arg[MAX_PARAMS];
	uint64_t ext_mul[MAX_PARAMS];
};
struct CUmod_st {
	int in_use;
};

typedef struct {
	uintptr_t base;
	size_t size;
	int kind; /* CU_MEMORYTYPE_DEVICE, _HOST, or 0x10 managed */
	unsigned host_flags;
	unsigned char *resident; /* managed: one byte per 2 MB chunk */
	uint64_t seq;
} alloc_t;

#define KIND_MANAGED 0x10

typedef struct {
	pthread_mutex_t lock;
	int init;
	struct CUctx_st ctx[MAX_CTX];
	struct CUstream_st streams[SI_STREAMS];
	struct CUevent_st events[SI_EVENTS];
	struct CUmod_st mods[MAX_MOD];
	struct CUfunc_st fns[MAX_FN];
	alloc_t allocs[MAX_ALLOC];
	int nallocs;
	uint64_t alloc_seq;
	int primary_refs;
	unsigned primary_flags;
	size_t limits[16]; /* cuCtxSetLimit values (0: the default) */
} si_state_t;

/* The process's tables (standin.c). */
extern si_state_t si__state;
#define S si__state

extern __thread struct CUctx_st *tl_stack[16];
extern __thread int tl_depth;
extern __thread int tl_ptds[MAX_CTX]; /* engine stream index + 1 of this thread's default stream */
extern __thread int tl_ptds_gen;
extern int g_gen; /* bumped in a forked child: per-thread state of the parent is void */

#define REQUIRE_INIT()                                                                                       \
	do {                                                                                                 \
		if (!S.init)                                                                                 \
			return CUDA_ERROR_NOT_INITIALIZED;                                                   \
	} while (0)

#define REQUIRE_CTX(c)                                                                                       \
	struct CUctx_st *c = si__cur_ctx();                                                                  \
	if (!S.init)                                                                                         \
		return CUDA_ERROR_NOT_INITIALIZED;                                                           \
	if (!c)                                                                                              \
	return CUDA_ERROR_INVALID_CONTEXT

/* The current context of this thread, or NULL. */
struct CUctx_st *si__cur_ctx(void);
/* Nonzero if c is a live context of this process. */
int si__valid_ctx(CUcontext c);
/* The table entry behind a handle, or NULL when the handle is not a live one. */
struct CUstream_st *si__stream_of(CUstream h);
struct CUevent_st *si__event_of(CUevent h);
struct CUfunc_st *si__func_of(CUfunction h);
struct CUmod_st *si__mod_of(CUmodule h);
/* The engine stream for a stream argument as the driver reads it (legacy/per-thread/own). */
CUresult si__resolve_stream(CUstream h, int ptsz, int *si);
/* The allocation holding p, or NULL; adds one (NULL when the table is full); removes one. */
alloc_t *si__alloc_find(uintptr_t p);
alloc_t *si__alloc_add(uintptr_t base, size_t size, int kind);
void si__alloc_remove(alloc_t *a);
/* Chunks of an allocation of size bytes; bytes of chunk i of a. */
size_t si__chunks(size_t size);
uint64_t si__chunk_bytes(const alloc_t *a, size_t i);
/* Makes chunks [c0, c1) of a managed allocation resident (S.lock held); bytes moved. */
uint64_t si__make_resident(alloc_t *a, size_t c0, size_t c1);

/* Loads a text module (docs/standin.md), an image the fatbin parser reads, or a file of
 * either; origin names the image in error messages. */
CUresult si__module_load_text(CUmodule *module, const char *text, const char *origin);
CUresult si__module_load_image(CUmodule *module, const void *image, const char *origin);
CUresult si__module_load_file(CUmodule *module, const char *path);
/* The driver version the stand-in reports (13000, or GPUMUX_STANDIN_DRIVER_VERSION). */
int si__driver_version(void);
/* The simulated device's attribute (standin/device.c; 0 for what is not simulated). */
int si__device_attribute(CUdevice_attribute attrib);
/* The simulated device's UUID. */
void si__device_uuid(CUuuid *uuid);
/* Drops the runtime's context-local storage of a context (NULL: of every context). */
void si__cls_forget(CUcontext ctx);

/* ---- stream capture (graph.c) ---- */
enum { SI_CAP_KERNEL = 1, SI_CAP_COPY, SI_CAP_MEMSET, SI_CAP_HOSTFN, SI_CAP_RECORD };
/* One captured command: what replaying it needs. */
typedef struct {
	int kind;
	struct CUfunc_st *f; /* kernel */
	unsigned grid[3], block[3];
	void *dst;	     /* copy, memset */
	const void *src;     /* copy */
	size_t n;	     /* copy: bytes; memset: elements */
	unsigned value;
	int width;
	void (*hostfn)(void *);
	void *user;
	int event; /* record: engine event index */
} si_cap_t;
/* Nonzero while engine stream si captures. */
int si__capturing(int si);
/* Records c (a kernel's parameter values from params) in si's capture. */
CUresult si__capture(int si, const si_cap_t *c, void **params);
/* Stream si joins the capture stream `from` is in (a wait on an event it recorded). */
void si__capture_join(int si, int from);
/* A forked child: no capture is active. */
void si__capture_forget(void);
/* cuStreamIsCapturing's answer. */
CUresult si__is_capturing(CUstream h, int ptsz, CUstreamCaptureStatus *st);
/* A launch's duration (module figure plus managed-memory faults), ns. */
int64_t si__launch_cost(struct CUfunc_st *f, void **params);
/* Copies / sets the bytes now and occupies engine stream si for the transfer time. */
CUresult si__copy_submit(void *dst, const void *src, size_t n, int si);
CUresult si__memset_submit(uintptr_t d, unsigned v, size_t n, int width, int si);

/* GPUMUX_STANDIN_RECORD (record.c): a device or managed allocation; a kernel as it runs. */
void si__record_alloc(uintptr_t base, size_t size);
void si__record_kernel(const struct CUfunc_st *f, void **params, int stream, int64_t dur_ns, const unsigned grid[3],
		       const unsigned block[3], unsigned shmem);

#endif
