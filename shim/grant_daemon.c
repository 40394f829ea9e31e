/*
 * The "daemon" grant policy: queue heads are released when gpumuxd grants them.
 *
 * For each command that heads its queue the shim's may_release() pushes a launch notice into
 * the shared "up" ring (once per command) and says "hold" until a grant for its seq arrives in
 * the "down" ring; completions go back up the ring. No system call is made on that path unless
 * the other side sleeps (see daemon/gmx_proto.h). The connection itself is daemon_conn.c's
 * (a thread of its own, which alone connects, holding no lock); managed allocations are
 * daemon_alloc.c's. With GPUMUX_TEMPLATES naming a templates file, each launch's predicted
 * working set (wset.c) precedes its notice, so the planner moves what the kernel touches, not
 * whole allocations.
 *
 * Locks: see daemon_link.h. The policy's calls run under the queue lock, which guards the
 * session too: they take no lock of their own; nothing here blocks.
 */
#define _GNU_SOURCE
#include "daemon_link.h"
#include "queue.h"
#include "tunables.h"
#include "wset.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

gmx_dlink_t gmx_dl = {.lock = PTHREAD_MUTEX_INITIALIZER,
		      .first_cv = PTHREAD_COND_INITIALIZER,
		      .alloc_lock = PTHREAD_MUTEX_INITIALIZER,
		      .sock = -1,
		      .efd_up = -1,
		      .efd_down = -1};

_Static_assert(GMX_CMD_COPY == GMX_PROTO_KIND_COPY && GMX_CMD_MEMSET == GMX_PROTO_KIND_MEMSET &&
		   GMX_CMD_KIND_COUNT == GMX_CMD_KIND_COUNT_PROTO,
	       "gmx_proto.h's command kinds follow gmx_grant.h");
_Static_assert(GMX_AHEAD_MAX_PER_STREAM == GMX_AHEAD_MAX,
	       "GPUMUX_SHIM_AHEAD's maximum is the protocol's bound");

static int grant_may_release(void *self, const gmx_shim_cmd_t *cmd);
static void grant_completed(void *self, uint64_t seq);
static void grant_host_wait(void *self);
static void grant_prepare(void *self);
static int grant_lease_release(void *self, const gmx_shim_cmd_t *cmd, const uint64_t *done, unsigned ndone,
			       unsigned *room);
static void grant_flush(void *self);
static void grant_completed_n(void *self, const uint64_t *seqs, unsigned n);
static int grant_ahead(void *self, const gmx_shim_cmd_t *cmd);
static void completed_locked(uint64_t seq, int64_t now);
static void completed_many(const uint64_t *seqs, unsigned n, int64_t now);

static const gmx_grant_ops_t g_daemon = {"daemon",
					 0,
					 grant_may_release,
					 NULL,
					 NULL,
					 grant_completed,
					 grant_host_wait,
					 grant_prepare,
					 grant_lease_release,
					 grant_flush,
					 grant_completed_n,
					 grant_ahead};

int gmx_dl_active(void)
{
	gmx_shim_load();
	return gmx_shim_policy == &g_daemon;
}

/* ---- seq table (open addressing; the queue lock held) ---- */

static size_t seq_hash(uint64_t s)
{
	return (size_t)((s * 0x9E3779B97F4A7C15ull) >> 40) & (SEQ_TABLE - 1);
}

seq_slot_t *gmx_dl_seq_find(uint64_t s)
{
	for (size_t i = seq_hash(s), n = 0; n < SEQ_TABLE; i = (i + 1) & (SEQ_TABLE - 1), n++) {
		if (gmx_dl.tbl[i].state == ST_FREE)
			return NULL;
		if (gmx_dl.tbl[i].state != ST_TOMB && gmx_dl.tbl[i].seq == s)
			return &gmx_dl.tbl[i];
	}
	return NULL;
}

/* Empties the seq table (its rebuild starts here: the lease stays). */
static void tbl_clear(void)
{
	memset(gmx_dl.tbl, 0, sizeof gmx_dl.tbl);
	gmx_dl.used = 0;
	gmx_dl.granted = 0;
}

