/*
 * Software queues.
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
 * Completion of each released launch, copy or memset is tracked without a driver call per
 * command where the stream allows it: a command released onto an application stream with
 * nothing of that stream in flight gets no event; the stream's query says when it and
 * everything before it completed. Only when a later command follows it while it is in flight is
 * an event recorded (before the later one: it marks exactly the earlier commands), so a
 * pipeline learns of each completion as it happens. The legacy stream (whose handle means the
 * current context's) gets an event after each command. The number of commands not yet
 * complete is bounded (GPUMUX_SHIM_INFLIGHT) so that a held process stops within a few kernels.
 *
 * Locking: one mutex (g.lock) guards every queue, the event table and the kernel identity
 * cache (cmd.c, which also holds a command's parameter copy and its hand-over to the driver).
 * It is held while the shim calls the driver to release or reap, never while it waits for a
 * grant.
 */
#define _GNU_SOURCE
#include "queue.h"
#include "cmd.h"
#include "tunables.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

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
			     * each, or NULL while none is (the stream's newest; see mark_tail) */
	uint64_t *ring_seq; /* the seq of each ring entry, for the policy's completed() */
	int rhead, rlen;
	CUevent *pool; /* spare completion events of this context */
	int npool, cappool;
	CUresult deferred; /* first error of a release, reported at the next synchronisation */
	int syncers;	   /* threads waiting in the driver on one of its ring's events (no lock) */
	int busy;	   /* the last look found its released work still running (leased_straight) */
};

#define EV_BUCKETS 1024
#define GMX_DONE_BATCH 64 /* completions handed to the policy with one leased release */

static struct {
	pthread_mutex_t lock;
	pthread_cond_t cv_work, cv_done;
	gmx_sq *queues;
	gmx_sq *retired; /* destroyed streams' queues, kept as shells (see gmx_shim_stream_forget) */
	uint64_t seq;
	size_t queued; /* commands in all queues */
	int inflight, inflight_max;
	long poll_ns;
	int dispatcher;
	int disp_idle; /* the dispatcher waits with nothing queued or in flight (no timeout) */
	int untracked; /* the policy never holds (gmx_grant_never_holds): nothing is tracked in flight */
	unsigned gen;  /* bumped when a queue is freed: invalidates per-thread caches */
	int captures;
	evinfo_t *ev[EV_BUCKETS];
	gmx_cmd *free_cmds;
	/* counts for the shim log at exit (report) */
	unsigned long released_caller, released_dispatcher, released_leased, events_recorded;
} g = {.lock = PTHREAD_MUTEX_INITIALIZER,
       .cv_work = PTHREAD_COND_INITIALIZER,
       .cv_done = PTHREAD_COND_INITIALIZER};

static pthread_once_t g_init_once = PTHREAD_ONCE_INIT;
/* Initial-exec TLS: a few bytes of the static TLS block, read without a __tls_get_addr call on
 * every launch (glibc keeps surplus static TLS for libraries loaded by dlopen, as this one may be). */
#define GMX_TLS __thread __attribute__((tls_model("initial-exec")))
static GMX_TLS int tl_dispatcher;
static GMX_TLS CUcontext tl_disp_ctx;
static GMX_TLS gmx_sq *tl_last_q;
static GMX_TLS CUstream tl_last_stream;
static GMX_TLS unsigned tl_last_gen;
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
	g.inflight_max =
	    (int)env_long("GPUMUX_SHIM_INFLIGHT", GMX_INFLIGHT_DEFAULT, GMX_INFLIGHT_MIN, GMX_INFLIGHT_MAX);
	g.poll_ns =
	    1000L * env_long("GPUMUX_SHIM_POLL_US", GMX_POLL_US_DEFAULT, GMX_POLL_US_MIN, GMX_POLL_US_MAX);
	__atomic_store_n(&g.untracked, gmx_grant_never_holds(gmx_shim_policy), __ATOMIC_RELAXED);
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
	pthread_mutex_lock(&g.lock);
	/* Commands still queued point at their fninfo; the unload drained them first. */
	gmx_shim__fn_clear();
	pthread_mutex_unlock(&g.lock);
}

/* ---- events ---- */

static evinfo_t *ev_lookup(CUevent e, int create)
{
	size_t h = gmx_shim__ptr_hash(e, EV_BUCKETS);
	for (evinfo_t *x = g.ev[h]; x; x = x->next)
		if (x->ev == e)
			return x;
	if (!create)
		return NULL;
	evinfo_t *x = calloc(1, sizeof *x);
	if (!x)
		return NULL;
	x->ev = e;
	x->next = g.ev[h];
	g.ev[h] = x;
	return x;
}

static void ev_remove(CUevent e)
{
	size_t h = gmx_shim__ptr_hash(e, EV_BUCKETS);
	for (evinfo_t **pp = &g.ev[h]; *pp; pp = &(*pp)->next)
		if ((*pp)->ev == e) {
			evinfo_t *x = *pp;
			*pp = x->next;
			free(x);
			return;
		}
}

/* ---- queues ---- */

static CUcontext current_ctx(void)
{
	CUcontext c = NULL;
	__typeof__(&cuCtxGetCurrent) get = GMX_REAL(cuCtxGetCurrent);
	if (get)
		get(&c);
	return c;
}

