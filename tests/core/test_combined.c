/* The combined policy's decisions (core/combined.c) and its scheduler (core/sched_gpumux.c)
 * against a fake device: HP pages never evicted for LP work, LP admitted only when its pages
 * and run fit the gap, an HP migration waits at most one piece, HP work preempts LP at once. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "gpumux/combined.h"
#include "gpumux/kdur.h"
#include "gpumux/sched.h"

static void hp_pages_not_evicted_for_lp(void **state)
{
	(void)state;
	assert_false(gmx_comb_may_evict(0, 5)); /* HP page, LP work: never */
	assert_true(gmx_comb_may_evict(5, 0));	/* LP page, HP work */
	assert_true(gmx_comb_may_evict(5, 5));	/* LP page, LP work */
	assert_true(gmx_comb_may_evict(0, 0));	/* HP page, HP work */
	/* LP pages go before the requester's own level, and within a level the later needed first. */
	assert_true(gmx_comb_evict_key(5, 0, 0) < gmx_comb_evict_key(0, 0, UINT32_MAX));
	assert_true(gmx_comb_evict_key(9, 0, 0) < gmx_comb_evict_key(5, 0, 0));
	assert_true(gmx_comb_evict_key(5, 5, 7) < gmx_comb_evict_key(5, 5, 3));
}

/* Rule 6's gate: LP windows beyond the next are prefetched only while the link moves their least
 * bytes in less than half their GPU time. At 1 GB/s a byte takes a nanosecond. */
static void prefetch_ahead_only_with_half_the_link_spare(void **state)
{
	(void)state;
	assert_true(gmx_comb_prefetch_ahead(499, 1000, 1.0));
	assert_false(gmx_comb_prefetch_ahead(500, 1000, 1.0)); /* exactly half: no time to spare */
	assert_false(gmx_comb_prefetch_ahead(750, 1000, 1.0)); /* the link keeps up, with no margin */
	assert_false(gmx_comb_prefetch_ahead(2000, 1000, 1.0));
	assert_true(gmx_comb_prefetch_ahead(0, 1, 1.0)); /* the windows fit: nothing must move */
	assert_false(gmx_comb_prefetch_ahead(0, 0, 1.0));
	assert_false(gmx_comb_prefetch_ahead(1, INT64_MAX, 0.0)); /* no link */
	/* The MSched paper's testcases on an RTX 5080 (31.75 GB/s in): T's training, 25% of its
	 * GPU time on the link, prefetches ahead; I's inference, 69%, does not. */
	int64_t gpu = 100000000; /* 100 ms */
	assert_true(gmx_comb_prefetch_ahead((uint64_t)(0.25 * 31.75 * (double)gpu), gpu, 31.75));
	assert_false(gmx_comb_prefetch_ahead((uint64_t)(0.69 * 31.75 * (double)gpu), gpu, 31.75));
}

/* Rule 6 for gpumuxd (commands seen one by one): the window after the current one always; windows
 * after it only with the link's margin, when Forestall's latest start falls within the current
 * GPU time, and while they fit the room. At 1 GB/s a byte takes a nanosecond; room 400 B cuts
 * windows of 100 B. */
static void prefetch_cmds_by_window_gate_and_room(void **state)
{
	(void)state;
	gmx_comb_coming_t c[6];
	uint32_t next = 99;
	/* Short runs (50 ns) that each miss 100 B: the link, 100 ns a window, falls behind unless it
	 * starts early; 300 B beyond the room over 1.3 us of GPU time leaves it a margin. */
	for (int i = 0; i < 6; i++)
		c[i] = (gmx_comb_coming_t){100, 100, 50};
	/* Windows 1 and 2 are due within the current 1 us; window 3 would not fit beside them. */
	assert_int_equal(gmx_comb_prefetch_cmds(c, 6, 100, 1000, 400, 1.0, &next), 3);
	assert_int_equal(next, 1);
	/* No margin (4 ns a byte: 1.2 us of link over 1.3 us of GPU time): the next window only. */
	assert_int_equal(gmx_comb_prefetch_cmds(c, 6, 100, 1000, 400, 0.25, &next), 1);
	/* Long runs (1 us each): every window can still start in time at a later call. */
	for (int i = 0; i < 6; i++)
		c[i].run_ns = 1000;
	assert_int_equal(gmx_comb_prefetch_cmds(c, 6, 100, 1000, 400, 1.0, &next), 1);
	/* Windows of a quarter of the room: commands of 50 B go two to a window, one touching only
	 * what an earlier one touches joins it. All of it fits the room (no least bytes: the gate
	 * is open) and the slow link must start every window now. */
	for (int i = 0; i < 6; i++)
		c[i] = (gmx_comb_coming_t){50, 50, 25};
	c[1].fresh_bytes = c[1].missing_bytes = 0;
	assert_int_equal(gmx_comb_prefetch_cmds(c, 6, 100, 1000, 400, 0.25, &next), 6);
	assert_int_equal(next, 3);
	/* The same with the current ones holding 200 B: the third window no longer fits. */
	assert_int_equal(gmx_comb_prefetch_cmds(c, 6, 200, 1000, 400, 0.25, &next), 5);
	assert_int_equal(gmx_comb_prefetch_cmds(c, 0, 100, 1000, 400, 1.0, &next), 0);
	assert_int_equal(next, 0);
}

