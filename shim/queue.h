/* The shim's software queues: per-stream FIFOs released to the driver when granted. */
#ifndef GMX_SHIM_QUEUE_H
#define GMX_SHIM_QUEUE_H

#include "shim_internal.h"

/* What a hook hands to the queue: the command as the application issued it. */
typedef struct {
	gmx_cmd_kind_t kind;
	CUstream stream;
	int ptsz; /* issued through a _ptsz/_ptds entry point */
	/* launches */
	CUfunction f;
	unsigned grid[3], block[3], shmem;
	void **params, **extra;
	const CUlaunchConfig *cfg;
	/* host function */
	CUhostFn fn;
	void *user;
	/* graph */
	CUgraphExec gexec;
	/* copies (copy_kind 0 generic, 1 HtoD, 2 DtoH, 3 DtoD) and memsets (width 1, 2, 4) */
	int copy_kind;
	CUdeviceptr dst, src;
	void *hdst;
	const void *hsrc;
	size_t n;
	unsigned value;
	int width;
	/* events */
	CUevent ev;
	unsigned flags;
	int with_flags;
} gmx_shim_req_t;

/* A cuLaunchKernel's arguments as the application passed them (gmx_shim_enqueue_launch). */
typedef struct {
	CUfunction f;
	unsigned grid[3], block[3], shmem;
	CUstream stream;
	void **params, **extra;
} gmx_shim_launch_t;

/* Result meaning "the queue cannot take this command; call the driver after a barrier". */
#define GMX_SHIM_DIRECT ((CUresult)-1)

/* Queues a command in its stream's FIFO (releasing it at once when granted); returns
 * CUDA_SUCCESS, a driver error for a bad handle, or GMX_SHIM_DIRECT. */
CUresult gmx_shim_enqueue(const gmx_shim_req_t *req);

/* gmx_shim_enqueue for a cuLaunchKernel (ptsz: its _ptsz form), the same result: under a leasing
 * policy with nothing queued the launch goes to the driver from l itself, and the request the
 * queue keeps is built only when it is queued after all. */
CUresult gmx_shim_enqueue_launch(const gmx_shim_launch_t *l, int ptsz);

/* Nonzero when a launch on stream s may go straight to the driver, unqueued and without the
 * queue lock: the policy never holds (queue), nothing is queued anywhere in the process (so no
 * ordering rule can hold it), no log is written and s is not the per-thread default stream
 * (which is mapped to the shim's own stream). A command another thread queues at the same
 * moment is not ordered against this one by anything the application did, as with two threads
 * calling the driver; once the application orders them, this load sees it queued. */
int gmx_shim_straight(CUstream s, int ptsz);

/* Nonzero if the stream is being captured (its work must go straight to the driver). */
int gmx_shim_capturing(CUstream s, int ptsz);

/* gmx_shim_capturing(s, ptsz) || gmx_shim_straight(s, ptsz) in one call: a launch's hook asks
 * both on every launch for which gmx_shim_maybe_direct() holds. */
int gmx_shim_launch_direct(CUstream s, int ptsz);

/* What gmx_shim_launch_direct looks at first (queue.c writes both). */
typedef struct {
	int captures;  /* captures begun and not ended (gmx_shim_capture_begin / _end) */
	int untracked; /* the policy never holds (gmx_grant_never_holds): nothing is tracked in flight;
			  written once, by the queue's set-up (0 before: the queue) */
} gmx_shim_direct_t;
extern GMX_HIDDEN gmx_shim_direct_t gmx_shim_direct;

/* 0 when gmx_shim_launch_direct would say 0 for any stream (no capture under way and a policy
 * that may hold), read inline: a launch's hook then builds its request without a call that its
 * arguments must be saved around. The same relaxed loads of the same words as the first looks of
 * gmx_shim_capturing and gmx_shim_straight, at the same point of the hook, so nothing is ordered
 * differently: a capture begun by this thread is seen (program order), one begun by another
 * thread at the same moment is unordered with this launch, as it was with those looks. */
static inline int gmx_shim_maybe_direct(void)
{
	return __atomic_load_n(&gmx_shim_direct.captures, __ATOMIC_RELAXED) |
	       __atomic_load_n(&gmx_shim_direct.untracked, __ATOMIC_RELAXED);
}

/* Waits until the stream's queued work reached the driver; returns the stream handle for the
 * driver and the first deferred error of that queue (CUDA_SUCCESS if none) in *err. */
CUstream gmx_shim_stream_flush(CUstream s, int ptsz, CUresult *err);

/* CUDA_ERROR_NOT_READY if the stream still has queued work, else CUDA_SUCCESS; *out gets
 * the driver's handle for the stream. */
CUresult gmx_shim_stream_pending(CUstream s, int ptsz, CUstream *out);

/* Waits until the stream's queue is empty and its in-flight work retired, then forgets it. */
void gmx_shim_stream_forget(CUstream s);

/* Nonzero while a record of the event is still in a software queue. */
int gmx_shim_event_pending(CUevent e);

/* Waits until no record of the event is queued; forget also drops the shim's record of it. */
void gmx_shim_event_flush(CUevent e, int forget);

/* Counts stream captures so launches check capture status only while one may be active. */
void gmx_shim_capture_begin(void);
void gmx_shim_capture_end(void);

/* Takes / releases the queue lock from outside the queue (the daemon link's connection thread and
 * allocations: the lock also guards the link's session state, daemon_link.h). Never taken by a
 * thread that already holds it. */
void gmx_shim_queue_lock(void);
void gmx_shim_queue_unlock(void);

/* Wakes the dispatcher to re-check grants now (a grant arrived); never blocks on the GPU. */
void gmx_shim_queue_kick(void);

/* Waits until every released command has completed on the GPU (nothing in flight). */
void gmx_shim_queue_quiesce(void);

/* Forgets cached kernel names and layouts (a module was unloaded). */
void gmx_shim_func_cache_clear(void);

#endif