static int is_legacy(CUstream s, int ptsz)
{
	return s == CU_STREAM_LEGACY || (s == NULL && !ptsz);
}

static int is_ptds(CUstream s, int ptsz)
{
	return s == CU_STREAM_PER_THREAD || (s == NULL && ptsz);
}

static gmx_sq *sq_new(CUcontext ctx, CUstream user, int kind)
{
	gmx_sq *q = calloc(1, sizeof *q);
	if (!q)
		return NULL;
	q->ring = calloc((size_t)g.inflight_max, sizeof *q->ring);
	q->ring_seq = calloc((size_t)g.inflight_max, sizeof *q->ring_seq);
	if (!q->ring || !q->ring_seq) {
		free(q->ring);
		free(q->ring_seq);
		free(q);
		return NULL;
	}
	q->ctx = ctx;
	q->user = user;
	q->real = user;
	q->kind = kind;
	q->next = g.queues;
	g.queues = q;
	return q;
}

/* Finds (create: or makes) the queue for a stream as seen by the calling thread. */
static gmx_sq *sq_find(CUstream s, int ptsz, int create)
{
	/* The cache serves application streams only: the legacy and per-thread streams depend
	 * on the current context, which may change between calls. */
	int special = is_legacy(s, ptsz) || is_ptds(s, ptsz);
	if (!special && tl_last_gen == g.gen && tl_last_q && tl_last_stream == s)
		return tl_last_q;
	gmx_sq *found = NULL;
	CUcontext ctx = NULL;
	if (is_legacy(s, ptsz) || is_ptds(s, ptsz)) {
		ctx = current_ctx();
		if (!ctx)
			return NULL;
		for (gmx_sq *q = g.queues; q; q = q->next) {
			if (q->ctx != ctx)
				continue;
			if (is_legacy(s, ptsz) && q->kind == SQ_LEGACY) {
				found = q;
				break;
			}
			if (is_ptds(s, ptsz) && q->ptds && pthread_equal(q->owner, pthread_self())) {
				found = q;
				break;
			}
		}
	} else {
		for (gmx_sq *q = g.queues; q; q = q->next)
			if (q->user == s && !q->ptds && q->kind != SQ_LEGACY) {
				found = q;
				break;
			}
	}
	if (!found && create) {
		if (is_legacy(s, ptsz)) {
			found = sq_new(ctx, NULL, SQ_LEGACY);
		} else if (is_ptds(s, ptsz)) {
			/* The per-thread default stream belongs to its thread, but queued work may be
			 * released by the dispatcher: it goes to a blocking stream of the shim's, which
			 * the driver orders exactly as the per-thread stream (blocking, synchronises with
			 * the legacy stream). Every _ptsz call of this thread is mapped onto it. */
			__typeof__(&cuStreamCreate) mk = GMX_REAL(cuStreamCreate);
			CUstream sub = NULL;
			if (!mk || mk(&sub, CU_STREAM_DEFAULT) != CUDA_SUCCESS)
				return NULL;
			found = sq_new(ctx, CU_STREAM_PER_THREAD, SQ_BLOCKING);
			if (found) {
				found->ptds = 1;
				found->owner = pthread_self();
				found->real = sub;
			}
		} else {
			unsigned flags = 0;
			CUcontext sctx = NULL;
			__typeof__(&cuStreamGetFlags) gf = GMX_REAL(cuStreamGetFlags);
			__typeof__(&cuStreamGetCtx) gc = GMX_REAL(cuStreamGetCtx);
			if (gf && gf(s, &flags) != CUDA_SUCCESS)
				return NULL; /* not a valid stream: let the driver report it */
			if (!gc || gc(s, &sctx) != CUDA_SUCCESS)
				sctx = current_ctx();
			found =
			    sq_new(sctx, s, (flags & CU_STREAM_NON_BLOCKING) ? SQ_NONBLOCKING : SQ_BLOCKING);
		}
	}
	if (found && !special) {
		tl_last_q = found;
		tl_last_stream = s;
		tl_last_gen = g.gen;
	}
	return found;
}

/* ---- release ---- */

static int counted(gmx_cmd_kind_t k)
{
	return k != GMX_CMD_EVENT_RECORD && k != GMX_CMD_STREAM_WAIT;
}

/* Nonzero once every command of q with seq <= s has been released. */
static int released_through(const gmx_sq *q, uint64_t s)
{
	return !q->head || q->head->info.seq > s;
}

static int deps_met(const gmx_cmd *c)
{
	const gmx_sq *q = c->q;
	if (c->dep_q && !released_through(c->dep_q, c->dep_seq))
		return 0;
	if (q->kind == SQ_NONBLOCKING)
		return 1;
	for (const gmx_sq *o = g.queues; o; o = o->next) {
		if (o == q || o->ctx != q->ctx)
			continue;
		if (q->kind == SQ_LEGACY && o->kind == SQ_BLOCKING && !released_through(o, c->info.seq))
			return 0;
		if (q->kind == SQ_BLOCKING && o->kind == SQ_LEGACY && !released_through(o, c->info.seq))
			return 0;
	}
	return 1;
}