static void lp_admitted_only_if_pages_fit_the_gap(void **state)
{
	(void)state;
	/* 1 ms run, 64 MiB to load at 31.75 GB/s (2.11 ms), 32 us switches in and out */
	int64_t load = gmx_comb_link_ns(64ull << 20, 31.75);
	assert_true(load > 2100000 && load < 2120000);
	assert_true(gmx_comb_admit(4000000, 1000000, load, 32000));
	assert_false(gmx_comb_admit(3000000, 1000000, load, 32000)); /* the run fits, the pages do not */
	assert_true(gmx_comb_admit(1100000, 1000000, 0, 32000));     /* resident: the run alone */
	assert_false(gmx_comb_admit(-1, 0, 0, 0));		     /* unknown gap */
	assert_true(gmx_comb_admit(INT64_MAX, 1000000000, load, 0)); /* no HP work expected */
}

static void hp_migration_waits_at_most_one_piece(void **state)
{
	(void)state;
	uint64_t piece = gmx_comb_piece_bytes(31.75, 2000000);
	assert_int_equal(piece % GMX_COMB_PIECE_BYTES_MIN, 0);
	assert_true(gmx_comb_link_ns(piece, 31.75) <= 2000000);
	assert_int_equal(gmx_comb_piece_bytes(31.75, 0), GMX_COMB_PIECE_BYTES_MIN);
	/* a backlog of 1 s of LP migration: HP goes after the piece in flight, LP after it all */
	int64_t now = 1000, piece_end = now + 2000000, backlog = now + 1000000000;
	assert_int_equal(gmx_comb_migration_start(0, 0, now, piece_end, backlog), piece_end);
	assert_int_equal(gmx_comb_migration_start(5, 0, now, piece_end, backlog), backlog);
	assert_int_equal(gmx_comb_migration_start(0, 0, now, 0, 0), now);
}

static void lp_slice_from_targets(void **state)
{
	(void)state;
	int64_t t[3] = {0, 600000000, 0};
	assert_int_equal(gmx_comb_lp_slice(t, 3, 2000000, 2000000000), 200000000);
	int64_t none[2] = {0, 0};
	assert_int_equal(gmx_comb_lp_slice(none, 2, 2000000, 2000000000), 2000000000);
	int64_t tight[1] = {1000};
	assert_int_equal(gmx_comb_lp_slice(tight, 1, 2000000, 2000000000), 2000000);
}

/* ---- the scheduler against a fake device ---------------------------------- */

typedef struct fake {
	int64_t now, load;
	int held[4];
	int preempts;
	uint32_t submitted[4];
} fake_t;

static int64_t f_now(void *c)
{
	return ((fake_t *)c)->now;
}
static int f_submit(void *c, gmx_cmd_t *cmd)
{
	((fake_t *)c)->submitted[cmd->task]++;
	return 0;
}
static void f_timer(void *c, int64_t at)
{
	(void)c;
	(void)at;
}
static void f_preempt(void *c, uint32_t task, int hold)
{
	((fake_t *)c)->held[task] = hold;
	((fake_t *)c)->preempts++;
}
static int64_t f_load(void *c, const gmx_cmd_t *cmd)
{
	(void)cmd;
	return ((fake_t *)c)->load;
}

/* A gpumux policy on fake device f, with preemption or without: HP task 0 at priority 0 when hp,
 * LP tasks 1..n_lp at 5. */
static gmx_policy_t *fake_policy(fake_t *f, int preempt, const gmx_sched_params_t *p, int hp, uint32_t n_lp)
{
	gmx_device_t dev = {.ctx = f,
			    .now = f_now,
			    .submit = f_submit,
			    .set_timer = f_timer,
			    .preempt = preempt ? f_preempt : NULL,
			    .load_ns = f_load};
	gmx_policy_t *s;
	assert_int_equal(gmx_sched_find("gpumux")->create(p, &dev, &s), 0);
	if (hp)
		assert_int_equal(gmx_sched_find("gpumux")->task_add(s, 0, 0), 0);
	for (uint32_t i = 1; i <= n_lp; i++)
		assert_int_equal(gmx_sched_find("gpumux")->task_add(s, i, 5), 0);
	return s;
}

