/* Releasing queued work to the driver: the ordering rules, the policy's say, the leased fast
 * path; the dispatcher thread, and waiting (pumping) until a condition holds. */
#define _GNU_SOURCE
#include "queue_internal.h"

#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

int gmx_q_counted(gmx_cmd_kind_t k)
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
	for (const gmx_sq *o = gmx_q.queues; o; o = o->next) {
		if (o == q || o->ctx != q->ctx)
			continue;
		if (q->kind == SQ_LEGACY && o->kind == SQ_BLOCKING && !released_through(o, c->info.seq))
			return 0;
		if (q->kind == SQ_BLOCKING && o->kind == SQ_LEGACY && !released_through(o, c->info.seq))
			return 0;
	}
	return 1;
}

int gmx_q_can_release(const gmx_cmd *c)
{
	if (gmx_q_counted(c->info.kind) && gmx_q.inflight >= gmx_q.inflight_max)
		return 0;
	if (!deps_met(c))
		return 0;
	return gmx_shim_policy->may_release(gmx_shim_policy->self, &c->info);
}

void gmx_q_cmd_free(gmx_cmd *c)
{
	c->next = gmx_q.free_cmds;
	gmx_q.free_cmds = c;
}

/* Releases the head of q (which gmx_q_can_release approved). Lock held. */
void gmx_q_release_head(gmx_sq *q)
{
	gmx_cmd *c = q->head;
	if (tl_dispatcher && tl_disp_ctx != q->ctx) {
		__typeof__(&cuCtxSetCurrent) set = GMX_REAL(cuCtxSetCurrent);
		if (set && set(q->ctx) == CUDA_SUCCESS)
			tl_disp_ctx = q->ctx;
	}
	int tracks = gmx_q_counted(c->info.kind) && !gmx_shim_direct.untracked;
	if (tracks)
		gmx_q_mark_tail(q, 0);
	CUresult r = gmx_shim__cmd_call_driver(c, q->real);
	q->head = c->next;
	if (!q->head)
		q->tail = NULL;
	__atomic_sub_fetch(&gmx_q.queued, 1, __ATOMIC_RELAXED); /* read without the lock: enqueue */
	if (r != CUDA_SUCCESS && q->deferred == CUDA_SUCCESS)
		q->deferred = r;
	if (c->evi)
		c->evi->pending--;
	int tracked = r == CUDA_SUCCESS && tracks && gmx_q_track(q, c->info.seq);
	if (tl_dispatcher)
		gmx_q.released_dispatcher++;
	else
		gmx_q.released_caller++;
	if (gmx_shim_policy->released)
		gmx_shim_policy->released(gmx_shim_policy->self, &c->info);
	/* What no completion event tracks (event records, stream waits, a release the driver
	 * refused, an event that could not be recorded) is complete for the policy now: a
	 * policy that counts released work (the daemon) must not wait for it forever. */
	if (!tracked && gmx_shim_policy->completed)
		gmx_shim_policy->completed(gmx_shim_policy->self, c->info.seq);
	gmx_shim__cmd_log(c, r);
	gmx_q_cmd_free(c);
}

/* Offers the policy q's held head and the GPUMUX_SHIM_AHEAD commands behind it, oldest first,
 * until it takes no more. Lock held. */
static void offer_ahead(const gmx_sq *q)
{
	int i = 0;
	for (const gmx_cmd *c = q->head; c && i <= gmx_q.ahead_max; c = c->next, i++)
		if (!gmx_shim_policy->ahead(gmx_shim_policy->self, &c->info))
			return;
}

/* Releases whatever may go now; a caller thread only touches its current context's queues
 * (releasing into another context would change the caller's current context). Lock held. */
int gmx_q_pump(void)
{
	gmx_q_reap();
	CUcontext mine = tl_dispatcher ? NULL : gmx_q_current_ctx();
	int any = 0, progress = 1;
	while (progress) {
		progress = 0;
		for (gmx_sq *q = gmx_q.queues; q; q = q->next) {
			if (!tl_dispatcher && q->ctx != mine)
				continue;
			while (q->head && gmx_q_can_release(q->head)) {
				gmx_q_release_head(q);
				progress = any = 1;
			}
			if (q->head && gmx_shim_policy->ahead && gmx_q.ahead_max > 0)
				offer_ahead(q);
		}
		if (progress)
			gmx_q_reap();
	}
	if (any)
		pthread_cond_broadcast(&gmx_q.cv_done);
	return any;
}

void gmx_q_timed_wait(pthread_cond_t *cv)
{
	gmx_q_timed_wait_on(cv, &gmx_q.lock);
}