static int can_release(const gmx_cmd *c)
{
	if (counted(c->info.kind) && g.inflight >= g.inflight_max)
		return 0;
	if (!deps_met(c))
		return 0;
	return gmx_shim_policy->may_release(gmx_shim_policy->self, &c->info);
}

static void cmd_free(gmx_cmd *c)
{
	c->next = g.free_cmds;
	g.free_cmds = c;
}

/* Nonzero when q's in-flight commands are tracked lazily (mark_tail): an application stream or
 * the shim's per-thread one, whose handle names the same stream whatever the current context. */
static int lazy_tracked(const gmx_sq *q)
{
	return q->kind != SQ_LEGACY;
}

/* A completion event of q's context: a spare one, or a new one (NULL if the driver refuses). */
static CUevent event_get(gmx_sq *q)
{
	if (q->npool > 0)
		return q->pool[--q->npool];
	CUevent e = NULL;
	__typeof__(&cuEventCreate) mk = GMX_REAL(cuEventCreate);
	if (!mk || mk(&e, CU_EVENT_DISABLE_TIMING) != CUDA_SUCCESS)
		return NULL;
	return e;
}

/* Keeps e for reuse (or destroys it when the pool cannot grow). */
static void event_put(gmx_sq *q, CUevent e)
{
	if (q->npool == q->cappool) {
		int cap = q->cappool ? q->cappool * 2 : 8;
		CUevent *np = realloc(q->pool, (size_t)cap * sizeof *np);
		if (np) {
			q->pool = np;
			q->cappool = cap;
		}
	}
	if (q->npool < q->cappool) {
		q->pool[q->npool++] = e;
	} else {
		__typeof__(&cuEventDestroy_v2) destroy = GMX_REAL(cuEventDestroy_v2);
		if (destroy)
			destroy(e);
	}
}

static void retire_oldest(gmx_sq *q, CUresult r);

/* Nonzero when q's newest in-flight command has no completion event yet. */
static int tail_unmarked(const gmx_sq *q)
{
	return q->rlen > 0 && !q->ring[(q->rhead + q->rlen - 1) % g.inflight_max];
}

/* Before a command is released onto q: if q's newest in-flight command has no completion event,
 * records one now, so that it marks exactly the commands before the one about to go; unless the
 * stream's query (skipped when the caller just saw it busy) finds them all complete already
 * (short kernels, or a stream the application synchronised): they are retired instead. Lock
 * held. */
static void mark_tail(gmx_sq *q, int known_busy)
{
	if (!tail_unmarked(q))
		return;
	if (!known_busy) {
		__typeof__(&cuStreamQuery) squery = GMX_REAL(cuStreamQuery);
		CUresult sr = squery ? squery(q->real) : CUDA_ERROR_NOT_READY;
		q->busy = sr == CUDA_ERROR_NOT_READY;
		if (sr != CUDA_ERROR_NOT_READY) {
			while (q->rlen > 0)
				retire_oldest(q, sr);
			return;
		}
	}
	CUevent e = event_get(q);
	__typeof__(&cuEventRecord) rec = GMX_REAL(cuEventRecord);
	if (!e)
		return;
	if (rec && rec(e, q->real) == CUDA_SUCCESS) {
		q->ring[(q->rhead + q->rlen - 1) % g.inflight_max] = e;
		g.events_recorded++;
	} else {
		event_put(q, e);
	}
}

/* Books command seq, just released onto q, as in flight: lazily (no event) on an application
 * stream, else with an event recorded after it. 1 if tracked, 0 if it could not be. Lock held. */
static int track(gmx_sq *q, uint64_t seq)
{
	CUevent e = NULL;
	if (!lazy_tracked(q)) {
		__typeof__(&cuEventRecord) rec = GMX_REAL(cuEventRecord);
		e = event_get(q);
		if (!e)
			return 0;
		if (!rec || rec(e, q->real) != CUDA_SUCCESS) {
			event_put(q, e);
			return 0;
		}
		g.events_recorded++;
	}
	int at = (q->rhead + q->rlen) % g.inflight_max;
	q->ring[at] = e;
	q->ring_seq[at] = seq;
	q->rlen++;
	g.inflight++;
	return 1;
}

/* Releases the head of q (which can_release approved). Lock held. */
static void release_head(gmx_sq *q)
{
	gmx_cmd *c = q->head;
	if (tl_dispatcher && tl_disp_ctx != q->ctx) {
		__typeof__(&cuCtxSetCurrent) set = GMX_REAL(cuCtxSetCurrent);
		if (set && set(q->ctx) == CUDA_SUCCESS)
			tl_disp_ctx = q->ctx;
	}
	int tracks = counted(c->info.kind) && !g.untracked;
	if (tracks)
		mark_tail(q, 0);
	CUresult r = gmx_shim__cmd_call_driver(c, q->real);
	q->head = c->next;
	if (!q->head)
		q->tail = NULL;
	__atomic_sub_fetch(&g.queued, 1, __ATOMIC_RELAXED); /* read without the lock: enqueue */
	if (r != CUDA_SUCCESS && q->deferred == CUDA_SUCCESS)
		q->deferred = r;
	if (c->evi)
		c->evi->pending--;
	int tracked = r == CUDA_SUCCESS && tracks && track(q, c->info.seq);
	if (tl_dispatcher)
		g.released_dispatcher++;
	else
		g.released_caller++;
	if (gmx_shim_policy->released)
		gmx_shim_policy->released(gmx_shim_policy->self, &c->info);
	/* What no completion event tracks (event records, stream waits, a release the driver
	 * refused, an event that could not be recorded) is complete for the policy now: a
	 * policy that counts released work (the daemon) must not wait for it forever. */
	if (!tracked && gmx_shim_policy->completed)
		gmx_shim_policy->completed(gmx_shim_policy->self, c->info.seq);
	gmx_shim__cmd_log(c, r);
	cmd_free(c);
}

