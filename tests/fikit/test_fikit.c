/* fikit: kernel IDs, profiles and their file, BestPrioFit by hand-computed
 * cases, stream order, and the starvation bound (docs/fikit.md). */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "fikit.h"
#include "gpumux/kprofile.h"
#include "gpumux/sched.h"
#include "profile.h"

/* A device that records submissions and whose clock the test moves. */
typedef struct fake {
	int64_t now, timer;
	gmx_cmd_t *sub[4096];
	int64_t sub_t[4096];
	uint32_t n_sub;
} fake_t;

static int64_t f_now(void *c)
{
	return ((fake_t *)c)->now;
}

static int f_submit(void *c, gmx_cmd_t *cmd)
{
	fake_t *f = c;
	f->sub_t[f->n_sub] = f->now;
	f->sub[f->n_sub++] = cmd;
	return 0;
}

static void f_timer(void *c, int64_t at)
{
	((fake_t *)c)->timer = at;
}

/* A profile where kernel `id` always runs dur_ns and is followed by gap_ns. */
static void const_profile(gmx_kprof_t *p, uint64_t id, int64_t dur_ns, int64_t gap_ns)
{
	for (int i = 0; i < 4; i++)
		assert_int_equal(gmx_kprof_observe(p, id, 0, dur_ns, gap_ns, "k"), 0);
}

static void test_kernel_id(void **state)
{
	(void)state;
	uint32_t g[3] = {80, 1, 1}, b[3] = {256, 1, 1}, g2[3] = {81, 1, 1};
	uint64_t a = gmx_kernel_id("conv", g, b, 0);
	assert_true(a != 0);
	assert_true(a == gmx_kernel_id("conv", g, b, 0));
	assert_true(a != gmx_kernel_id("conv", g2, b, 0));
	assert_true(a != gmx_kernel_id("conv", g, b, 1024));
	assert_true(a != gmx_kernel_id("conv2", g, b, 0));
	assert_true(gmx_kernel_id(NULL, g, b, 0) != 0);
}

static void test_quantiles(void **state)
{
	(void)state;
	gmx_kprof_t p;
	assert_int_equal(gmx_kprof_init(&p, "t"), 0);
	/* gaps 0..99 us evenly: the 5% quantile is ~5 us; after 50 us idle, the
	 * 5% quantile of what remains is ~2.5 us */
	for (int i = 0; i < 100; i++)
		assert_int_equal(gmx_kprof_observe(&p, 7, 0, 1000, i * 1000, NULL), 0);
	gmx_kprof_finish(&p);
	const gmx_kprof_entry_t *e = gmx_kprof_find(&p, 7, 0);
	assert_non_null(e);
	assert_int_equal(e->n, 100);
	int64_t q5 = gmx_kdist_quantile(&e->gap, 0.05);
	assert_true(q5 >= 4000 && q5 <= 6000);
	int64_t r = gmx_kdist_remaining(&e->gap, 50000, 0.05);
	assert_true(r >= 1500 && r <= 3500);
	assert_int_equal(gmx_kdist_remaining(&e->gap, 200000, 0.05), 0);
	assert_int_equal(gmx_kprof_observe(&p, 0, 0, 1, 1, NULL), -EINVAL);
	gmx_kprof_free(&p);
}

/* A snapshot is the finished profile, and the source keeps measuring as if
 * nothing had happened (the daemon saves while a policy still learns). */