static void hp_arrival_preempts_lp_at_once(void **state)
{
	(void)state;
	fake_t f = {0};
	gmx_sched_params_t p;
	gmx_sched_params_default(&p);
	const gmx_policy_ops_t *ops = gmx_sched_find("gpumux");
	assert_non_null(ops);
	gmx_policy_t *s = fake_policy(&f, 1, &p, 1, 1);
	gmx_cmd_t lp = {.seq = 1, .task = 1, .kind = GMX_OP_KERNEL, .predicted_ns = 1000000};
	ops->on_launch(s, &lp);
	assert_int_equal(f.submitted[1], 1); /* HP idle: LP runs */
	f.now = 10;
	gmx_cmd_t hp = {.seq = 2, .task = 0, .kind = GMX_OP_KERNEL, .predicted_ns = 1000};
	ops->on_launch(s, &hp);
	assert_int_equal(f.submitted[0], 1);
	assert_int_equal(f.held[1], 1); /* LP held at once */
	f.now = 2000;
	ops->on_complete(s, &hp);
	assert_int_equal(f.held[1], 0); /* HP idle again: LP resumes */
	ops->destroy(s);
}

static void without_preemption_lp_waits_for_a_gap_its_pages_fit(void **state)
{
	(void)state;
	fake_t f = {0};
	gmx_sched_params_t p;
	gmx_sched_params_default(&p);
	const gmx_policy_ops_t *ops = gmx_sched_find("gpumux");
	gmx_policy_t *s = fake_policy(&f, 0, &p, 1, 1);
	/* Teach the policy HP gaps of 1 ms: HP commands 1 ms apart. */
	gmx_cmd_t hp[16];
	for (int i = 0; i < 16; i++) {
		hp[i] = (gmx_cmd_t){
		    .seq = (uint64_t)i + 1, .task = 0, .kind = GMX_OP_KERNEL, .predicted_ns = 100};
		f.now = (int64_t)i * 1100000;
		ops->on_launch(s, &hp[i]);
		f.now += 100000;
		ops->on_complete(s, &hp[i]);
	}
	/* An LP kernel of 0.5 ms whose pages take 2 ms to load does not fit a 1 ms gap... */
	f.load = 2000000;
	gmx_cmd_t lp = {.seq = 100, .task = 1, .kind = GMX_OP_KERNEL, .predicted_ns = 500000};
	ops->on_launch(s, &lp);
	assert_int_equal(f.submitted[1], 0);
	/* ... and does once its pages are resident. */
	f.load = 0;
	f.now += 1000;
	ops->on_timer(s);
	assert_int_equal(f.submitted[1], 1);
	ops->destroy(s);
}

/* An LP kernel waiting for its pages is not an idle LP task, and another LP task's turn never
 * cuts it: the planner makes the next turn's room from the outgoing task's pages, so a kernel
 * cut there would resume on pages gone (the "LP alone slower than LP beside HP" of issue 15). */
static void lp_turn_ends_at_a_kernel_boundary(void **state)
{
	(void)state;
	fake_t f = {0};
	gmx_sched_params_t p;
	gmx_sched_params_default(&p);
	p.slice_ns = 50000000;
	const gmx_policy_ops_t *ops = gmx_sched_find("gpumux");
	gmx_policy_t *s = fake_policy(&f, 1, &p, 0, 2);
	gmx_cmd_t a = {.seq = 1, .task = 1, .kind = GMX_OP_KERNEL, .predicted_ns = 1000000};
	gmx_cmd_t b = {.seq = 2, .task = 2, .kind = GMX_OP_KERNEL, .predicted_ns = 1000000};
	ops->on_launch(s, &a);
	ops->on_launch(s, &b);
	assert_int_equal(f.submitted[1], 1);
	assert_int_equal(f.submitted[2], 0);
	/* 5 ms on, task 1's kernel still waits for its pages: its turn holds (no grace counted). */
	f.now = 5000000;
	ops->on_timer(s);
	assert_int_equal(f.preempts, 0);
	assert_int_equal(f.submitted[2], 0);
	/* Past its slice, the kernel still in flight: not cut, task 2 waits for it. */
	f.now = 60000000;
	ops->on_timer(s);
	assert_int_equal(f.preempts, 0);
	assert_int_equal(f.held[1], 0);
	assert_int_equal(f.submitted[2], 0);
	f.now = 61000000;
	ops->on_complete(s, &a);
	assert_int_equal(f.submitted[2], 1);
	assert_int_equal(f.held[1], 0);
	ops->destroy(s);
}

