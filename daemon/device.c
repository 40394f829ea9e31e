/*
 * The device the policy drives in gpumuxd: its clock and timer, submit = a grant, migrate = an
 * order, lease = a lease, all sent down the clients' rings (behind outstanding evictions where
 * ring order asks for it); and whether some client waits for the daemon (how long the loop may
 * sleep). The clients themselves, their up rings and commands are client.c's.
 */
#include "server_internal.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/timerfd.h>
#include <unistd.h>

int64_t gmxd__dev_now(void *ctx)
{
	(void)ctx;
	if (SRV.now_ovr)
		return SRV.now_ovr;
	/* The policy's clock never goes back: an entry read later but stamped earlier than what
	 * the policy already saw is shown at that time. */
	int64_t now = gmxd__now_ns();
	if (now < SRV.last_ovr)
		return SRV.last_ovr;
	SRV.last_ovr = now;
	return now;
}

void gmxd__dev_set_timer(void *ctx, int64_t at)
{
	(void)ctx;
	/* A policy asks again at nearly every event (fikit: at each launch and completion): the
	 * loop reads timer_at before it sleeps and sleeps no longer (no system call per request). */
	SRV.timer_at = at > 0 ? at : 1;
}

void gmxd__arm_timer(int64_t at)
{
	struct itimerspec it = {0};
	if (at <= 0)
		at = 1; /* "now": an absolute time in the past fires at once */
	it.it_value.tv_sec = at / 1000000000LL;
	it.it_value.tv_nsec = at % 1000000000LL;
	SRV.timer_armed = at;
	if (timerfd_settime(SRV.tfd, TFD_TIMER_ABSTIME, &it, NULL) != 0)
		gmxd_log("timerfd_settime: %s", strerror(errno));
}

/* Pushes to a client's down ring, waking it if it sleeps; a full ring cuts it off. */
void gmxd__push_down(client_t *c, const gmx_ring_entry_t *e)
{
	if (c->dead || c->cut)
		return;
	int w = 0;
	if (gmx_ring_push(&c->region->down, e, &w) != 0) {
		gmxd__cut(c, "its grant ring is full (it stopped reading)");
		return;
	}
	if (e->type == GMX_DOWN_GRANT) {
		dcmd_t *d = gmxd__hash_take(c, e->seq, 0);
		if (d)
			d->gidx = ++c->g_pushed;
	}
	if (w) {
		uint64_t one = 1;
		SRV.loop.wakes_sent++;
		if (write(c->efd_down, &one, sizeof one) < 0 && errno != EAGAIN)
			gmxd_log("client %u: eventfd write: %s", c->id, strerror(errno));
	}
}

/* Sends now, or after the outstanding evictions when there are any (keeps ring order). */
void gmxd__send_action(client_t *c, const gmx_ring_entry_t *e)
{
	if (SRV.evicts_outstanding == 0 && !SRV.act_head) {
		gmxd__push_down(c, e);
		return;
	}
	action_t *a = malloc(sizeof *a);
	if (!a) {
		gmxd__cut(c, "out of memory queueing its grant");
		return;
	}
	*a = (action_t){NULL, c->task, c->id, *e};
	c->actions++;
	if (SRV.act_tail)
		SRV.act_tail->next = a;
	else
		SRV.act_head = a;
	SRV.act_tail = a;
}

void gmxd__flush_actions(void)
{
	while (SRV.evicts_outstanding == 0 && SRV.act_head) {
		action_t *a = SRV.act_head;
		SRV.act_head = a->next;
		if (!SRV.act_head)
			SRV.act_tail = NULL;
		client_t *c = &SRV.cl[a->task];
		if (c->used && c->id == a->client_id) { /* else its slot was freed since, count and all */
			c->actions--;
			gmxd__push_down(c, &a->e);
		}
		free(a);
	}
	gmxd__lease_retry(); /* the orders for a client whose lease was held may all be out now */
}

int gmxd__has_actions(const client_t *c)
{
	return c->actions != 0; /* counted, not walked: asked at every grant and for every held lease */
}