void gmx_dl_seq_clear(void)
{
	tbl_clear();
	memset(&gmx_dl.lease, 0, sizeof gmx_dl.lease);
	gmx_dl.unchecked = 0;
	gmx_dl.up_room = 0;
	gmx_dl.run_n = 0;
	gmx_dl.ahead_last = 0;
	gmx_dl.ahead_now = 0;
}

static int live(int st)
{
	return st == ST_NOTICED || st == ST_GRANTED || st == ST_AHEAD;
}

int gmx_dl_flush(void)
{
	if (gmx_dl_run_push() != 0)
		gmx_dl_desync_locked(); /* cannot happen: the run's entry has its room reserved */
	if (gmx_dl.unchecked == 0)
		return 0;
	gmx_dl.unchecked = 0;
	gmx_dl.n_looks++;
	if (gmx_ring_batch_wake(
		&gmx_dl.region->up)) { /* the daemon sleeps with no deadline, or the ring fills */
		uint64_t one = 1;
		if (write(gmx_dl.efd_up, &one, sizeof one) < 0 && errno != EAGAIN)
			gmx_shim_log("daemon: eventfd write failed: %s", strerror(errno));
	}
	return 1;
}

int gmx_dl_run_push(void)
{
	if (!gmx_dl.run_n)
		return 0;
	gmx_ring_entry_t e = gmx_dl.run;
	uint32_t more = gmx_dl.run_n - 1;
	e.a |= e.type == GMX_UP_RELEASED ? more << GMX_RUN_SHIFT : more;
	/* Its room was reserved when the run began (gmx_dl_up_room counts it as taken, and every
	 * other push to the up ring pushes the run first), so the daemon's head is not read here:
	 * its cache line is the daemon's to write, and a look at it cost a transfer from the
	 * daemon's core at every run. */
	gmx_ring_push_lazy(&gmx_dl.region->up, &e);
	gmx_dl.run_n = 0;
	gmx_dl.n_entries++;
	if (++gmx_dl.unchecked >= GMX_BATCH_CHECK)
		gmx_dl_flush();
	return 0;
}

/* Nonzero when a batched entry (type, a, seq, x, y) extends the run being gathered. */
static inline int run_extends(uint32_t type, uint32_t a, uint64_t seq, uint64_t x, uint64_t y)
{
	const gmx_ring_entry_t *r = &gmx_dl.run;
	if (!gmx_dl.run_n || type != r->type || a != r->a || x != r->x || seq != r->seq + gmx_dl.run_n ||
	    gmx_dl.run_n >= GMX_RUN_MAX)
		return 0;
	/* completions seen together share their time; releases follow within the span */
	return type == GMX_UP_COMPLETE
		   ? y == r->y
		   : (int64_t)y >= gmx_dl.run_t0 && (int64_t)y - gmx_dl.run_t0 <= GMX_RUN_SPAN_NS;
}

/* Extends the run being gathered by the batched entry (type, a, seq, x, y) if it may (1), else
 * 0 and nothing changes. Inline: most leased releases only extend the run. */
static inline int run_grow(uint32_t type, uint32_t a, uint64_t seq, uint64_t x, uint64_t y)
{
	if (!run_extends(type, a, seq, x, y))
		return 0;
	gmx_dl.run_n++;
	gmx_dl.run.y = y; /* a run of releases: heard at its last one's time */
	gmx_dl.n_batched++;
	return 1;
}

int gmx_dl_push_batched(uint32_t type, uint32_t a, uint64_t seq, uint64_t x, uint64_t y)
{
	if (run_grow(type, a, seq, x, y))
		return 0;
	if (gmx_dl_run_push() != 0 || !gmx_dl_up_room(1))
		return -1;
	gmx_ring_entry_t e = {.type = type, .a = a, .seq = seq, .x = x, .y = y};
	gmx_dl.up_room--;
	if (type == GMX_UP_RELEASED || type == GMX_UP_COMPLETE) { /* a run begins; its room is taken */
		gmx_dl.run = e;
		gmx_dl.run_n = 1;
		gmx_dl.run_t0 = (int64_t)y;
		gmx_dl.n_batched++;
		return 0;
	}
	gmx_ring_push_lazy(&gmx_dl.region->up, &e);
	gmx_dl.n_batched++;
	gmx_dl.n_entries++;
	if (++gmx_dl.unchecked >= GMX_BATCH_CHECK)
		gmx_dl_flush();
	return 0;
}

