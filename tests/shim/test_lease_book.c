/* The interposer's lease book (shim/lease.h): what a command does under a lease, its bound,
 * its end, a revoke while leased commands are in flight, and what is acknowledged. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "lease.h"

static void no_lease_asks(void **state)
{
	(void)state;
	gmx_shim_lease_t l = {0};
	assert_int_equal(gmx_shim_lease_decide(&l, 5, 0, 0), GMX_LEASE_ASK);
}

static void bound_holds_then_releases(void **state)
{
	(void)state;
	gmx_shim_lease_t l = {0};
	gmx_shim_lease_apply(&l, 2, 0);
	assert_int_equal(gmx_shim_lease_decide(&l, 5, 0, 0), GMX_LEASE_RELEASE);
	gmx_shim_lease_released(&l, 10);
	assert_int_equal(gmx_shim_lease_decide(&l, 5, 0, 0), GMX_LEASE_RELEASE);
	gmx_shim_lease_released(&l, 11);
	assert_int_equal(l.last_seq, 11);
	/* At the bound: wait for a leased completion rather than ask the daemon. */
	assert_int_equal(gmx_shim_lease_decide(&l, 5, 0, 0), GMX_LEASE_HOLD);
	assert_int_equal(gmx_shim_lease_completed(&l, 10), 1);
	assert_int_equal(gmx_shim_lease_decide(&l, 5, 0, 0), GMX_LEASE_RELEASE);
	/* A migration or a restart blocks leased releases. */
	assert_int_equal(gmx_shim_lease_decide(&l, 5, 1, 0), GMX_LEASE_HOLD);
	assert_int_equal(gmx_shim_lease_completed(&l, 11), 1);
	assert_int_equal(gmx_shim_lease_decide(&l, 5, 1, 0), GMX_LEASE_ASK);
	assert_int_equal(gmx_shim_lease_completed(&l, 11), 0); /* never twice, never below zero */
	assert_int_equal(l.now, 0);
}

static void end_and_revoke(void **state)
{
	(void)state;
	gmx_shim_lease_t l = {0};
	gmx_shim_lease_apply(&l, 1, 1000);
	assert_int_equal(gmx_shim_lease_decide(&l, 999, 0, 0), GMX_LEASE_RELEASE);
	gmx_shim_lease_released(&l, 3);
	/* Ended: ask, even with leased work in flight (its slice is over). */
	assert_int_equal(gmx_shim_lease_decide(&l, 1000, 0, 0), GMX_LEASE_ASK);
	/* Revoked with one in flight: the next command asks; the one in flight stays counted. */
	gmx_shim_lease_apply(&l, 0, 5000);
	assert_int_equal(l.until, 0);
	assert_int_equal(l.now, 1);
	assert_int_equal(gmx_shim_lease_decide(&l, 10, 0, 0), GMX_LEASE_ASK);
	/* Narrowed below what is in flight: hold until it drains. */
	gmx_shim_lease_released(&l, 4);
	gmx_shim_lease_apply(&l, 1, 0);
	assert_int_equal(gmx_shim_lease_decide(&l, 10, 0, 0), GMX_LEASE_HOLD);
	assert_int_equal(l.last_seq, 4);
}

/* Granted commands in flight count against the bound too: everything the task has in flight. */
static void granted_count(void **state)
{
	(void)state;
	gmx_shim_lease_t l = {0};
	gmx_shim_lease_apply(&l, 2, 0);
	assert_int_equal(gmx_shim_lease_decide(&l, 5, 0, 1), GMX_LEASE_RELEASE);
	gmx_shim_lease_released(&l, 7);
	assert_int_equal(gmx_shim_lease_decide(&l, 5, 0, 1), GMX_LEASE_HOLD);
	assert_int_equal(gmx_shim_lease_completed(&l, 7), 1);
	assert_int_equal(gmx_shim_lease_decide(&l, 5, 0, 2), GMX_LEASE_HOLD);
	gmx_shim_lease_apply(&l, 1, 0);
	assert_int_equal(gmx_shim_lease_decide(&l, 5, 0, 1), GMX_LEASE_HOLD);
}

/* The book knows which commands in flight are leased (the seq table then holds none of them):
 * a completion of another command (granted, or unknown) is not counted against the lease, and
 * leased ones may complete in any order. */
static void leased_seqs(void **state)
{
	(void)state;
	static gmx_shim_lease_t l;
	gmx_shim_lease_apply(&l, 3, 0);
	gmx_shim_lease_released(&l, 1);
	gmx_shim_lease_released(&l, 2);
	gmx_shim_lease_released(&l, 5);
	assert_int_equal(gmx_shim_lease_decide(&l, 5, 0, 0), GMX_LEASE_HOLD);
	assert_int_equal(gmx_shim_lease_completed(&l, 3), 0); /* granted, not leased */
	assert_int_equal(l.now, 3);
	assert_int_equal(gmx_shim_lease_completed(&l, 2), 1);
	assert_int_equal(l.now, 2);
	assert_int_equal(gmx_shim_lease_seq_at(&l, 0), 1);
	assert_int_equal(gmx_shim_lease_seq_at(&l, 1), 5);
	assert_int_equal(gmx_shim_lease_decide(&l, 5, 0, 0), GMX_LEASE_RELEASE);
	assert_int_equal(gmx_shim_lease_completed(&l, 5), 1);
	assert_int_equal(gmx_shim_lease_completed(&l, 1), 1);
	assert_int_equal(gmx_shim_lease_completed(&l, 1), 0);
	assert_int_equal(l.now, 0);
	/* Never more in flight than the book can name: held at its size whatever the bound. */
	gmx_shim_lease_apply(&l, GMX_LEASE_SEQS + 10, 0);
	for (uint64_t s = 100; s < 100 + GMX_LEASE_SEQS; s++)
		gmx_shim_lease_released(&l, s);
	assert_int_equal(gmx_shim_lease_decide(&l, 5, 0, 0), GMX_LEASE_HOLD);
	assert_int_equal(gmx_shim_lease_completed(&l, 100 + GMX_LEASE_SEQS - 1), 1);
	assert_int_equal(gmx_shim_lease_decide(&l, 5, 0, 0), GMX_LEASE_RELEASE);
}