static void gap_prior_from_arrivals(void **state)
{
	(void)state;
	/* Poisson at 2/s: memoryless, the 5% quantile of an exponential whatever has passed. */
	gmx_comb_arrivals_t po = {.rate_per_s = 2.0, .interarrival_ns = NULL};
	int64_t g = gmx_comb_gap_prior(&po, 0, 0.05);
	assert_true(g > 25600000 && g < 25700000); /* -ln(0.95) / 2 s = 25.65 ms */
	assert_int_equal(gmx_comb_gap_prior(&po, 1000000000, 0.05), g);
	/* Periodic, 100 ms apart, 20 ms busy: an 80 ms gap, less what has passed. */
	int64_t period = 100000000;
	gmx_comb_arrivals_t pe = {.interarrival_ns = &period, .n_interarrival = 1, .busy_ns = 20000000};
	assert_int_equal(gmx_comb_gap_prior(&pe, 0, 0.05), 80000000);
	assert_int_equal(gmx_comb_gap_prior(&pe, 30000000, 0.05), 50000000);
	assert_int_equal(gmx_comb_gap_prior(&pe, 90000000, 0.05), INT64_MAX); /* beyond it: open */
	/* A trace of 10..100 ms: the median among those longer than what has passed. */
	int64_t tr[10];
	for (int i = 0; i < 10; i++)
		tr[i] = (int64_t)(10 - i) * 10000000;
	gmx_comb_arrivals_t t = {.interarrival_ns = tr, .n_interarrival = 10};
	assert_int_equal(gmx_comb_gap_prior(&t, 0, 0.5), 60000000);
	assert_int_equal(gmx_comb_gap_prior(&t, 0, 0), 10000000);
	assert_int_equal(gmx_comb_gap_prior(&t, 55000000, 0), 5000000); /* 60 ms less 55 */
	/* Nothing known. */
	gmx_comb_arrivals_t none = {.rate_per_s = 0, .interarrival_ns = NULL};
	assert_int_equal(gmx_comb_gap_prior(&none, 0, 0.05), -1);
	assert_int_equal(gmx_comb_gap_prior(NULL, 0, 0.05), -1);
}

/* Whether an LP kernel of lp_ns goes at the start of the HP task's first idle gap (no gap seen
 * yet), on a device without preemption, with these arrivals known (NULL: none). */
static int first_gap_admits(const gmx_comb_arrivals_t *arr, uint32_t n_arr, int64_t lp_ns)
{
	fake_t f = {0};
	gmx_sched_params_t p;
	gmx_sched_params_default(&p);
	p.arrivals = arr;
	p.n_arrivals = n_arr;
	const gmx_policy_ops_t *ops = gmx_sched_find("gpumux");
	gmx_policy_t *s = fake_policy(&f, 0, &p, 1, 1);
	gmx_cmd_t hp = {.seq = 1, .task = 0, .kind = GMX_OP_KERNEL, .predicted_ns = 100000};
	ops->on_launch(s, &hp);
	f.now = 100000;
	ops->on_complete(s, &hp); /* HP idle: its first gap */
	gmx_cmd_t lp = {.seq = 2, .task = 1, .kind = GMX_OP_KERNEL, .predicted_ns = lp_ns};
	ops->on_launch(s, &lp);
	ops->destroy(s);
	return f.submitted[1] == 1;
}

/* Before any HP gap is seen, the predictor takes the gap the HP task's known arrivals leave
 * (without them it is open and the first LP kernels go whatever their length). */
static void gap_predictor_seeded_from_arrivals(void **state)
{
	(void)state;
	/* HP every 1.1 ms, busy 0.1 ms of it: 1 ms gaps. */
	int64_t period = 1100000;
	gmx_comb_arrivals_t arr[2] = {{.interarrival_ns = &period, .n_interarrival = 1, .busy_ns = 100000},
				      {.interarrival_ns = NULL}};
	assert_false(first_gap_admits(arr, 2, 2000000)); /* 2 ms does not fit the 1 ms gap */
	assert_true(first_gap_admits(NULL, 0, 2000000)); /* unknown arrivals: open */
	assert_true(first_gap_admits(arr, 2, 500000));	 /* 0.5 ms fits */
}

/* Without preemption, an LP task whose kernel is still running is not idle: its turn holds
 * while the kernel runs past the grace (1 ms) and for the grace after it completes, so a host
 * that launches again at once keeps its turn instead of handing it (and a migration) over. */
static void without_preemption_a_running_lp_kernel_keeps_its_turn(void **state)
{
	(void)state;
	fake_t f = {0};
	gmx_device_t dev = {.ctx = &f, .now = f_now, .submit = f_submit, .set_timer = f_timer};
	gmx_sched_params_t p;
	gmx_sched_params_default(&p);
	p.slice_ns = 100000000; /* turns of 100 ms: only idleness can end one here */
	p.inflight_max = 1;
	const gmx_policy_ops_t *ops = gmx_sched_find("gpumux");
	gmx_policy_t *s;
	assert_int_equal(ops->create(&p, &dev, &s), 0);
	assert_int_equal(ops->task_add(s, 0, 0), 0); /* HP, idle */
	assert_int_equal(ops->task_add(s, 1, 5), 0);
	assert_int_equal(ops->task_add(s, 2, 5), 0);
	gmx_cmd_t a1 = {.seq = 1, .task = 1, .kind = GMX_OP_KERNEL};
	gmx_cmd_t b1 = {.seq = 2, .task = 2, .kind = GMX_OP_KERNEL};
	ops->on_launch(s, &a1);
	ops->on_launch(s, &b1);
	assert_int_equal(f.submitted[1], 1); /* task 1's turn */
	f.now = 3000000;		     /* its kernel ran 3 ms */
	ops->on_timer(s);
	ops->on_complete(s, &a1);
	f.now += 200000; /* its host launches again 0.2 ms later */
	gmx_cmd_t a2 = {.seq = 3, .task = 1, .kind = GMX_OP_KERNEL};
	ops->on_launch(s, &a2);
	assert_int_equal(f.submitted[1], 2);
	assert_int_equal(f.submitted[2], 0);
	ops->destroy(s);
}

