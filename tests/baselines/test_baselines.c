/* The baselines' rules (docs/baselines.md), each pinned on a fake device, and their key
 * properties in the simulator: tgs (LP launch-rate control, priority eviction), orion (SM and
 * class admission, the cap on outstanding BE work), reef (reset-based preemption). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sim_testutil.h"

#include "gpumux/sched.h"
#include "memspace.h"
#include "sim.h"
#include "tgs.h"

/* ---- a fake device that records what a policy does -------------------------------------- */

typedef struct {
	int64_t now, timer;
	uint64_t sub[64];
	uint32_t n_sub;
	uint32_t resets[8], n_resets;
	uint32_t resumed[8], n_resumed;
} fake_t;

static int64_t f_now(void *c)
{
	return ((fake_t *)c)->now;
}

static int f_submit(void *c, gmx_cmd_t *cmd)
{
	fake_t *f = c;
	f->sub[f->n_sub++] = cmd->seq;
	return 0;
}

static void f_timer(void *c, int64_t at)
{
	((fake_t *)c)->timer = at;
}

static void f_preempt(void *c, uint32_t task, int hold)
{
	fake_t *f = c;
	if (!hold)
		f->resumed[f->n_resumed++] = task;
}

static void f_reset(void *c, uint32_t task)
{
	fake_t *f = c;
	f->resets[f->n_resets++] = task;
}

static int submitted(const fake_t *f, uint64_t seq)
{
	for (uint32_t i = 0; i < f->n_sub; i++)
		if (f->sub[i] == seq)
			return 1;
	return 0;
}

static gmx_policy_t *make(const char *name, gmx_device_t *dev, int p0, int p1, int p2)
{
	const gmx_policy_ops_t *ops = gmx_sched_find(name);
	assert_non_null(ops);
	gmx_sched_params_t p;
	gmx_sched_params_default(&p);
	gmx_policy_t *pol = NULL;
	assert_int_equal(ops->create(&p, dev, &pol), 0);
	assert_int_equal(ops->task_add(pol, 0, p0), 0);
	assert_int_equal(ops->task_add(pol, 1, p1), 0);
	if (p2 >= 0)
		assert_int_equal(ops->task_add(pol, 2, p2), 0);
	return pol;
}

/* A unit of `n` kernels of one class, SM need and predicted duration. */
typedef struct {
	gmx_op_t ops[4];
	gmx_workload_t w;
} unit_t;

static void unit(unit_t *u, uint32_t n, int8_t klass, uint32_t sms)
{
	memset(u, 0, sizeof(*u));
	for (uint32_t i = 0; i < n; i++)
		u->ops[i] =
		    (gmx_op_t){.kind = GMX_OP_KERNEL, .klass = klass, .sm_demand = sms, .grid = {1, 1, 1}};
	u->w.ops = u->ops;
	u->w.n_ops = n;
}

static gmx_cmd_t cmd(uint64_t seq, uint32_t task, unit_t *u, uint32_t op, int64_t pred)
{
	return (gmx_cmd_t){.seq = seq,
			   .task = task,
			   .kind = GMX_OP_KERNEL,
			   .predicted_ns = pred,
			   .op = &u->ops[op],
			   .workload = &u->w};
}

/* ---- orion ------------------------------------------------------------------------------ */

/* A BE kernel of the HP kernel's class waits for the end of the HP request (its unit's last
 * kernel), whatever the host gaps inside it; one of the other class goes beside it at once. */
static void orion_same_class_waits_for_the_hp_request(void **state)
{
	(void)state;
	fake_t f = {0};
	gmx_device_t dev = {.ctx = &f, .now = f_now, .submit = f_submit, .set_timer = f_timer, .sms = 80};
	gmx_policy_t *pol = make("orion", &dev, 0, 5, 5);
	const gmx_policy_ops_t *ops = gmx_sched_find("orion");
	unit_t hp, same, other;
	unit(&hp, 2, GMX_CLASS_COMPUTE, 40);
	unit(&same, 1, GMX_CLASS_COMPUTE, 20);
	unit(&other, 1, GMX_CLASS_MEMORY, 20);
	gmx_cmd_t h0 = cmd(1, 0, &hp, 0, 1000), b0 = cmd(2, 1, &same, 0, 1000),
		  o0 = cmd(3, 2, &other, 0, 1000);
	gmx_cmd_t h1 = cmd(4, 0, &hp, 1, 1000);
	ops->on_launch(pol, &h0);
	ops->on_launch(pol, &b0);
	ops->on_launch(pol, &o0);
	assert_true(submitted(&f, 1));
	assert_false(submitted(&f, 2)); /* same class as the HP kernel */
	assert_true(submitted(&f, 3));	/* memory-bound beside compute-bound */
	ops->on_complete(pol, &h0);	/* a host gap inside the request */
	assert_false(submitted(&f, 2));
	ops->on_launch(pol, &h1);
	ops->on_complete(pol, &h1); /* the request's last kernel */
	assert_true(submitted(&f, 2));
	ops->destroy(pol);
}