int gmx_dl_push_batched_n(uint32_t type, uint32_t a, uint64_t seq, uint32_t n, uint64_t x, uint64_t y)
{
	while (n > 0) {
		if (!run_extends(type, a, seq, x, y)) { /* a run begins (or an entry of its own) */
			if (gmx_dl_push_batched(type, a, seq, x, y) != 0)
				return -1;
			seq++;
			n--;
			continue;
		}
		uint32_t k = GMX_RUN_MAX - gmx_dl.run_n; /* run_extends: at least 1 */
		if (k > n)
			k = n;
		gmx_dl.run_n += k;
		gmx_dl.run.y = y;
		gmx_dl.n_batched += k;
		seq += k;
		n -= k;
	}
	return 0;
}

int gmx_dl_up_room(uint32_t need)
{
	if (gmx_dl.up_room >= need)
		return 1;
	uint32_t space = gmx_ring_space(&gmx_dl.region->up);
	gmx_dl.up_room = space > 0 && gmx_dl.run_n ? space - 1 : space; /* the run's entry is taken */
	return gmx_dl.up_room >= need;
}

int gmx_dl_apply_down(const gmx_ring_entry_t *e)
{
	if (e->type == GMX_DOWN_GRANT) {
		seq_slot_t *g = gmx_dl_seq_find(e->seq);
		if (g && g->state == ST_NOTICED) {
			g->state = ST_GRANTED;
			gmx_dl.granted++;
			return 1;
		}
	} else if (e->type == GMX_DOWN_LEASE) {
		/* From here on (in the up ring's order) releases count against this lease. */
		if (gmx_dl_push_batched(GMX_UP_LEASE_ACK, 0, e->seq, gmx_dl.lease.last_seq, 0) != 0) {
			gmx_shim_lease_apply(&gmx_dl.lease, 0, 0); /* unacknowledged: nothing under it */
			gmx_dl_desync_locked();
			return 0;
		}
		gmx_dl_flush(); /* rare: the daemon may look for it at once */
		gmx_shim_lease_apply_seen(&gmx_dl.lease, e->a, (int64_t)e->x, e->y);
	}
	return 0;
}

static seq_slot_t *seq_insert(uint64_t s)
{
	if (gmx_dl.used >= SEQ_TABLE / 2) { /* rebuild without tombstones */
		static seq_slot_t old[SEQ_TABLE];
		memcpy(old, gmx_dl.tbl, sizeof old);
		tbl_clear();
		for (size_t i = 0; i < SEQ_TABLE; i++)
			if (live(old[i].state)) {
				seq_slot_t *n = seq_insert(old[i].seq);
				n->state = old[i].state;
				gmx_dl.granted += n->state == ST_GRANTED;
			}
		if (gmx_dl.used >= SEQ_TABLE / 2)
			return NULL; /* really full: the caller holds the command and retries */
	}
	size_t i = seq_hash(s);
	while (live(gmx_dl.tbl[i].state))
		i = (i + 1) & (SEQ_TABLE - 1);
	if (gmx_dl.tbl[i].state == ST_FREE)
		gmx_dl.used++;
	gmx_dl.tbl[i].seq = s;
	gmx_dl.tbl[i].state = ST_NOTICED;
	return &gmx_dl.tbl[i];
}

/* ---- the grant policy ---- */

/* Nonzero when the down ring holds an entry (drain_inline's own first look, inline: on a leased
 * release it is nearly always empty). The queue lock held. */
static inline int down_pending(void)
{
	const gmx_ring_t *r = &gmx_dl.region->down;
	return __atomic_load_n(&r->head, __ATOMIC_RELAXED) != __atomic_load_n(&r->tail, __ATOMIC_ACQUIRE);
}

