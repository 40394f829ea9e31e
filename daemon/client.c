/*
 * A client of gpumuxd: its up ring (notices, ranges, completions, allocations, hints), its
 * commands as the policy sees them, and its departure. The device the policy drives (grants,
 * migration orders and leases down its ring) is device.c's.
 *
 * Policy calls never re-enter: work that must reach the policy while it is running (a
 * command of a dead client being submitted, which completes at once) goes to a deferred list
 * drained after the call returns. Cutting a client off also happens only at the top of the
 * loop, never from inside a policy call.
 */
#include "server_internal.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

/* The time of the ring batch being read (taken once its indices were read: every entry in it
 * was written before), or 0 outside gmxd__poll_rings. */
static int64_t drain_now;

static int64_t real_now(void)
{
	return drain_now ? drain_now : gmxd__now_ns();
}

void gmxd__owe(client_t *c, int64_t now)
{
	if (c->inflight == 0 && c->evicts == 0)
		c->last_progress = now;
}

void gmxd__cut_err(client_t *c, int error, const char *why)
{
	if (c->cut || c->dead)
		return;
	c->cut = 1;
	c->cut_error = error;
	SRV.cut_pending = 1;
	snprintf(c->cut_reason, sizeof c->cut_reason, "%s", why);
}

void gmxd__cut(client_t *c, const char *why)
{
	gmxd__cut_err(c, EPROTO, why);
}

/* Commands freed, kept for the next ones (a leased release and its completion would otherwise
 * cost an allocation and a free per kernel): at most GMXD_DCMD_POOL, released by gmxd__fini. */
static dcmd_t *dcmd_pool;
static uint32_t dcmd_pooled;

static dcmd_t *dcmd_new(void)
{
	dcmd_t *d = dcmd_pool;
	if (!d)
		return calloc(1, sizeof *d);
	dcmd_pool = d->dnext;
	dcmd_pooled--;
	memset(d, 0, sizeof *d);
	return d;
}

static void dcmd_free(dcmd_t *d)
{
	free(d->ranges);
	if (dcmd_pooled >= GMXD_DCMD_POOL) {
		free(d);
		return;
	}
	d->dnext = dcmd_pool;
	dcmd_pool = d;
	dcmd_pooled++;
}

void gmxd__dcmd_pool_free(void)
{
	while (dcmd_pool) {
		dcmd_t *d = dcmd_pool;
		dcmd_pool = d->dnext;
		free(d);
	}
	dcmd_pooled = 0;
}

void gmxd__live(const client_t *c, int on)
{
	uint32_t t = c->task;
	if (t >= GMX_MAX_TASKS)
		return;
	if (on)
		SRV.live[t / 64] |= 1ull << (t % 64);
	else
		SRV.live[t / 64] &= ~(1ull << (t % 64));
}

/* Forgets what c announced ahead (it left, or its slot is freed). */
static void ahead_clear(client_t *c)
{
	for (uint32_t i = 0; i < c->nahead; i++)
		dcmd_free(c->ahead[i]);
	c->nahead = 0;
}

/* Takes c's command seq out of what it announced ahead: the command, or NULL if not announced. */
static dcmd_t *ahead_take(client_t *c, uint64_t seq)
{
	for (uint32_t i = 0; i < c->nahead; i++)
		if (c->ahead[i]->cseq == seq) {
			dcmd_t *d = c->ahead[i];
			memmove(&c->ahead[i], &c->ahead[i + 1], (c->nahead - i - 1) * sizeof c->ahead[0]);
			c->nahead--;
			return d;
		}
	return NULL;
}

void gmxd__free_slot(client_t *c)
{
	gmxd__live(c, 0);
	ahead_clear(c);
	for (int h = 0; h < HASH; h++)
		for (dcmd_t *d = c->hash[h], *nx; d; d = nx) {
			nx = d->hnext;
			dcmd_free(d);
		}
	free(c->allocs);
	memset(c, 0, sizeof *c);
}

/* Frees a dead client's slot once the policy holds none of its commands. */
static void maybe_free_slot(client_t *c)
{
	if (c->dead && c->refs == 0)
		gmxd__free_slot(c);
}