/* An unprofiled class counts as differing (Orion's profile -1); a BE kernel needing more SMs
 * than the threshold (the device's) does not go beside an HP request. */
static void orion_unknown_class_goes_big_kernel_waits(void **state)
{
	(void)state;
	fake_t f = {0};
	gmx_device_t dev = {.ctx = &f, .now = f_now, .submit = f_submit, .set_timer = f_timer, .sms = 40};
	gmx_policy_t *pol = make("orion", &dev, 0, 5, 5);
	const gmx_policy_ops_t *ops = gmx_sched_find("orion");
	unit_t hp, unknown, big;
	unit(&hp, 2, GMX_CLASS_COMPUTE, 20);
	unit(&unknown, 1, GMX_CLASS_UNKNOWN, 10);
	unit(&big, 1, GMX_CLASS_MEMORY, 60); /* profiled on an 80-SM GPU */
	gmx_cmd_t h0 = cmd(1, 0, &hp, 0, 1000), u0 = cmd(2, 1, &unknown, 0, 1000),
		  g0 = cmd(3, 2, &big, 0, 1000);
	ops->on_launch(pol, &h0);
	ops->on_launch(pol, &u0);
	ops->on_launch(pol, &g0);
	assert_true(submitted(&f, 2));
	assert_false(submitted(&f, 3));
	gmx_cmd_t h1 = cmd(4, 0, &hp, 1, 1000);
	ops->on_launch(pol, &h1);
	ops->on_complete(pol, &h0);
	ops->on_complete(pol, &h1); /* HP between requests: BE runs freely */
	assert_true(submitted(&f, 3));
	ops->destroy(pol);
}

/* Outstanding BE work is capped at 160 us of predicted time while HP runs: past it, BE waits
 * until every BE command on the device has completed. */
static void orion_caps_outstanding_be_work(void **state)
{
	(void)state;
	fake_t f = {0};
	gmx_device_t dev = {.ctx = &f, .now = f_now, .submit = f_submit, .set_timer = f_timer, .sms = 80};
	gmx_policy_t *pol = make("orion", &dev, 0, 5, -1);
	const gmx_policy_ops_t *ops = gmx_sched_find("orion");
	unit_t hp, be;
	unit(&hp, 2, GMX_CLASS_COMPUTE, 20);
	unit(&be, 4, GMX_CLASS_MEMORY, 20);
	gmx_cmd_t h0 = cmd(1, 0, &hp, 0, 1000000);
	ops->on_launch(pol, &h0);
	gmx_cmd_t b[4];
	for (uint32_t i = 0; i < 4; i++) {
		b[i] = cmd(10 + i, 1, &be, i, 100000);
		ops->on_launch(pol, &b[i]);
	}
	assert_true(submitted(&f, 10));
	assert_true(submitted(&f, 11)); /* 200 us: over the cap once released */
	assert_false(submitted(&f, 12));
	ops->on_complete(pol, &b[0]);
	assert_false(submitted(&f, 12)); /* one still outstanding */
	ops->on_complete(pol, &b[1]);
	assert_true(submitted(&f, 12)); /* drained: the count starts again */
	ops->destroy(pol);
}

/* ---- reef ------------------------------------------------------------------------------- */

/* BE keeps at most 2 commands on the device; an RT arrival kills the running BE kernels at
 * once, no BE command goes while the RT request lasts, and BE resumes when it ends. */
