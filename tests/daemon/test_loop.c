/*
 * gpumuxd's loop at kernel rates, without a loop (the rig of rig.h): how often it reads leased
 * batches, that its reads of a client's rings never fault, and that what it reports counts every
 * entry written before the request however late the loop would read it.
 */
#include "rig.h"

#include <signal.h>
#include <sys/resource.h>

/* Connects a client at priority 3, has its first command granted with a lease, acknowledges the
 * lease and releases command 2 under it (not read by the loop yet). */
static void leased_client(tconn_t *a)
{
	assert_int_equal(hello(a, 1000, "a", 3), 'W');
	up(a, GMX_UP_NOTICE, 1);
	gmxd__poll_rings();
	uint64_t id = 0;
	uint32_t bound = 0;
	int64_t until = -1;
	assert_int_equal(last_lease(a, &id, &bound, &until), 1);
	up_entry(a, GMX_UP_LEASE_ACK, 0, id, 0, 0);
	up_entry(a, GMX_UP_RELEASED, 0, 2, 7, (uint64_t)now_ns);
}

/* The loop reads leased batches every GMXD_LEASE_DRAIN_MS .. GMXD_LEASE_DRAIN_MAX_MS only while some
 * client waits for the daemon (here a worse priority queued behind a leased client); while none
 * does, every GMXD_LEASE_IDLE_DRAIN_MS: fewer wake-ups per kernel, the same decisions. */
static void test_drain_interval_while_nobody_waits(void **state)
{
	(void)state;
	start("fikit", 8);
	tconn_t a, b;
	leased_client(&a);
	gmxd__poll_rings();
	assert_true(gmxd__leases_active());
	assert_false(gmxd__someone_waits());
	assert_int_equal(gmxd__drain_interval(2000000), GMXD_LEASE_IDLE_DRAIN_MS * 1000000LL);
	/* A ring read with GMXD_DRAIN_BATCH entries or more in it keeps the short reads. */
	for (int i = 0; i < GMXD_DRAIN_BATCH; i++)
		up(&a, GMX_UP_HOST_WAIT, 0);
	gmxd__poll_rings();
	assert_int_equal(gmxd__drain_interval(2000000), 2000000);
	up(&a, GMX_UP_HOST_WAIT, 0);
	gmxd__poll_rings();
	assert_int_equal(gmxd__drain_interval(2000000), GMXD_LEASE_IDLE_DRAIN_MS * 1000000LL);
	assert_int_equal(hello(&b, 1000, "b", 7), 'W');
	up(&b, GMX_UP_NOTICE, 1); /* a is busy: b waits for a gap */
	gmxd__poll_rings();
	assert_int_equal(SRV.cl[task_of(&b)].queued, 1);
	assert_int_equal(gmxd__drain_interval(2000000), 2000000);
	books();
	bye(&a);
	bye(&b);
	books();
	gmxd__fini();
}

/* Reads one byte of every page of [p, p + len). Not instrumented: AddressSanitizer's check of
 * each read would touch its shadow memory, whose first use of a page is itself a minor fault. */
#if defined(__clang__) || defined(__GNUC__)
__attribute__((no_sanitize_address))
#endif
static unsigned touch_pages(const volatile unsigned char *p, size_t len)
{
	unsigned sum = 0;
	for (size_t o = 0; o < len; o += 4096)
		sum += p[o];
	return sum;
}

/* A client's region is mapped populated: the loop's reads of its rings, page after page as they
 * wrap, never fault (a trap into the kernel each, several µs in a virtual machine). */
static void test_region_populated(void **state)
{
	(void)state;
	start("fikit", 8);
	tconn_t a;
	assert_int_equal(hello(&a, 1000, "a", 3), 'W');
	const volatile unsigned char *p = (const volatile unsigned char *)SRV.cl[task_of(&a)].region;
	struct rusage r0, r1;
	assert_int_equal(getrusage(RUSAGE_THREAD, &r0), 0);
	unsigned sum = touch_pages(p, sizeof(gmx_shm_region_t));
	assert_int_equal(getrusage(RUSAGE_THREAD, &r1), 0);
	(void)sum;
	assert_int_equal(r1.ru_minflt - r0.ru_minflt, 0);
	bye(&a);
	gmxd__fini();
}

/* A status request counts the leased releases written before it, even those the loop would read
 * only at its next timed read (up to GMXD_LEASE_IDLE_DRAIN_MS later). */
