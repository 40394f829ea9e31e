/*
 * Software queues.
 *
 * The queue's interface to the hooks (queue.h): set-up, enqueue, flushes, barriers, queries,
 * fork. How the queues work: queue_internal.h.
 */
#define _GNU_SOURCE
#include "queue_internal.h"
#include "tunables.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

gmx_qstate_t gmx_q = {.lock = PTHREAD_MUTEX_INITIALIZER,
		      .poll_lock = PTHREAD_MUTEX_INITIALIZER,
		      .cv_poll = PTHREAD_COND_INITIALIZER,
		      .cv_work = PTHREAD_COND_INITIALIZER,
		      .cv_done = PTHREAD_COND_INITIALIZER};

gmx_shim_direct_t gmx_shim_direct;
static pthread_once_t g_init_once = PTHREAD_ONCE_INIT;
GMX_TLS int tl_dispatcher;
GMX_TLS CUcontext tl_disp_ctx;
GMX_TLS gmx_sq *tl_last_q;
GMX_TLS CUstream tl_last_stream;
GMX_TLS unsigned tl_last_gen;
GMX_TLS gmx_qbias_me_t tl_qbias;
static int g_inited; /* init_once ran (read without pthread_once on the launch path) */

static long env_long(const char *name, long def, long lo, long hi)
{
	const char *s = getenv(name);
	if (!s || !*s)
		return def;
	char *end;
	long v = strtol(s, &end, 10);
	if (*end || v < lo || v > hi) {
		fprintf(stderr, "gpumux shim: %s=%s is out of range [%ld, %ld]; using %ld\n", name, s, lo, hi,
			def);
		return def;
	}
	return v;
}

static void init_once(void)
{
	gmx_q.inflight_max =
	    (int)env_long("GPUMUX_SHIM_INFLIGHT", GMX_INFLIGHT_DEFAULT, GMX_INFLIGHT_MIN, GMX_INFLIGHT_MAX);
	gmx_q.ring_cap = gmx_q.inflight_max > GMX_SHIM_LEASED_MAX ? gmx_q.inflight_max : GMX_SHIM_LEASED_MAX;
	unsigned slots = 1;
	while (slots < (unsigned)gmx_q.ring_cap)
		slots <<= 1;
	gmx_q.ring_mask = slots - 1;
	gmx_q.poll_ns =
	    1000L * env_long("GPUMUX_SHIM_POLL_US", GMX_POLL_US_DEFAULT, GMX_POLL_US_MIN, GMX_POLL_US_MAX);
	gmx_q.ahead_max =
	    (int)env_long("GPUMUX_SHIM_AHEAD", GMX_AHEAD_DEFAULT, GMX_AHEAD_MIN, GMX_AHEAD_MAX_PER_STREAM);
	__atomic_store_n(&gmx_shim_direct.untracked, gmx_grant_never_holds(gmx_shim_policy),
			 __ATOMIC_RELAXED);
	__atomic_store_n(&g_inited, 1, __ATOMIC_RELEASE);
}

static void ensure_init(void)
{
	if (GMX_LIKELY(__atomic_load_n(&g_inited, __ATOMIC_ACQUIRE)))
		return;
	gmx_shim_load();
	pthread_once(&g_init_once, init_once);
}

/* ---- kernel identity (cmd.c), guarded by the queue lock ---- */

void gmx_shim_func_cache_clear(void)
{
	gmx_q_lock();
	/* Commands still queued point at their fninfo; the unload drained them first. */
	gmx_shim__fn_clear();
	pthread_mutex_unlock(&gmx_q.lock);
}

/* Nonzero if host memory at p is page-locked or managed, so the copy may be deferred. */
static int host_deferrable(const void *p)
{
	__typeof__(&cuPointerGetAttribute) pga = GMX_REAL(cuPointerGetAttribute);
	unsigned type = 0;
	return pga && pga(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, (CUdeviceptr)(uintptr_t)p) == CUDA_SUCCESS;
}

/* After a launch went the leased path straight: the dispatcher (it polls completions for the
 * policy) is to be woken once out of the lock when it sleeps with work in flight. */
static int leased_wake(void)
{
	int signal = gmx_q.disp_idle && gmx_q.inflight > 0;
	if (signal) { /* one wake-up: it clears disp_idle itself only once it has the lock */
		gmx_q.disp_wakes++;
		gmx_q.disp_idle = 0;
	}
	return signal;
}

