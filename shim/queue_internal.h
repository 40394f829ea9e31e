/*
 * The shim's software queues, inside (queue.h is their interface to the hooks).
 *
 * Each (context, stream) has a FIFO of commands. A command is released to the real driver
 * when it heads its FIFO, its ordering dependencies have been released, the number of
 * commands in flight is under the bound, and the grant policy agrees. Release happens in the
 * calling thread when possible (no hand-off on the fast path) and otherwise in a dispatcher
 * thread started at the first command that has to wait.
 *
 * Ordering across FIFOs is kept by releasing, never by waiting on the GPU: the driver orders
 * what it receives, so the shim only has to hand commands over in an order the driver would
 * have seen. Two rules do that:
 *  - a stream wait is released only after the event record it waits on (the last record of
 *    that event queued before it) has been released;
 *  - legacy default stream: a command there is released only after every earlier command on
 *    the context's blocking streams, and a blocking stream's command only after every earlier
 *    legacy-stream command.
 *
 * The files, one job each:
 *   queue.c     the interface to the hooks: set-up, enqueue, flushes and barriers, fork
 *   qstreams.c  finding a stream's queue, and the table of events recorded through the queue
 *   release.c   releasing (ordering rules, the policy, the leased fast path), the dispatcher,
 *               waiting until a condition holds
 *   inflight.c  what was released and has not completed: completion events, stream queries
 *
 * Locking: one mutex (gmx_q.lock) guards every queue, the event table and the kernel identity
 * cache (cmd.c, which also holds a command's parameter copy and its hand-over to the driver).
 * It is held while the shim calls the driver to release or reap, never while it waits for a
 * grant. Every function declared here runs with it held unless its comment says otherwise.
 */
#ifndef GMX_SHIM_QUEUE_INTERNAL_H
#define GMX_SHIM_QUEUE_INTERNAL_H

#include "cmd.h"
#include "qbias.h"
#include "queue.h"

#include <pthread.h>

enum { SQ_LEGACY, SQ_BLOCKING, SQ_NONBLOCKING };

typedef struct gmx_sq gmx_sq;

typedef struct evinfo {
	struct evinfo *next;
	CUevent ev;
	int pending;	/* records queued, not yet released */
	gmx_sq *last_q; /* queue and seq of the last queued record */
	uint64_t last_seq;
} evinfo_t;

struct gmx_sq {
	gmx_sq *next;
	CUcontext ctx;
	CUstream user; /* the application's handle (NULL legacy, CU_STREAM_PER_THREAD) */
	CUstream real; /* the handle given to the driver */
	int kind;
	int ptds;
	pthread_t owner; /* per-thread default stream: the owning thread */
	gmx_cmd *head, *tail;
	CUevent *ring;	    /* in-flight commands, oldest first: the completion event recorded after
			     * each, or NULL while none is (the stream's newest; see gmx_q_mark_tail) */
	uint64_t *ring_seq; /* the seq of each ring entry, for the policy's completed() */
	int rhead, rlen;
	CUevent *pool; /* spare completion events of this context */
	int npool, cappool;
	CUresult deferred; /* first error of a release, reported at the next synchronisation */
	int syncers;	   /* threads waiting in the driver on one of its ring's events (no lock) */
	int busy;	   /* the last look found its released work still running (gmx_q_leased_straight) */
};

#define EV_BUCKETS 1024
#define GMX_DONE_BATCH 64 /* completions handed to the policy with one leased release */
/* A leased launch yields this often at most for room to report it, then queues. */
#define GMX_FULL_YIELDS 32