static void reef_resets_be_on_rt_arrival(void **state)
{
	(void)state;
	fake_t f = {0};
	gmx_device_t dev = {.ctx = &f,
			    .now = f_now,
			    .submit = f_submit,
			    .set_timer = f_timer,
			    .preempt = f_preempt,
			    .reset = f_reset};
	gmx_policy_t *pol = make("reef", &dev, 0, 5, -1);
	const gmx_policy_ops_t *ops = gmx_sched_find("reef");
	unit_t rt, be;
	unit(&rt, 2, GMX_CLASS_COMPUTE, 20);
	unit(&be, 4, GMX_CLASS_COMPUTE, 20);
	gmx_cmd_t b[4];
	for (uint32_t i = 0; i < 3; i++) {
		b[i] = cmd(10 + i, 1, &be, i, 1000);
		ops->on_launch(pol, &b[i]);
	}
	assert_int_equal(f.n_sub, 2); /* REEF's BE device queue holds 2 */
	gmx_cmd_t r0 = cmd(1, 0, &rt, 0, 1000), r1 = cmd(2, 0, &rt, 1, 1000);
	ops->on_launch(pol, &r0);
	assert_true(submitted(&f, 1));
	assert_int_equal(f.n_resets, 1);
	assert_int_equal(f.resets[0], 1);
	ops->on_complete(pol, &r0); /* a host gap inside the RT request */
	b[3] = cmd(13, 1, &be, 3, 1000);
	ops->on_launch(pol, &b[3]);
	assert_false(submitted(&f, 12));
	assert_int_equal(f.n_resumed, 0);
	ops->on_launch(pol, &r1);
	ops->on_complete(pol, &r1); /* the request's last kernel */
	assert_int_equal(f.n_resumed, 1);
	assert_int_equal(f.resumed[0], 1);
	assert_false(submitted(&f, 12)); /* the killed pair re-runs first: the queue is full */
	ops->on_complete(pol, &b[0]);
	assert_true(submitted(&f, 12));
	assert_int_equal(f.n_resets, 1);
	ops->destroy(pol);
}

/* A device that cannot kill kernels: in-flight BE work drains (REEF-N), nothing new goes. */
static void reef_without_reset_drains(void **state)
{
	(void)state;
	fake_t f = {0};
	gmx_device_t dev = {.ctx = &f, .now = f_now, .submit = f_submit, .set_timer = f_timer};
	gmx_policy_t *pol = make("reef", &dev, 0, 5, -1);
	const gmx_policy_ops_t *ops = gmx_sched_find("reef");
	unit_t rt, be;
	unit(&rt, 1, GMX_CLASS_COMPUTE, 20);
	unit(&be, 4, GMX_CLASS_COMPUTE, 20);
	gmx_cmd_t b[3];
	for (uint32_t i = 0; i < 3; i++) {
		b[i] = cmd(10 + i, 1, &be, i, 1000);
		ops->on_launch(pol, &b[i]);
	}
	gmx_cmd_t r0 = cmd(1, 0, &rt, 0, 1000);
	ops->on_launch(pol, &r0);
	assert_int_equal(f.n_resets, 0);
	ops->on_complete(pol, &b[0]);
	assert_false(submitted(&f, 12));
	ops->on_complete(pol, &r0);
	assert_true(submitted(&f, 12));
	ops->destroy(pol);
}

/* ---- tgs -------------------------------------------------------------------------------- */

/* While TGS profiles HP's rate the LP limit is 0: one LP launch per 50 ms window; HP's go at
 * once; once HP has finished LP is free. */
static void tgs_profiling_admits_one_lp_launch_per_window(void **state)
{
	(void)state;
	fake_t f = {0};
	gmx_device_t dev = {.ctx = &f, .now = f_now, .submit = f_submit, .set_timer = f_timer};
	gmx_policy_t *pol = make("tgs", &dev, 0, 5, -1);
	const gmx_policy_ops_t *ops = gmx_sched_find("tgs");
	unit_t lp;
	unit(&lp, 4, GMX_CLASS_COMPUTE, 20);
	gmx_cmd_t l[4];
	for (uint32_t i = 0; i < 4; i++) {
		l[i] = cmd(10 + i, 1, &lp, i, 1000);
		ops->on_launch(pol, &l[i]);
	}
	assert_int_equal(f.n_sub, 1);
	assert_true(f.timer <= 50000000);
	f.now = 50000000;
	ops->on_timer(pol);
	ops->on_complete(pol, &l[0]);
	assert_int_equal(f.n_sub, 2);
	ops->on_complete(pol, &l[1]);
	assert_int_equal(f.n_sub, 2); /* the window's launch is spent */
	ops->task_done(pol, 0);	      /* HP gone: no control */
	assert_int_equal(f.n_sub, 4);
	ops->destroy(pol);
}

