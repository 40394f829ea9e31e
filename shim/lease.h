/*
 * The interposer's book of its lease (docs/protocol.md, "Leases"): pure, no locks, no I/O, so
 * that it is unit-tested alone (tests/shim/test_lease_book.c). grant_daemon.c keeps one per
 * session under the queue lock. It also knows which commands in flight went under a lease (so that the
 * seq table holds only noticed and granted ones): a ring, oldest first, since leased commands
 * mostly complete in the order they were released: the oldest one's completion is one step of
 * the ring's head, not a move of the rest.
 */
#ifndef GMX_SHIM_LEASE_H
#define GMX_SHIM_LEASE_H

#include <stdint.h>

#define GMX_LEASE_SEQS                                                                                       \
	1024 /* leased commands in flight at most (GPUMUX_SHIM_INFLIGHT's maximum); a power of two */

typedef struct {
	uint32_t inflight;	       /* leased commands in flight at most; 0: no lease */
	uint32_t now;		       /* leased commands in flight */
	int64_t until;		       /* no release from this CLOCK_MONOTONIC ns on; 0: no end */
	uint64_t last_seq;	       /* the last seq released under a lease this session (0: none) */
	uint32_t head;		       /* the ring's oldest entry */
	uint64_t allocs;	       /* ALLOC entries pushed this session (an oversubscribed client's) */
	uint64_t seqs[GMX_LEASE_SEQS]; /* a ring: the leased commands in flight, oldest (at head) first */
} gmx_shim_lease_t;

/* The i-th oldest leased command in flight (i < now). */
static inline uint64_t gmx_shim_lease_seq_at(const gmx_shim_lease_t *l, uint32_t i)
{
	return l->seqs[(l->head + i) & (GMX_LEASE_SEQS - 1)];
}

/* What a command that was never announced does under the lease at now_ns. */
enum {
	GMX_LEASE_RELEASE, /* go now, reported in the next batch */
	GMX_LEASE_HOLD,	   /* wait: the bound is reached, a leased command will complete */
	GMX_LEASE_ASK	   /* announce it (NOTICE) and wait for a grant: no lease, or it ended */
};

/* The decision for one release at now_ns, with `granted` commands the daemon granted in flight
 * besides (the bound counts everything the task has in flight, as the policy does); `blocked`
 * (a migration running, the session being restarted): nothing goes under the lease. */
static inline int gmx_shim_lease_decide(const gmx_shim_lease_t *l, int64_t now_ns, int blocked,
					uint32_t granted)
{
	int ended = l->until && now_ns >= l->until;
	if (!l->inflight || ended)
		return GMX_LEASE_ASK;
	if (l->now + granted < l->inflight && l->now < GMX_LEASE_SEQS && !blocked)
		return GMX_LEASE_RELEASE;
	return l->now + granted ? GMX_LEASE_HOLD : GMX_LEASE_ASK;
}

/* How many more commands the lease admits now, with `granted` granted ones in flight besides (0:
 * the next one waits for a completion, or there is no lease). */
static inline uint32_t gmx_shim_lease_room(const gmx_shim_lease_t *l, uint32_t granted)
{
	uint32_t used = l->now + granted;
	return l->inflight > used ? l->inflight - used : 0;
}

/* A LEASE entry applied: the bound from here on (0 revokes). Leased commands in flight stay. */
static inline void gmx_shim_lease_apply(gmx_shim_lease_t *l, uint32_t inflight, int64_t until)
{
	l->inflight = inflight;
	l->until = inflight ? until : 0;
}

/* An allocation reported (ALLOC pushed): no lease from here on until one sent after the daemon
 * read it (its memory is not resident; the daemon leases an oversubscribed client only while
 * all of it is). Leased commands in flight stay. */
static inline void gmx_shim_lease_alloc(gmx_shim_lease_t *l)
{
	l->allocs++;
	l->inflight = 0;
	l->until = 0;
}

/* A LEASE entry {inflight, until} read, sent after the daemon had read `allocs` ALLOC entries of
 * this session: applied, or as a revoke when an allocation went up after that. */
static inline void gmx_shim_lease_apply_seen(gmx_shim_lease_t *l, uint32_t inflight, int64_t until,
					     uint64_t allocs)
{
	gmx_shim_lease_apply(l, allocs == l->allocs ? inflight : 0, until);
}

/* Command seq was released under the lease (decide said GMX_LEASE_RELEASE). */
static inline void gmx_shim_lease_released(gmx_shim_lease_t *l, uint64_t seq)
{
	if (l->now < GMX_LEASE_SEQS)
		l->seqs[(l->head + l->now++) & (GMX_LEASE_SEQS - 1)] = seq;
	l->last_seq = seq;
}

/* Commands first .. first + n - 1 completed together: 1 if they are the n oldest leased
 * commands in flight (now forgotten: one step of the head), else 0 and nothing changes. The
 * book holds seqs in release order, strictly increasing (gmx_shim_lease_released appends, a
 * completion removes), so its oldest and its n-th oldest say it: n seqs strictly between them. */
static inline int gmx_shim_lease_completed_oldest(gmx_shim_lease_t *l, uint64_t first, uint32_t n)
{
	if (n == 0 || n > l->now || gmx_shim_lease_seq_at(l, 0) != first ||
	    gmx_shim_lease_seq_at(l, n - 1) != first + n - 1)
		return 0;
	l->head = (l->head + n) & (GMX_LEASE_SEQS - 1);
	l->now -= n;
	return 1;
}

/* Command seq completed: 1 if it was a leased command in flight (now forgotten), else 0. */
static inline int gmx_shim_lease_completed(gmx_shim_lease_t *l, uint64_t seq)
{
	const uint32_t m = GMX_LEASE_SEQS - 1;
	if (l->now && l->seqs[l->head] == seq) { /* the oldest: the usual case */
		l->head = (l->head + 1) & m;
		l->now--;
		return 1;
	}
	for (uint32_t i = 1; i < l->now; i++)
		if (l->seqs[(l->head + i) & m] == seq) {
			for (uint32_t j = i; j + 1 < l->now; j++) /* the younger ones close the gap */
				l->seqs[(l->head + j) & m] = l->seqs[(l->head + j + 1) & m];
			l->now--;
			return 1;
		}
	return 0;
}

#endif
