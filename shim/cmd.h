/* One queued command: what the shim keeps of an intercepted call (the kernel's identity and a
 * copy of its parameters), and how it is handed to the real driver later. Private to the
 * shim's queue (queue.c); every function here runs with the queue lock held. */
#ifndef GMX_SHIM_CMD_H
#define GMX_SHIM_CMD_H

#include "queue.h"

struct gmx_sq;
struct evinfo;

/* A kernel's name and parameter layout, cached per CUfunction. */
typedef struct fninfo {
	struct fninfo *next;
	CUfunction f;
	char *name;
	uint64_t name_hash; /* gmx_shim_name_hash(name) */
	int known;	    /* the parameter layout is known */
	size_t n, total;
	size_t *off, *size;
} fninfo_t;

typedef struct gmx_cmd {
	struct gmx_cmd *next;
	gmx_shim_req_t r;
	gmx_shim_cmd_t info;
	struct gmx_sq *q;
	fninfo_t *fi;
	unsigned char *buf; /* copies of parameter values / the extra buffer */
	size_t bufcap;
	void **pv; /* parameter pointers into buf */
	size_t pvcap;
	void *extra[5];
	CUlaunchConfig cfg;
	CUlaunchAttribute *attrs;
	size_t attrcap;
	struct evinfo *evi;
	struct gmx_sq *dep_q; /* stream wait: release after this queue passes dep_seq */
	uint64_t dep_seq;
} gmx_cmd;

/* A bucket for pointer p in a table of n (a power of two) buckets. */
static inline size_t gmx_shim__ptr_hash(const void *p, size_t n)
{
	uintptr_t x = (uintptr_t)p;
	x ^= x >> 15;
	x *= 0x9E3779B97F4A7C15ull;
	return (size_t)(x >> 32) & (n - 1);
}

/* The identity last looked up (a loop launches the same kernel again), or NULL. */
extern GMX_HIDDEN fninfo_t *gmx_shim__fn_last;

/* gmx_shim__fn_lookup past its look at gmx_shim__fn_last: the table, then the driver. */
fninfo_t *gmx_shim__fn_lookup_slow(CUfunction f, CUresult *err);

/* The cached identity of f, looked up in the driver on first use. NULL with *err set for a
 * handle the driver rejects or when out of memory. Inline: a launch of the kernel launched last
 * (nearly every launch of a loop) makes no call for it. */
static inline fninfo_t *gmx_shim__fn_lookup(CUfunction f, CUresult *err)
{
	fninfo_t *fi = gmx_shim__fn_last;
	return GMX_LIKELY(fi && fi->f == f) ? fi : gmx_shim__fn_lookup_slow(f, err);
}

/* Frees every cached identity (no queued command may still point at one). */
void gmx_shim__fn_clear(void);

/* Drops the cache without freeing it (a forked child: the entries name the parent's
 * handles). */
void gmx_shim__fn_abandon(void);

/* Grows *p to hold n elements of elem bytes. 0, or -1 when out of memory (*p unchanged). */
int gmx_shim__reserve(void **p, size_t *cap, size_t n, size_t elem);

/* Copies the launch's parameter values (they live on the caller's stack) into c. 0, or -1
 * when the layout is unknown or cannot be copied and the launch must go to the driver
 * directly. */
int gmx_shim__cmd_copy_params(gmx_cmd *c, void **params, void **extra);

/* Hands c to the real driver on stream s (non-_ptsz entry points, explicit handles); the
 * driver's result. */
CUresult gmx_shim__cmd_call_driver(gmx_cmd *c, CUstream s);

/* Hands a launch straight from the caller's arguments to the real driver on stream s (no copy:
 * the caller still holds them); the driver's result, or GMX_SHIM_DIRECT for any other kind. */
CUresult gmx_shim__req_call_driver(const gmx_shim_req_t *r, CUstream s);

/* Writes c's release line (kind, stream, kernel, parameters, result r) to the shim log. */
void gmx_shim__cmd_log(const gmx_cmd *c, CUresult r);

/* Writes the release line of a launch released straight from the caller's arguments (params:
 * the launch's kernelParams, or NULL; values shown when fi knows the layout). */
void gmx_shim__req_log(const gmx_shim_cmd_t *info, const fninfo_t *fi, void *const *params, CUresult r);

#endif