static void test_snapshot(void **state)
{
	(void)state;
	gmx_kprof_t p, snap, done;
	assert_int_equal(gmx_kprof_init(&p, "t"), 0);
	for (int i = 0; i < 10; i++) {
		gmx_kprof_observe(&p, 5, 1, 10000, 0, "a");
		gmx_kprof_observe(&p, 5, 2, 100000, 0, "a");
		gmx_kprof_observe(&p, 9, 1, 3000, 0, "b");
		gmx_kprof_observe(&p, 9, 2, 3000, 0, "b");
	}
	assert_int_equal(gmx_kprof_snapshot(&p, &snap), 0);
	assert_string_equal(snap.task, "t");
	assert_null(gmx_kprof_find(&snap, 9, 1)); /* compacted as finish would */
	assert_int_equal(gmx_kdist_quantile(&gmx_kprof_lookup(&snap, 5, 2)->dur, 0.5), 100000);
	assert_non_null(gmx_kprof_find(&p, 9, 1)); /* the source is untouched */
	assert_int_equal(gmx_kprof_find(&p, 5, 1)->n_s, 10);
	gmx_kprof_observe(&p, 5, 1, 20000, 0, "a");
	assert_int_equal(gmx_kprof_find(&p, 5, 1)->n, 11);
	/* The snapshot equals what finishing the source gives. */
	assert_int_equal(gmx_kprof_snapshot(&p, &done), 0);
	gmx_kprof_finish(&p);
	assert_int_equal(done.n, p.n);
	for (uint32_t i = 0; i < p.n; i++) {
		const gmx_kprof_entry_t *e = gmx_kprof_find(&done, p.e[i].id, p.e[i].prev);
		assert_non_null(e);
		assert_int_equal(e->n, p.e[i].n);
		assert_memory_equal(e->dur.q, p.e[i].dur.q, sizeof e->dur.q);
	}
	gmx_kprof_free(&done);
	gmx_kprof_free(&snap);
	gmx_kprof_free(&p);
}

static void test_context(void **state)
{
	(void)state;
	gmx_kprof_t p;
	assert_int_equal(gmx_kprof_init(&p, "t"), 0);
	/* kernel 5 runs 10 us after kernel 1 and 100 us after kernel 2 */
	for (int i = 0; i < 10; i++) {
		gmx_kprof_observe(&p, 5, 1, 10000, 0, NULL);
		gmx_kprof_observe(&p, 5, 2, 100000, 0, NULL);
		gmx_kprof_observe(&p, 9, 1, 3000, 0, NULL); /* constant: no context kept */
		gmx_kprof_observe(&p, 9, 2, 3000, 0, NULL);
	}
	gmx_kprof_finish(&p);
	assert_int_equal(gmx_kdist_quantile(&gmx_kprof_lookup(&p, 5, 1)->dur, 0.5), 10000);
	assert_int_equal(gmx_kdist_quantile(&gmx_kprof_lookup(&p, 5, 2)->dur, 0.5), 100000);
	assert_null(gmx_kprof_find(&p, 9, 1));
	assert_non_null(gmx_kprof_lookup(&p, 9, 1));
	gmx_kprof_free(&p);
}

/* The profile's memo of the entries last observed stays exact when gmx_kprof_finish drops and
 * moves entries: the memoised index then holds another key (kernel 5 after kernel 1), which a
 * lookup of the dropped one (kernel 9 after kernel 1) must not return. */
static void test_memo_after_compaction(void **state)
{
	(void)state;
	gmx_kprof_t p;
	assert_int_equal(gmx_kprof_init(&p, "t"), 0);
	gmx_kprof_observe(&p, 5, 0, 10000, 0, NULL);
	for (int i = 0; i < 10; i++) {
		gmx_kprof_observe(&p, 5, 1, 10000, 0, NULL);
		gmx_kprof_observe(&p, 5, 2, 100000, 0, NULL);
		gmx_kprof_observe(&p, 9, 1, 3000, 0, NULL); /* constant: its context entry goes */
	}
	assert_non_null(gmx_kprof_find(&p, 9, 1)); /* the memoised entry, before finish */
	gmx_kprof_finish(&p);
	assert_null(gmx_kprof_find(&p, 9, 1));
	assert_int_equal(gmx_kprof_lookup(&p, 9, 1)->id, 9);
	assert_int_equal(gmx_kprof_lookup(&p, 9, 1)->prev, 0);
	assert_int_equal(gmx_kdist_quantile(&gmx_kprof_find(&p, 5, 1)->dur, 0.5), 10000);
	/* Learning again after finish: a new key, then the memoised one found where it now is. */
	assert_int_equal(gmx_kprof_observe(&p, 9, 1, 3000, 0, NULL), 0);
	assert_int_equal(gmx_kprof_find(&p, 9, 1)->n, 1);
	assert_int_equal(gmx_kprof_observe(&p, 5, 1, 10000, 0, NULL), 0);
	assert_int_equal(gmx_kprof_find(&p, 5, 1)->n, 11);
	assert_int_equal(gmx_kprof_find(&p, 9, 1)->n, 1);
	gmx_kprof_free(&p);
}

/* HP task 0 at level 0; LP tasks 1, 2 at level 3 and 3 at level 5, each with
 * one queued kernel of known duration. */