/* gmx_shim_enqueue inside the queue lock (the mutex, or the bias), which it never leaves.
 * *signal: the dispatcher is to be woken once out of it; *leased: the launch went the leased
 * path straight; lease_tried: gmx_shim_enqueue_launch asked the policy for it already (and was
 * told to queue it), so it is not asked again here. */
static CUresult enqueue_in(const gmx_shim_req_t *req, int *signal, int *leased, int lease_tried)
{
	CUstream s = req->kind == GMX_CMD_LAUNCH_EX ? req->cfg->hStream : req->stream;
	gmx_sq *q = gmx_q_sq_find(s, req->ptsz, 1);
	if (!q) {
		return GMX_SHIM_DIRECT; /* no context or an invalid stream: the driver says which */
	}
	/* Straight through (gmx_shim_straight: the hooks call the driver without coming here) for
	 * what that leaves to the queue: the per-thread default stream, mapped to the shim's stream
	 * for this thread, and launches before the queue was set up. The driver gets the call the
	 * application made, in the caller's own context, so that context need not be the stream's as
	 * for a release. */
	if (gmx_shim_direct.untracked && gmx_q.queued == 0 && gmx_shim_log_fd < 0) {
		CUresult r = gmx_shim__req_call_driver(req, q->real);
		if (r != GMX_SHIM_DIRECT) {
			gmx_q.seq++;
			return r;
		}
	}
	if (gmx_shim_policy->lease_release && gmx_q.queued != 0) {
		gmx_q.div_behind += gmx_q_is_launch(req->kind); /* behind queued commands: ring order */
	} else if (gmx_shim_policy->lease_release && !lease_tried) {
		CUresult r = gmx_q_leased_straight(req, s, q);
		if (r != GMX_SHIM_DIRECT) {
			*signal = leased_wake();
			*leased = 1;
			return r;
		}
	}
	gmx_cmd *c = gmx_q_cmd_alloc();
	if (!c) {
		return GMX_SHIM_DIRECT;
	}
	c->r = *req;
	c->q = q;
	c->info.kind = req->kind;
	c->info.stream = (uintptr_t)s;
	if (gmx_q_is_launch(req->kind)) {
		CUresult err = CUDA_SUCCESS;
		c->fi = gmx_shim__fn_lookup(req->f, &err);
		if (!c->fi) {
			gmx_q_cmd_free(c);
			return err;
		}
		if (req->kind == GMX_CMD_LAUNCH_EX) {
			c->cfg = *req->cfg;
			if (c->cfg.numAttrs) {
				if (gmx_shim__reserve((void **)&c->attrs, &c->attrcap, c->cfg.numAttrs,
						      sizeof *c->attrs)) {
					gmx_q_cmd_free(c);
					return GMX_SHIM_DIRECT;
				}
				memcpy(c->attrs, req->cfg->attrs, c->cfg.numAttrs * sizeof *c->attrs);
				c->cfg.attrs = c->attrs;
			}
			c->r.grid[0] = c->cfg.gridDimX;
			c->r.grid[1] = c->cfg.gridDimY;
			c->r.grid[2] = c->cfg.gridDimZ;
			c->r.block[0] = c->cfg.blockDimX;
			c->r.block[1] = c->cfg.blockDimY;
			c->r.block[2] = c->cfg.blockDimZ;
			c->r.shmem = c->cfg.sharedMemBytes;
		}
		if (gmx_shim__cmd_copy_params(c, req->params, req->extra) != 0) {
			gmx_q_cmd_free(c);
			return GMX_SHIM_DIRECT;
		}
		c->info.name = c->fi->name;
		c->info.name_hash = c->fi->name_hash;
		memcpy(c->info.grid, c->r.grid, sizeof c->info.grid);
		memcpy(c->info.block, c->r.block, sizeof c->info.block);
		c->info.shared_mem = c->r.shmem;
	} else if (req->kind == GMX_CMD_COPY || req->kind == GMX_CMD_MEMSET) {
		c->info.bytes = req->n * (req->kind == GMX_CMD_MEMSET ? (size_t)req->width : 1);
	} else if (req->kind == GMX_CMD_EVENT_RECORD || req->kind == GMX_CMD_STREAM_WAIT) {
		evinfo_t *x = gmx_q_ev_lookup(req->ev, req->kind == GMX_CMD_EVENT_RECORD);
		if (req->kind == GMX_CMD_EVENT_RECORD) {
			if (!x) {
				gmx_q_cmd_free(c);
				return GMX_SHIM_DIRECT;
			}
			c->evi = x;
		} else if (x && x->pending > 0) {
			c->dep_q = x->last_q;
			c->dep_seq = x->last_seq;
		}
	}
	c->info.seq = ++gmx_q.seq;
	if (c->evi) {
		c->evi->pending++;
		c->evi->last_q = q;
		c->evi->last_seq = c->info.seq;
	}
	c->next = NULL;
	if (q->tail)
		q->tail->next = c;
	else
		q->head = c;
	q->tail = c;
	__atomic_add_fetch(&gmx_q.queued, 1, __ATOMIC_RELAXED);
	/* Fast path: the calling thread releases what it may right away, retiring what completed
	 * first when the in-flight bound is what holds it. */
	if (q->head == c && q->ctx == gmx_q_current_ctx()) {
		if (gmx_q_counted(c->info.kind) && gmx_q.inflight >= gmx_q.inflight_max)
			gmx_q_reap();
		int ok = gmx_q_can_release(c);
		if (!ok &&
		    gmx_q.inflight > 0) { /* the policy's bound may wait for a completion not yet seen */
			gmx_q_reap();
			ok = gmx_q_can_release(c);
		}
		if (ok) {
			gmx_q_release_head(q);
			pthread_cond_broadcast(&gmx_q.cv_done);
		}
	}
	/* The dispatcher is woken only for what needs it: work left queued, or work in flight
	 * while it sleeps without a timeout (it polls completions for the policy). Waking it for
	 * every command would cost a futex call and a lock hand-over per launch. */
	if (gmx_q.queued > 0) {
		gmx_q_ensure_dispatcher();
		gmx_q_wake_dispatcher();
	} else if (gmx_q.inflight > 0 && gmx_q.disp_idle) {
		gmx_q.disp_wakes++;
		gmx_q.disp_idle = 0;
		pthread_cond_signal(&gmx_q.cv_work);
	}
	return CUDA_SUCCESS;
}