/* Completes what was deferred during policy calls. */
void gmxd__run_deferred(void)
{
	while (SRV.deferred) {
		dcmd_t *d = SRV.deferred;
		SRV.deferred = d->dnext;
		client_t *c = d->cl;
		gmxd__hash_take(c, d->cseq, 1);
		SRV.ops->on_complete(SRV.pol, &d->c);
		dcmd_free(d);
		c->refs--;
		maybe_free_slot(c);
	}
}

/* ---- clients ---- */

/* The client picks its seqs: a secret multiplier keeps them from piling into one bucket. They
 * come in order, so a run of GMXD_HASH_RUN of them shares one cache line of buckets: reading a
 * batch from many clients, whose lines are cold after the loop's sleep, costs a miss per run of
 * commands rather than one per command. Which line a run takes stays the secret's (its top bits:
 * runs that differ in any bit may land anywhere), one bucket per seq within it. */
size_t gmxd__hash_of(uint64_t cseq)
{
	_Static_assert(HASH % GMXD_HASH_RUN == 0 && HASH / GMXD_HASH_RUN == 32, "32 lines of buckets");
	uint64_t line = ((cseq / GMXD_HASH_RUN) * SRV.hash_key) >> 59;
	return (size_t)(line * GMXD_HASH_RUN + cseq % GMXD_HASH_RUN);
}

static void hash_put(client_t *c, dcmd_t *d)
{
	size_t h = gmxd__hash_of(d->cseq);
	d->hnext = c->hash[h];
	c->hash[h] = d;
}

/* Where seq cseq's command is linked in c's hash: *result is NULL when c has none. */
static dcmd_t **hash_slot(client_t *c, uint64_t cseq)
{
	dcmd_t **pp = &c->hash[gmxd__hash_of(cseq)];
	while (*pp && (*pp)->cseq != cseq)
		pp = &(*pp)->hnext;
	return pp;
}

dcmd_t *gmxd__hash_take(client_t *c, uint64_t cseq, int remove)
{
	dcmd_t **pp = hash_slot(c, cseq), *d = *pp;
	if (d && remove)
		*pp = d->hnext;
	return d;
}

/* Ends a client: everything it held is released now (in-flight commands complete for the
 * policy, queued ones complete when the policy hands them out, memory is forgotten). */
void gmxd__drop_client(client_t *c, const char *why)
{
	if (c->dead || !c->used)
		return;
	gmxd_log("client %u (pid %d, %s): %s; releasing %u in flight, %u queued, %llu bytes", c->id,
		 (int)c->pid, c->name, why, c->inflight, c->queued, (unsigned long long)c->alloc_bytes);
	gmxd__metrics_leave(c);
	c->dead = 1;
	gmxd__live(c, 0);
	gmxd__ep_del(c->fd);
	gmxd__ep_del(c->efd_up);
	close(c->fd);
	close(c->efd_up);
	close(c->efd_down);
	munmap(c->region, sizeof(gmx_shm_region_t));
	SRV.evicts_outstanding -= c->evicts;
	c->evicts = 0;
	gmxd_mem_drop(SRV.mem, c->task);
	free(c->allocs);
	c->allocs = NULL;
	c->nallocs = 0;
	c->alloc_bytes = 0;
	c->nr = 0;
	ahead_clear(c);
	/* Its commands stay in its hash as orphans until the policy lets go of them. */
	for (int i = 0; i < HASH; i++)
		for (dcmd_t *d = c->hash[i]; d; d = d->hnext) {
			if (d->state == D_GRANTED) {
				d->dnext = SRV.deferred;
				SRV.deferred = d;
			}
			d->state = D_ORPHAN; /* a queued one is still in the policy's queue */
		}
	c->inflight = c->queued = 0;
	c->g_known_inflight = 0;
	/* gmxd__run_deferred() may free the slot (and zero *c) once its last command
	 * completes: keep the task's index for the policy and its name for the profile store. */
	uint32_t task = c->task;
	char name[GMX_NAME_MAX];
	memcpy(name, c->name, sizeof name);
	/* task_done first: the policy then hands out its queued commands at once (they complete
	 * unrun, and the slot is free for a new client), and learns nothing from the killed work. */
	SRV.in_policy = 1;
	SRV.ops->task_done(SRV.pol, task);
	gmxd__run_deferred();
	SRV.in_policy = 0;
	gmxd__flush_actions();
	/* A task's profile is saved when the last client of its name leaves (at most every
	 * GMXD_SAVE_INTERVAL_NS; and at shutdown), so a daemon that is killed later loses at most
	 * that much of what that task taught it. */
	int same_name = 0;
	for (int t = 0; t < GMX_MAX_TASKS; t++)
		same_name += SRV.cl[t].used && !SRV.cl[t].dead && strcmp(SRV.cl[t].name, name) == 0;
	if (!same_name)
		gmxd__store_left(name, gmxd__now_ns());
	maybe_free_slot(c);
}