typedef struct rig {
	fake_t f;
	gmx_kprof_t prof[4];
	gmx_kprof_t *pp[4];
	gmx_policy_t *pol;
	const gmx_policy_ops_t *ops;
	gmx_cmd_t cmd[64];
} rig_t;

/* Creates the policy over the profiles already in r->prof[0..n) and adds the tasks. */
static void rig_start(rig_t *r, const int *levels, int n)
{
	gmx_device_t dev = {.ctx = &r->f, .now = f_now, .submit = f_submit, .set_timer = f_timer};
	gmx_sched_params_t p;
	gmx_sched_params_default(&p);
	for (int t = 0; t < n; t++)
		r->pp[t] = &r->prof[t];
	p.profiles = r->pp;
	p.n_profiles = (uint32_t)n;
	r->ops = gmx_sched_find("fikit");
	assert_non_null(r->ops);
	assert_int_equal(r->ops->create(&p, &dev, &r->pol), 0);
	for (int t = 0; t < n; t++)
		assert_int_equal(r->ops->task_add(r->pol, (uint32_t)t, levels[t]), 0);
}

static void rig_init(rig_t *r, const int *levels, const int64_t *dur, int n)
{
	memset(r, 0, sizeof(*r));
	for (int t = 0; t < n; t++) {
		gmx_kprof_init(&r->prof[t], "t");
		const_profile(&r->prof[t], 100 + (uint64_t)t, dur[t], t == 0 ? 500000 : 0);
		gmx_kprof_finish(&r->prof[t]);
	}
	rig_start(r, levels, n);
}

static void rig_free(rig_t *r, int n)
{
	r->ops->destroy(r->pol);
	for (int t = 0; t < n; t++)
		gmx_kprof_free(&r->prof[t]);
}

static gmx_cmd_t *launch(rig_t *r, int i, uint32_t task, int16_t stream)
{
	static uint64_t seq;
	gmx_cmd_t *c = &r->cmd[i];
	*c = (gmx_cmd_t){
	    .seq = ++seq, .task = task, .stream = stream, .kind = GMX_OP_KERNEL, .kernel_id = 100 + task};
	r->ops->on_launch(r->pol, c);
	return c;
}

static void test_bestpriofit_cases(void **state)
{
	(void)state;
	rig_t r;
	int levels[4] = {0, 3, 3, 5};
	int64_t dur[4] = {50000, 300000, 450000, 100000};
	rig_init(&r, levels, dur, 4);
	/* HP busy: its kernel goes at once, nothing else */
	r.f.now = 1000;
	gmx_cmd_t *hp = launch(&r, 0, 0, 0);
	launch(&r, 1, 1, 0);
	launch(&r, 2, 2, 0);
	launch(&r, 3, 3, 0);
	assert_int_equal(r.f.n_sub, 1);
	assert_ptr_equal(r.f.sub[0], hp);
	/* Hand-computed picks (durations at the 95th percentile = the constants;
	 * switch cost 0 by default): */
	uint32_t t = 99;
	assert_int_equal(gmx_fikit_pick(r.pol, 0, 0, 500000, &t), 450000); /* largest that fits at level 3 */
	assert_int_equal(t, 2);
	assert_int_equal(gmx_fikit_pick(r.pol, 0, 0, 449999, &t), 300000); /* 450 no longer fits */
	assert_int_equal(t, 1);
	assert_int_equal(gmx_fikit_pick(r.pol, 0, 0, 200000, &t),
			 100000); /* level 3 empty of fits: level 5 */
	assert_int_equal(t, 3);
	assert_int_equal(gmx_fikit_pick(r.pol, 0, 0, 99999, &t), -1); /* nothing fits */
	/* The HP kernel completes: its gap is 500 us at every quantile, so the
	 * fill takes task 2 (450 us, fits), then nothing more fits in the 50 us
	 * left at level 3 or 5. */
	r.f.now = 60000;
	r.ops->on_complete(r.pol, hp);
	assert_int_equal(r.f.n_sub, 2);
	assert_int_equal(r.f.sub[1]->task, 2);
	rig_free(&r, 4);
}