typedef struct {
	pthread_mutex_t lock;
	pthread_cond_t cv_work, cv_done;
	gmx_sq *queues;
	gmx_sq *retired; /* destroyed streams' queues, kept as shells (see gmx_shim_stream_forget) */
	uint64_t seq;
	size_t queued; /* commands in all queues */
	int inflight, inflight_max;
	int ahead_max; /* commands behind a held head offered to the policy's ahead() (GPUMUX_SHIM_AHEAD) */
	int ring_cap;  /* the leased path's bound: max(inflight_max, GMX_SHIM_LEASED_MAX) */
	unsigned ring_mask; /* each stream's in-flight ring holds ring_mask + 1 >= ring_cap entries, a
			     * power of two: a slot is an AND, not a division, at every launch */
	long poll_ns;
	int dispatcher;
	int disp_idle; /* the dispatcher waits with nothing queued or in flight (no timeout) */
	/* While leased launches go on, the dispatcher polls without the queue lock (dispatcher_poll):
	 * it waits on cv_poll under poll_lock (taken after the queue lock, never before it), and a
	 * wake-up for it sets poll_kicked there (gmx_q_wake_dispatcher). */
	int disp_polling;
	pthread_mutex_t poll_lock;
	pthread_cond_t cv_poll;
	int poll_kicked;
	int lease_full; /* the last leased release left the lease no room: the next asks the stream first */
	unsigned gen;	/* bumped when a queue is freed: invalidates per-thread caches */
	evinfo_t *ev[EV_BUCKETS];
	gmx_cmd *free_cmds;
	/* counts for the shim log at exit (queue.c's report) */
	unsigned long released_caller, released_dispatcher, released_leased, events_recorded;
	unsigned long disp_sleeps,
	    disp_wakes;		      /* the dispatcher went to sleep without a timeout; was woken from it */
	unsigned long stream_queries; /* cuStreamQuery calls to see completions */
	unsigned long full_yields; /* yields of a leased launch while the policy had no room to report it */
	unsigned long
	    polls_skipped; /* dispatcher polls that left the queue lock alone: leased launches went on */
	/* Launches of a leasing policy that went through the queue instead of straight, by reason:
	 * the lease's bound waited for work still running; the policy had no room to report them
	 * after GMX_FULL_YIELDS; commands were queued before them (ring order); no lease at that
	 * moment; anything else (another context, a bound of nothing in flight). */
	unsigned long div_running, div_ring_full, div_behind, div_unleased, div_other;
	unsigned long lease_reasks; /* second policy calls for a launch whose first look found all running */
	unsigned long biased;	    /* launches that entered through the bias, without the mutex */
	/* The lock's bias (qbias.h): the thread launching under a lease again and again enters
	 * gmx_shim_enqueue without the mutex; every other way in takes it through gmx_q_lock. */
	gmx_qbias_t bias;
} gmx_qstate_t;

/* Nonzero for the kinds that launch a kernel. */
static inline int gmx_q_is_launch(gmx_cmd_kind_t kind)
{
	return kind == GMX_CMD_LAUNCH || kind == GMX_CMD_LAUNCH_EX || kind == GMX_CMD_LAUNCH_COOP;
}

/* The queues' state (queue.c defines it). */
extern GMX_HIDDEN gmx_qstate_t gmx_q;

/* Initial-exec TLS: a few bytes of the static TLS block, read without a __tls_get_addr call on
 * every launch (glibc keeps surplus static TLS for libraries loaded by dlopen, as this one may be). */
#define GMX_TLS __thread __attribute__((tls_model("initial-exec")))
extern GMX_TLS int tl_dispatcher;     /* this thread is the dispatcher */
extern GMX_TLS CUcontext tl_disp_ctx; /* the dispatcher's current context */
extern GMX_TLS gmx_sq *tl_last_q;     /* gmx_q_sq_find's cache: the last application stream's queue */
extern GMX_TLS CUstream tl_last_stream;
extern GMX_TLS unsigned tl_last_gen;
extern GMX_TLS gmx_qbias_me_t tl_qbias; /* this thread's handle on the lock's bias */

/* Takes the queue lock: the mutex, then the bias revoked if another thread holds it (waiting
 * until that thread is out). Every way in but gmx_shim_enqueue's biased one comes here. */
static inline void gmx_q_lock(void)
{
	pthread_mutex_lock(&gmx_q.lock);
	gmx_qbias_locked(&gmx_q.bias, &tl_qbias);
}

/* After a wait on a condition with the queue lock: the mutex is held again, and a bias granted
 * meanwhile is revoked as gmx_q_lock does. */
static inline void gmx_q_relocked(void)
{
	gmx_qbias_locked(&gmx_q.bias, &tl_qbias);
}

/* ---- qstreams.c ---- */

/* The event's record in the table, or NULL; create: made when missing (NULL if out of memory). */
evinfo_t *gmx_q_ev_lookup(CUevent e, int create);
/* Drops the event's record from the table. */
void gmx_q_ev_remove(CUevent e);
/* The calling thread's current context (NULL if none), as the driver says. No lock needed.
 * Inline: every leased launch asks it. */
static inline CUcontext gmx_q_current_ctx(void)
{
	CUcontext c = NULL;
	__typeof__(&cuCtxGetCurrent) get = GMX_REAL(cuCtxGetCurrent);
	if (get)
		get(&c);
	return c;
}
/* Nonzero if (s, ptsz) names the legacy default stream. No lock needed. */
int gmx_q_is_legacy(CUstream s, int ptsz);
/* Nonzero if (s, ptsz) names the per-thread default stream. No lock needed. */
int gmx_q_is_ptds(CUstream s, int ptsz);
/* The queue of stream s as the calling thread sees it; create: made when missing. NULL when
 * there is no context or the driver rejects the stream. */
gmx_sq *gmx_q_sq_find(CUstream s, int ptsz, int create);