void gmx_q_timed_wait_on(pthread_cond_t *cv, pthread_mutex_t *m)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	ts.tv_nsec += gmx_q.poll_ns;
	while (ts.tv_nsec >= 1000000000L) {
		ts.tv_nsec -= 1000000000L;
		ts.tv_sec++;
	}
	pthread_cond_timedwait(cv, m, &ts);
	if (m == &gmx_q.lock)
		gmx_q_relocked();
}

void gmx_q_wake_dispatcher(void)
{
	pthread_cond_signal(&gmx_q.cv_work);
	if (gmx_q.disp_polling) {
		pthread_mutex_lock(&gmx_q.poll_lock);
		gmx_q.poll_kicked = 1;
		pthread_cond_signal(&gmx_q.cv_poll);
		pthread_mutex_unlock(&gmx_q.poll_lock);
	}
}

/* The dispatcher's poll while leased launches go on: it waits a poll period without the queue
 * lock, and as long as leased launches went on meanwhile (the launching thread reports its own
 * releases and completions, and pushes a run as soon as a launch does not extend it) and nothing
 * was queued or woke it, it waits again without taking the lock at all: taking it would stall
 * the launching thread, which holds it for most of each launch (a futex wait and wake on both
 * sides). *seen: the leased releases counted at its last look. Called and returns with the queue
 * lock held. */
static void dispatcher_poll(unsigned long *seen)
{
	gmx_q.disp_polling = 1;
	pthread_mutex_unlock(&gmx_q.lock);
	for (;;) {
		pthread_mutex_lock(&gmx_q.poll_lock);
		if (!gmx_q.poll_kicked)
			gmx_q_timed_wait_on(&gmx_q.cv_poll, &gmx_q.poll_lock);
		int kicked = gmx_q.poll_kicked;
		gmx_q.poll_kicked = 0;
		pthread_mutex_unlock(&gmx_q.poll_lock);
		unsigned long now = __atomic_load_n(&gmx_q.released_leased, __ATOMIC_RELAXED);
		if (kicked || now == *seen || __atomic_load_n(&gmx_q.queued, __ATOMIC_RELAXED) > 0)
			break;
		*seen = now;
		__atomic_store_n(&gmx_q.polls_skipped, gmx_q.polls_skipped + 1, __ATOMIC_RELAXED);
	}
	gmx_q_lock();
	gmx_q.disp_polling = 0;
}

/* The dispatcher: releases queued work and, while work is in flight, polls completions every
 * poll period for the policy. With nothing queued or in flight it sleeps without a timeout, but
 * only after a whole period without a leased launch: a caller finding it asleep with work in
 * flight wakes it (a futex call and a lock hand-over), so a stream of short leased launches,
 * each complete before the next, would otherwise wake it once per launch. While leased launches
 * go on and nothing is queued it polls without the queue lock (dispatcher_poll). */
static void *dispatcher_main(void *arg)
{
	(void)arg;
	tl_dispatcher = 1;
	gmx_q_lock();
	unsigned long leased_seen = gmx_q.released_leased;
	for (;;) {
		gmx_q_pump();
		if (gmx_shim_policy->flush)
			gmx_shim_policy->flush(gmx_shim_policy->self);
		int quiet = gmx_q.released_leased == leased_seen;
		leased_seen = gmx_q.released_leased;
		if (gmx_q.queued == 0 && gmx_q.inflight == 0 && quiet) {
			gmx_q.disp_idle = 1;
			gmx_q.disp_sleeps++;
			pthread_cond_wait(&gmx_q.cv_work, &gmx_q.lock);
			gmx_q_relocked();
			gmx_q.disp_idle = 0;
		} else if (gmx_q.queued == 0 && !quiet) {
			dispatcher_poll(&leased_seen);
		} else
			gmx_q_timed_wait(&gmx_q.cv_work);
	}
	return NULL;
}

/* Starts the dispatcher once work has to wait (for a grant, a slot, or another thread). */
void gmx_q_ensure_dispatcher(void)
{
	if (gmx_q.dispatcher)
		return;
	pthread_t t;
	pthread_attr_t a;
	pthread_attr_init(&a);
	pthread_attr_setdetachstate(&a, PTHREAD_CREATE_DETACHED);
	if (pthread_create(&t, &a, dispatcher_main, NULL) == 0)
		gmx_q.dispatcher = 1;
	else
		fprintf(stderr, "gpumux shim: cannot start the dispatcher thread; queued work is "
				"released only from API calls\n");
	pthread_attr_destroy(&a);
}