static void test_switch_cost(void **state)
{
	(void)state;
	/* With a 40 us context switch each way, a 450 us kernel needs 530 us. */
	rig_t r;
	int levels[3] = {0, 3, 3};
	int64_t dur[3] = {50000, 300000, 450000};
	rig_init(&r, levels, dur, 3);
	r.ops->destroy(r.pol);
	gmx_device_t dev = {.ctx = &r.f, .now = f_now, .submit = f_submit, .set_timer = f_timer};
	gmx_sched_params_t p;
	gmx_sched_params_default(&p);
	p.switch_ns = 40000;
	p.profiles = r.pp;
	p.n_profiles = 3;
	assert_int_equal(r.ops->create(&p, &dev, &r.pol), 0);
	for (int k = 0; k < 3; k++)
		r.ops->task_add(r.pol, (uint32_t)k, levels[k]);
	launch(&r, 0, 0, 0);
	launch(&r, 1, 1, 0);
	launch(&r, 2, 2, 0);
	uint32_t t;
	assert_int_equal(gmx_fikit_pick(r.pol, 0, 0, 529999, &t), 300000);
	assert_int_equal(gmx_fikit_pick(r.pol, 0, 0, 530000, &t), 450000);
	rig_free(&r, 3);
}

/* Stream order: whatever the interleaving, each task's commands reach the
 * device in launch order, and so each stream's. */
static void test_stream_order(void **state)
{
	(void)state;
	rig_t r;
	int levels[3] = {0, 4, 7};
	int64_t dur[3] = {20000, 30000, 10000};
	rig_init(&r, levels, dur, 3);
	gmx_cmd_t *inflight[64];
	int n_in = 0, launched = 0;
	uint64_t x = 12345;
	uint32_t done = 0;
	while (done < 60) {
		x = x * 6364136223846793005ull + 1442695040888963407ull;
		int op = (int)((x >> 33) % 3);
		r.f.now += 7000;
		if (op < 2 && launched < 60) {
			launch(&r, launched, (uint32_t)((x >> 40) % 3), (int16_t)((x >> 50) % 2));
			launched++;
		} else {
			/* complete the oldest submitted command not completed yet */
			n_in = 0;
			for (uint32_t k = 0; k < r.f.n_sub && n_in < 64; k++)
				if (r.f.sub[k]->next != (gmx_cmd_t *)1)
					inflight[n_in++] = r.f.sub[k];
			if (n_in) {
				inflight[0]->next = (gmx_cmd_t *)1; /* mark completed */
				r.ops->on_complete(r.pol, inflight[0]);
				done++;
			} else if (launched >= 60) {
				r.f.now = r.f.timer > r.f.now ? r.f.timer : r.f.now + 1000000;
				r.ops->on_timer(r.pol);
			}
		}
	}
	uint64_t last[3] = {0, 0, 0};
	for (uint32_t k = 0; k < r.f.n_sub; k++) {
		gmx_cmd_t *c = r.f.sub[k];
		assert_true(c->seq > last[c->task]);
		last[c->task] = c->seq;
	}
	assert_int_equal(r.f.n_sub, 60);
	rig_free(&r, 3);
}

/* No starvation: the HP task is never idle (a new kernel is always queued),
 * yet an LP head is released within starve_ns of becoming head. */
static void test_starvation_bound(void **state)
{
	(void)state;
	rig_t r;
	int levels[2] = {0, 9};
	int64_t dur[2] = {1000000, 5000000};
	rig_init(&r, levels, dur, 2);
	gmx_sched_params_t d;
	gmx_sched_params_default(&d);
	/* two HP kernels queued at t = 0, then the LP kernel: its head time is 0 */
	gmx_cmd_t *q[2] = {launch(&r, 0, 0, 0), launch(&r, 1, 0, 0)};
	gmx_cmd_t *lp = launch(&r, 2, 1, 0);
	int i = 3;
	int64_t released = -1;
	/* every 1 ms the oldest HP kernel completes and a new one is queued
	 * first: the HP task is never idle */
	while (r.f.now < 4 * d.starve_ns && released < 0 && i < 60) {
		r.f.now += 1000000;
		gmx_cmd_t *next = launch(&r, i++, 0, 0);
		gmx_cmd_t *done = q[0];
		q[0] = q[1];
		q[1] = next;
		r.ops->on_complete(r.pol, done);
		if (r.f.timer && r.f.timer <= r.f.now)
			r.ops->on_timer(r.pol);
		for (uint32_t k = 0; k < r.f.n_sub; k++)
			if (r.f.sub[k] == lp)
				released = r.f.sub_t[k];
		if (i >= 60)
			i = 3; /* reuse command slots: they have completed long ago */
	}
	assert_true(released >= 0);
	/* the bound: starve_ns after it became head, at the first decision then */
	assert_true(released >= d.starve_ns);
	assert_true(released <= d.starve_ns + 1000000);
	rig_free(&r, 2);
}