int gmxd__dev_submit(void *ctx, gmx_cmd_t *cmd)
{
	(void)ctx;
	dcmd_t *d = (dcmd_t *)cmd;
	client_t *c = d->cl;
	if (d->state == D_ORPHAN || c->dead || c->cut) {
		if (d->state == D_QUEUED)
			c->queued--;
		d->state = D_ORPHAN;
		d->dnext = SRV.deferred; /* completes at once, after this policy call */
		SRV.deferred = d;
		return 0;
	}
	int64_t now = gmxd__now_ns();
	d->state = D_GRANTED;
	c->queued--;
	gmxd__owe(c, now);
	c->inflight++;
	c->grants++;
	SRV.total_grants++;
	c->last_grant_ns = now;
	uint32_t lat = (uint32_t)(now - d->notice_ns > 0xffffffffLL ? 0xffffffffLL : now - d->notice_ns);
	c->lat_ns[c->nlat++ % GMXD_LAT_SAMPLES] = lat;
	if (c->priority <= 2)
		SRV.hp_lat[SRV.n_hp_lat++ % GMXD_LAT_SAMPLES] = lat;
	gmxd__metrics_grant(c, now - d->notice_ns, d->kind <= 2);
	int touches = GMX_PROTO_KIND_TOUCHES_MEMORY(d->kind);
	int loads = touches && gmxd__plan_memory(c, d);
	/* Rule 6: the LP client's coming windows, evictions now (before the grant in its ring), loads
	 * after the grant (while d computes). */
	gmxd_prefetch_t pf = {0};
	if (touches)
		gmxd__prefetch_plan(c, d, &pf);
	gmx_ring_entry_t e = {.type = GMX_DOWN_GRANT, .seq = d->cseq};
	if (!loads && !gmxd__has_actions(c))
		gmxd__push_down(c, &e); /* its memory is in: no eviction elsewhere concerns it */
	else
		gmxd__send_action(c, &e);
	gmxd__prefetch_send(c, &pf);
	return 0;
}

/* Orders from a policy that plans memory itself: buffer = the task's allocation index. */
int gmxd__dev_migrate(void *ctx, const gmx_migration_t *m)
{
	(void)ctx;
	if (m->task >= GMX_MAX_TASKS || !SRV.cl[m->task].used)
		return -ENOENT;
	client_t *c = &SRV.cl[m->task];
	if (m->buffer >= (uint32_t)c->nallocs)
		return -ENOENT;
	dalloc_t *a = &c->allocs[m->buffer];
	uint64_t off = m->offset < a->size ? m->offset : a->size;
	uint64_t len = m->length < a->size - off ? m->length : a->size - off;
	if (!m->to_device)
		gmxd__lease_memory_moves(c);
	gmx_ring_entry_t e = {.type = GMX_DOWN_MIGRATE,
			      .a = m->to_device ? 1 : 0,
			      .seq = ++SRV.tokens,
			      .x = a->ptr + off,
			      .y = len};
	gmxd__send_action(c, &e);
	return 0;
}

static void send_lease(client_t *c, uint32_t inflight, int64_t until)
{
	uint32_t id = ++c->lease_id;
	c->lsent[c->nlsent++] = (__typeof__(c->lsent[0])){id, inflight, until, c->g_pushed};
	if (inflight) {
		c->leases_sent++;
		SRV.total_leases++;
	} else {
		c->revokes++;
		SRV.total_revokes++;
	}
	/* y: the ALLOC entries read from this session so far; the client applies a lease only when
	 * it has pushed no allocation since (one the daemon has not seen is not resident). */
	gmx_ring_entry_t e = {
	    .type = GMX_DOWN_LEASE, .a = inflight, .seq = id, .x = (uint64_t)until, .y = c->allocs_read};
	/* At once, never behind evictions: a revoke must precede the evictions that follow it, and
	 * an oversubscribed client is leased only once nothing for it waits (lease_memory_in). */
	gmxd__push_down(c, &e);
}