/* Applies what the down ring holds, in order, up to a migration order (only the connection
 * thread runs those): grants and leases count before the next release. The check is one load
 * of the ring's tail when nothing came. The queue lock held. */
static void drain_inline(void)
{
	gmx_ring_t *r = &gmx_dl.region->down;
	while (!gmx_dl.migrating) {
		uint32_t h = __atomic_load_n(&r->head, __ATOMIC_RELAXED);
		uint32_t t = __atomic_load_n(&r->tail, __ATOMIC_ACQUIRE);
		if (h == t || t - h > GMX_RING_ENTRIES ||
		    r->e[h & (GMX_RING_ENTRIES - 1)].type == GMX_DOWN_MIGRATE)
			break;
		gmx_ring_entry_t e;
		if (gmx_ring_pop(r, &e) != 1)
			break;
		gmx_dl_apply_down(&e);
	}
}

/* FNV-1a over name and shape: the kernel's identity (0 for what is not a kernel). The name's
 * part comes from cmd->name_hash when the caller has it (cached per function). */
static uint64_t kernel_id(const gmx_shim_cmd_t *cmd)
{
	if (!cmd->name)
		return 0;
	uint64_t kid = cmd->name_hash ? cmd->name_hash : gmx_shim_name_hash(cmd->name);
	for (int i = 0; i < 3; i++)
		kid = ((kid ^ cmd->grid[i]) * 1099511628211ull ^ cmd->block[i]) * 1099511628211ull;
	return (kid ^ cmd->shared_mem) * 1099511628211ull;
}

/* Releases cmd under the lease: reported in the next batch (its RELEASED matches an
 * announcement ahead, slot `ahead`, if it had one). 1, or 0 when it cannot be booked (the up
 * ring short of room for it and the completions owed: it is held and asked about again). The
 * queue lock held. */
static int lease_release(const gmx_shim_cmd_t *cmd, int64_t now, seq_slot_t *ahead)
{
	/* Room for this release and every leased completion owed, so that none is ever lost: when
	 * the daemon is behind, the command waits (and the daemon is woken) instead. */
	if (!gmx_dl_up_room(gmx_dl.lease.now + 2 + GMX_LEASE_RING_RESERVE)) {
		gmx_ring_t *r = &gmx_dl.region->up;
		__atomic_thread_fence(__ATOMIC_SEQ_CST);
		if (__atomic_exchange_n(&r->waiting, 0, __ATOMIC_RELAXED)) {
			uint64_t one = 1;
			if (write(gmx_dl.efd_up, &one, sizeof one) < 0 && errno != EAGAIN)
				gmx_shim_log("daemon: eventfd write failed: %s", strerror(errno));
		}
		return 0;
	}
	/* the run's extension inline; a run begins (or is pushed) in gmx_dl_push_batched */
	uint64_t kid = kernel_id(cmd);
	if (!run_grow(GMX_UP_RELEASED, (uint32_t)cmd->kind, cmd->seq, kid, (uint64_t)now) &&
	    gmx_dl_push_batched(GMX_UP_RELEASED, (uint32_t)cmd->kind, cmd->seq, kid, (uint64_t)now) != 0)
		return 0;
	gmx_shim_lease_released(&gmx_dl.lease, cmd->seq);
	gmx_dl.leased_total++;
	if (ahead) {
		ahead->state = ST_TOMB;
		gmx_dl.ahead_now--;
	}
	return 1;
}

/* Pushes cmd's predicted ranges (an oversubscribed client's launches), then its `type` entry
 * (NOTICE or AHEAD), once the up ring has room for them and `spare` entries more; 0, or -1
 * (nothing pushed). A NOTICE wakes a sleeping daemon (it waits for a grant); an AHEAD goes as a
 * batched entry: the daemon reads it at its next wake (the completion of the work before it, a
 * notice) or look, so a stream of launches behind a held head costs it one read, not one wake
 * and one plan each. The queue lock held. */