/* A device (the daemon) may give a finished task's index to a new task: the
 * new task starts clean and is scheduled; a task still running is refused. */
static void test_task_index_reuse(void **state)
{
	(void)state;
	rig_t r;
	int levels[2] = {0, 5};
	int64_t dur[2] = {100000, 100000};
	rig_init(&r, levels, dur, 2);
	launch(&r, 0, 1, 0);
	assert_int_equal(r.ops->task_add(r.pol, 1, 5), -EBUSY); /* running: not reusable */
	r.ops->task_done(r.pol, 0);
	assert_int_equal(r.ops->task_add(r.pol, 0, 0), 0); /* finished: starts over */
	uint32_t before = r.f.n_sub;
	launch(&r, 1, 0, 0);
	assert_int_equal(r.f.n_sub, before + 1); /* the new high-priority task's kernel goes at once */
	assert_ptr_equal(r.f.sub[r.f.n_sub - 1], &r.cmd[1]);
	rig_free(&r, 2);
}

/* A task that takes a finished task's place in its level (the daemon reuses slots) carries its
 * queued and in-flight work with it: fikit keeps per-level bits by position, which must move. */
static void test_level_books_follow_reuse(void **state)
{
	(void)state;
	rig_t r;
	int levels[3] = {0, 0, 0};
	int64_t dur[3] = {100000, 100000, 100000};
	rig_init(&r, levels, dur, 3);
	uint32_t bound = 0;
	for (int i = 0; i < 8 && r.f.n_sub == (uint32_t)i; i++, bound++)
		launch(&r, i, 2, 0); /* task 2 fills its in-flight bound, the next one waits */
	gmx_cmd_t *held = &r.cmd[bound - 1];
	assert_true(bound >= 2 && r.f.n_sub == bound - 1);
	r.ops->task_done(r.pol, 0);
	assert_int_equal(r.ops->task_add(r.pol, 0, 0), 0); /* task 2 moves to task 0's place */
	r.f.now = 100000;
	r.ops->on_complete(r.pol, &r.cmd[0]);
	assert_ptr_equal(r.f.sub[r.f.n_sub - 1], held); /* its waiting kernel goes */
	gmx_cmd_t *c0 = launch(&r, 20, 0, 0), *c1 = launch(&r, 21, 1, 0);
	assert_ptr_equal(r.f.sub[r.f.n_sub - 2], c0);
	assert_ptr_equal(r.f.sub[r.f.n_sub - 1], c1);
	rig_free(&r, 3);
}

/* Whether cmd reached the device. */
static int submitted(const rig_t *r, const gmx_cmd_t *cmd)
{
	for (uint32_t k = 0; k < r->f.n_sub; k++)
		if (r->f.sub[k] == cmd)
			return 1;
	return 0;
}

/* Two high-priority tasks idle at once: the lower level may use only the shorter of their
 * predicted gaps (a 1 ms kernel does not fit beside a 100 us gap, whatever the other's 2 ms). */
static void hp_gap_of_two(int64_t gap0, int64_t gap1, int want_fill)
{
	rig_t r;
	memset(&r, 0, sizeof(r));
	int levels[3] = {0, 0, 3};
	const int64_t gap[3] = {gap0, gap1, 0}, dur[3] = {50000, 50000, 1000000};
	for (int t = 0; t < 3; t++) {
		gmx_kprof_init(&r.prof[t], "t");
		const_profile(&r.prof[t], 100 + (uint64_t)t, dur[t], gap[t]);
		gmx_kprof_finish(&r.prof[t]);
	}
	rig_start(&r, levels, 3);
	gmx_cmd_t *a = launch(&r, 0, 0, 0), *b = launch(&r, 1, 1, 0), *lp = launch(&r, 2, 2, 0);
	assert_true(submitted(&r, a) && submitted(&r, b) && !submitted(&r, lp));
	r.f.now = 50000;
	r.ops->on_complete(r.pol, b); /* task 1 idle, task 0 still busy: no fill */
	assert_false(submitted(&r, lp));
	r.f.now = 60000;
	r.ops->on_complete(r.pol, a); /* both idle */
	if (submitted(&r, lp) != want_fill)
		fail_msg("gaps %lld and %lld us: the 1 ms kernel was %s", (long long)gap0 / 1000,
			 (long long)gap1 / 1000, want_fill ? "held" : "placed");
	rig_free(&r, 3);
}