/* The slice rule (core's, the simulator's and gpumuxd's): a turn whose migration takes 10% of
 * it, at least 2 ms, at most the cap; the migration is re-estimated over the slice it asks for. */
static double fixed_migration(void *ctx, int64_t horizon_ns)
{
	(void)horizon_ns;
	return *(const double *)ctx;
}
static double growing_migration(void *ctx, int64_t horizon_ns)
{
	/* a task touching 1 GB per s of its turn, of which 256 MB are missing, at 25 GB/s */
	(void)ctx;
	double miss = (double)horizon_ns * 1.0 < 256e6 ? (double)horizon_ns * 1.0 : 256e6;
	return miss / 25e9;
}
static void slice_rule_bounds_the_migration_share(void **state)
{
	(void)state;
	double m = 0.010; /* 10 ms to move */
	assert_int_equal(gmx_comb_slice_rule(GMX_COMB_SLICE_NS_MAX, fixed_migration, &m), 100000000);
	m = 0;
	assert_int_equal(gmx_comb_slice_rule(GMX_COMB_SLICE_NS_MAX, fixed_migration, &m), GMX_COMB_SLICE_NS_MIN);
	m = 0.010; /* a 50 ms cap (a latency target) wins over the 100 ms the migration asks for */
	assert_int_equal(gmx_comb_slice_rule(50000000, fixed_migration, &m), 50000000);
	assert_int_equal(gmx_comb_slice_rule(1000, fixed_migration, &m), GMX_COMB_SLICE_NS_MIN);
	/* over 2 s the turn misses 256 MB (10.24 ms): 102.4 ms; over 102.4 ms it misses 102.4 MB
	 * (4.1 ms): 41 ms */
	int64_t sl = gmx_comb_slice_rule(GMX_COMB_SLICE_NS_MAX, growing_migration, NULL);
	assert_true(sl > 40000000 && sl < 41000000);
}

/* Learned kernel durations: the median of the last ones per identity and task; the least
 * recently observed identity gives way; a task's slot forgotten when it leaves. */
static void kernel_durations_learned(void **state)
{
	(void)state;
	gmx_kdur_t *k;
	assert_int_equal(gmx_kdur_create(4, &k), 0);
	assert_int_equal(gmx_kdur_predict(k, 1, 7), -1);
	assert_int_equal(gmx_kdur_task_mean(k, 1), -1);
	for (int i = 0; i < 9; i++)
		assert_int_equal(gmx_kdur_observe(k, 1, 7, i == 4 ? 50000000 : 1000000), 0); /* one ran 50 ms */
	assert_int_equal(gmx_kdur_predict(k, 1, 7), 1000000);
	assert_int_equal(gmx_kdur_predict(k, 2, 7), -1); /* per task */
	assert_int_equal(gmx_kdur_observe(k, 1, 8, 3000000), 0);
	assert_int_equal(gmx_kdur_task_mean(k, 1), (9 * 1000000 + 3000000) / 10);
	for (uint64_t id = 100; id < 100 + GMX_KDUR_IDS; id++)
		assert_int_equal(gmx_kdur_observe(k, 1, id, 5), 0);
	assert_int_equal(gmx_kdur_predict(k, 1, 7), -1); /* the least recently observed went first */
	assert_int_equal(gmx_kdur_predict(k, 1, 100 + GMX_KDUR_IDS - 1), 5);
	assert_int_equal(gmx_kdur_observe(k, 4, 1, 5), -EINVAL);
	assert_int_equal(gmx_kdur_observe(k, 1, 1, -1), -EINVAL);
	gmx_kdur_forget(k, 1);
	assert_int_equal(gmx_kdur_predict(k, 1, 100 + GMX_KDUR_IDS - 1), -1);
	gmx_kdur_destroy(k);
}

/* HP task 0's first 16 requests (hp[0..15]), one every period_ns from 0, each busy for busy_ns. */
static void hp_requests(const gmx_policy_ops_t *ops, gmx_policy_t *s, fake_t *f, gmx_cmd_t *hp, int64_t busy_ns,
			int64_t period_ns)
{
	for (int i = 0; i < 16; i++) {
		hp[i] = (gmx_cmd_t){.seq = (uint64_t)i + 1, .task = 0, .kind = GMX_OP_KERNEL, .kernel_id = 9};
		f->now = (int64_t)i * period_ns;
		ops->on_launch(s, &hp[i]);
		f->now += busy_ns;
		ops->on_complete(s, &hp[i]);
	}
}

/* On a device whose commands carry no duration (gpumuxd), the policy measures its kernels
 * (params.kdur) and keeps an LP kernel that ran 2 ms out of a 1 ms HP gap; knowing nothing
 * of durations (no kdur), it lets it in and the HP request waits for it. */