/* Enters the queue lock for an enqueue: 1 through the bias (the thread holding it launched under
 * the lease GMX_QBIAS_STREAK times in a row, no other thread taking the lock between: no mutex),
 * else 0 with the mutex taken. */
static inline int enqueue_enter(void)
{
	int biased = gmx_qbias_enter(&gmx_q.bias, &tl_qbias);
	if (!biased)
		gmx_q_lock();
	return biased;
}

/* Leaves what enqueue_enter entered (a leased launch under the mutex counts towards the bias),
 * then wakes the dispatcher if signal. */
static inline void enqueue_exit(int biased, int leased, int signal)
{
	if (biased) {
		gmx_q.biased++;
		gmx_qbias_exit(&tl_qbias);
	} else {
		if (leased)
			gmx_qbias_note(&gmx_q.bias, &tl_qbias);
		pthread_mutex_unlock(&gmx_q.lock);
	}
	if (signal)
		pthread_cond_signal(&gmx_q.cv_work);
}

CUresult gmx_shim_enqueue(const gmx_shim_req_t *req)
{
	ensure_init();
	/* A pageable host buffer may be reused as soon as the call returns: such copies cannot
	 * wait in a queue. */
	if (req->kind == GMX_CMD_COPY &&
	    ((req->copy_kind == 1 && !host_deferrable(req->hsrc)) ||
	     (req->copy_kind == 2 && !host_deferrable(req->hdst)) ||
	     (req->copy_kind == 0 && (!host_deferrable((void *)(uintptr_t)req->src) ||
				      !host_deferrable((void *)(uintptr_t)req->dst)))))
		return GMX_SHIM_DIRECT;

	if (gmx_shim_policy->prepare) /* never under the lock: it may block this thread */
		gmx_shim_policy->prepare(gmx_shim_policy->self);
	int biased = enqueue_enter();
	int signal = 0, leased = 0;
	CUresult r = enqueue_in(req, &signal, &leased, 0);
	enqueue_exit(biased, leased, signal);
	return r;
}

/* The request gmx_shim_enqueue takes for the launch l. */
static gmx_shim_req_t launch_req(const gmx_shim_launch_t *l, int ptsz)
{
	return (gmx_shim_req_t){.kind = GMX_CMD_LAUNCH,
				.stream = l->stream,
				.ptsz = ptsz,
				.f = l->f,
				.grid = {l->grid[0], l->grid[1], l->grid[2]},
				.block = {l->block[0], l->block[1], l->block[2]},
				.shmem = l->shmem,
				.params = l->params,
				.extra = l->extra};
}

