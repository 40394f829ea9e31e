/*
 * Leases of oversubscribed clients (docs/daemon.md, "Leases"; the rig of rig.h): the combined
 * policy's LP client is leased while all of its memory is resident, its lease is revoked ahead of
 * any eviction of its memory in its ring, held while its memory is away, and sent again once a
 * plan brought it back; a lease sent before the daemon read the client's latest allocation is
 * marked so that the client ignores it.
 */
#include "rig.h"

#include <errno.h>
#include <signal.h>

/* What one pop of a down ring gave, in order. */
typedef struct {
	gmx_ring_entry_t e[256];
	int n;
} downs_t;

static void pop_all(tconn_t *c, downs_t *d)
{
	d->n = 0;
	while (d->n < 256 && gmx_ring_pop(&c->r->down, &d->e[d->n]) == 1)
		d->n++;
}

/* Index of the first entry of type (and, a >= 0, with that a) from `from` on; -1 none. */
static int find(const downs_t *d, int from, uint32_t type, int a)
{
	for (int i = from; i < d->n; i++)
		if (d->e[i].type == type && (a < 0 || d->e[i].a == (uint32_t)a))
			return i;
	return -1;
}

/* Index of the last entry of type (and a, when a >= 0); -1 none. */
static int find_last(const downs_t *d, uint32_t type, int a)
{
	int k = -1;
	for (int i = 0; i < d->n; i++)
		if (d->e[i].type == type && (a < 0 || d->e[i].a == (uint32_t)a))
			k = i;
	return k;
}

/* Acknowledges every eviction order in d. */
static void ack_evictions(tconn_t *c, const downs_t *d)
{
	for (int i = 0; i < d->n; i++)
		if (d->e[i].type == GMX_DOWN_MIGRATE && d->e[i].a == 0)
			up_entry(c, GMX_UP_MIG_DONE, 0, d->e[i].seq, d->e[i].x, 0);
}

/* gpumux on a 64 MB device: an LP client of 40 MB (oversubscribed) and an HP client of 32 MB
 * (together 72 MB). The LP client's first command loads its 40 MB and the lease follows the
 * loads; HP's request makes room from the LP client's memory: the revoke precedes the eviction
 * in the LP client's ring, and HP's grant waits for the eviction's acknowledgement. With 8 MB of
 * it away, the policy's lease for the LP client is held, not sent; once HP has left, a plan
 * brings its memory back and the lease is sent after the loads. A new allocation revokes it, the
 * revoke carrying the allocations read. */