/* Retires q's oldest in-flight command (r: its completion status) without telling the policy;
 * its seq. Lock held. */
static uint64_t retire_quiet(gmx_sq *q, CUresult r)
{
	CUevent e = q->ring[q->rhead];
	uint64_t seq = q->ring_seq[q->rhead];
	if (r != CUDA_SUCCESS && q->deferred == CUDA_SUCCESS)
		q->deferred = r;
	q->rhead = (q->rhead + 1) % g.inflight_max;
	q->rlen--;
	g.inflight--;
	if (e)
		event_put(q, e);
	return seq;
}

/* Retires q's oldest in-flight command (r: its completion status). Lock held. */
static void retire_oldest(gmx_sq *q, CUresult r)
{
	uint64_t seq = retire_quiet(q, r);
	if (gmx_shim_policy->completed)
		gmx_shim_policy->completed(gmx_shim_policy->self, seq);
}

/* Retires completed in-flight commands: oldest first, each by its event, and a command without
 * one (with all after it) once its stream is idle. Lock held. */
static void reap(void)
{
	if (g.inflight == 0)
		return;
	__typeof__(&cuEventQuery) query = GMX_REAL(cuEventQuery);
	__typeof__(&cuStreamQuery) squery = GMX_REAL(cuStreamQuery);
	for (gmx_sq *q = g.queues; q; q = q->next) {
		while (q->rlen > 0) {
			CUevent e = q->ring[q->rhead];
			CUresult r = e ? (query ? query(e) : CUDA_SUCCESS) : (squery ? squery(q->real) : CUDA_SUCCESS);
			if (r == CUDA_ERROR_NOT_READY) {
				q->busy = 1;
				break;
			}
			if (e) {
				retire_oldest(q, r);
				continue;
			}
			q->busy = 0;
			while (q->rlen > 0) /* the stream is idle: everything released onto it completed */
				retire_oldest(q, r);
		}
	}
}

/* Releases whatever may go now; a caller thread only touches its current context's queues
 * (releasing into another context would change the caller's current context). Lock held. */
static int pump(void)
{
	reap();
	CUcontext mine = tl_dispatcher ? NULL : current_ctx();
	int any = 0, progress = 1;
	while (progress) {
		progress = 0;
		for (gmx_sq *q = g.queues; q; q = q->next) {
			if (!tl_dispatcher && q->ctx != mine)
				continue;
			while (q->head && can_release(q->head)) {
				release_head(q);
				progress = any = 1;
			}
		}
		if (progress)
			reap();
	}
	if (any)
		pthread_cond_broadcast(&g.cv_done);
	return any;
}

static void timed_wait(pthread_cond_t *cv)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	ts.tv_nsec += g.poll_ns;
	while (ts.tv_nsec >= 1000000000L) {
		ts.tv_nsec -= 1000000000L;
		ts.tv_sec++;
	}
	pthread_cond_timedwait(cv, &g.lock, &ts);
}

static void *dispatcher_main(void *arg)
{
	(void)arg;
	tl_dispatcher = 1;
	pthread_mutex_lock(&g.lock);
	int linger = 0; /* polls made with nothing to do */
	for (;;) {
		pump();
		if (g.queued == 0 && g.inflight == 0 && linger >= GMX_DISPATCH_LINGER_POLLS) {
			g.disp_idle = 1;
			pthread_cond_wait(&g.cv_work, &g.lock);
			g.disp_idle = 0;
			linger = 0;
		} else {
			linger = g.queued == 0 && g.inflight == 0 ? linger + 1 : 0;
			timed_wait(&g.cv_work);
		}
	}
	return NULL;
}

/* Starts the dispatcher once work has to wait (for a grant, a slot, or another thread). */
static void ensure_dispatcher(void)
{
	if (g.dispatcher)
		return;
	pthread_t t;
	pthread_attr_t a;
	pthread_attr_init(&a);
	pthread_attr_setdetachstate(&a, PTHREAD_CREATE_DETACHED);
	if (pthread_create(&t, &a, dispatcher_main, NULL) == 0)
		g.dispatcher = 1;
	else
		fprintf(stderr, "gpumux shim: cannot start the dispatcher thread; queued work is "
				"released only from API calls\n");
	pthread_attr_destroy(&a);
}

/* When the in-flight bound holds back q's queued work and q has work in flight, waits in the
 * driver for q's oldest in-flight command (the lock released meanwhile) instead of for the
 * dispatcher's next poll: a synchronising thread then releases the next command as soon as a
 * slot frees. The event stays valid: q's events are destroyed only once no thread waits on
 * them (stream_retired). 1 if it waited. Lock held. */