/* When q's head is held (the pump just left it queued) and q has work in flight, waits in the
 * driver for q's oldest in-flight command (the lock released meanwhile) instead of for the
 * dispatcher's next poll: a synchronising thread then releases the next command as soon as a
 * slot frees, whichever bound held it, the shim's in-flight bound or the policy's (a lease's
 * depth); a poll period (GPUMUX_SHIM_POLL_US) later would leave the GPU idle between kernels
 * longer than that. What else may free the head meanwhile (a grant, another stream's release)
 * the dispatcher releases. The event stays valid: q's events are destroyed only once no thread
 * waits on them (gmx_q_stream_retired). 1 if it waited. Lock held. */
static int wait_oldest(gmx_sq *q)
{
	__typeof__(&cuEventSynchronize) es = GMX_REAL(cuEventSynchronize);
	__typeof__(&cuStreamSynchronize) ss = GMX_REAL(cuStreamSynchronize);
	if (!q || !q->head || q->rlen == 0 || !es || !ss)
		return 0;
	gmx_q_ensure_dispatcher();
	/* The oldest without an event is the stream's newest in flight (gmx_q_mark_tail). Waiting on
	 * the stream itself would also wait for what another thread (the dispatcher, on a grant)
	 * releases onto it meanwhile: the next command would then go only after that one ended, the
	 * GPU dry between. So it is marked first (or retired, if the stream is idle already), when
	 * q is of the calling thread's current context: an event made here belongs to it. */
	if (!q->ring[q->rhead] && q->ctx == gmx_q_current_ctx()) {
		gmx_q_mark_tail(q, 0);
		if (q->rlen == 0)
			return 1;
	}
	CUevent e = q->ring[q->rhead];
	CUstream s = q->real;
	q->syncers++;
	pthread_mutex_unlock(&gmx_q.lock);
	if (e)
		es(e);
	else /* no event could be recorded: the stream itself */
		ss(s);
	gmx_q_lock();
	q->syncers--;
	return 1;
}

/* The first queue of the calling thread's current context whose head is held while it has work
 * in flight (a wait for everything queued can go on in the driver there), or NULL. Lock held. */
static gmx_sq *held_queue(void)
{
	CUcontext mine = gmx_q_current_ctx();
	for (gmx_sq *q = gmx_q.queues; q; q = q->next)
		if (q->head && q->rlen > 0 && q->ctx == mine)
			return q;
	return NULL;
}

/* Waits, pumping, until done(arg) holds; waits in the driver for the oldest command of q (or,
 * with any, of whichever queue is held with work in flight) while its head is held
 * (wait_oldest), else for the dispatcher. Lock held. */
static void wait_loop(int (*done)(const void *), const void *arg, gmx_sq *q, int any)
{
	while (!done(arg)) {
		gmx_q_pump();
		if (done(arg))
			break;
		if (wait_oldest(any ? held_queue() : q))
			continue;
		gmx_q_ensure_dispatcher();
		gmx_q_wake_dispatcher();
		gmx_q_timed_wait(&gmx_q.cv_done);
	}
}

void gmx_q_wait_until_q(int (*done)(const void *), const void *arg, gmx_sq *q)
{
	wait_loop(done, arg, q, 0);
}

void gmx_q_wait_until(int (*done)(const void *), const void *arg)
{
	wait_loop(done, arg, NULL, 0);
}

void gmx_q_wait_all_released(void)
{
	wait_loop(gmx_q_all_released, NULL, NULL, 1);
}

/* Nonzero once q, and what it must follow (legacy semantics), has no queued command. */
int gmx_q_stream_released(const void *arg)
{
	const gmx_sq *q = arg;
	if (q->head)
		return 0;
	if (q->kind == SQ_NONBLOCKING)
		return 1;
	for (const gmx_sq *o = gmx_q.queues; o; o = o->next)
		if (o->ctx == q->ctx && o->head &&
		    ((q->kind == SQ_LEGACY && o->kind == SQ_BLOCKING) || o->kind == SQ_LEGACY))
			return 0;
	return 1;
}

int gmx_q_all_released(const void *arg)
{
	(void)arg;
	return gmx_q.queued == 0;
}

int gmx_q_stream_retired(const void *arg)
{
	const gmx_sq *q = arg;
	if (!gmx_q_stream_released(arg))
		return 0;
	if (q->rlen > 0)
		gmx_q_reap();
	return q->rlen == 0 && q->syncers == 0;
}

int gmx_q_event_released(const void *arg)
{
	const evinfo_t *x = arg;
	return x->pending == 0;
}