CUresult gmx_shim_enqueue_launch(const gmx_shim_launch_t *l, int ptsz)
{
	ensure_init();
	const gmx_grant_ops_t *p = gmx_shim_policy;
	if (!p->lease_release || gmx_shim_direct.untracked) { /* no lease: enqueue_in's way */
		gmx_shim_req_t req = launch_req(l, ptsz);
		return gmx_shim_enqueue(&req);
	}
	if (p->prepare) /* never under the lock: it may block this thread */
		p->prepare(p->self);
	int biased = enqueue_enter();
	int signal = 0, leased = 0, tried = 0;
	CUresult r = GMX_SHIM_DIRECT;
	/* What enqueue_in does first for a launch under a leasing policy, with nothing queued: the
	 * stream's queue, then the leased path (a queue it cannot find is enqueue_in's to report). */
	gmx_sq *q = gmx_q.queued == 0 ? gmx_q_sq_find(l->stream, ptsz, 1) : NULL;
	if (q) {
		tried = 1;
		r = gmx_q_leased_launch(l, q);
		if (r != GMX_SHIM_DIRECT) {
			signal = leased_wake();
			leased = 1;
		}
	}
	if (!leased) {
		gmx_shim_req_t req = launch_req(l, ptsz);
		r = enqueue_in(&req, &signal, &leased, tried);
	}
	enqueue_exit(biased, leased, signal);
	return r;
}

int gmx_shim_capturing(CUstream s, int ptsz)
{
	if (__atomic_load_n(&gmx_shim_direct.captures, __ATOMIC_RELAXED) == 0)
		return 0;
	CUstreamCaptureStatus st = CU_STREAM_CAPTURE_STATUS_NONE;
	__typeof__(&cuStreamIsCapturing) f =
	    ptsz ? GMX_REAL(cuStreamIsCapturing_ptsz) : GMX_REAL(cuStreamIsCapturing);
	if (f && f(s, &st) == CUDA_SUCCESS)
		return st != CU_STREAM_CAPTURE_STATUS_NONE;
	return 0;
}

void gmx_shim_capture_begin(void)
{
	__atomic_add_fetch(&gmx_shim_direct.captures, 1, __ATOMIC_RELAXED);
}

void gmx_shim_capture_end(void)
{
	int v = __atomic_load_n(&gmx_shim_direct.captures, __ATOMIC_RELAXED);
	while (v > 0 && !__atomic_compare_exchange_n(&gmx_shim_direct.captures, &v, v - 1, 0,
						     __ATOMIC_RELAXED, __ATOMIC_RELAXED))
		;
}

/* Tells the policy a host thread is about to block on the device, when it has work there
 * (gmx_q.lock held). */
static void note_host_wait(void)
{
	if ((gmx_q.queued > 0 || gmx_q.inflight > 0) && gmx_shim_policy->host_wait)
		gmx_shim_policy->host_wait(gmx_shim_policy->self);
}

CUstream gmx_shim_stream_flush(CUstream s, int ptsz, CUresult *err)
{
	*err = CUDA_SUCCESS;
	ensure_init();
	if (gmx_shim_policy->passthrough)
		return s;
	gmx_q_lock();
	/* The per-thread stream is always mapped once queueing is on, so that work passed through
	 * and work queued land on the same driver stream. */
	gmx_sq *q = gmx_q_sq_find(s, ptsz, gmx_q_is_ptds(s, ptsz));
	CUstream out = s;
	note_host_wait();
	if (q) {
		gmx_q_wait_until_q(gmx_q_stream_released, q, q);
		out = q->ptds ? q->real : s;
		*err = q->deferred;
		q->deferred = CUDA_SUCCESS;
	} else if (gmx_q.queued > 0 && gmx_q_is_legacy(s, ptsz)) {
		gmx_q_wait_all_released();
	}
	pthread_mutex_unlock(&gmx_q.lock);
	return out;
}