static int announce(uint32_t type, const gmx_shim_cmd_t *cmd, int ranges, uint32_t spare)
{
	gmx_tpl_range_t ws[GMX_RANGES_MAX];
	uint32_t nws = 0;
	if (ranges && gmx_dl.oversub && cmd->kind <= GMX_CMD_LAUNCH_COOP)
		gmx_shim_wset_predict(cmd, ws, &nws);
	if (!gmx_dl_up_room(nws + 1 + spare))
		return -1;
	int (*push)(uint32_t, uint32_t, uint64_t, uint64_t, uint64_t) =
	    type == GMX_UP_AHEAD ? gmx_dl_push_batched : gmx_dl_push_up;
	for (uint32_t i = 0; i < nws; i++)
		push(GMX_UP_RANGE, 0, cmd->seq, ws[i].addr, ws[i].length);
	return push(type, (uint32_t)cmd->kind, cmd->seq, kernel_id(cmd), cmd->bytes);
}

/* Announces cmd (its predicted ranges first, unless it was announced ahead with them: slot
 * `ahead`); the grant comes later. The queue lock held. */
static void notice(const gmx_shim_cmd_t *cmd, seq_slot_t *ahead)
{
	/* An oversubscribed client's predicted working set goes first, so the daemon has it when
	 * the notice may be granted at once. */
	seq_slot_t *s = ahead ? ahead : seq_insert(cmd->seq);
	if (!s)
		return; /* table full: notice again at the next look */
	if (announce(GMX_UP_NOTICE, cmd, !ahead, 0) != 0) {
		s->state = ahead ? ST_AHEAD : ST_TOMB; /* ring full: notice again at the next look */
		return;
	}
	s->state = ST_NOTICED;
	if (ahead)
		gmx_dl.ahead_now--;
}

/* The announcement ahead (protocol 7): an oversubscribed client's command waiting behind its
 * stream's head goes up with its predicted ranges, so that gpumuxd's rule 6 plans the client's
 * windows beyond the next; it asks no grant (its NOTICE does, without the ranges, in its turn).
 * Seqs rise from one to the next (a stream's older command offered after a newer one of
 * another stream is noticed in its turn only), at most GMX_AHEAD_MAX are outstanding, and they
 * leave half the up ring to notices and completions. */
static int grant_ahead(void *self, const gmx_shim_cmd_t *cmd)
{
	(void)self;
	if (!__atomic_load_n(&gmx_dl.connected, __ATOMIC_ACQUIRE) || !gmx_dl.connected || !gmx_dl.oversub ||
	    gmx_dl.desync)
		return 0;
	if (cmd->seq <= gmx_dl.ahead_last || !GMX_PROTO_KIND_TOUCHES_MEMORY((uint32_t)cmd->kind) ||
	    gmx_dl_seq_find(cmd->seq))
		return 1; /* announced already, noticed, or nothing for the plan */
	if (gmx_dl.ahead_now >= GMX_AHEAD_MAX)
		return 0;
	seq_slot_t *s = seq_insert(cmd->seq);
	if (!s)
		return 0;
	if (announce(GMX_UP_AHEAD, cmd, 1, GMX_RING_ENTRIES / 2) != 0) {
		s->state = ST_TOMB;
		return 0;
	}
	s->state = ST_AHEAD;
	gmx_dl.ahead_last = cmd->seq;
	gmx_dl.ahead_now++;
	gmx_dl.n_ahead++;
	return 1;
}

static int grant_may_release(void *self, const gmx_shim_cmd_t *cmd)
{
	(void)self;
	if (!__atomic_load_n(&gmx_dl.connected, __ATOMIC_ACQUIRE))
		return 1; /* pass-through while no daemon */
	int ok = 0;
	if (!gmx_dl.connected) {
		ok = 1;
	} else {
		/* A revoke (or a grant) already in the ring counts before this release. */
		drain_inline();
		seq_slot_t *s = gmx_dl_seq_find(cmd->seq);
		seq_slot_t *ahead = s && s->state == ST_AHEAD ? s : NULL; /* announced, not noticed */
		if (s && !ahead) {
			ok = s->state == ST_GRANTED; /* a noticed command waits for its grant */
		} else if (gmx_dl.lease.inflight) {
			int64_t now = gmx_dl_stamp_ns();
			int d = gmx_shim_lease_decide(&gmx_dl.lease, now, gmx_dl.migrating || gmx_dl.desync,
						      gmx_dl.granted);
			if (d == GMX_LEASE_RELEASE)
				ok = lease_release(cmd, now, ahead);
			else if (d == GMX_LEASE_ASK)
				notice(cmd, ahead);
			/* GMX_LEASE_HOLD: asked again once a leased command completed */
		} else {
			notice(cmd, ahead);
		}
	}
	return ok;
}