/* ---- the interface used by the hooks ---- */

gmx_cmd *gmx_q_cmd_alloc(void)
{
	gmx_cmd *c = gmx_q.free_cmds;
	if (c) {
		/* Only what enqueue does not always write is reset (the whole command is ~480
		 * bytes; its buffers are kept): r is copied, cfg and extra are written where read. */
		gmx_q.free_cmds = c->next;
		memset(&c->info, 0, sizeof c->info);
		c->fi = NULL;
		c->evi = NULL;
		c->dep_q = NULL;
		c->dep_seq = 0;
		return c;
	}
	return calloc(1, sizeof *c);
}

/* The checks before a leased launch of f asks the policy: room in the in-flight rings, the
 * stream's context current, no extra buffer to log. f's kernel identity, or NULL with *err:
 * GMX_SHIM_DIRECT (queue it instead) or the driver's error for a bad handle. Lock held. */
static inline fninfo_t *leased_fn(CUfunction f, void **extra, const gmx_sq *q, CUresult *err)
{
	*err = GMX_SHIM_DIRECT;
	/* The lease bounds what goes under it; the rings hold ring_cap (GMX_SHIM_LEASED_MAX or more). */
	if (gmx_q.inflight >= gmx_q.ring_cap)
		gmx_q_reap();
	if (gmx_q.inflight >= gmx_q.ring_cap) {
		gmx_q.div_running++;
		return NULL;
	}
	if (q->ctx != gmx_q_current_ctx()) {
		gmx_q.div_other++;
		return NULL;
	}
	if (gmx_shim_log_fd >= 0 && extra) {
		gmx_q.div_other++;
		return NULL; /* its log line shows the copy of the extra buffer */
	}
	*err = CUDA_SUCCESS;
	return gmx_shim__fn_lookup(f, err); /* a handle the driver rejects, reported as the queue would */
}

/* The command info of a launch of fi on stream s (seq: the next), every field written (no
 * zeroing pass over it first). */
static inline gmx_shim_cmd_t leased_info(gmx_cmd_kind_t kind, uintptr_t s, const fninfo_t *fi,
					 const unsigned grid[3], const unsigned block[3], unsigned shmem)
{
	return (gmx_shim_cmd_t){.kind = kind,
				.seq = gmx_q.seq + 1,
				.stream = s,
				.name = fi->name,
				.name_hash = fi->name_hash,
				.grid = {grid[0], grid[1], grid[2]},
				.block = {block[0], block[1], block[2]},
				.shared_mem = shmem,
				.nparams = 0,
				.param_offset = NULL,
				.param_size = NULL,
				.param_data = NULL,
				.bytes = 0};
}

/* The policy's decision for the leased launch info onto q: 1 when it goes now (counted as
 * released under the lease), 0 when it must be queued instead (the reason counted). Completions
 * the lease's bound waits for are reaped first. Lock held. */
static inline int leased_decide(gmx_sq *q, const gmx_shim_cmd_t *info)
{
	const gmx_grant_ops_t *p = gmx_shim_policy;
	uint64_t done[GMX_DONE_BATCH];
	unsigned nd = 0, room = 0;
	int looked = 0;
	if (gmx_q.lease_full && gmx_q.inflight > 0) {
		/* The last leased release filled the lease's bound: this one needs a completion, so the
		 * stream is asked first and the policy hears the answer with the decision, in one call.
		 * One query of the stream says whether all of it completed. */
		nd = gmx_q_collect_idle(q, done);
		if (nd == 0)
			gmx_q_reap();
		looked = 1;
	}
	int d = p->lease_release(p->self, info, done, nd, &room);
	if (d == GMX_GRANT_HELD && gmx_q.inflight > 0 && (!looked || nd == 0)) {
		/* The bound waits for a completion not yet seen (a bound narrowed meanwhile, or the work
		 * was still running when asked first): the stream is asked again. */
		gmx_q.lease_reasks += looked; /* the first look found nothing complete */
		nd = gmx_q_collect_idle(q, done);
		if (nd == 0)
			gmx_q_reap();
		d = p->lease_release(p->self, info, done, nd, &room);
	}
	for (int i = 0; d == GMX_GRANT_FULL && i < GMX_FULL_YIELDS; i++) {
		/* The scheduler was told to read what this process reported: a moment for it (as a
		 * driver whose push buffer is full waits for the GPU), rather than the queue. */
		gmx_q.full_yields++;
		sched_yield();
		d = p->lease_release(p->self, info, NULL, 0, &room);
	}
	gmx_q.lease_full = d == GMX_GRANT_LEASED && room == 0;
	if (d == GMX_GRANT_LEASED)
		return 1;
	if (d == GMX_GRANT_FULL)
		gmx_q.div_ring_full++;
	else if (d == GMX_GRANT_QUEUE)
		gmx_q.div_unleased++;
	else if (gmx_q.inflight > 0)
		gmx_q.div_running++;
	else
		gmx_q.div_other++;
	return 0;
}