/* update_rate_limit's steps. */
static void tgs_controller_steps(void **state)
{
	(void)state;
	gmx_tgs_ctl_t c = {.limit = 20000, .max_rate = 1e6, .state = GMX_TGS_SLOW_START};
	gmx_tgs_update_limit(&c, 0.98e6); /* within 3%: slow start */
	assert_true(c.limit == 30001);
	gmx_tgs_update_limit(&c, 0.95e6); /* 5% off: back off into congestion avoidance */
	assert_int_equal(c.state, GMX_TGS_CONGESTION_AVOIDANCE);
	assert_true(c.limit > 20000.6 && c.limit < 20000.7);
	double l = c.limit;
	gmx_tgs_update_limit(&c, 1e6); /* additive increase: max(0.025% of 1e6, 1000) */
	assert_true(c.limit == l + 1000);
	l = c.limit;
	gmx_tgs_update_limit(&c, 0.96e6); /* multiplicative decrease: 8% */
	assert_true(c.limit > l * 0.92 - 1e-6 && c.limit < l * 0.92 + 1e-6);
	l = c.limit;
	gmx_tgs_update_limit(&c, 0.9e6); /* 10% off: decrease, then slow start at a tenth */
	assert_int_equal(c.state, GMX_TGS_SLOW_START);
	assert_true(c.limit > l * 0.92 / 10 - 1e-6 && c.limit < l * 0.92 / 10 + 1e-6);
	gmx_tgs_ctl_t z = {.limit = 500, .max_rate = 1e6, .state = GMX_TGS_CONGESTION_AVOIDANCE, .sign = 1};
	gmx_tgs_update_limit(&z, 0.5e6);
	assert_true(z.limit == 0); /* never negative */
	for (int i = 0; i < 20; i++)
		gmx_tgs_update_limit(&z, 0.5e6);
	assert_true(z.max_rate < 1e6); /* 20 reports 12% off: the peak is lowered */
}

/* ---- priority eviction (tgs under um) ----------------------------------------------------- */

/* Full memory: a new chunk of the low-priority task evicts that task's oldest chunk, not the
 * high-priority task's older ones; with none of its own left, the high-priority task's go. */
static void prio_eviction_spares_the_better_level(void **state)
{
	(void)state;
	gmx_workload_t hp, lp;
	uint32_t b;
	assert_int_equal(gmx_workload_init(&hp, "hp"), 0);
	assert_int_equal(gmx_workload_add_buffer(&hp, 0, 2 * GMX_CHUNK_SIZE, NULL, &b), 0);
	assert_int_equal(gmx_workload_init(&lp, "lp"), 0);
	assert_int_equal(gmx_workload_add_buffer(&lp, 0, 4 * GMX_CHUNK_SIZE, NULL, &b), 0);
	const gmx_workload_t *ws[2] = {&hp, &lp};
	uint64_t all[8], in = 0, out = 0;
	memset(all, 0xff, sizeof(all));
	for (int prio = 0; prio < 2; prio++) {
		gmx_memspace_t m;
		assert_int_equal(gmx_memspace_init(&m, ws, 2, 3 * GMX_CHUNK_SIZE), 0);
		int pr[2] = {0, 5};
		if (prio)
			gmx_memspace_prio_evict(&m, pr);
		gmx_memspace_warm(&m); /* hp's chunks 0 and 1, lp's chunk 2 */
		assert_int_equal(gmx_memspace_populate(&m, 3, all, 1, 1000, &in, &out), 512);
		/* plain um: the earliest populated (hp's chunk 0); priority: lp's own chunk 2 */
		assert_int_equal(m.chunks[0].resident, prio ? 512 : 0);
		assert_int_equal(m.chunks[2].resident, prio ? 0 : 512);
		if (prio) {
			/* lp's own oldest again, whatever hp populated before it */
			assert_int_equal(gmx_memspace_populate(&m, 4, all, 2, 2000, &in, &out), 512);
			assert_int_equal(m.chunks[3].resident, 0);
			assert_int_equal(gmx_memspace_populate(&m, 5, all, 3, 3000, &in, &out), 512);
			assert_int_equal(m.chunks[0].resident, 512);
			uint64_t again[8] = {1, 0, 0, 0, 0, 0, 0, 0};
			assert_int_equal(gmx_memspace_populate(&m, 2, again, 3, 3000, &in, &out), 1);
			assert_int_equal(m.chunks[0].resident,
					 0); /* lp's only chunk is this batch's: hp's oldest */
		}
		char err[128];
		assert_int_equal(gmx_memspace_check(&m, err, sizeof err), 0);
		gmx_memspace_free(&m);
	}
	gmx_workload_free(&hp);
	gmx_workload_free(&lp);
}