/* ---- inflight.c ---- */

/* Nonzero when q's newest in-flight command has no completion event yet. */
int gmx_q_tail_unmarked(const gmx_sq *q);
/* Before a release onto q: gives q's unmarked newest in-flight command a completion event, or
 * retires q's in-flight work if the stream's query (skipped when known_busy) finds it done. */
void gmx_q_mark_tail(gmx_sq *q, int known_busy);
/* Books seq, just released onto q, as in flight with completion event e (NULL: none). */
static inline void gmx_q_track_as(gmx_sq *q, uint64_t seq, CUevent e)
{
	unsigned at = (unsigned)(q->rhead + q->rlen) & gmx_q.ring_mask;
	q->ring[at] = e;
	q->ring_seq[at] = seq;
	q->rlen++;
	gmx_q.inflight++;
}
/* gmx_q_track on the legacy stream: with an event recorded after seq; 1, or 0 if none could be. */
int gmx_q_track_event(gmx_sq *q, uint64_t seq);
/* Books seq, just released onto q, as in flight: lazily (no event) on an application stream or
 * the shim's per-thread one (whose handle names the same stream whatever the current context;
 * gmx_q_mark_tail), else with an event recorded after it. 1 if tracked, 0 if it could not be.
 * Inline: every leased launch books its command. */
static inline int gmx_q_track(gmx_sq *q, uint64_t seq)
{
	if (q->kind == SQ_LEGACY)
		return gmx_q_track_event(q, seq);
	gmx_q_track_as(q, seq, NULL);
	return 1;
}
/* Retires every completed in-flight command of every queue, telling the policy. */
void gmx_q_reap(void);
/* If q's unmarked in-flight work is complete (the stream's query): retires it, the first
 * GMX_DONE_BATCH seqs into done[] without telling the policy (the caller does); how many. */
unsigned gmx_q_collect_idle(gmx_sq *q, uint64_t done[GMX_DONE_BATCH]);

/* ---- release.c ---- */

/* Nonzero for a kind tracked to completion (not an event record or stream wait). No lock. */
int gmx_q_counted(gmx_cmd_kind_t k);
/* Nonzero if c (heading its queue) may be released now: bound, ordering, policy. */
int gmx_q_can_release(const gmx_cmd *c);
/* A command to fill (from the free list, or new); NULL when out of memory. */
gmx_cmd *gmx_q_cmd_alloc(void);
/* Returns c to the free list. */
void gmx_q_cmd_free(gmx_cmd *c);
/* Releases the head of q (gmx_q_can_release approved it) and books it. */
void gmx_q_release_head(gmx_sq *q);
/* Releases whatever may go now (the caller: its current context's queues); nonzero if any. */
int gmx_q_pump(void);
/* Waits on cv (the lock released meanwhile) for at most one poll period. */
void gmx_q_timed_wait(pthread_cond_t *cv);
/* The same with mutex m (held) instead of the queue lock. */
void gmx_q_timed_wait_on(pthread_cond_t *cv, pthread_mutex_t *m);
/* Wakes the dispatcher for queued work, whichever way it waits. */
void gmx_q_wake_dispatcher(void);
/* Starts the dispatcher thread if it is not running. */
void gmx_q_ensure_dispatcher(void);
/* Waits, pumping, until done(arg) holds; q (or NULL): the caller's stream, waited on in the
 * driver when the in-flight bound holds it. */
void gmx_q_wait_until_q(int (*done)(const void *), const void *arg, gmx_sq *q);
/* gmx_q_wait_until_q without a stream of the caller's. */
void gmx_q_wait_until(int (*done)(const void *), const void *arg);
/* Waits, pumping, until nothing is queued anywhere; meanwhile in the driver for the oldest
 * command of a queue whose head is held while it has work in flight. */
void gmx_q_wait_all_released(void);
/* Conditions for the waits: q (and what it follows) has nothing queued; nothing is queued
 * anywhere; q is released and nothing of it in flight; the event (evinfo_t) has no queued record. */
int gmx_q_stream_released(const void *q);
int gmx_q_all_released(const void *unused);
int gmx_q_stream_retired(const void *q);
int gmx_q_event_released(const void *x);
/* A launch released under the policy's lease straight from the caller's arguments; the
 * driver's result, or GMX_SHIM_DIRECT when it must be queued instead. */
CUresult gmx_q_leased_straight(const gmx_shim_req_t *req, CUstream s, gmx_sq *q);
/* gmx_q_leased_straight for a cuLaunchKernel from its arguments (gmx_shim_enqueue_launch): the
 * same checks, decision and booking, the driver called with l's own arguments onto q's stream. */
CUresult gmx_q_leased_launch(const gmx_shim_launch_t *l, gmx_sq *q);

#endif