/* The leased fast path (gmx_grant_ops_t.lease_release): the same decision as may_release for a
 * command never announced, without announcing it when the lease does not cover it (the queue
 * then asks through may_release). */
static int grant_lease_release(void *self, const gmx_shim_cmd_t *cmd, const uint64_t *done, unsigned ndone,
			       unsigned *room)
{
	(void)self;
	*room = UINT_MAX; /* no bound while passing through */
	if (!__atomic_load_n(&gmx_dl.connected, __ATOMIC_ACQUIRE))
		return GMX_GRANT_LEASED; /* pass-through while no daemon */
	int r = GMX_GRANT_QUEUE;
	gmx_dl.n_lease_calls++;
	if (!gmx_dl.connected) {
		r = GMX_GRANT_LEASED;
	} else {
		/* One clock reading serves the completions seen just now and this release. */
		int64_t now = gmx_dl_stamp_ns();
		if (ndone) { /* most releases have none: no call for them */
			completed_many(done, ndone, now);
			if (gmx_dl_run_push() != 0) /* their run goes up now, whatever follows */
				gmx_dl_desync_locked();
		}
		if (down_pending()) /* a revoke already in the ring counts before this release */
			drain_inline();
		if (gmx_dl.lease.inflight) {
			int d = gmx_shim_lease_decide(&gmx_dl.lease, now, gmx_dl.migrating || gmx_dl.desync,
						      gmx_dl.granted);
			if (d == GMX_LEASE_RELEASE)
				r = lease_release(cmd, now, NULL) ? GMX_GRANT_LEASED : GMX_GRANT_FULL;
			else if (d == GMX_LEASE_HOLD)
				r = GMX_GRANT_HELD;
			if (r == GMX_GRANT_LEASED)
				*room = gmx_shim_lease_room(&gmx_dl.lease, gmx_dl.granted);
		}
	}
	return r;
}

/* Commands seqs[0..n) (oldest first) seen complete together at now (as completed_locked): a
 * stretch of consecutive seqs that are the lease book's oldest leaves the book in one step and
 * goes up as one run, whatever its length (the usual case: a stream of leased launches found
 * idle); the rest one by one. The queue lock held, connected. */
static void completed_many(const uint64_t *seqs, unsigned n, int64_t now)
{
	for (unsigned i = 0; i < n;) {
		unsigned k = 1;
		while (i + k < n && seqs[i + k] == seqs[i] + k)
			k++;
		if (k > 1 && gmx_shim_lease_completed_oldest(&gmx_dl.lease, seqs[i], k)) {
			if (gmx_dl_push_batched_n(GMX_UP_COMPLETE, 0, seqs[i], k, 0,
						  (uint64_t)(now ? now : gmx_dl_stamp_ns())) != 0)
				gmx_dl_desync_locked();
		} else {
			for (unsigned j = 0; j < k; j++)
				completed_locked(seqs[i + j], now);
		}
		i += k;
	}
}

/* Command seq completed, seen at now (CLOCK_MONOTONIC ns; 0: read the clock when it is leased).
 * the queue lock held, connected. */