/* ---- reef in the simulator --------------------------------------------------------------- */

/* Runs an RT service (open loop, 3 kernels) beside a BE job (1 ms kernels) and checks that no
 * BE kernel (re)starts on the engine while an RT command waits to start. Under timeslice the
 * same check finds such starts (it has teeth); under reef it finds none and BE still runs. */
static uint32_t be_starts_during_rt_waits(const char *sched, double *be_units)
{
	gmx_workload_t rt, be;
	tu_sweep(&rt, "rt", 64ull << 20, 3, 16ull << 20, 300000, 20000);
	tu_sweep(&be, "be", 64ull << 20, 4, 16ull << 20, 1000000, 5000);
	gmx_sim_task_t tasks[2] = {
	    {.name = "rt", .priority = 0, .arrival = GMX_ARRIVAL_POISSON, .rate_per_s = 200, .workload = &rt},
	    {.name = "be", .priority = 5, .workload = &be}};
	gmx_sim_timeline_t tl = {0};
	gmx_sim_config_t cfg = {.device = gmx_preset_find("rtx5080"),
				.capacity_bytes = 1ull << 30,
				.mem = GMX_MEM_UM,
				.policy = gmx_sched_find(sched),
				.duration_ns = 300000000,
				.seed = 3,
				.tasks = tasks,
				.n_tasks = 2,
				.timeline = &tl};
	gmx_sched_params_default(&cfg.sched);
	gmx_sim_result_t *res = calloc(1, sizeof(*res));
	char err[256];
	assert_int_equal(gmx_sim_run(&cfg, res, err, sizeof err), 0);
	*be_units = res->tasks[1].progress;
	uint32_t bad = 0;
	for (uint64_t i = 0; i < tl.n; i++) {
		const gmx_sim_span_t *b = &tl.spans[i];
		if (b->task != 1 || b->kind != GMX_OP_KERNEL)
			continue;
		for (uint64_t j = 0; j < tl.n; j++) {
			const gmx_sim_span_t *w = &tl.spans[j];
			if (w->task != 0 || w->kind != GMX_SPAN_WAIT || b->start_ns <= w->start_ns ||
			    b->start_ns >= w->end_ns)
				continue;
			bad++;
			if (strcmp(sched, "timeslice")) /* expected there: say where else */
				fprintf(stderr,
					"%s: BE op %u starts at %lld while RT op %u waits [%lld, %lld)\n",
					sched, b->op, (long long)b->start_ns, w->op, (long long)w->start_ns,
					(long long)w->end_ns);
		}
	}
	free(tl.spans);
	free(res);
	gmx_workload_free(&rt);
	gmx_workload_free(&be);
	return bad;
}

static void reef_no_be_start_while_rt_waits(void **state)
{
	(void)state;
	double be_ts, be_reef;
	assert_true(be_starts_during_rt_waits("timeslice", &be_ts) > 0);
	assert_int_equal(be_starts_during_rt_waits("reef", &be_reef), 0);
	assert_true(be_reef > 10);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(orion_same_class_waits_for_the_hp_request),
	    cmocka_unit_test(orion_unknown_class_goes_big_kernel_waits),
	    cmocka_unit_test(orion_caps_outstanding_be_work),
	    cmocka_unit_test(reef_resets_be_on_rt_arrival),
	    cmocka_unit_test(reef_without_reset_drains),
	    cmocka_unit_test(tgs_profiling_admits_one_lp_launch_per_window),
	    cmocka_unit_test(tgs_controller_steps),
	    cmocka_unit_test(prio_eviction_spares_the_better_level),
	    cmocka_unit_test(reef_no_be_start_while_rt_waits),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
