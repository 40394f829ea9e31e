/*
 * Rule 6 of the combined policy in gpumuxd (docs/combined.md, "The real path"; the rig of rig.h):
 * at the grant of an LP client's command, the window after it is ordered to the device behind the
 * grant (loaded while the command computes, before the grant of the command that needs it), the
 * windows after that only when core's gate (gmx_comb_prefetch_ahead) finds the link has time to
 * spare and Forestall's rule finds they must start now, as far as room allows; HP's memory is
 * never evicted for it.
 */
#include "rig.h"

#include <signal.h>

#define MIB (1ull << 20)
#define HP_BASE (1ull << 40)
#define LP_BASE (2ull << 40)
#define WIN (8 * MIB) /* what one LP command touches: window w is LP_BASE + w * WIN */
#define LONG_K 7      /* kernel identities: a 20 ms one and a 0.5 ms one */
#define SHORT_K 9

typedef struct {
	gmx_ring_entry_t e[1024];
	int n;
} downs_t;

static void pop_more(tconn_t *c, downs_t *d)
{
	while (d->n < 1024 && gmx_ring_pop(&c->r->down, &d->e[d->n]) == 1)
		d->n++;
}

static void pop_all(tconn_t *c, downs_t *d)
{
	d->n = 0;
	pop_more(c, d);
}

static int grant_at(const downs_t *d, uint64_t seq)
{
	for (int i = 0; i < d->n; i++)
		if (d->e[i].type == GMX_DOWN_GRANT && d->e[i].seq == seq)
			return i;
	return -1;
}

/* Bytes of window w that loads in d[from, to) bring in. */
static uint64_t loaded(const downs_t *d, int from, int to, uint32_t w)
{
	uint64_t lo = LP_BASE + w * WIN, hi = lo + WIN, b = 0;
	for (int i = from; i < to; i++)
		if (d->e[i].type == GMX_DOWN_MIGRATE && d->e[i].a == 1) {
			uint64_t a = d->e[i].x > lo ? d->e[i].x : lo;
			uint64_t z = d->e[i].x + d->e[i].y < hi ? d->e[i].x + d->e[i].y : hi;
			b += z > a ? z - a : 0;
		}
	return b;
}

static void ack_evictions(tconn_t *c, const downs_t *d)
{
	for (int i = 0; i < d->n; i++)
		if (d->e[i].type == GMX_DOWN_MIGRATE && d->e[i].a != GMX_MIGRATE_LOAD)
			up_entry(c, GMX_UP_MIG_DONE, 0, d->e[i].seq, d->e[i].x, 0);
}

static void notice(tconn_t *c, uint64_t seq, uint64_t kid, uint64_t addr, uint64_t len)
{
	up_entry(c, GMX_UP_RANGE, 0, seq, addr, len);
	up_entry(c, GMX_UP_NOTICE, 0, seq, kid, 0);
}

/* Announces seq ahead (protocol 7): its ranges, then AHEAD; no grant asked. */
static void ahead(tconn_t *c, uint64_t seq, uint64_t kid, uint64_t addr, uint64_t len)
{
	up_entry(c, GMX_UP_RANGE, 0, seq, addr, len);
	up_entry(c, GMX_UP_AHEAD, 0, seq, kid, 0);
}

static void complete(tconn_t *c, uint64_t seq, int64_t after_ns)
{
	now_ns += after_ns;
	up_entry(c, GMX_UP_COMPLETE, 0, seq, 0, (uint64_t)now_ns);
	gmxd__poll_rings();
}

/* How the LP client announces its commands after the warm-up: each with a NOTICE (several
 * streams, each with its head); one stream: the next with a NOTICE and the ten behind it with
 * AHEAD (protocol 7); one stream without AHEAD: the next only. */
enum { ALL_NOTICED, ONE_STREAM_AHEAD, ONE_STREAM };

/* gpumux on a 64 MB device at link_mb_s: an HP client holds hp_mb (one request run, then idle);
 * an LP client of 96 MB learns its kernels' durations on window 0 (20 ms and 0.5 ms), then
 * announces (as `how` says) a 20 ms kernel on window 1 and ten 0.5 ms ones on windows 2..11 while
 * the last warm-up kernel runs (the daemon refreshes the plan after reading them). Returns the LP
 * client's ring as read right after that kernel completed (the grant of seq 4, on window 1) in
 * *d, with *g the grant's index; HP's ring saw no eviction. */