static void test_hp_gap_is_the_shortest(void **state)
{
	(void)state;
	hp_gap_of_two(100000, 2000000, 0);
	hp_gap_of_two(2000000, 100000, 0);
	hp_gap_of_two(2000000, 2000000, 1); /* the control: both long, the kernel fits */
}

/* A kernel that completes while its host waits for it, with nothing queued behind it, ends a
 * request: its gap is looked up in the AFTER_SYNC context (the wait for the next request),
 * not the mid-request one. Kernel K after A: 10 us mid-request, 3 ms after a sync. */
static void after_sync(int host_waits, int want_fill)
{
	rig_t r;
	memset(&r, 0, sizeof(r));
	int levels[2] = {0, 3};
	const uint64_t A = 500, K = 501;
	gmx_kprof_init(&r.prof[0], "hp");
	for (int i = 0; i < 8; i++) {
		assert_int_equal(gmx_kprof_observe(&r.prof[0], A, 0, 50000, 10000, "A"), 0);
		assert_int_equal(gmx_kprof_observe(&r.prof[0], K, A, 50000, 10000, "K"), 0);
		assert_int_equal(
		    gmx_kprof_observe(&r.prof[0], K, GMX_KPROF_AFTER_SYNC(A), 50000, 3000000, "K"), 0);
	}
	gmx_kprof_finish(&r.prof[0]);
	assert_non_null(gmx_kprof_find(&r.prof[0], K, GMX_KPROF_AFTER_SYNC(A)));
	gmx_kprof_init(&r.prof[1], "lp");
	const_profile(&r.prof[1], 101, 1000000, 0);
	gmx_kprof_finish(&r.prof[1]);
	rig_start(&r, levels, 2);
	gmx_cmd_t *a = &r.cmd[0], *k = &r.cmd[1];
	*a = (gmx_cmd_t){.seq = 1, .task = 0, .kind = GMX_OP_KERNEL, .kernel_id = A};
	*k = (gmx_cmd_t){.seq = 2, .task = 0, .kind = GMX_OP_KERNEL, .kernel_id = K};
	r.ops->on_launch(r.pol, a);
	r.ops->on_launch(r.pol, k);
	gmx_cmd_t *lp = launch(&r, 2, 1, 0);
	assert_false(submitted(&r, lp));
	r.f.now = 50000;
	r.ops->on_complete(r.pol, a);
	if (host_waits)
		r.ops->on_host_wait(r.pol, 0);
	r.f.now = 100000;
	r.ops->on_complete(r.pol, k);
	if (submitted(&r, lp) != want_fill)
		fail_msg("host %s: the 1 ms kernel was %s", host_waits ? "waiting" : "not waiting",
			 want_fill ? "held" : "placed");
	rig_free(&r, 2);
}

static void test_after_sync_context(void **state)
{
	(void)state;
	after_sync(1, 1); /* end of a request: a 3 ms gap, the 1 ms kernel fits */
	after_sync(0, 0); /* mid-request: a 10 us gap, it does not */
}

static void make_profile(gmx_kprof_t *p)
{
	gmx_kprof_init(p, "inference");
	for (int i = 0; i < 50; i++) {
		gmx_kprof_observe(p, 11, 0, 1000 + i, 0, "gemm, with comma");
		gmx_kprof_observe(p, 12, 11, 5000 + 100 * i, i == 49 ? 9000000 : 10, "relu");
	}
	p->units = 49;
	gmx_kprof_finish(p);
}