static void completed_locked(uint64_t seq, int64_t now)
{
	if (gmx_shim_lease_completed(&gmx_dl.lease, seq)) {
		/* Leased work completes in batches: the daemon reads it on its own schedule. */
		if (gmx_dl_push_batched(GMX_UP_COMPLETE, 0, seq, 0,
					(uint64_t)(now ? now : gmx_dl_stamp_ns())) != 0)
			gmx_dl_desync_locked();
		return;
	}
	seq_slot_t *s = gmx_dl_seq_find(seq);
	if (s && s->state == ST_GRANTED) {
		s->state = ST_TOMB;
		gmx_dl.granted--;
		if (gmx_dl_push_up(GMX_UP_COMPLETE, 0, seq, 0, 0) != 0)
			gmx_dl_desync_locked(); /* a lost completion would stall the daemon's view: start over
						 */
	}
}

static void grant_completed(void *self, uint64_t seq)
{
	(void)self;
	if (!__atomic_load_n(&gmx_dl.connected, __ATOMIC_ACQUIRE))
		return;
	if (gmx_dl.connected) {
		completed_locked(seq, 0);
		/* pushed now, as every completion reported: no run waits for a look that may not come */
		if (gmx_dl_run_push() != 0)
			gmx_dl_desync_locked();
	}
}

/* Completions seen together (a stream found idle): one lock and one time for all of them. */
static void grant_completed_n(void *self, const uint64_t *seqs, unsigned n)
{
	(void)self;
	if (!__atomic_load_n(&gmx_dl.connected, __ATOMIC_ACQUIRE))
		return;
	if (gmx_dl.connected) {
		int64_t now = gmx_dl.lease.now ? gmx_dl_stamp_ns() : 0; /* leased ones carry a time */
		completed_many(seqs, n, now);
		if (gmx_dl_run_push() != 0) /* their run goes up now: the daemon reads it on its schedule */
			gmx_dl_desync_locked();
	}
}

/* A hint for the policy (fikit marks the next kernel as following a synchronisation). It
 * never wakes the daemon: the work being waited for completes later, and the daemon reads
 * the hint, in ring order, before that completion. Lost when the ring is full, which costs
 * nothing but the hint. */
static void grant_host_wait(void *self)
{
	(void)self;
	if (!__atomic_load_n(&gmx_dl.connected, __ATOMIC_ACQUIRE))
		return;
	if (gmx_dl.connected) {
		gmx_ring_entry_t e = {.type = GMX_UP_HOST_WAIT};
		if (gmx_dl_run_push() == 0 && gmx_dl_up_room(1) &&
		    gmx_ring_push_quiet(&gmx_dl.region->up, &e) == 0)
			gmx_dl.up_room--;
	}
}

/* The dispatcher's look (gmx_grant_ops_t.flush): wakes the daemon if it must read the batched
 * entries pushed since the last look. */
static void grant_flush(void *self)
{
	(void)self;
	if (!__atomic_load_n(&gmx_dl.connected, __ATOMIC_ACQUIRE))
		return;
	if (gmx_dl.connected)
		gmx_dl_flush();
}

/* Only the caller, without the queue lock: the connection thread starts, and the first
 * caller waits for its first attempt (see gmx_dl_start). */
static void grant_prepare(void *self)
{
	(void)self;
	if (__atomic_load_n(&gmx_dl.thread_started, __ATOMIC_ACQUIRE))
		return; /* gmx_dl_start's own first look, here: a call on every command otherwise */
	gmx_dl_start();
}

/* ---- fork ---- */

void gmx_dl_atfork_prepare_alloc(void)
{
	pthread_mutex_lock(&gmx_dl.alloc_lock);
}

void gmx_dl_atfork_prepare(void)
{
	pthread_mutex_lock(&gmx_dl.lock);
}

void gmx_dl_atfork_parent(void)
{
	pthread_mutex_unlock(&gmx_dl.lock);
}

void gmx_dl_atfork_parent_alloc(void)
{
	pthread_mutex_unlock(&gmx_dl.alloc_lock);
}

/* The child has one thread (the one that forked, which holds both locks) and must not touch
 * the parent's session. It starts with no connection and no connection thread, and with no
 * allocations: the parent's CUDA memory is not the child's (CUDA state does not survive fork),
 * so the child registers with the daemon as a client of its own, owning only what it
 * allocates itself. The condition variable may still list parent threads as waiters (they do
 * not exist here), so it alone is initialised afresh. */