/* Whether an oversubscribed client may hold a lease: every allocation it has is resident in
 * the planner's model (its leased commands are not announced, so whole-allocation prediction),
 * no eviction of its memory is outstanding, and no order for it waits behind other clients'
 * evictions (its loads reach its ring before the lease, and it runs them first). */
static int lease_memory_in(const client_t *c)
{
	gmxd_mem_slice_t all = {c->task, 1, NULL, 0};
	return !c->evicts && !gmxd__has_actions(c) && gmxd_mem_missing(SRV.mem, &all) == 0;
}

/* Sends the lease {n, until} unless it is the one last sent (or in effect); held while the
 * client has GMXD_LEASES_PENDING unacknowledged, an oversubscribed client's grant one slot
 * earlier, so that a revoke before an eviction always goes at once. */
static void offer_lease(client_t *c, uint32_t n, int64_t until)
{
	uint32_t room = GMXD_LEASES_PENDING - (c->oversub && n ? 1u : 0u);
	if (c->nlsent >= room) { /* an acknowledgement making room sends the policy's latest */
		c->want_set = 1;
		return;
	}
	c->want_set = 0;
	if (c->nlsent) { /* unchanged from the last one sent: nothing to say */
		if (c->lsent[c->nlsent - 1].inflight == n && c->lsent[c->nlsent - 1].until == until)
			return;
	} else if (c->l_inflight == n && c->l_until == until) {
		return;
	}
	send_lease(c, n, until);
}

/* The policy's lease for a task: sent down its ring; an oversubscribed client's only while its
 * memory is in (lease_memory_in), else held (mem_held) and sent once it is. */
void gmxd__dev_lease(void *ctx, uint32_t task, const gmx_lease_t *l)
{
	(void)ctx;
	if (task >= GMX_MAX_TASKS)
		return;
	client_t *c = &SRV.cl[task];
	if (!c->used || c->dead || c->cut)
		return;
	uint32_t n = l ? l->inflight : 0;
	int64_t until = n ? l->until : 0;
	c->pol = (gmx_lease_t){n, until};
	c->mem_held = c->oversub && n && !lease_memory_in(c);
	if (c->mem_held) {
		SRV.lease_mem_held = 1;
		n = 0, until = 0;
	}
	offer_lease(c, n, until);
}

void gmxd__lease_memory_moves(client_t *c)
{
	if (!c->oversub || c->dead || c->cut)
		return;
	if (c->pol.inflight)
		c->mem_held = SRV.lease_mem_held = 1;
	offer_lease(c, 0, 0);
}

void gmxd__lease_retry(void)
{
	if (!SRV.lease_mem_held)
		return;
	int held = 0;
	GMXD_FOR_LIVE(t) {
		client_t *c = &SRV.cl[t];
		if (c->mem_held && !c->dead && !c->cut && lease_memory_in(c))
			gmxd__dev_lease(NULL, c->task, &c->pol);
		held |= c->mem_held && !c->dead && !c->cut;
	}
	SRV.lease_mem_held = held;
}

int gmxd__leases_active(void)
{
	GMXD_FOR_LIVE(t) {
		const client_t *c = &SRV.cl[t];
		if ((c->l_inflight || c->nlsent || c->leased_now))
			return 1;
	}
	return 0;
}

int gmxd__someone_waits(void)
{
	if (SRV.evicts_outstanding || SRV.act_head)
		return 1;
	GMXD_FOR_LIVE(t) {
		const client_t *c = &SRV.cl[t];
		if (c->queued || c->want_set)
			return 1;
	}
	return 0;
}

int64_t gmxd__drain_interval(int64_t adaptive_ns)
{
	/* A ring that fills fast (a read found GMXD_DRAIN_BATCH entries in it) keeps the short reads: its
	 * client would otherwise reach the fill mark, or hold releases for room, between two reads. */
	if (gmxd__someone_waits() || SRV.ring_batch_max >= GMXD_DRAIN_BATCH)
		return adaptive_ns;
	return GMXD_LEASE_IDLE_DRAIN_MS * 1000000LL;
}