CUstream gmx_shim_stream_barrier(CUstream s, int ptsz)
{
	if (GMX_LIKELY(gmx_shim_policy != NULL && gmx_shim_policy->passthrough))
		return s;
	CUresult err;
	CUstream out = gmx_shim_stream_flush(s, ptsz, &err);
	if (err != CUDA_SUCCESS) { /* keep the error for the next synchronisation */
		gmx_q_lock();
		gmx_sq *q = gmx_q_sq_find(s, ptsz, 0);
		if (q && q->deferred == CUDA_SUCCESS)
			q->deferred = err;
		pthread_mutex_unlock(&gmx_q.lock);
	}
	return out;
}

CUresult gmx_shim_stream_pending(CUstream s, int ptsz, CUstream *out)
{
	ensure_init();
	*out = s;
	if (gmx_shim_policy->passthrough)
		return CUDA_SUCCESS;
	gmx_q_lock();
	gmx_q_pump();
	gmx_sq *q = gmx_q_sq_find(s, ptsz, 0);
	CUresult r = CUDA_SUCCESS;
	if (q) {
		if (!gmx_q_stream_released(q))
			r = CUDA_ERROR_NOT_READY;
		else if (q->deferred != CUDA_SUCCESS) {
			r = q->deferred;
			q->deferred = CUDA_SUCCESS;
		}
		if (q->ptds)
			*out = q->real;
	}
	pthread_mutex_unlock(&gmx_q.lock);
	return r;
}

void gmx_shim_stream_forget(CUstream s)
{
	ensure_init();
	if (gmx_shim_policy->passthrough)
		return;
	gmx_q_lock();
	gmx_sq *q = gmx_q_sq_find(s, 0, 0);
	if (q && q->kind != SQ_LEGACY && !q->ptds) {
		gmx_q_wait_until(gmx_q_stream_retired, q);
		for (gmx_sq **pp = &gmx_q.queues; *pp; pp = &(*pp)->next)
			if (*pp == q) {
				*pp = q->next;
				break;
			}
		__typeof__(&cuEventDestroy_v2) destroy = GMX_REAL(cuEventDestroy_v2);
		for (int i = 0; destroy && i < q->npool; i++)
			destroy(q->pool[i]);
		/* A wait queued elsewhere may still name q as its dependency; released_through(q)
		 * must stay true, so the queue is kept as an empty shell instead of freed. */
		q->user = NULL;
		q->ctx = NULL;
		q->npool = 0;
		q->kind = SQ_NONBLOCKING;
		q->next = gmx_q.retired;
		gmx_q.retired = q;
		gmx_q.gen++;
	}
	pthread_mutex_unlock(&gmx_q.lock);
}

int gmx_shim_event_pending(CUevent e)
{
	ensure_init();
	if (gmx_shim_policy->passthrough)
		return 0;
	gmx_q_lock();
	gmx_q_pump();
	evinfo_t *x = gmx_q_ev_lookup(e, 0);
	int pending = x && x->pending > 0;
	pthread_mutex_unlock(&gmx_q.lock);
	return pending;
}

void gmx_shim_event_flush(CUevent e, int forget)
{
	ensure_init();
	if (gmx_shim_policy->passthrough)
		return;
	gmx_q_lock();
	evinfo_t *x = gmx_q_ev_lookup(e, 0);
	if (!forget)
		note_host_wait();
	if (x) /* the last record's stream: its release waits for that stream's head */
		gmx_q_wait_until_q(gmx_q_event_released, x, x->last_q);
	if (x && forget)
		gmx_q_ev_remove(e);
	pthread_mutex_unlock(&gmx_q.lock);
}

void gmx_shim_drain_all(void)
{
	if (GMX_LIKELY(gmx_shim_policy != NULL && gmx_shim_policy->passthrough))
		return;
	ensure_init();
	if (gmx_shim_policy->passthrough)
		return;
	gmx_q_lock();
	note_host_wait();
	if (gmx_q.queued > 0)
		gmx_q_wait_all_released();
	pthread_mutex_unlock(&gmx_q.lock);
}

void gmx_shim_queue_quiesce(void)
{
	if (GMX_LIKELY(gmx_shim_policy != NULL && gmx_shim_policy->passthrough))
		return;
	ensure_init();
	gmx_q_lock();
	while (gmx_q.inflight > 0) {
		gmx_q_reap();
		if (gmx_q.inflight == 0)
			break;
		gmx_q_timed_wait(&gmx_q.cv_done);
	}
	pthread_mutex_unlock(&gmx_q.lock);
}

void gmx_shim_queue_lock(void)
{
	gmx_q_lock();
}