static void test_oversubscribed_lease_follows_residency(void **state)
{
	(void)state;
	gmxd_config_default(&cfg);
	snprintf(cfg.policy, sizeof cfg.policy, "gpumux");
	cfg.profile_dir[0] = 0;
	cfg.device_memory_mb = 64;
	cfg.inflight = 1;
	assert_int_equal(gmxd__init(&cfg, test_clock), 0);
	tconn_t hp, la;
	downs_t d;
	assert_int_equal(hello_flags(&hp, 0, "hp", 0, GMX_HELLO_OVERSUBSCRIBE), 'W');
	assert_int_equal(hello_flags(&la, 0, "la", 5, GMX_HELLO_OVERSUBSCRIBE), 'W');
	client_t *cl = &SRV.cl[task_of(&la)];
	up_entry(&hp, GMX_UP_ALLOC, 0, 0, 1ull << 40, 32ull << 20);
	up_entry(&la, GMX_UP_ALLOC, 0, 0, 2ull << 40, 40ull << 20);
	gmxd__poll_rings();

	/* 1. Its first command: loads, its grant, then a lease (its 40 MB resident). */
	up(&la, GMX_UP_NOTICE, 1);
	gmxd__poll_rings();
	pop_all(&la, &d);
	int grant = find(&d, 0, GMX_DOWN_GRANT, -1), lease = find(&d, 0, GMX_DOWN_LEASE, -1);
	int last_load = find_last(&d, GMX_DOWN_MIGRATE, 1);
	assert_true(grant >= 0 && last_load >= 0);
	if (lease < 0)
		fail_msg("an oversubscribed LP client whose memory is resident got no lease");
	assert_true(lease > last_load);
	assert_true(d.e[lease].a >= 1);
	assert_int_equal(d.e[lease].y, 1); /* one ALLOC read */
	uint64_t lid = d.e[lease].seq;
	up_entry(&la, GMX_UP_LEASE_ACK, 0, lid, 0, 0);
	up(&la, GMX_UP_COMPLETE, 1);
	up_entry(&la, GMX_UP_RELEASED, 0, 2, 7, (uint64_t)now_ns); /* under the lease, in flight */
	gmxd__poll_rings();
	assert_false(cl->cut);
	assert_int_equal(cl->leased, 1);
	books();

	/* 2. HP's request needs 8 MB of the LP client's memory: revoke first, then the eviction;
	 * HP's grant waits for the eviction. */
	now_ns += 1000000;
	up(&hp, GMX_UP_NOTICE, 1);
	gmxd__poll_rings();
	pop_all(&la, &d);
	int revoke = find(&d, 0, GMX_DOWN_LEASE, 0), evict = find(&d, 0, GMX_DOWN_MIGRATE, 0);
	assert_true(evict >= 0);
	if (revoke < 0 || revoke > evict)
		fail_msg("the LP client's memory is evicted while its lease is in effect (revoke at %d, "
			 "eviction at %d)",
			 revoke, evict);
	assert_int_equal(find(&d, 0, GMX_DOWN_LEASE, -1), revoke); /* no lease after it */
	downs_t h;
	pop_all(&hp, &h);
	assert_int_equal(find(&h, 0, GMX_DOWN_GRANT, -1), -1);
	up_entry(&la, GMX_UP_LEASE_ACK, 0, d.e[revoke].seq, 2, 0);
	up_entry(&la, GMX_UP_COMPLETE, 0, 2, 0, (uint64_t)now_ns);
	ack_evictions(&la, &d);
	gmxd__poll_rings();
	pop_all(&hp, &h);
	assert_true(find(&h, 0, GMX_DOWN_GRANT, -1) >= 0);
	books();

	/* 3. HP done and idle: the policy leases the LP client again, but 8 MB of it are away. */
	now_ns += 1000000;
	up(&hp, GMX_UP_COMPLETE, 1);
	gmxd__poll_rings();
	now_ns += 2000000;
	gmxd__tick(now_ns);
	gmxd__timer_fired();
	pop_all(&la, &d);
	assert_int_equal(find(&d, 0, GMX_DOWN_LEASE, -1), -1);
	assert_int_equal(cl->l_inflight, 0);
	books();

	/* 4. HP leaves; the LP client's next command brings its memory back: leased after the loads. */
	bye(&hp);
	up(&la, GMX_UP_NOTICE, 3);
	gmxd__poll_rings();
	pop_all(&la, &d);
	last_load = find_last(&d, GMX_DOWN_MIGRATE, 1);
	lease = find_last(&d, GMX_DOWN_LEASE, -1);
	assert_true(last_load >= 0 && lease > last_load);
	assert_true(d.e[lease].a >= 1);
	up_entry(&la, GMX_UP_LEASE_ACK, 0, d.e[lease].seq, 2, 0);
	up(&la, GMX_UP_COMPLETE, 3);
	gmxd__poll_rings();
	assert_true(cl->l_inflight >= 1);

	/* 5. A new allocation is not resident: revoked, the revoke carrying two ALLOCs read. */
	up_entry(&la, GMX_UP_ALLOC, 0, 0, 3ull << 40, 4ull << 20);
	gmxd__poll_rings();
	pop_all(&la, &d);
	lease = find_last(&d, GMX_DOWN_LEASE, -1);
	assert_true(lease >= 0);
	assert_int_equal(d.e[lease].a, 0);
	assert_int_equal(d.e[lease].y, 2);
	assert_false(cl->cut);
	books();
	bye(&la);
	books();
	gmxd__fini();
}

/* An interposer of the protocol before (6) sends no AHEAD (its one-stream clients' plans would
 * see one command ahead only, silently): the daemon refuses it, naming both versions. (Version 5
 * would read an eviction that need not wait for granted work, MIGRATE a = 2, as a load; version 4
 * would also take an oversubscribed lease without its contract.) */
static void test_older_interposer_refused(void **state)
{
	(void)state;
	gmxd_config_default(&cfg);
	snprintf(cfg.policy, sizeof cfg.policy, "gpumux");
	cfg.profile_dir[0] = 0;
	assert_int_equal(gmxd__init(&cfg, test_clock), 0);
	int sv[2];
	assert_int_equal(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv), 0);
	gmx_msg_hello_t h;
	memset(&h, 0, sizeof h);
	gmx_msg_init(&h.h, GMX_MSG_HELLO, sizeof h);
	h.h.version = GMX_PROTO_VERSION - 1;
	h.priority = 5;
	h.flags = GMX_HELLO_OVERSUBSCRIBE;
	snprintf(h.name, sizeof h.name, "old");
	assert_int_equal(send(sv[0], &h, sizeof h, 0), (ssize_t)sizeof h);
	struct ucred cr = {.pid = 100, .uid = 0, .gid = 0};
	gmxd__admit(sv[1], &cr);
	gmx_msg_refused_t r;
	memset(&r, 0, sizeof r);
	assert_true(recv(sv[0], &r, sizeof r, MSG_DONTWAIT) >= (ssize_t)sizeof r.h);
	assert_int_equal(r.h.type, GMX_MSG_REFUSED);
	assert_int_equal(r.error, EPROTONOSUPPORT);
	assert_non_null(strstr(r.reason, "protocol version 6"));
	assert_non_null(strstr(r.reason, "version 7"));
	close(sv[0]);
	gmxd__fini();
}

int main(void)
{
	signal(SIGPIPE, SIG_IGN);
	gmxd_log_to(NULL);
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_oversubscribed_lease_follows_residency),
	    cmocka_unit_test(test_older_interposer_refused),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