static void protocol_error(client_t *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void protocol_error(client_t *c, const char *fmt, ...)
{
	char why[sizeof((client_t *)0)->cut_reason];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(why, sizeof why, fmt, ap);
	va_end(ap);
	SRV.protocol_errors++;
	gmxd__cut(c, why);
}

/* What the policy sees of a notice's command kind (gmx_proto.h's). */
static gmx_op_kind_t op_kind(uint32_t a)
{
	return a == GMX_PROTO_KIND_COPY	    ? GMX_OP_COPY_H2D
	       : a == GMX_PROTO_KIND_MEMSET ? GMX_OP_MEMSET
					    : GMX_OP_KERNEL;
}

/* A command the client released under its lease (reported in a batch): checked against the
 * lease in effect at that point of the ring, then handed to the policy already in flight. */
static void leased_release(client_t *c, const gmx_ring_entry_t *e)
{
	unsigned long long seq = (unsigned long long)e->seq;
	if (gmxd__hash_take(c, e->seq, 0)) {
		protocol_error(c, "malformed message: a leased release of seq %llu, already announced", seq);
		return;
	}
	if (e->a >= GMX_CMD_KIND_COUNT_PROTO || c->nr) {
		protocol_error(c, "malformed message: a leased release of seq %llu (kind %u, %u ranges before it)",
			       seq, e->a, c->nr);
		return;
	}
	if (!c->l_inflight) {
		protocol_error(c, "malformed message: a leased release of seq %llu without a lease", seq);
		return;
	}
	if (c->leased_now + c->g_known_inflight >= c->l_inflight) {
		protocol_error(c,
			       "malformed message: a leased release of seq %llu beyond its lease (%u in flight: "
			       "%u leased and %u granted before it)",
			       seq, c->l_inflight, c->leased_now, c->g_known_inflight);
		return;
	}
	if (c->l_until && (int64_t)e->y >= c->l_until) {
		protocol_error(c, "malformed message: a leased release of seq %llu %lld ns after its lease ended",
			       seq, (long long)((int64_t)e->y - c->l_until));
		return;
	}
	dcmd_t *was = ahead_take(c, e->seq); /* announced ahead: it is here now */
	if (was)
		dcmd_free(was);
	if (c->queued + c->inflight >= GMXD_CMDS_PER_CLIENT) {
		protocol_error(c, "malformed message: more than %d commands announced and not completed",
			       GMXD_CMDS_PER_CLIENT);
		return;
	}
	dcmd_t *d = dcmd_new();
	if (!d) {
		gmxd__cut(c, "out of memory for its leased release");
		return;
	}
	int64_t now = real_now();
	d->cseq = e->seq;
	d->kind = e->a;
	d->cl = c;
	d->state = D_GRANTED;
	d->notice_ns = (int64_t)e->y;
	d->c.seq = ++SRV.seq;
	d->c.task = c->task;
	d->c.kind = op_kind(e->a);
	d->c.kernel_id = e->x;
	d->c.leased = 1;
	hash_put(c, d);
	c->refs++;
	gmxd__owe(c, now);
	c->inflight++;
	c->leased_now++;
	c->leased++;
	c->st.kernels += d->kind <= 2; /* gpumux_client_kernels_total: as gmxd__metrics_grant counts them */
	c->last_leased_seq = e->seq;
	SRV.total_leased++;
	SRV.ops->on_launch(SRV.pol, &d->c);
}

/* A command the client reports completed: the policy hears it. */
static void completed(client_t *c, const gmx_ring_entry_t *e)
{
	dcmd_t **pp = hash_slot(c, e->seq), *d = *pp;
	if (!d || d->state != D_GRANTED) {
		protocol_error(c, "malformed message: completion of seq %llu, which was not granted",
			       (unsigned long long)e->seq);
		return;
	}
	*pp = d->hnext;
	c->inflight--;
	c->completions++;
	c->last_progress = real_now();
	if (d->c.leased)
		c->leased_now--;
	else if (d->gidx && d->gidx <= c->g_known)
		c->g_known_inflight--;
	SRV.ops->on_complete(SRV.pol, &d->c);
	c->refs--;
	dcmd_free(d);
}

/* A new command with the RANGEs c sent before it (c's buffer emptied; a range is dropped when out
 * of memory: the command then needs every allocation); NULL when out of memory. */
static dcmd_t *with_ranges(client_t *c)
{
	dcmd_t *d = dcmd_new();
	if (d && c->nr) {
		d->ranges = malloc(c->nr * sizeof *d->ranges);
		if (d->ranges) {
			memcpy(d->ranges, c->rbuf, c->nr * sizeof *d->ranges);
			d->nranges = c->nr;
		}
	}
	c->nr = 0;
	return d;
}

/* Fills what a NOTICE and an AHEAD of client c both say of command d: its seq, kind, kernel. */
static void dcmd_name(dcmd_t *d, client_t *c, const gmx_ring_entry_t *e)
{
	d->cseq = e->seq;
	d->kind = e->a;
	d->cl = c;
	d->c.task = c->task;
	d->c.kind = op_kind(e->a);
	d->c.kernel_id = e->x;
}

/* A command the client announced ahead (AHEAD): kept, with its ranges, for rule 6's plan only,
 * until its NOTICE or RELEASED comes (matched there). Never shown to the policy, never granted. */
static void ahead_entry(client_t *c, const gmx_ring_entry_t *e)
{
	unsigned long long seq = (unsigned long long)e->seq;
	if (e->a >= GMX_CMD_KIND_COUNT_PROTO || (c->nr && c->rseq != e->seq)) {
		protocol_error(c,
			       "malformed message: announcement ahead of seq %llu (kind %u, ranges of seq "
			       "%llu before it)",
			       seq, e->a, c->nr ? (unsigned long long)c->rseq : seq);
		return;
	}
	if (e->seq <= c->ahead_last || gmxd__hash_take(c, e->seq, 0)) {
		protocol_error(
		    c,
		    "malformed message: announcement ahead of seq %llu, after seq %llu announced ahead "
		    "(seqs must rise) or its own notice",
		    seq, (unsigned long long)c->ahead_last);
		return;
	}
	if (c->nahead >= GMX_AHEAD_MAX) {
		protocol_error(
		    c,
		    "malformed message: more than %u commands announced ahead and not yet noticed (seq %llu)",
		    GMX_AHEAD_MAX, seq);
		return;
	}
	dcmd_t *d = with_ranges(c);
	if (!d) {
		gmxd__cut(c, "out of memory for its announcement ahead");
		return;
	}
	dcmd_name(d, c, e);
	c->ahead[c->nahead++] = d;
	c->ahead_last = e->seq;
	SRV.ahead_read++;
	/* More of its timeline known: rule 6's plan is refreshed once the batch is read. */
	c->prefetch_due |= d->nranges && c->oversub;
}

static void up_entry(client_t *c, const gmx_ring_entry_t *e)
{
	switch (e->type) {
	case GMX_UP_NOTICE: {
		if (gmxd__hash_take(c, e->seq, 0)) {
			protocol_error(c, "malformed message: a second notice for seq %llu",
				       (unsigned long long)e->seq);
			return;
		}
		if (e->a >= GMX_CMD_KIND_COUNT_PROTO) {
			protocol_error(c, "malformed message: command kind %u", e->a);
			return;
		}
		if (c->nr && c->rseq != e->seq) {
			protocol_error(c,
				       "malformed message: predicted ranges of seq %llu, then the notice "
				       "of seq %llu",
				       (unsigned long long)c->rseq, (unsigned long long)e->seq);
			return;
		}
		if (c->queued + c->inflight >= GMXD_CMDS_PER_CLIENT) {
			protocol_error(c,
				       "malformed message: more than %d commands announced and not completed",
				       GMXD_CMDS_PER_CLIENT);
			return;
		}
		dcmd_t *d = ahead_take(c, e->seq);
		if (d && (c->nr || d->kind != e->a || d->c.kernel_id != e->x)) {
			protocol_error(
			    c,
			    "malformed message: the notice of seq %llu (kind %u, kernel %#llx, %u "
			    "ranges) does not match its announcement ahead (kind %u, kernel %#llx)",
			    (unsigned long long)e->seq, e->a, (unsigned long long)e->x, c->nr, d->kind,
			    (unsigned long long)d->c.kernel_id);
			dcmd_free(d);
			return;
		}
		SRV.ahead_matched += d != NULL;
		d = d ? d : with_ranges(c); /* matched: its ranges came with its announcement */
		if (!d) {
			gmxd__cut(c, "out of memory for its notice");
			return;
		}
		dcmd_name(d, c, e);
		d->state = D_QUEUED;
		d->notice_ns = gmxd__now_ns(); /* notice-to-grant from the moment it is read */
		d->c.seq = ++SRV.seq;
		d->c.stream = 0;
		hash_put(c, d);
		c->refs++;
		c->queued++;
		c->notices++;
		SRV.ops->on_launch(SRV.pol, &d->c);
		/* Not granted at once, with predicted ranges: the interposer announces a stream's next
		 * command when the one before it is released, so this is where its window is first
		 * known while that one computes; the plan is refreshed once the batch is read (rule 6). */
		c->prefetch_due |= d->state == D_QUEUED && d->nranges && c->oversub;
		return;
	}
	case GMX_UP_COMPLETE:
	case GMX_UP_RELEASED: {
		/* One command, or a run of them (protocol 4): each heard in turn. */
		uint32_t more = gmx_run_more(e->type, e->a);
		if (more >= GMX_RUN_MAX) {
			protocol_error(c, "malformed message: a run of %u commands from seq %llu (at most %u)", more + 1,
				       (unsigned long long)e->seq, GMX_RUN_MAX);
			return;
		}
		gmx_ring_entry_t one = *e;
		one.a = e->type == GMX_UP_RELEASED ? e->a & ((1u << GMX_RUN_SHIFT) - 1) : 0;
		for (uint32_t i = 0; i <= more && !c->cut; i++) {
			one.seq = e->seq + i;
			if (e->type == GMX_UP_RELEASED)
				leased_release(c, &one);
			else
				completed(c, &one);
		}
		return;
	}
	case GMX_UP_LEASE_ACK:
		if (!c->nlsent || e->seq != c->lsent[0].id || e->x != c->last_leased_seq) {
			protocol_error(c,
				       "malformed message: acknowledgement of lease %llu after seq %llu (expected "
				       "lease %u after seq %llu)",
				       (unsigned long long)e->seq, (unsigned long long)e->x,
				       c->nlsent ? c->lsent[0].id : 0, (unsigned long long)c->last_leased_seq);
			return;
		}
		c->l_inflight = c->lsent[0].inflight;
		c->l_until = c->lsent[0].until;
		c->g_known = c->lsent[0].gmark;
		c->g_known_inflight = gmxd__known_grants(c);
		memmove(&c->lsent[0], &c->lsent[1], (c->nlsent - 1) * sizeof c->lsent[0]);
		c->nlsent--;
		if (c->want_set) /* the policy's latest, as memory now allows (gmxd__dev_lease) */
			gmxd__dev_lease(NULL, c->task, &c->pol);
		return;
	case GMX_UP_ALLOC:
		c->allocs_read++;
		if (c->nallocs >= GMXD_ALLOCS_PER_CLIENT || e->y == 0) {
			protocol_error(c, "malformed message: allocation %d of %llu bytes", c->nallocs,
				       (unsigned long long)e->y);
			return;
		}
		if (!c->allocs) {
			c->allocs = calloc(GMXD_ALLOCS_PER_CLIENT, sizeof *c->allocs);
			if (!c->allocs) {
				gmxd__cut(c, "out of memory for its allocations");
				return;
			}
		}
		int rc = gmxd_mem_alloc(SRV.mem, c->task, e->x, e->y);
		if (rc == -E2BIG) { /* over its budget: told so (E2BIG), the client backs off */
			char why[sizeof c->cut_reason];
			snprintf(why, sizeof why,
				 "%llu + %llu bytes of allocations exceed device + host memory (%llu) as "
				 "the device holds them (in 2 MiB chunks; %llu held)",
				 (unsigned long long)c->alloc_bytes, (unsigned long long)e->y,
				 (unsigned long long)gmxd_mem_task_limit(SRV.mem),
				 (unsigned long long)gmxd_mem_footprint(SRV.mem, c->task));
			SRV.protocol_errors++;
			gmxd__cut_err(c, E2BIG, why);
			return;
		}
		if (rc == -ENOMEM) {
			gmxd__cut(c, "out of memory for its allocations");
			return;
		}
		if (rc != 0) {
			protocol_error(
			    c,
			    "malformed message: allocation %#llx of %llu bytes overlaps another or "
			    "wraps",
			    (unsigned long long)e->x, (unsigned long long)e->y);
			return;
		}
		c->allocs[c->nallocs++] = (dalloc_t){e->x, e->y};
		c->alloc_bytes += e->y;
		gmxd__lease_memory_moves(c); /* the new allocation is not resident */
		return;
	case GMX_UP_FREE:
		for (int i = 0; i < c->nallocs; i++)
			if (c->allocs[i].ptr == e->x) {
				c->alloc_bytes -= c->allocs[i].size;
				gmxd_mem_free(SRV.mem, c->task, e->x);
				/* Keep indices stable for policies that name buffers by index. */
				memmove(&c->allocs[i], &c->allocs[i + 1],
					(size_t)(c->nallocs - i - 1) * sizeof *c->allocs);
				c->nallocs--;
				return;
			}
		protocol_error(c, "malformed message: free of unknown address %#llx",
			       (unsigned long long)e->x);
		return;
	case GMX_UP_MIG_DONE:
		if (e->a == 0 && c->evicts > 0) {
			c->evicts--;
			SRV.evicts_outstanding--;
			c->last_progress = real_now();
		}
		return;
	case GMX_UP_HOST_WAIT:
		SRV.host_waits++;
		if (SRV.ops->on_host_wait)
			SRV.ops->on_host_wait(SRV.pol, c->task);
		return;
	case GMX_UP_AHEAD:
		ahead_entry(c, e);
		return;
	case GMX_UP_RANGE:
		if (c->nr && c->rseq != e->seq) {
			protocol_error(c,
				       "malformed message: predicted ranges of seq %llu, then of seq %llu "
				       "without its notice",
				       (unsigned long long)c->rseq, (unsigned long long)e->seq);
			return;
		}
		if (c->nr >= GMX_RANGES_MAX || e->y == 0 || e->x + e->y < e->x) {
			protocol_error(c,
				       "malformed message: predicted range %u of seq %llu (%#llx, %llu "
				       "bytes)",
				       c->nr, (unsigned long long)e->seq, (unsigned long long)e->x,
				       (unsigned long long)e->y);
			return;
		}
		c->rseq = e->seq;
		c->rbuf[c->nr++] = (gmx_tpl_range_t){e->x, e->y};
		return;
	default:
		protocol_error(c, "malformed message: ring entry type %u", e->type);
	}
}

/* ---- reading the rings ---- */

/* A ring's batch being read: the entries head..tail, each shown to the policy at its time. */
typedef struct {
	client_t *c;
	uint32_t head, tail;
	uint32_t timed;	  /* the next entry at or after head that carries its time, or tail */
	int64_t key, last; /* the head's time; the last time shown from this ring */
} cursor_t;

/* The time an entry carries (RELEASED, and COMPLETEs of leased commands), else 0. */
static int64_t entry_time(const gmx_ring_entry_t *e)
{
	if (e->type == GMX_UP_RELEASED || e->type == GMX_UP_COMPLETE)
		return (int64_t)e->y > 0 ? (int64_t)e->y : 0;
	return 0;
}

/* The time of k's head entry: its own; for one that carries none (a notice, an
 * acknowledgement), that of the next one in its ring that does (it came before it), or the
 * batch's read time when none follows. Within [k->last, drain_now]: a ring's times never go
 * back and none is later than the read. */
static int64_t cursor_key(cursor_t *k)
{
	const gmx_ring_t *r = &k->c->region->up;
	if ((int32_t)(k->timed - k->head) < 0)
		k->timed = k->head;
	int64_t t = 0;
	while (k->timed != k->tail && !(t = entry_time(&r->e[k->timed & (GMX_RING_ENTRIES - 1)])))
		k->timed++;
	if (k->timed == k->tail || t > drain_now)
		t = drain_now;
	return t < k->last ? k->last : t;
}

/* Asks for what reading k's next entries will touch, so that the misses of many rings overlap
 * while other rings' entries are read: the next line of its ring (two entries to a line; never
 * past the tail, which the client may be writing) and the bucket of the head's seq (the head
 * itself was just read by cursor_key). With 64 clients every ring and hash is cold after the
 * loop's sleep, and waiting out one miss at a time per entry was most of a batch's cost. */
static void cursor_prefetch(const cursor_t *k)
{
	const gmx_ring_t *r = &k->c->region->up;
	if (k->tail - k->head > 2)
		__builtin_prefetch(&r->e[(k->head + 2) & (GMX_RING_ENTRIES - 1)]);
	__builtin_prefetch(&k->c->hash[gmxd__hash_of(r->e[k->head & (GMX_RING_ENTRIES - 1)].seq)]);
}

static void heap_down(cursor_t *cs, int *heap, int n, int i)
{
	for (;;) {
		int l = 2 * i + 1, m = i;
		if (l < n && cs[heap[l]].key < cs[heap[m]].key)
			m = l;
		if (l + 1 < n && cs[heap[l + 1]].key < cs[heap[m]].key)
			m = l + 1;
		if (m == i)
			return;
		int x = heap[i];
		heap[i] = heap[m];
		heap[m] = x;
		i = m;
	}
}

/* Drains every live client's up ring: each ring's entries up to the tail read at the start,
 * one batch, merged across rings by their times, so that the policy's clock goes forward
 * through every ring's entries as they happened (a leased client's batch read after another's
 * does not show the policy its earlier releases late). Returns the number of entries taken. */
int gmxd__poll_rings(void)
{
	cursor_t cs[GMX_MAX_TASKS];
	int heap[GMX_MAX_TASKS], nh = 0, n = 0;
	uint32_t most = 0;
	GMXD_FOR_LIVE(t) {
		client_t *c = &SRV.cl[t];
		if (c->cut)
			continue;
		gmx_ring_t *r = &c->region->up;
		uint32_t head = __atomic_load_n(&r->head, __ATOMIC_RELAXED);
		uint32_t tail = __atomic_load_n(&r->tail, __ATOMIC_ACQUIRE);
		if (tail == head)
			continue;
		if (tail - head > GMX_RING_ENTRIES) {
			protocol_error(c, "malformed message: corrupt ring indices");
			continue;
		}
		__builtin_prefetch(&r->e[head & (GMX_RING_ENTRIES - 1)]);
		cs[nh] = (cursor_t){.c = c, .head = head, .tail = tail, .timed = head};
		if (tail - head > most)
			most = tail - head;
		heap[nh] = nh;
		nh++;
	}
	if (!nh)
		return 0;
	SRV.ring_batch_max = most; /* of the last read that found entries */
	drain_now = gmxd__now_ns(); /* every entry of the batches was written before this */
	for (int i = 0; i < nh; i++) {
		cs[i].last = SRV.last_ovr;
		cs[i].key = cursor_key(&cs[i]);
		cursor_prefetch(&cs[i]);
	}
	for (int i = nh / 2 - 1; i >= 0; i--)
		heap_down(cs, heap, nh, i);
	SRV.in_policy = 1;
	while (nh) {
		cursor_t *k = &cs[heap[0]];
		client_t *c = k->c;
		gmx_ring_t *r = &c->region->up;
		gmx_ring_entry_t e = r->e[k->head & (GMX_RING_ENTRIES - 1)];
		__atomic_store_n(&r->head, ++k->head, __ATOMIC_RELEASE);
		SRV.now_ovr = SRV.last_ovr = k->last = k->key;
		up_entry(c, &e);
		gmxd__run_deferred();
		n++;
		if (k->head == k->tail || c->cut || c->dead) {
			heap[0] = heap[--nh];
		} else {
			k->key = cursor_key(k);
			cursor_prefetch(k);
		}
		heap_down(cs, heap, nh, 0);
	}
	SRV.now_ovr = 0;
	drain_now = 0;
	SRV.in_policy = 0;
	SRV.loop.drains++;
	SRV.loop.entries += (uint64_t)n;
	GMXD_FOR_LIVE(t) {
		client_t *c = &SRV.cl[t];
		if (c->prefetch_due) {
			c->prefetch_due = 0;
			gmxd__prefetch_refresh(c);
		}
	}
	gmxd__flush_actions();
	return n;
}

uint32_t gmxd__known_grants(const client_t *c)
{
	uint32_t n = 0;
	for (int h = 0; h < HASH; h++)
		for (const dcmd_t *d = c->hash[h]; d; d = d->hnext)
			n += d->state == D_GRANTED && !d->c.leased && d->gidx && d->gidx <= c->g_known;
	return n;
}