void gmx_shim_queue_unlock(void)
{
	pthread_mutex_unlock(&gmx_q.lock);
}

void gmx_shim_queue_kick(void)
{
	gmx_q_lock();
	if (gmx_q.queued > 0) {
		gmx_q_ensure_dispatcher();
		gmx_q_wake_dispatcher();
	}
	pthread_mutex_unlock(&gmx_q.lock);
}

/* ---- fork ---- */

void gmx_shim_queue_atfork_prepare(void)
{
	gmx_q_lock();
	pthread_mutex_lock(&gmx_q.poll_lock);
}

void gmx_shim_queue_atfork_parent(void)
{
	pthread_mutex_unlock(&gmx_q.poll_lock);
	pthread_mutex_unlock(&gmx_q.lock);
}

/* The child has one thread (the one that forked, which holds the lock: prepare) and none of
 * the parent's driver state is usable in it: start over with empty queues (the parent's are
 * left allocated, not freed: they name parent handles). The lock is released, not initialised
 * again; the condition variables may still list the parent's other threads as waiters, which
 * do not exist here, so they alone are initialised afresh. */
void gmx_shim_queue_atfork_child(void)
{
	pthread_cond_init(&gmx_q.cv_work, NULL);
	pthread_cond_init(&gmx_q.cv_done, NULL);
	pthread_cond_init(&gmx_q.cv_poll, NULL);
	gmx_q.disp_polling = 0;
	gmx_q.poll_kicked = 0;
	pthread_mutex_unlock(&gmx_q.poll_lock);
	gmx_q.queues = NULL;
	__atomic_store_n(&gmx_q.queued, 0, __ATOMIC_RELAXED);
	gmx_q.inflight = 0;
	gmx_q.dispatcher = 0;
	gmx_q.disp_idle = 0;
	gmx_shim_direct.captures = 0;
	gmx_q.free_cmds = NULL;
	gmx_q.gen++;
	memset(gmx_q.ev, 0, sizeof gmx_q.ev);
	gmx_shim__fn_abandon();
	tl_last_q = NULL;
	tl_disp_ctx = NULL;
	gmx_qbias_atfork_child(&gmx_q.bias);
	pthread_mutex_unlock(&gmx_q.lock);
}

int gmx_shim_straight(CUstream s, int ptsz)
{
	/* untracked is written once, by init_once; a thread that reads it before sees 0 (the queue). */
	return __atomic_load_n(&gmx_shim_direct.untracked, __ATOMIC_RELAXED) && gmx_shim_log_fd < 0 &&
	       !gmx_q_is_ptds(s, ptsz) && __atomic_load_n(&gmx_q.queued, __ATOMIC_ACQUIRE) == 0;
}

int gmx_shim_launch_direct(CUstream s, int ptsz)
{
	return gmx_shim_capturing(s, ptsz) || gmx_shim_straight(s, ptsz);
}

/* The queue's counts, in the shim log when the process ends (tests read them: which thread
 * released, how many completion events were recorded in the driver). */
__attribute__((destructor)) static void report(void)
{
	if (gmx_shim_log_fd < 0 || !__atomic_load_n(&g_inited, __ATOMIC_ACQUIRE))
		return;
	gmx_q_lock();
	gmx_shim_log(
	    "queue released caller=%lu dispatcher=%lu leased_straight=%lu completion_events=%lu "
	    "dispatcher_sleeps=%lu dispatcher_wakes=%lu stream_queries=%lu full_yields=%lu polls_skipped=%lu "
	    "diverted_running=%lu diverted_ring_full=%lu diverted_behind=%lu diverted_unleased=%lu "
	    "diverted_other=%lu "
	    "lease_reasks=%lu biased=%lu bias_grants=%lu bias_revokes=%lu",
	    gmx_q.released_caller, gmx_q.released_dispatcher, gmx_q.released_leased, gmx_q.events_recorded,
	    gmx_q.disp_sleeps, gmx_q.disp_wakes, gmx_q.stream_queries, gmx_q.full_yields,
	    __atomic_load_n(&gmx_q.polls_skipped, __ATOMIC_RELAXED), gmx_q.div_running, gmx_q.div_ring_full,
	    gmx_q.div_behind, gmx_q.div_unleased, gmx_q.div_other, gmx_q.lease_reasks, gmx_q.biased,
	    gmx_q.bias.grants, gmx_q.bias.revokes);
	pthread_mutex_unlock(&gmx_q.lock);
}