static uint32_t lp_after_learning(int with_kdur)
{
	fake_t f = {0};
	gmx_sched_params_t p;
	gmx_sched_params_default(&p);
	gmx_kdur_t *k = NULL;
	if (with_kdur) {
		assert_int_equal(gmx_kdur_create(GMX_MAX_TASKS, &k), 0);
		p.kdur = k;
	}
	const gmx_policy_ops_t *ops = gmx_sched_find("gpumux");
	gmx_policy_t *s = fake_policy(&f, 0, &p, 1, 1);
	gmx_cmd_t hp[17];
	hp_requests(ops, s, &f, hp, 100000, 1100000); /* HP gaps of 1 ms */
	/* An LP kernel of unknown length goes into the gap, and runs 2 ms. */
	f.now += 1000;
	gmx_cmd_t a1 = {.seq = 100, .task = 1, .kind = GMX_OP_KERNEL, .kernel_id = 77};
	ops->on_launch(s, &a1);
	assert_int_equal(f.submitted[1], 1);
	f.now += 2000000;
	ops->on_complete(s, &a1);
	if (k)
		assert_int_equal(gmx_kdur_predict(k, 1, 77), 2000000);
	/* HP's next request, then a new gap: the same LP kernel again. */
	hp[16] = (gmx_cmd_t){.seq = 101, .task = 0, .kind = GMX_OP_KERNEL, .kernel_id = 9};
	ops->on_launch(s, &hp[16]);
	f.now += 100000;
	ops->on_complete(s, &hp[16]);
	f.now += 1000;
	gmx_cmd_t a2 = {.seq = 102, .task = 1, .kind = GMX_OP_KERNEL, .kernel_id = 77};
	ops->on_launch(s, &a2);
	uint32_t n = f.submitted[1];
	ops->destroy(s);
	gmx_kdur_destroy(k);
	return n;
}
static void learned_durations_keep_lp_out_of_short_gaps(void **state)
{
	(void)state;
	assert_int_equal(lp_after_learning(1), 1); /* a2 waits: 2 ms does not fit the 1 ms gap */
	assert_int_equal(lp_after_learning(0), 2); /* blind to durations: a2 goes */
}


/* params.kdur: an LP kernel released with its pages away measures their migration too (in
 * gpumuxd, pieces and round trips: tens of ms under load). It is never learned as a run: learned,
 * the task's resident kernels after it looked as long as the switch and none fitted an HP gap
 * again (e2e_combined under load: 2 LP kernels while HP ran, each a switch). It gives its turn's
 * switch cost instead, all of it while no run is known: unmeasured, the task's turns stayed as short
 * as its pages' link time, each another switch. */
static int64_t lp_after_a_switch(int64_t *predicted, int64_t *switch_ns)
{
	fake_t f = {0};
	gmx_sched_params_t p;
	gmx_sched_params_default(&p);
	p.inflight_max = 1;
	gmx_kdur_t *k;
	assert_int_equal(gmx_kdur_create(GMX_MAX_TASKS, &k), 0);
	p.kdur = k;
	const gmx_policy_ops_t *ops = gmx_sched_find("gpumux");
	gmx_policy_t *s = fake_policy(&f, 0, &p, 1, 1);
	gmx_cmd_t hp[17];
	hp_requests(ops, s, &f, hp, 1000000, 5000000); /* HP: 1 ms requests, gaps of 4 ms */
	/* The LP kernel's pages are away (1 ms of link): it fits the gap and goes; its pages coming
	 * in make it take 6 ms, through HP's next request. */
	f.load = 1000000;
	f.now += 1000;
	gmx_cmd_t a1 = {.seq = 100, .task = 1, .kind = GMX_OP_KERNEL, .kernel_id = 77};
	ops->on_launch(s, &a1);
	assert_int_equal(f.submitted[1], 1);
	f.load = 0; /* resident from now on */
	hp[16] = (gmx_cmd_t){.seq = 17, .task = 0, .kind = GMX_OP_KERNEL, .kernel_id = 9};
	f.now = 80000000;
	ops->on_launch(s, &hp[16]);
	f.now = 81000000;
	ops->on_complete(s, &hp[16]);
	f.now = 82000000;
	ops->on_complete(s, &a1);
	*predicted = gmx_kdur_predict(k, 1, 77);
	*switch_ns = gmx_kdur_switch_ns(k, 1);
	/* The next LP kernel, its pages resident, 1 ms into a 4 ms gap: it runs 0.5 ms. */
	f.now += 1000;
	gmx_cmd_t a2 = {.seq = 101, .task = 1, .kind = GMX_OP_KERNEL, .kernel_id = 77};
	ops->on_launch(s, &a2);
	int64_t n = f.submitted[1];
	ops->destroy(s);
	gmx_kdur_destroy(k);
	return n;
}
static void switch_not_learned_as_a_run(void **state)
{
	(void)state;
	int64_t pred, sw;
	assert_int_equal(lp_after_a_switch(&pred, &sw), 2); /* a2 goes into the gap */
	assert_int_equal(pred, -1);		       /* nothing learned of its runs yet */
	assert_int_equal(sw, 82000000 - 76001000); /* its switch: all of it, its run unknown */
}

