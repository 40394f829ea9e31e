/*
 * Internal interface of the CUDA driver-API interposer (libcuda.so.1 of gpumux).
 *
 * Every translation unit of the shim sees the driver API as the driver itself declares it
 * (__CUDA_API_VERSION_INTERNAL), so that legacy, _v2, _ptsz and _ptds entry points are all
 * declared under their exported names and each hook is checked against cuda.h's prototype.
 */
#ifndef GMX_SHIM_INTERNAL_H
#define GMX_SHIM_INTERNAL_H

#define __CUDA_API_VERSION_INTERNAL 1
#include <cuda.h>
#include <cudaProfiler.h>

#include <stddef.h>
#include <stdint.h>

#include "gmx_grant.h"
#include "gmx_shim_syms.h"

/* Generated forwarders are weak so that a hook of the same name replaces them at link time. */
#define GMX_FORWARDER __attribute__((weak, visibility("default")))
#define GMX_EXPORT __attribute__((visibility("default")))
#define GMX_HIDDEN __attribute__((visibility("hidden")))
#define GMX_UNLIKELY(x) __builtin_expect(!!(x), 0)
#define GMX_LIKELY(x) __builtin_expect(!!(x), 1)

extern GMX_HIDDEN const char *const gmx_shim_sym_names[GMX_SYM_COUNT];
extern GMX_HIDDEN void *gmx_shim_tbl[GMX_SYM_COUNT];
extern GMX_HIDDEN int gmx_shim_loaded;

/* Loads the real driver and resolves every symbol once; safe to call from any thread. */
void gmx_shim_load(void);

/* Returns the real driver's address for symbol index i, or NULL if it lacks it. */
static inline void *gmx_shim_real(int i)
{
	if (GMX_UNLIKELY(!__atomic_load_n(&gmx_shim_loaded, __ATOMIC_ACQUIRE)))
		gmx_shim_load();
	return gmx_shim_tbl[i];
}

/* The real function `name` with its own prototype (NULL when the driver lacks it). */
#define GMX_REAL(name) ((__typeof__(&name))gmx_shim_real(GMX_SYM_##name))

/* Declares `fn` as the real `name`, returning the right error when it is missing. */
#define GMX_REAL_OR_RETURN(fn, name)                                                                         \
	__typeof__(&name) fn = GMX_REAL(name);                                                               \
	if (GMX_UNLIKELY(fn == NULL))                                                                        \
	return gmx_shim_missing(GMX_SYM_##name)

/* Error for a call whose real function is missing: no driver at all, or an older driver. */
CUresult gmx_shim_missing(int sym);

/* A trampoline's destination for symbol index i (the real function, or one returning the
 * error gmx_shim_missing gives); called from the trampolines' first-call path. */
void *gmx_shim_trampoline_target(int sym);

/* Address of the shim's own export for symbol index i (a hook or a forwarder). */
void *gmx_shim_own(int sym);

/* Index of an exported symbol name, or -1. */
int gmx_shim_sym_index(const char *name);

/* Releases the stream's queued work (and, for the legacy stream, the context's) to the
 * driver before a stream-ordered call that is not queued; returns the stream handle to pass
 * to the driver (the per-thread default stream is mapped to the shim's own stream for it). */
CUstream gmx_shim_stream_barrier(CUstream s, int ptsz);

/* Releases and waits for every queued command of the process before a synchronous call. */
void gmx_shim_drain_all(void);

/* fork, per module: prepare takes the module's locks, parent releases them, child releases
 * them and starts the module over. loader.c calls them in the one order the shim nests its
 * locks (daemon allocations, queue and daemon session, kernel info, daemon connection thread,
 * integrity table), so a child never inherits a lock
 * held mid-update. */
void gmx_shim_queue_atfork_prepare(void);
void gmx_shim_queue_atfork_parent(void);
void gmx_shim_queue_atfork_child(void);
void gmx_shim_modinfo_atfork_prepare(void);
void gmx_shim_modinfo_atfork_parent(void);
void gmx_shim_modinfo_atfork_child(void);
void gmx_dl_atfork_prepare_alloc(void); /* the allocation list's lock: first of all */
void gmx_dl_atfork_parent_alloc(void);	/* ... and last, in the parent and the child alike */
void gmx_dl_atfork_prepare(void);
void gmx_dl_atfork_parent(void);
void gmx_dl_atfork_child(void);
void gmx_shim_integrity_atfork_prepare(void);
void gmx_shim_integrity_atfork_release(void); /* parent and child alike */

/* The grant policy chosen from the environment at load (never NULL after gmx_shim_load). */
extern GMX_HIDDEN const gmx_grant_ops_t *gmx_shim_policy;

/* The daemon grant policy (shim/grant_daemon.c): talks to gpumuxd, pass-through without it. */
const gmx_grant_ops_t *gmx_grant_daemon(void);

/* Writes one line to the shim's log (GPUMUX_SHIM_LOG), if enabled. */
void gmx_shim_log(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
extern GMX_HIDDEN int gmx_shim_log_fd;

#endif