static void run_as(int how, long link_mb_s, uint64_t hp_mb, downs_t *d, int *g, tconn_t *hp, tconn_t *lp)
{
	gmxd_config_default(&cfg);
	snprintf(cfg.policy, sizeof cfg.policy, "gpumux");
	cfg.profile_dir[0] = 0;
	cfg.device_memory_mb = 64;
	cfg.inflight = 1;
	cfg.link_mb_s = link_mb_s;
	assert_int_equal(gmxd__init(&cfg, test_clock), 0);
	assert_int_equal(hello_flags(hp, 0, "hp", 0, GMX_HELLO_OVERSUBSCRIBE), 'W');
	assert_int_equal(hello_flags(lp, 0, "lp", 5, GMX_HELLO_OVERSUBSCRIBE), 'W');
	up_entry(hp, GMX_UP_ALLOC, 0, 0, HP_BASE, hp_mb * MIB);
	up_entry(lp, GMX_UP_ALLOC, 0, 0, LP_BASE, 96 * MIB);
	gmxd__poll_rings();
	notice(hp, 1, 3, HP_BASE, hp_mb * MIB);
	gmxd__poll_rings();
	pop_all(hp, d);
	assert_true(grant_at(d, 1) >= 0);
	complete(hp, 1, 1000000);
	assert_int_equal(gmxd_mem_resident(SRV.mem, (uint32_t)task_of(hp)), hp_mb * MIB);

	/* Warm-up on window 0: the first kernel loads it (not learned as a run), the next two are
	 * learned. */
	uint64_t kid[3] = {LONG_K, LONG_K, SHORT_K};
	int64_t dur[3] = {20000000, 20000000, 500000};
	for (uint64_t s = 1; s <= 3; s++) {
		notice(lp, s, kid[s - 1], LP_BASE, WIN);
		gmxd__poll_rings();
		pop_all(lp, d);
		ack_evictions(lp, d);
		gmxd__poll_rings();
		if (s == 3)
			break;
		complete(lp, s, dur[s - 1]);
	}
	/* Seq 3 runs; the client announces its next eleven commands. */
	notice(lp, 4, LONG_K, LP_BASE + 1 * WIN, WIN);
	for (uint64_t s = 5; s <= 14 && how != ONE_STREAM; s++)
		(how == ALL_NOTICED ? notice : ahead)(lp, s, SHORT_K, LP_BASE + (s - 3) * WIN, WIN);
	gmxd__poll_rings();
	pop_all(lp, d);
	assert_int_equal(grant_at(d, 4), -1);
	/* Known while seq 3 computes: seq 4's window is ordered at its notice. */
	assert_int_equal(loaded(d, 0, d->n, 1), WIN);
	complete(lp, 3, dur[2]);
	pop_all(lp, d); /* the evictions the grant and the loads behind it wait for */
	ack_evictions(lp, d);
	gmxd__poll_rings();
	pop_more(lp, d);
	*g = grant_at(d, 4);
	assert_true(*g >= 0);
	downs_t h;
	pop_all(hp, &h);
	for (int i = 0; i < h.n; i++)
		if (h.e[i].type == GMX_DOWN_MIGRATE && h.e[i].a != GMX_MIGRATE_LOAD)
			fail_msg("HP's memory evicted for the LP client's prefetch");
	assert_int_equal(gmxd_mem_resident(SRV.mem, (uint32_t)task_of(hp)), hp_mb * MIB);
	books();
}

static void run(long link_mb_s, uint64_t hp_mb, downs_t *d, int *g, tconn_t *hp, tconn_t *lp)
{
	run_as(ALL_NOTICED, link_mb_s, hp_mb, d, g, hp, lp);
}

static void finish(tconn_t *hp, tconn_t *lp)
{
	books();
	bye(hp);
	bye(lp);
	gmxd__fini();
}

/* HP holds 16 MB, a slow link (100 MB/s): the 48 MiB the LP client's windows hold beyond the 48
 * MiB HP leaves take 419-503 ms on it against their 25-25.5 ms of GPU time, so no window beyond the next
 * is loaded early; the next one (window 2, seq 5's) is ordered behind the grant of seq 4, and
 * seq 5's grant then needs no load. */
static void test_next_window_loaded_while_the_current_computes(void **state)
{
	(void)state;
	tconn_t hp, lp;
	downs_t d;
	int g;
	run(100, 16, &d, &g, &hp, &lp);
	if (loaded(&d, g + 1, d.n, 2) != WIN)
		fail_msg("window 2 (seq 5's) not ordered behind seq 4's grant: %llu of %llu bytes",
			 (unsigned long long)loaded(&d, g + 1, d.n, 2), (unsigned long long)WIN);
	assert_int_equal(loaded(&d, 0, g, 2), 0); /* not before the grant: it loads while seq 4 runs */
	for (uint32_t w = 3; w <= 11; w++)
		assert_int_equal(loaded(&d, 0, d.n, w), 0);
	assert_int_equal(SRV.mig_ahead_bytes, 0);
	ack_evictions(&lp, &d);
	gmxd__poll_rings();
	complete(&lp, 4, 20000000);
	pop_all(&lp, &d);
	g = grant_at(&d, 5);
	assert_true(g >= 0);
	assert_int_equal(loaded(&d, 0, g, 2), 0); /* already in */
	finish(&hp, &lp);
}