static int wait_oldest(gmx_sq *q)
{
	__typeof__(&cuEventSynchronize) es = GMX_REAL(cuEventSynchronize);
	__typeof__(&cuStreamSynchronize) ss = GMX_REAL(cuStreamSynchronize);
	if (!q || !q->head || q->rlen == 0 || g.inflight < g.inflight_max || !es || !ss)
		return 0;
	CUevent e = q->ring[q->rhead];
	CUstream s = q->real;
	q->syncers++;
	pthread_mutex_unlock(&g.lock);
	if (e)
		es(e);
	else /* no event: the stream's newest in flight (mark_tail), so the stream itself */
		ss(s);
	pthread_mutex_lock(&g.lock);
	q->syncers--;
	return 1;
}

/* Waits, pumping, until done(arg) holds; q (or NULL): the caller's own stream, waited on in the
 * driver when the in-flight bound holds it back (wait_oldest). Lock held. */
static void wait_until_q(int (*done)(const void *), const void *arg, gmx_sq *q)
{
	while (!done(arg)) {
		pump();
		if (done(arg))
			break;
		if (wait_oldest(q))
			continue;
		ensure_dispatcher();
		pthread_cond_signal(&g.cv_work);
		timed_wait(&g.cv_done);
	}
}

static void wait_until(int (*done)(const void *), const void *arg)
{
	wait_until_q(done, arg, NULL);
}

/* Nonzero once q, and what it must follow (legacy semantics), has no queued command. */
static int stream_released(const void *arg)
{
	const gmx_sq *q = arg;
	if (q->head)
		return 0;
	if (q->kind == SQ_NONBLOCKING)
		return 1;
	for (const gmx_sq *o = g.queues; o; o = o->next)
		if (o->ctx == q->ctx && o->head &&
		    ((q->kind == SQ_LEGACY && o->kind == SQ_BLOCKING) || o->kind == SQ_LEGACY))
			return 0;
	return 1;
}

static int all_released(const void *arg)
{
	(void)arg;
	return g.queued == 0;
}

static int stream_retired(const void *arg)
{
	const gmx_sq *q = arg;
	if (!stream_released(arg))
		return 0;
	if (q->rlen > 0)
		reap();
	return q->rlen == 0 && q->syncers == 0;
}

static int event_released(const void *arg)
{
	const evinfo_t *x = arg;
	return x->pending == 0;
}

/* ---- the interface used by the hooks ---- */

static gmx_cmd *cmd_alloc(void)
{
	gmx_cmd *c = g.free_cmds;
	if (c) {
		/* Only what enqueue does not always write is reset (the whole command is ~480
		 * bytes; its buffers are kept): r is copied, cfg and extra are written where read. */
		g.free_cmds = c->next;
		memset(&c->info, 0, sizeof c->info);
		c->fi = NULL;
		c->evi = NULL;
		c->dep_q = NULL;
		c->dep_seq = 0;
		return c;
	}
	return calloc(1, sizeof *c);
}

/* Nonzero if host memory at p is page-locked or managed, so the copy may be deferred. */
static int host_deferrable(const void *p)
{
	__typeof__(&cuPointerGetAttribute) pga = GMX_REAL(cuPointerGetAttribute);
	unsigned type = 0;
	return pga && pga(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, (CUdeviceptr)(uintptr_t)p) == CUDA_SUCCESS;
}

/* When q's newest in-flight command has no event and the stream's query finds it idle: retires
 * all of q's in-flight commands, the first GMX_DONE_BATCH into done[] without telling the policy
 * (the caller does), the rest through completed(). How many went into done[]. Lock held. */
static unsigned collect_idle(gmx_sq *q, uint64_t done[GMX_DONE_BATCH])
{
	if (!tail_unmarked(q))
		return 0;
	__typeof__(&cuStreamQuery) squery = GMX_REAL(cuStreamQuery);
	CUresult sr = squery ? squery(q->real) : CUDA_ERROR_NOT_READY;
	q->busy = sr == CUDA_ERROR_NOT_READY;
	unsigned nd = 0;
	while (!q->busy && q->rlen > 0) {
		if (nd < GMX_DONE_BATCH)
			done[nd++] = retire_quiet(q, sr);
		else
			retire_oldest(q, sr);
	}
	return nd;
}

/* A launch on stream s (queue q) released under the policy's lease straight from the caller's
 * arguments: nothing of the process is queued, so no ordering rule can hold it, and nothing is
 * copied. Completions the lease's bound waits for are reaped here first. The driver's result,
 * or GMX_SHIM_DIRECT when it must be queued (not a launch, another context, the in-flight bound,
 * no lease or its bound). Lock held. */