static void test_profile_roundtrip(void **state)
{
	(void)state;
	gmx_kprof_t p[2];
	make_profile(&p[0]);
	make_profile(&p[1]);
	free(p[1].task);
	p[1].task = strdup("training");
	char path[] = "/tmp/gmx_fikit_profXXXXXX";
	int fd = mkstemp(path);
	assert_true(fd >= 0);
	close(fd);
	char err[512];
	assert_int_equal(gmx_profile_write(path, p, 2, err, sizeof(err)), 0);
	gmx_kprof_t *q;
	uint32_t n;
	assert_int_equal(gmx_profile_read(path, &q, &n, err, sizeof(err)), 0);
	assert_int_equal(n, 2);
	for (uint32_t t = 0; t < 2; t++) {
		assert_string_equal(q[t].task, p[t].task);
		assert_int_equal(q[t].units, 49);
		assert_int_equal(q[t].n, p[t].n);
		for (uint32_t i = 0; i < p[t].n; i++) {
			const gmx_kprof_entry_t *a = &p[t].e[i], *b = gmx_kprof_find(&q[t], a->id, a->prev);
			assert_non_null(b);
			assert_int_equal(a->n, b->n);
			assert_memory_equal(&a->dur, &b->dur, sizeof(a->dur));
			assert_memory_equal(&a->gap, &b->gap, sizeof(a->gap));
			if (a->name)
				assert_string_equal(a->name, b->name);
		}
	}
	gmx_profile_free(q, n);
	gmx_kprof_free(&p[0]);
	gmx_kprof_free(&p[1]);
	unlink(path);
}

/* Corruptions, each refused with FILE:LINE and what was expected. */
static void test_profile_corrupt(void **state)
{
	(void)state;
	gmx_kprof_t p;
	make_profile(&p);
	char path[] = "/tmp/gmx_fikit_badXXXXXX";
	int fd = mkstemp(path);
	close(fd);
	char err[512];
	assert_int_equal(gmx_profile_write(path, &p, 1, err, sizeof(err)), 0);
	FILE *f = fopen(path, "r");
	char good[16384];
	size_t len = fread(good, 1, sizeof(good) - 1, f);
	good[len] = 0;
	fclose(f);
	static const struct {
		const char *from, *to, *expect;
	} cases[] = {
	    {"gmxprof 1", "gmxprof 9", ":3: unsupported profile version"},
	    {"gmxprof 1", "gmxprog 1", ":3: not a gpumux kernel profile"},
	    {" n 50 dur ", " n 0 dur ", ":5: count: expected a positive integer"},
	    {" dur 1000 ", " dur -1000 ", ":5: dur quantile 0"},
	    {" dur 1000 ", " dur 9999999 ", ":5: dur quantiles must not decrease"},
	    {"entries 3", "entries 4",
	     ":8: task 'inference': 'end' after 3 entries, the task line announced 4"},
	    {"entries 3", "entries 2", ":7: task 'inference': expected 'end'"},
	    {"k 00000000000000", "k 0000000000000g", ":5: kernel ID"},
	};
	for (size_t c = 0; c < sizeof(cases) / sizeof(cases[0]); c++) {
		char bad[16384];
		const char *at = strstr(good, cases[c].from);
		assert_non_null(at);
		size_t pre = (size_t)(at - good);
		snprintf(bad, sizeof(bad), "%.*s%s%s", (int)pre, good, cases[c].to,
			 at + strlen(cases[c].from));
		f = fopen(path, "w");
		fputs(bad, f);
		fclose(f);
		gmx_kprof_t *q;
		uint32_t n;
		err[0] = 0;
		assert_int_equal(gmx_profile_read(path, &q, &n, err, sizeof(err)), -EINVAL);
		if (!strstr(err, cases[c].expect) || strncmp(err, path, strlen(path)))
			fail_msg("case %zu: error '%s' lacks '%s'", c, err, cases[c].expect);
	}
	f = fopen(path, "w");
	fclose(f);
	gmx_kprof_t *q;
	uint32_t n;
	assert_int_equal(gmx_profile_read(path, &q, &n, err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "empty file"));
	gmx_kprof_free(&p);
	unlink(path);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_kernel_id),
	    cmocka_unit_test(test_quantiles),
	    cmocka_unit_test(test_context),
	    cmocka_unit_test(test_memo_after_compaction),
	    cmocka_unit_test(test_snapshot),
	    cmocka_unit_test(test_bestpriofit_cases),
	    cmocka_unit_test(test_switch_cost),
	    cmocka_unit_test(test_stream_order),
	    cmocka_unit_test(test_starvation_bound),
	    cmocka_unit_test(test_profile_roundtrip),
	    cmocka_unit_test(test_profile_corrupt),
	    cmocka_unit_test(test_task_index_reuse),
	    cmocka_unit_test(test_level_books_follow_reuse),
	    cmocka_unit_test(test_hp_gap_is_the_shortest),
	    cmocka_unit_test(test_after_sync_context),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