/* The book is a ring: oldest-first completions step its head, across its end too, and one from
 * the middle of a wrapped ring keeps the others in order. */
static void ring_wraps(void **state)
{
	(void)state;
	static gmx_shim_lease_t l;
	gmx_shim_lease_apply(&l, 64, 0);
	uint64_t next = 1, oldest = 1;
	for (int round = 0; round < 3 * GMX_LEASE_SEQS / 40; round++) { /* ~3 times round the ring */
		for (int i = 0; i < 40; i++)
			gmx_shim_lease_released(&l, next++);
		for (int i = 0; i < 37; i++)
			assert_int_equal(gmx_shim_lease_completed(&l, oldest++), 1);
	}
	assert_true(l.head != 0 || oldest > GMX_LEASE_SEQS);
	uint32_t n = l.now;
	assert_int_equal(n, next - oldest);
	/* the second youngest completes first: the rest stay, in order */
	assert_int_equal(gmx_shim_lease_completed(&l, next - 2), 1);
	assert_int_equal(l.now, n - 1);
	for (uint32_t i = 0; i + 1 < n - 1; i++)
		assert_int_equal(gmx_shim_lease_seq_at(&l, i), oldest + i);
	assert_int_equal(gmx_shim_lease_seq_at(&l, n - 2), next - 1);
	while (oldest < next - 2)
		assert_int_equal(gmx_shim_lease_completed(&l, oldest++), 1);
	assert_int_equal(gmx_shim_lease_completed(&l, next - 2), 0);
	assert_int_equal(gmx_shim_lease_completed(&l, next - 1), 1);
	assert_int_equal(l.now, 0);
}

/* An allocation reported ends the lease at once (its memory is not resident); a LEASE the daemon
 * sent before it read that allocation counts as a revoke, one sent after it applies. */
/* A stretch of consecutive completions that are the book's oldest leaves in one step (across
 * the ring's end); one that is not (a gap, another stream's seqs first, more than in flight)
 * changes nothing, and the one-by-one path still finds each. */
static void oldest_run_completes(void **state)
{
	(void)state;
	gmx_shim_lease_t l = {0};
	l.head = GMX_LEASE_SEQS - 3; /* the stretch wraps */
	gmx_shim_lease_apply(&l, 64, 0);
	for (uint64_t s = 100; s < 108; s++)
		gmx_shim_lease_released(&l, s);
	gmx_shim_lease_released(&l, 110); /* a gap: 108 and 109 went elsewhere */
	assert_int_equal(gmx_shim_lease_completed_oldest(&l, 101, 3), 0);  /* not the oldest */
	assert_int_equal(gmx_shim_lease_completed_oldest(&l, 100, 10), 0); /* more than in flight */
	assert_int_equal(gmx_shim_lease_completed_oldest(&l, 100, 0), 0);
	assert_int_equal(l.now, 9);
	assert_int_equal(gmx_shim_lease_completed_oldest(&l, 100, 5), 1);
	assert_int_equal(l.now, 4);
	assert_int_equal(gmx_shim_lease_seq_at(&l, 0), 105);
	/* 105..108 are four consecutive seqs, but 108 is not in the book: 110 is its fourth. */
	assert_int_equal(gmx_shim_lease_completed_oldest(&l, 105, 4), 0);
	assert_int_equal(gmx_shim_lease_completed_oldest(&l, 105, 3), 1);
	assert_int_equal(gmx_shim_lease_seq_at(&l, 0), 110);
	assert_int_equal(gmx_shim_lease_completed(&l, 110), 1);
	assert_int_equal(l.now, 0);
	assert_int_equal(l.head, 6); /* nine completed from GMX_LEASE_SEQS - 3: past the ring's end */
}

static void allocation_ends_lease(void **state)
{
	(void)state;
	gmx_shim_lease_t l = {0};
	gmx_shim_lease_apply_seen(&l, 1, 0, 0);
	assert_int_equal(gmx_shim_lease_decide(&l, 5, 0, 0), GMX_LEASE_RELEASE);
	gmx_shim_lease_released(&l, 10);
	gmx_shim_lease_alloc(&l);
	assert_int_equal(l.inflight, 0);
	assert_int_equal(l.now, 1);		/* in flight stays */
	gmx_shim_lease_apply_seen(&l, 2, 0, 0); /* sent before the daemon read the ALLOC */
	assert_int_equal(l.inflight, 0);
	assert_int_equal(gmx_shim_lease_completed(&l, 10), 1);
	assert_int_equal(gmx_shim_lease_decide(&l, 5, 0, 0), GMX_LEASE_ASK);
	gmx_shim_lease_apply_seen(&l, 2, 0, 1);
	assert_int_equal(gmx_shim_lease_decide(&l, 5, 0, 0), GMX_LEASE_RELEASE);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(no_lease_asks),	    cmocka_unit_test(bound_holds_then_releases),
	    cmocka_unit_test(end_and_revoke),	    cmocka_unit_test(granted_count),
	    cmocka_unit_test(leased_seqs),	    cmocka_unit_test(ring_wraps),
	    cmocka_unit_test(oldest_run_completes), cmocka_unit_test(allocation_ends_lease),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