static void test_status_counts_unread_batches(void **state)
{
	(void)state;
	start("exclusive", 8);
	tconn_t a;
	leased_client(&a);
	int sv[2];
	assert_int_equal(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv), 0);
	gmx_msg_hdr_t h;
	gmx_msg_init(&h, GMX_MSG_STATUS_REQ, sizeof h);
	assert_int_equal(send(sv[0], &h, sizeof h, 0), (ssize_t)sizeof h);
	struct ucred cr = {.pid = 100, .uid = 1000, .gid = 1000};
	gmxd__admit(sv[1], &cr);
	static char reply[70000];
	ssize_t n = recv(sv[0], reply, sizeof reply - 1, MSG_DONTWAIT);
	assert_true(n > (ssize_t)sizeof h);
	reply[n] = 0;
	assert_non_null(strstr(reply + sizeof h, "\"leased_releases\":1"));
	close(sv[0]);
	books();
	bye(&a);
	gmxd__fini();
}

/* A client's seqs come in order: each aligned run of GMXD_HASH_RUN of them takes the buckets of one
 * cache line of its hash, one bucket per seq, so reading a batch of many clients' cold hashes
 * costs a miss per run, not per command. Which line a run takes is the secret key's, and the runs of
 * a client's GMXD_CMDS_PER_CLIENT commands spread over every line. */
static void test_hash_runs_share_a_line(void **state)
{
	(void)state;
	start("fikit", 8);
	assert_int_equal((uintptr_t)&SRV.cl[1].hash[0] % 64, 0);
	const uint64_t keys[] = {SRV.hash_key, 0x9E3779B97F4A7C15ull, 0xD6E8FEB86659FD93ull};
	for (size_t k = 0; k < sizeof keys / sizeof keys[0]; k++) {
		SRV.hash_key = keys[k] | 1;
		uint32_t per_line[HASH / GMXD_HASH_RUN] = {0};
		for (uint64_t run = 0; run < GMXD_CMDS_PER_CLIENT / GMXD_HASH_RUN; run++) {
			size_t first = gmxd__hash_of(run * GMXD_HASH_RUN);
			assert_int_equal(first % GMXD_HASH_RUN, 0);
			for (uint64_t j = 0; j < GMXD_HASH_RUN; j++)
				assert_int_equal(gmxd__hash_of(run * GMXD_HASH_RUN + j), first + j);
			per_line[first / GMXD_HASH_RUN]++;
		}
		if (k == 0)
			continue; /* a random key: where its runs go is not the test's to know */
		for (size_t l = 0; l < HASH / GMXD_HASH_RUN; l++) {
			assert_true(per_line[l] > 0);
			assert_true(per_line[l] <= 2 * GMXD_CMDS_PER_CLIENT / HASH);
		}
	}
	gmxd__fini();
}

/* Every command of a client is found again whatever run of seqs it is in: 40 notices (5 runs and
 * part of a sixth), each completed in turn as it is granted; a completion of a command still
 * queued is a protocol error, which cuts its client. */
static void test_completions_across_runs(void **state)
{
	(void)state;
	start("fikit", 8);
	tconn_t a, b;
	assert_int_equal(hello(&a, 1000, "a", 3), 'W');
	client_t *c = &SRV.cl[task_of(&a)];
	enum { N = 40 };
	for (uint64_t s = 1; s <= N; s++)
		up(&a, GMX_UP_NOTICE, s);
	gmxd__poll_rings();
	books();
	for (uint64_t s = 1; s <= N; s++)
		assert_non_null(gmxd__hash_take(c, s, 0));
	assert_null(gmxd__hash_take(c, N + 1, 0));
	for (uint64_t s = 1; s <= N; s++) {
		int grants = 0, evictions = 0;
		down(&a, s, &grants, &evictions, 0);
		assert_true(c->inflight > 0);
		up(&a, GMX_UP_COMPLETE, s);
		gmxd__poll_rings();
		books();
		assert_null(gmxd__hash_take(c, s, 0));
	}
	assert_int_equal(c->refs, 0);
	assert_int_equal(c->completions, N);
	assert_false(c->cut);

	assert_int_equal(hello(&b, 1000, "b", 3), 'W');
	client_t *cb = &SRV.cl[task_of(&b)];
	for (uint64_t s = 1; s <= N; s++)
		up(&b, GMX_UP_NOTICE, s);
	gmxd__poll_rings();
	assert_true(cb->queued > 0);
	up(&b, GMX_UP_COMPLETE, N); /* still queued */
	gmxd__poll_rings();
	assert_true(cb->cut);
	assert_non_null(strstr(cb->cut_reason, "completion of seq 40, which was not granted"));
	gmxd__tick(now_ns);
	books();
	bye(&a);
	bye(&b);
	books();
	gmxd__fini();
}

int main(void)
{
	signal(SIGPIPE, SIG_IGN);
	gmxd_log_to(NULL);
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_drain_interval_while_nobody_waits),
	    cmocka_unit_test(test_region_populated),
	    cmocka_unit_test(test_status_counts_unread_batches),
	    cmocka_unit_test(test_hash_runs_share_a_line),
	    cmocka_unit_test(test_completions_across_runs),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