static CUresult leased_straight(const gmx_shim_req_t *req, CUstream s, gmx_sq *q)
{
	if (req->kind != GMX_CMD_LAUNCH && req->kind != GMX_CMD_LAUNCH_COOP && req->kind != GMX_CMD_LAUNCH_EX)
		return GMX_SHIM_DIRECT;
	if (g.inflight >= g.inflight_max)
		reap();
	if (g.inflight >= g.inflight_max || q->ctx != current_ctx())
		return GMX_SHIM_DIRECT;
	if (gmx_shim_log_fd >= 0 && req->extra)
		return GMX_SHIM_DIRECT; /* its log line shows the copy of the extra buffer */
	CUresult err = CUDA_SUCCESS;
	fninfo_t *fi = gmx_shim__fn_lookup(req->f, &err);
	if (!fi)
		return err; /* a handle the driver rejects, reported as the queue would */
	gmx_shim_cmd_t info = {.kind = req->kind, .seq = g.seq + 1, .stream = (uintptr_t)s, .name = fi->name};
	if (req->kind == GMX_CMD_LAUNCH_EX) {
		const CUlaunchConfig *cf = req->cfg;
		info.grid[0] = cf->gridDimX, info.grid[1] = cf->gridDimY, info.grid[2] = cf->gridDimZ;
		info.block[0] = cf->blockDimX, info.block[1] = cf->blockDimY, info.block[2] = cf->blockDimZ;
		info.shared_mem = cf->sharedMemBytes;
	} else {
		memcpy(info.grid, req->grid, sizeof info.grid);
		memcpy(info.block, req->block, sizeof info.block);
		info.shared_mem = req->shmem;
	}
	const gmx_grant_ops_t *p = gmx_shim_policy;
	int d = p->lease_release(p->self, &info, NULL, 0);
	if (d == GMX_GRANT_HELD && g.inflight > 0) {
		/* The bound waits for a completion not yet seen: one query of the stream says whether
		 * all of it completed, and those completions reach the policy with the decision. */
		uint64_t done[GMX_DONE_BATCH];
		unsigned nd = collect_idle(q, done);
		if (nd == 0)
			reap();
		d = p->lease_release(p->self, &info, done, nd);
	}
	if (d != GMX_GRANT_LEASED)
		return GMX_SHIM_DIRECT;
	g.seq++;
	/* Work seen still running at the last look (a pipeline): mark what this one follows, so
	 * each completion is seen as it happens. Short kernels are left unmarked: the next query
	 * finds them all complete at once. */
	if (q->busy)
		mark_tail(q, 0);
	CUresult r = gmx_shim__req_call_driver(req, q->real);
	int tracked = r == CUDA_SUCCESS && track(q, info.seq);
	g.released_leased++;
	gmx_shim__req_log(&info, fi, req->params, r);
	if (p->released)
		p->released(p->self, &info);
	if (!tracked && p->completed)
		p->completed(p->self, info.seq);
	return r;
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
	pthread_mutex_lock(&g.lock);
	CUstream s = req->kind == GMX_CMD_LAUNCH_EX ? req->cfg->hStream : req->stream;
	gmx_sq *q = sq_find(s, req->ptsz, 1);
	if (!q) {
		pthread_mutex_unlock(&g.lock);
		return GMX_SHIM_DIRECT; /* no context or an invalid stream: the driver says which */
	}
	/* Straight through (gmx_shim_straight: the hooks call the driver without coming here) for
	 * what that leaves to the queue: the per-thread default stream, mapped to the shim's stream
	 * for this thread, and launches before the queue was set up. The driver gets the call the
	 * application made, in the caller's own context, so that context need not be the stream's as
	 * for a release. */
	if (g.untracked && g.queued == 0 && gmx_shim_log_fd < 0) {
		CUresult r = gmx_shim__req_call_driver(req, q->real);
		if (r != GMX_SHIM_DIRECT) {
			g.seq++;
			pthread_mutex_unlock(&g.lock);
			return r;
		}
	}
	if (gmx_shim_policy->lease_release && g.queued == 0) {
		CUresult r = leased_straight(req, s, q);
		if (r != GMX_SHIM_DIRECT) {
			int idle = g.disp_idle && g.inflight > 0;
			pthread_mutex_unlock(&g.lock);
			if (idle) /* it polls completions for the policy; woken after the unlock */
				pthread_cond_signal(&g.cv_work);
			return r;
		}
	}
	gmx_cmd *c = cmd_alloc();
	if (!c) {
		pthread_mutex_unlock(&g.lock);
		return GMX_SHIM_DIRECT;
	}
	c->r = *req;
	c->q = q;
	c->info.kind = req->kind;
	c->info.stream = (uintptr_t)s;
	if (req->kind == GMX_CMD_LAUNCH || req->kind == GMX_CMD_LAUNCH_COOP ||
	    req->kind == GMX_CMD_LAUNCH_EX) {
		CUresult err = CUDA_SUCCESS;
		c->fi = gmx_shim__fn_lookup(req->f, &err);
		if (!c->fi) {
			cmd_free(c);
			pthread_mutex_unlock(&g.lock);
			return err;
		}
		if (req->kind == GMX_CMD_LAUNCH_EX) {
			c->cfg = *req->cfg;
			if (c->cfg.numAttrs) {
				if (gmx_shim__reserve((void **)&c->attrs, &c->attrcap, c->cfg.numAttrs,
						      sizeof *c->attrs)) {
					cmd_free(c);
					pthread_mutex_unlock(&g.lock);
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
			cmd_free(c);
			pthread_mutex_unlock(&g.lock);
			return GMX_SHIM_DIRECT;
		}
		c->info.name = c->fi->name;
		memcpy(c->info.grid, c->r.grid, sizeof c->info.grid);
		memcpy(c->info.block, c->r.block, sizeof c->info.block);
		c->info.shared_mem = c->r.shmem;
	} else if (req->kind == GMX_CMD_COPY || req->kind == GMX_CMD_MEMSET) {
		c->info.bytes = req->n * (req->kind == GMX_CMD_MEMSET ? (size_t)req->width : 1);
	} else if (req->kind == GMX_CMD_EVENT_RECORD || req->kind == GMX_CMD_STREAM_WAIT) {
		evinfo_t *x = ev_lookup(req->ev, req->kind == GMX_CMD_EVENT_RECORD);
		if (req->kind == GMX_CMD_EVENT_RECORD) {
			if (!x) {
				cmd_free(c);
				pthread_mutex_unlock(&g.lock);
				return GMX_SHIM_DIRECT;
			}
			c->evi = x;
		} else if (x && x->pending > 0) {
			c->dep_q = x->last_q;
			c->dep_seq = x->last_seq;
		}
	}
	c->info.seq = ++g.seq;
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
	__atomic_add_fetch(&g.queued, 1, __ATOMIC_RELAXED);
	/* Fast path: the calling thread releases what it may right away, retiring what completed
	 * first when the in-flight bound is what holds it. */
	if (q->head == c && q->ctx == current_ctx()) {
		if (counted(c->info.kind) && g.inflight >= g.inflight_max)
			reap();
		int ok = can_release(c);
		if (!ok && g.inflight > 0) { /* the policy's bound may wait for a completion not yet seen */
			reap();
			ok = can_release(c);
		}
		if (ok) {
			release_head(q);
			pthread_cond_broadcast(&g.cv_done);
		}
	}
	/* The dispatcher is woken only for what needs it: work left queued, or work in flight
	 * while it sleeps without a timeout (it polls completions for the policy). Waking it for
	 * every command would cost a futex call and a lock hand-over per launch. */
	if (g.queued > 0) {
		ensure_dispatcher();
		pthread_cond_signal(&g.cv_work);
	} else if (g.inflight > 0 && g.disp_idle) {
		pthread_cond_signal(&g.cv_work);
	}
	pthread_mutex_unlock(&g.lock);
	return CUDA_SUCCESS;
}

int gmx_shim_capturing(CUstream s, int ptsz)
{
	if (__atomic_load_n(&g.captures, __ATOMIC_RELAXED) == 0)
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
	__atomic_add_fetch(&g.captures, 1, __ATOMIC_RELAXED);
}

void gmx_shim_capture_end(void)
{
	int v = __atomic_load_n(&g.captures, __ATOMIC_RELAXED);
	while (v > 0 &&
	       !__atomic_compare_exchange_n(&g.captures, &v, v - 1, 0, __ATOMIC_RELAXED, __ATOMIC_RELAXED))
		;
}

/* Tells the policy a host thread is about to block on the device, when it has work there
 * (g.lock held). */
static void note_host_wait(void)
{
	if ((g.queued > 0 || g.inflight > 0) && gmx_shim_policy->host_wait)
		gmx_shim_policy->host_wait(gmx_shim_policy->self);
}

CUstream gmx_shim_stream_flush(CUstream s, int ptsz, CUresult *err)
{
	*err = CUDA_SUCCESS;
	ensure_init();
	if (gmx_shim_policy->passthrough)
		return s;
	pthread_mutex_lock(&g.lock);
	/* The per-thread stream is always mapped once queueing is on, so that work passed through
	 * and work queued land on the same driver stream. */
	gmx_sq *q = sq_find(s, ptsz, is_ptds(s, ptsz));
	CUstream out = s;
	note_host_wait();
	if (q) {
		wait_until_q(stream_released, q, q);
		out = q->ptds ? q->real : s;
		*err = q->deferred;
		q->deferred = CUDA_SUCCESS;
	} else if (g.queued > 0 && is_legacy(s, ptsz)) {
		wait_until(all_released, NULL);
	}
	pthread_mutex_unlock(&g.lock);
	return out;
}

CUstream gmx_shim_stream_barrier(CUstream s, int ptsz)
{
	if (GMX_LIKELY(gmx_shim_policy != NULL && gmx_shim_policy->passthrough))
		return s;
	CUresult err;
	CUstream out = gmx_shim_stream_flush(s, ptsz, &err);
	if (err != CUDA_SUCCESS) { /* keep the error for the next synchronisation */
		pthread_mutex_lock(&g.lock);
		gmx_sq *q = sq_find(s, ptsz, 0);
		if (q && q->deferred == CUDA_SUCCESS)
			q->deferred = err;
		pthread_mutex_unlock(&g.lock);
	}
	return out;
}

CUresult gmx_shim_stream_pending(CUstream s, int ptsz, CUstream *out)
{
	ensure_init();
	*out = s;
	if (gmx_shim_policy->passthrough)
		return CUDA_SUCCESS;
	pthread_mutex_lock(&g.lock);
	pump();
	gmx_sq *q = sq_find(s, ptsz, 0);
	CUresult r = CUDA_SUCCESS;
	if (q) {
		if (!stream_released(q))
			r = CUDA_ERROR_NOT_READY;
		else if (q->deferred != CUDA_SUCCESS) {
			r = q->deferred;
			q->deferred = CUDA_SUCCESS;
		}
		if (q->ptds)
			*out = q->real;
	}
	pthread_mutex_unlock(&g.lock);
	return r;
}

void gmx_shim_stream_forget(CUstream s)
{
	ensure_init();
	if (gmx_shim_policy->passthrough)
		return;
	pthread_mutex_lock(&g.lock);
	gmx_sq *q = sq_find(s, 0, 0);
	if (q && q->kind != SQ_LEGACY && !q->ptds) {
		wait_until(stream_retired, q);
		for (gmx_sq **pp = &g.queues; *pp; pp = &(*pp)->next)
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
		q->next = g.retired;
		g.retired = q;
		g.gen++;
	}
	pthread_mutex_unlock(&g.lock);
}

int gmx_shim_event_pending(CUevent e)
{
	ensure_init();
	if (gmx_shim_policy->passthrough)
		return 0;
	pthread_mutex_lock(&g.lock);
	pump();
	evinfo_t *x = ev_lookup(e, 0);
	int pending = x && x->pending > 0;
	pthread_mutex_unlock(&g.lock);
	return pending;
}

void gmx_shim_event_flush(CUevent e, int forget)
{
	ensure_init();
	if (gmx_shim_policy->passthrough)
		return;
	pthread_mutex_lock(&g.lock);
	evinfo_t *x = ev_lookup(e, 0);
	if (!forget)
		note_host_wait();
	if (x)
		wait_until(event_released, x);
	if (x && forget)
		ev_remove(e);
	pthread_mutex_unlock(&g.lock);
}

void gmx_shim_drain_all(void)
{
	if (GMX_LIKELY(gmx_shim_policy != NULL && gmx_shim_policy->passthrough))
		return;
	ensure_init();
	if (gmx_shim_policy->passthrough)
		return;
	pthread_mutex_lock(&g.lock);
	note_host_wait();
	if (g.queued > 0)
		wait_until(all_released, NULL);
	pthread_mutex_unlock(&g.lock);
}

void gmx_shim_queue_quiesce(void)
{
	if (GMX_LIKELY(gmx_shim_policy != NULL && gmx_shim_policy->passthrough))
		return;
	ensure_init();
	pthread_mutex_lock(&g.lock);
	while (g.inflight > 0) {
		reap();
		if (g.inflight == 0)
			break;
		timed_wait(&g.cv_done);
	}
	pthread_mutex_unlock(&g.lock);
}

void gmx_shim_queue_kick(void)
{
	pthread_mutex_lock(&g.lock);
	if (g.queued > 0) {
		ensure_dispatcher();
		pthread_cond_signal(&g.cv_work);
	}
	pthread_mutex_unlock(&g.lock);
}

/* ---- fork ---- */

void gmx_shim_queue_atfork_prepare(void)
{
	pthread_mutex_lock(&g.lock);
}

void gmx_shim_queue_atfork_parent(void)
{
	pthread_mutex_unlock(&g.lock);
}

/* The child has one thread (the one that forked, which holds the lock: prepare) and none of
 * the parent's driver state is usable in it: start over with empty queues (the parent's are
 * left allocated, not freed: they name parent handles). The lock is released, not initialised
 * again; the condition variables may still list the parent's other threads as waiters, which
 * do not exist here, so they alone are initialised afresh. */
void gmx_shim_queue_atfork_child(void)
{
	pthread_cond_init(&g.cv_work, NULL);
	pthread_cond_init(&g.cv_done, NULL);
	g.queues = NULL;
	__atomic_store_n(&g.queued, 0, __ATOMIC_RELAXED);
	g.inflight = 0;
	g.dispatcher = 0;
	g.disp_idle = 0;
	g.captures = 0;
	g.free_cmds = NULL;
	g.gen++;
	memset(g.ev, 0, sizeof g.ev);
	gmx_shim__fn_abandon();
	tl_last_q = NULL;
	tl_disp_ctx = NULL;
	pthread_mutex_unlock(&g.lock);
}

int gmx_shim_straight(CUstream s, int ptsz)
{
	/* g.untracked is written once, by init_once; a thread that reads it before sees 0 (the queue). */
	return __atomic_load_n(&g.untracked, __ATOMIC_RELAXED) && gmx_shim_log_fd < 0 && !is_ptds(s, ptsz) &&
	       __atomic_load_n(&g.queued, __ATOMIC_ACQUIRE) == 0;
}

/* The queue's counts, in the shim log when the process ends (tests read them: which thread
 * released, how many completion events were recorded in the driver). */
__attribute__((destructor)) static void report(void)
{
	if (gmx_shim_log_fd < 0 || !__atomic_load_n(&g_inited, __ATOMIC_ACQUIRE))
		return;
	pthread_mutex_lock(&g.lock);
	gmx_shim_log("queue released caller=%lu dispatcher=%lu leased_straight=%lu completion_events=%lu",
		     g.released_caller, g.released_dispatcher, g.released_leased, g.events_recorded);
	pthread_mutex_unlock(&g.lock);
}