/* params.kdur: what an LP task's switch costs is measured as how much longer the first kernel
 * of its turn took than its kernels do (its pages coming in): gpumuxd's slice rule reads it. */
static void switch_cost_measured(void **state)
{
	(void)state;
	fake_t f = {0};
	gmx_sched_params_t p;
	gmx_sched_params_default(&p);
	p.inflight_max = 1;
	gmx_kdur_t *k;
	assert_int_equal(gmx_kdur_create(GMX_MAX_TASKS, &k), 0);
	p.kdur = k;
	const gmx_policy_ops_t *ops = gmx_sched_find("gpumux");
	gmx_policy_t *s = fake_policy(&f, 0, &p, 0, 2); /* two LP tasks, 2 ms turns */
	gmx_cmd_t a[3], b = {.seq = 10, .task = 2, .kind = GMX_OP_KERNEL, .kernel_id = 6};
	for (int i = 0; i < 3; i++)
		a[i] = (gmx_cmd_t){.seq = (uint64_t)i + 1, .task = 1, .kind = GMX_OP_KERNEL, .kernel_id = 5};
	ops->on_launch(s, &a[0]);
	f.now = 1000000;
	ops->on_complete(s, &a[0]); /* task 1's kernels run 1 ms */
	ops->on_launch(s, &a[1]);
	f.now = 1500000;
	ops->on_launch(s, &b);
	f.now = 2000000;
	ops->on_complete(s, &a[1]); /* task 1's turn is over: task 2's */
	assert_int_equal(f.submitted[2], 1);
	f.now = 2500000;
	ops->on_launch(s, &a[2]);
	f.now = 3000000;
	ops->on_complete(s, &b);
	f.now = 4000000;
	ops->on_timer(s); /* task 2 idle past the grace: task 1's turn again */
	assert_int_equal(f.submitted[1], 3);
	assert_int_equal(gmx_kdur_switch_ns(k, 1), -1);
	f.now = 9000000; /* its first kernel took 5 ms: 4 ms of switch */
	ops->on_complete(s, &a[2]);
	assert_int_equal(gmx_kdur_switch_ns(k, 1), 4000000);
	ops->destroy(s);
	gmx_kdur_destroy(k);
}

/* Leases on a device without preemption (gpumuxd): the LP task whose turn it is gets one
 * command in flight, ending where the predicted HP gap ends less its kernel; HP's arrival
 * revokes it at once; a leased release is counted in flight. */
static gmx_lease_t lease_of[4];
static int leases_sent;
static void f_lease(void *c, uint32_t task, const gmx_lease_t *l)
{
	(void)c;
	lease_of[task] = l ? *l : (gmx_lease_t){0};
	leases_sent++;
}
/* The LP lease in effect when each HP command was released: the revoke must come first (gpumuxd
 * prepares an HP release, its memory plan and orders, while the LP interposer keeps releasing). */
static uint32_t lp_lease_at_hp_release;
static int f_submit_seeing_lease(void *c, gmx_cmd_t *cmd)
{
	if (cmd->task == 0)
		lp_lease_at_hp_release = lease_of[1].inflight;
	return f_submit(c, cmd);
}
static void lp_lease_bounded_by_the_gap_and_revoked_on_hp(void **state)
{
	(void)state;
	fake_t f = {0};
	memset(lease_of, 0, sizeof lease_of);
	gmx_device_t dev = {
	    .ctx = &f, .now = f_now, .submit = f_submit_seeing_lease, .set_timer = f_timer, .lease = f_lease};
	gmx_sched_params_t p;
	gmx_sched_params_default(&p);
	p.slice_ns = 100000000;
	gmx_kdur_t *k;
	assert_int_equal(gmx_kdur_create(GMX_MAX_TASKS, &k), 0);
	p.kdur = k;
	const gmx_policy_ops_t *ops = gmx_sched_find("gpumux");
	gmx_policy_t *s;
	assert_int_equal(ops->create(&p, &dev, &s), 0);
	assert_int_equal(ops->task_add(s, 0, 0), 0);
	assert_int_equal(ops->task_add(s, 1, 5), 0);
	gmx_cmd_t hp[17];
	for (int i = 0; i < 16; i++) { /* HP gaps of 1 ms */
		hp[i] = (gmx_cmd_t){.seq = (uint64_t)i + 1, .task = 0, .kind = GMX_OP_KERNEL, .kernel_id = 9};
		f.now = (int64_t)i * 1100000;
		ops->on_launch(s, &hp[i]);
		f.now += 100000;
		ops->on_complete(s, &hp[i]);
	}
	assert_int_equal(lease_of[1].inflight, 0);
	/* LP's first kernel (noticed) runs 0.2 ms; it then holds a lease of one command in flight
	 * that ends 0.2 ms before the predicted 1 ms gap does. */
	int64_t idle_from = f.now;
	f.now += 1000;
	gmx_cmd_t a1 = {.seq = 100, .task = 1, .kind = GMX_OP_KERNEL, .kernel_id = 5};
	ops->on_launch(s, &a1);
	assert_int_equal(f.submitted[1], 1);
	f.now += 200000;
	ops->on_complete(s, &a1);
	assert_int_equal(lease_of[1].inflight, 1);
	assert_true(lease_of[1].until > f.now && lease_of[1].until <= idle_from + 1000000 - 200000);
	/* A leased release is in flight: the task's turn holds through it. */
	gmx_cmd_t a2 = {.seq = 101, .task = 1, .kind = GMX_OP_KERNEL, .kernel_id = 5, .leased = 1};
	ops->on_launch(s, &a2);
	assert_int_equal(f.submitted[1], 1); /* never submitted by the policy */
	/* HP arrives: the lease is revoked at once, before HP's command is released. */
	hp[16] = (gmx_cmd_t){.seq = 102, .task = 0, .kind = GMX_OP_KERNEL, .kernel_id = 9};
	f.now += 10000;
	lp_lease_at_hp_release = 99;
	ops->on_launch(s, &hp[16]);
	assert_int_equal(lease_of[1].inflight, 0);
	assert_int_equal(f.submitted[0], 17);
	assert_int_equal(lp_lease_at_hp_release, 0);
	ops->on_complete(s, &a2);
	ops->on_complete(s, &hp[16]);
	ops->destroy(s);
	gmx_kdur_destroy(k);
}