/* Windows 2 to 6 (the next and four beyond it) are ordered behind the grant at d->e[g], none after
 * them (the room is full). */
static void windows_2_to_6_behind(const downs_t *d, int g)
{
	for (uint32_t w = 2; w <= 6; w++)
		if (loaded(d, g + 1, d->n, w) != WIN)
			fail_msg("window %u not ordered behind seq 4's grant: %llu bytes", w,
				 (unsigned long long)loaded(d, g + 1, d->n, w));
	for (uint32_t w = 7; w <= 11; w++)
		assert_int_equal(loaded(d, 0, d->n, w), 0);
	assert_int_equal(SRV.mig_ahead_bytes, 4 * WIN);
}

/* HP holds 16 MB, a link of 4 GB/s: the 40 MiB the windows hold beyond the 48 MiB HP leaves take
 * 10.5 ms, under half of their 25 ms of GPU time; the 0.5 ms kernels need
 * their 8 MiB (2.1 ms each) faster than the link brings them in, so Forestall's rule starts
 * windows 3 to 6 within seq 4's 20 ms too, as far as the 48 MiB allow (seq 4's window and five
 * more); window 7 does not fit. */
static void test_windows_ahead_when_the_link_has_time_to_spare(void **state)
{
	(void)state;
	tconn_t hp, lp;
	downs_t d;
	int g;
	run(4000, 16, &d, &g, &hp, &lp);
	windows_2_to_6_behind(&d, g);
	/* The room for them: window 0 (seq 3's, done), evicted at once (EVICT_NOW: the plan kept
	 * the granted seq 4's window 1, so the client need not wait for seq 4 to finish). */
	int evict_now = 0;
	for (int i = 0; i < d.n; i++)
		if (d.e[i].type == GMX_DOWN_MIGRATE && d.e[i].a != GMX_MIGRATE_LOAD) {
			assert_int_equal(d.e[i].a, GMX_MIGRATE_EVICT_NOW);
			assert_true(d.e[i].x >= LP_BASE + 2 * WIN || d.e[i].x + d.e[i].y <= LP_BASE + WIN);
			evict_now++;
		}
	assert_true(evict_now > 0);
	finish(&hp, &lp);
}

/* One stream, a link of 4 GB/s: with the ten commands behind seq 4 announced ahead, windows 2
 * to 6 are ordered behind seq 4's grant as when every command heads a stream of its own (the
 * test above); seq 5's NOTICE then matches its announcement (its ranges from there, counted
 * once) and its grant needs no load. Without them the daemon knows seq 4 only: nothing beyond
 * window 1 is ordered. */
static void test_ahead_notices_plan_windows_beyond_the_next(void **state)
{
	(void)state;
	tconn_t hp, lp;
	downs_t d;
	int g;
	run_as(ONE_STREAM, 4000, 16, &d, &g, &hp, &lp);
	for (uint32_t w = 2; w <= 11; w++)
		assert_int_equal(loaded(&d, 0, d.n, w), 0);
	assert_int_equal(SRV.mig_ahead_bytes, 0);
	finish(&hp, &lp);

	run_as(ONE_STREAM_AHEAD, 4000, 16, &d, &g, &hp, &lp);
	windows_2_to_6_behind(&d, g);
	client_t *cl = &SRV.cl[task_of(&lp)];
	assert_int_equal(cl->nahead, 10);
	assert_int_equal(cl->queued, 0); /* announced ahead: never the policy's, never granted */
	assert_int_equal(grant_at(&d, 5), -1);
	ack_evictions(&lp, &d);
	gmxd__poll_rings();
	up_entry(&lp, GMX_UP_NOTICE, 0, 5, SHORT_K, 0); /* seq 5 heads its stream: no ranges again */
	gmxd__poll_rings();
	assert_false(cl->cut);
	assert_int_equal(cl->nahead, 9);
	assert_int_equal(SRV.ahead_matched, 1);
	dcmd_t *five = gmxd__hash_take(cl, 5, 0);
	assert_non_null(five);
	assert_int_equal(five->nranges, 1);
	assert_int_equal(five->ranges[0].addr, LP_BASE + 2 * WIN);
	complete(&lp, 4, 20000000);
	pop_all(&lp, &d);
	g = grant_at(&d, 5);
	assert_true(g >= 0);
	assert_int_equal(loaded(&d, 0, g, 2), 0); /* already in */
	books();
	finish(&hp, &lp);
}