void gmx_dl_atfork_child(void)
{
	gmx_dl_forget_session(); /* the child's copies of the parent's descriptors and mapping */
	gmx_dl.thread_started = 0;
	gmx_dl.first_done = 0;
	gmx_dl.migrating = 0;
	gmx_dl.mig_ctx = NULL;
	gmx_dl.nallocs = 0;
	gmx_dl.alloc_bytes = 0;
	gmx_dl.refused_bytes = 0;
	pthread_cond_init(&gmx_dl.first_cv, NULL);
	pthread_mutex_unlock(&gmx_dl.lock);
}

/* ---- set-up ---- */

const gmx_grant_ops_t *gmx_grant_daemon(void)
{
	const char *dir = getenv("GPUMUX_RUNTIME_DIR");
	snprintf(gmx_dl.dir, sizeof gmx_dl.dir, "%s", dir && *dir ? dir : GMX_RUNTIME_DIR_DEFAULT);
	const char *name = getenv("GPUMUX_NAME");
	if (!name || !*name) {
		static char comm[64];
		FILE *f = fopen("/proc/self/comm", "r");
		if (f && fgets(comm, sizeof comm, f))
			comm[strcspn(comm, "\n")] = 0;
		if (f)
			fclose(f);
		name = comm[0] ? comm : "task";
	}
	snprintf(gmx_dl.name, sizeof gmx_dl.name, "%s", name);
	const char *pr = getenv("GPUMUX_PRIORITY");
	gmx_dl.priority = 5;
	if (pr && *pr) {
		char *end;
		long v = strtol(pr, &end, 10);
		if (*end || v < 0 || v > 9)
			fprintf(stderr, "gpumux shim: GPUMUX_PRIORITY=%s is not 0..9; using 5\n", pr);
		else
			gmx_dl.priority = (int)v;
	}
	const char *os = getenv("GPUMUX_OVERSUBSCRIBE");
	gmx_dl.oversub = os && strcmp(os, "1") == 0;
	gmx_dl.reconnect_ms = GMX_RECONNECT_MS_DEFAULT;
	const char *rc = getenv("GPUMUX_RECONNECT_MS");
	if (rc && *rc) {
		char *end;
		long v = strtol(rc, &end, 10);
		if (*end || v < GMX_RECONNECT_MS_MIN || v > GMX_RECONNECT_MS_MAX)
			fprintf(stderr,
				"gpumux shim: GPUMUX_RECONNECT_MS=%s is out of range [%d, %d]; "
				"using %d\n",
				rc, GMX_RECONNECT_MS_MIN, GMX_RECONNECT_MS_MAX, GMX_RECONNECT_MS_DEFAULT);
		else
			gmx_dl.reconnect_ms = v;
	}
	const char *tpl = getenv("GPUMUX_TEMPLATES");
	if (gmx_dl.oversub && tpl && *tpl)
		gmx_shim_wset_load(tpl);

	return &g_daemon;
}

/* The link's counts, in the shim log when the process ends (tests read them: how many batched
 * entries went up per look at the daemon, how many policy calls the leased launches took). */
__attribute__((destructor)) static void report(void)
{
	if (gmx_shim_log_fd < 0 || gmx_shim_policy != &g_daemon)
		return;
	gmx_shim_queue_lock();
	gmx_shim_log("daemon link leased=%llu batched=%llu entries=%llu looks=%llu lease_calls=%llu "
		     "clock_reads=%llu stamp=%s ahead=%llu",
		     (unsigned long long)gmx_dl.leased_total, (unsigned long long)gmx_dl.n_batched,
		     (unsigned long long)gmx_dl.n_entries, (unsigned long long)gmx_dl.n_looks,
		     (unsigned long long)gmx_dl.n_lease_calls, (unsigned long long)gmx_dl.n_clock,
		     gmx_dl_stamp_tsc() ? "tsc" : "clock", (unsigned long long)gmx_dl.n_ahead);
	gmx_shim_queue_unlock();
}