/* Without HP, the LP task whose turn it is holds a lease for its turn; when the turn is over
 * and another task waits, its lease is revoked even while its last kernel finishes. */
static void lp_lease_revoked_when_its_turn_ends(void **state)
{
	(void)state;
	fake_t f = {0};
	memset(lease_of, 0, sizeof lease_of);
	gmx_device_t dev = {.ctx = &f, .now = f_now, .submit = f_submit, .set_timer = f_timer, .lease = f_lease};
	gmx_sched_params_t p;
	gmx_sched_params_default(&p); /* 2 ms turns, 2 in flight */
	const gmx_policy_ops_t *ops = gmx_sched_find("gpumux");
	gmx_policy_t *s;
	assert_int_equal(ops->create(&p, &dev, &s), 0);
	assert_int_equal(ops->task_add(s, 1, 5), 0);
	assert_int_equal(ops->task_add(s, 2, 5), 0);
	gmx_cmd_t a1 = {.seq = 1, .task = 1, .kind = GMX_OP_KERNEL}, b1 = {.seq = 2, .task = 2, .kind = GMX_OP_KERNEL};
	ops->on_launch(s, &a1);
	assert_int_equal(lease_of[1].inflight, p.inflight_max);
	assert_int_equal(lease_of[1].until, p.slice_ns);
	ops->on_launch(s, &b1);
	f.now = 3000000; /* the turn is over; a1 still runs */
	ops->on_timer(s);
	assert_int_equal(lease_of[1].inflight, 0);
	assert_int_equal(f.submitted[2], 0);
	ops->on_complete(s, &a1);
	assert_int_equal(f.submitted[2], 1);
	assert_int_equal(lease_of[2].inflight, p.inflight_max);
	ops->on_complete(s, &b1);
	ops->destroy(s);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(hp_pages_not_evicted_for_lp),
	    cmocka_unit_test(lp_admitted_only_if_pages_fit_the_gap),
	    cmocka_unit_test(prefetch_ahead_only_with_half_the_link_spare),
	    cmocka_unit_test(hp_migration_waits_at_most_one_piece),
	    cmocka_unit_test(lp_slice_from_targets),
	    cmocka_unit_test(hp_arrival_preempts_lp_at_once),
	    cmocka_unit_test(without_preemption_lp_waits_for_a_gap_its_pages_fit),
	    cmocka_unit_test(lp_turn_ends_at_a_kernel_boundary),
	    cmocka_unit_test(gap_prior_from_arrivals),
	    cmocka_unit_test(gap_predictor_seeded_from_arrivals),
	    cmocka_unit_test(without_preemption_a_running_lp_kernel_keeps_its_turn),
	    cmocka_unit_test(slice_rule_bounds_the_migration_share),
	    cmocka_unit_test(kernel_durations_learned),
	    cmocka_unit_test(learned_durations_keep_lp_out_of_short_gaps),
	    cmocka_unit_test(switch_cost_measured),
	    cmocka_unit_test(switch_not_learned_as_a_run),
	    cmocka_unit_test(lp_lease_bounded_by_the_gap_and_revoked_on_hp),
	    cmocka_unit_test(lp_lease_revoked_when_its_turn_ends),
	    cmocka_unit_test(prefetch_cmds_by_window_gate_and_room),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