/* A client alone (gpumux, oversubscribed) announcing ahead; its record. */
static client_t *ahead_client(tconn_t *c)
{
	gmxd_config_default(&cfg);
	snprintf(cfg.policy, sizeof cfg.policy, "gpumux");
	cfg.profile_dir[0] = 0;
	assert_int_equal(gmxd__init(&cfg, test_clock), 0);
	assert_int_equal(hello_flags(c, 0, "lp", 5, GMX_HELLO_OVERSUBSCRIBE), 'W');
	up_entry(c, GMX_UP_ALLOC, 0, 0, LP_BASE, 96 * MIB);
	notice(c, 1, SHORT_K, LP_BASE, WIN);
	gmxd__poll_rings();
	return &SRV.cl[task_of(c)];
}

/* Announcements ahead are checked like every entry: a seq not above the last one announced
 * ahead (a duplicate, or out of order), one already noticed, more than GMX_AHEAD_MAX
 * outstanding, ranges of another seq before one, an unknown kind, and a NOTICE that does not
 * match its announcement (other kernel, or ranges again) cut the client off; a leased release
 * of a command announced ahead matches it. */
static void test_bad_ahead_notices_cut_off(void **state)
{
	(void)state;
	const char *cut[] = {"seqs must rise",	"seqs must rise", "seqs must rise", "more than 64",
			     "ranges of seq 9", "kind 99",	  "does not match", "does not match"};
	for (int k = 0; k < 8; k++) {
		tconn_t c;
		client_t *cl = ahead_client(&c);
		ahead(&c, 5, SHORT_K, LP_BASE, WIN);
		ahead(&c, 7, SHORT_K, LP_BASE + WIN, WIN);
		gmxd__poll_rings();
		assert_false(cl->cut);
		assert_int_equal(cl->nahead, 2);
		books();
		switch (k) {
		case 0: /* a duplicate */
			up_entry(&c, GMX_UP_AHEAD, 0, 7, SHORT_K, 0);
			break;
		case 1: /* out of order */
			up_entry(&c, GMX_UP_AHEAD, 0, 6, SHORT_K, 0);
			break;
		case 2: /* already noticed (and granted) */
			up_entry(&c, GMX_UP_AHEAD, 0, 1, SHORT_K, 0);
			break;
		case 3: /* a flood */
			for (uint64_t s = 8; s < 8 + GMX_AHEAD_MAX; s++)
				up_entry(&c, GMX_UP_AHEAD, 0, s, SHORT_K, 0);
			break;
		case 4:
			up_entry(&c, GMX_UP_RANGE, 0, 9, LP_BASE, WIN);
			up_entry(&c, GMX_UP_AHEAD, 0, 10, SHORT_K, 0);
			break;
		case 5:
			up_entry(&c, GMX_UP_AHEAD, 99, 10, SHORT_K, 0);
			break;
		case 6: /* a lie: another kernel */
			up_entry(&c, GMX_UP_NOTICE, 0, 5, LONG_K, 0);
			break;
		case 7: /* its ranges twice */
			notice(&c, 5, SHORT_K, LP_BASE, WIN);
			break;
		}
		gmxd__poll_rings();
		if (!cl->cut || !strstr(cl->cut_reason, cut[k]))
			fail_msg("case %d: %s", k, cl->cut ? cl->cut_reason : "not cut off");
		books();
		bye(&c);
		books();
		gmxd__fini();
	}
	/* Honest: the first 64 outstanding are taken; a leased release matches what was announced. */
	tconn_t c;
	client_t *cl = ahead_client(&c);
	for (uint64_t s = 2; s < 2 + GMX_AHEAD_MAX; s++)
		ahead(&c, s, SHORT_K, LP_BASE, WIN);
	gmxd__poll_rings();
	assert_false(cl->cut);
	assert_int_equal(cl->nahead, GMX_AHEAD_MAX);
	up_entry(&c, GMX_UP_NOTICE, 0, 2, SHORT_K, 0);
	gmxd__poll_rings();
	assert_false(cl->cut);
	assert_int_equal(cl->nahead, GMX_AHEAD_MAX - 1);
	books();
	bye(&c);
	gmxd__fini();
}

int main(void)
{
	signal(SIGPIPE, SIG_IGN);
	gmxd_log_to(NULL);
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_next_window_loaded_while_the_current_computes),
	    cmocka_unit_test(test_windows_ahead_when_the_link_has_time_to_spare),
	    cmocka_unit_test(test_ahead_notices_plan_windows_beyond_the_next),
	    cmocka_unit_test(test_bad_ahead_notices_cut_off),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