/* Before the driver gets a launch the policy leased onto q: its seq taken, the dispatcher
 * running (it looks for completions and hands the batches over). Work seen still running at the
 * last look (a pipeline): what this one follows is marked, so each completion is seen as it
 * happens; short kernels are left unmarked: the next query finds them all complete at once.
 * Lock held. */
static inline void leased_go(gmx_sq *q)
{
	gmx_q.seq++;
	if (!gmx_q.dispatcher)
		gmx_q_ensure_dispatcher();
	if (q->busy)
		gmx_q_mark_tail(q, 0);
}

/* After the driver's answer r for the leased launch info (kernel fi, parameters params): booked
 * in flight on q, counted, logged, and the policy told. r. Lock held. */
static inline CUresult leased_done(gmx_sq *q, const gmx_shim_cmd_t *info, const fninfo_t *fi, void **params,
				   CUresult r)
{
	const gmx_grant_ops_t *p = gmx_shim_policy;
	int tracked = r == CUDA_SUCCESS && gmx_q_track(q, info->seq);
	/* read by a polling dispatcher without the lock */
	__atomic_store_n(&gmx_q.released_leased, gmx_q.released_leased + 1, __ATOMIC_RELAXED);
	if (gmx_shim_log_fd >= 0) /* looked at here: a call on every leased launch otherwise */
		gmx_shim__req_log(info, fi, params, r);
	if (p->released)
		p->released(p->self, info);
	if (!tracked && p->completed)
		p->completed(p->self, info->seq);
	return r;
}

/* A launch on stream s (queue q) released under the policy's lease straight from the caller's
 * arguments: nothing of the process is queued, so no ordering rule can hold it, and nothing is
 * copied. Completions the lease's bound waits for are reaped here first. The driver's result,
 * or GMX_SHIM_DIRECT when it must be queued (not a launch, another context, the in-flight bound,
 * no lease or its bound). Lock held. */
CUresult gmx_q_leased_straight(const gmx_shim_req_t *req, CUstream s, gmx_sq *q)
{
	if (!gmx_q_is_launch(req->kind))
		return GMX_SHIM_DIRECT;
	CUresult err;
	const fninfo_t *fi = leased_fn(req->f, req->extra, q, &err);
	if (!fi)
		return err;
	gmx_shim_cmd_t info;
	if (req->kind == GMX_CMD_LAUNCH_EX) {
		const CUlaunchConfig *cf = req->cfg;
		const unsigned grid[3] = {cf->gridDimX, cf->gridDimY, cf->gridDimZ};
		const unsigned block[3] = {cf->blockDimX, cf->blockDimY, cf->blockDimZ};
		info = leased_info(req->kind, (uintptr_t)s, fi, grid, block, cf->sharedMemBytes);
	} else {
		info = leased_info(req->kind, (uintptr_t)s, fi, req->grid, req->block, req->shmem);
	}
	if (!leased_decide(q, &info))
		return GMX_SHIM_DIRECT;
	leased_go(q);
	return leased_done(q, &info, fi, req->params, gmx_shim__req_call_driver(req, q->real));
}

CUresult gmx_q_leased_launch(const gmx_shim_launch_t *l, gmx_sq *q)
{
	CUresult err;
	const fninfo_t *fi = leased_fn(l->f, l->extra, q, &err);
	if (!fi)
		return err;
	const gmx_shim_cmd_t info =
	    leased_info(GMX_CMD_LAUNCH, (uintptr_t)l->stream, fi, l->grid, l->block, l->shmem);
	if (!leased_decide(q, &info))
		return GMX_SHIM_DIRECT;
	leased_go(q);
	__typeof__(&cuLaunchKernel) launch = GMX_REAL(cuLaunchKernel);
	CUresult r = GMX_LIKELY(launch != NULL)
			 ? launch(l->f, l->grid[0], l->grid[1], l->grid[2], l->block[0], l->block[1],
				  l->block[2], l->shmem, q->real, l->params, l->extra)
			 : gmx_shim_missing(GMX_SYM_cuLaunchKernel);
	return leased_done(q, &info, fi, l->params, r);
}
