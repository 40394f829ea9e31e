/* Leases (include/gpumux/sched.h): which policies grant them, when they narrow and revoke them,
 * and how commands a device released under a lease are accounted (in flight, never submitted
 * again). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "gpumux/kprofile.h"
#include "gpumux/sched.h"

typedef struct {
	int64_t now, timer;
	uint32_t n_sub, n_lease, n_timer;
	gmx_lease_t lease[GMX_MAX_TASKS]; /* what each task was last told */
	uint32_t lp_leased_at_hp;	  /* f_submit */
} fake_t;

static int64_t f_now(void *c)
{
	return ((fake_t *)c)->now;
}

static int f_submit(void *c, gmx_cmd_t *cmd)
{
	fake_t *f = c;
	f->n_sub++;
	/* The most lower-priority leases in effect at an HP (task 0) release: revokes come first. */
	uint32_t lp = 0;
	for (uint32_t t = 1; cmd->task == 0 && t < GMX_MAX_TASKS; t++)
		lp += f->lease[t].inflight;
	if (lp > f->lp_leased_at_hp)
		f->lp_leased_at_hp = lp;
	return 0;
}

static void f_timer(void *c, int64_t at)
{
	((fake_t *)c)->timer = at;
	((fake_t *)c)->n_timer++;
}

static void f_lease(void *c, uint32_t task, const gmx_lease_t *l)
{
	fake_t *f = c;
	f->n_lease++;
	f->lease[task] = l ? *l : (gmx_lease_t){0};
}

typedef struct {
	fake_t f;
	const gmx_policy_ops_t *ops;
	gmx_policy_t *p;
	gmx_cmd_t cmd[64];
	int n;
} rig_t;

static void rig_open(rig_t *r, const char *policy, uint32_t inflight)
{
	memset(r, 0, sizeof *r);
	r->ops = gmx_sched_find(policy);
	assert_non_null(r->ops);
	gmx_sched_params_t p;
	gmx_sched_params_default(&p);
	p.inflight_max = inflight;
	gmx_device_t dev = {
	    .ctx = &r->f, .now = f_now, .submit = f_submit, .set_timer = f_timer, .lease = f_lease};
	assert_int_equal(r->ops->create(&p, &dev, &r->p), 0);
}

/* Task `task` launches a kernel (leased: already released by the device). */
static gmx_cmd_t *launch(rig_t *r, uint32_t task, int leased)
{
	assert_true(r->n < 64);
	gmx_cmd_t *c = &r->cmd[r->n];
	*c = (gmx_cmd_t){.seq = (uint64_t)r->n + 1,
			 .task = task,
			 .kind = GMX_OP_KERNEL,
			 .kernel_id = 7,
			 .leased = (uint8_t)leased};
	r->n++;
	r->ops->on_launch(r->p, c);
	return c;
}

static void timeslice_slice_lease(void **state)
{
	(void)state;
	rig_t r;
	rig_open(&r, "timeslice", 2);
	assert_int_equal(r.ops->task_add(r.p, 0, 5), 0);
	assert_int_equal(r.ops->task_add(r.p, 1, 5), 0);
	/* Task 0 alone: its first command is granted, and it holds a lease with no end. */
	gmx_cmd_t *a = launch(&r, 0, 0);
	assert_int_equal(r.f.n_sub, 1);
	assert_int_equal(r.f.lease[0].inflight, 2);
	assert_int_equal(r.f.lease[0].until, 0);
	assert_int_equal(r.f.lease[1].inflight, 0);
	/* Leased commands are in flight, never submitted. */
	gmx_cmd_t *b = launch(&r, 0, 1);
	assert_int_equal(r.f.n_sub, 1);
	/* Task 1 has work: task 0's lease narrows to its slice. */
	r.f.now = 100000;
	launch(&r, 1, 0);
	assert_int_equal(r.f.n_sub, 1); /* task 0 still has two in flight */
	assert_int_equal(r.f.lease[0].inflight, 2);
	assert_int_equal(r.f.lease[0].until, GMX_SLICE_NS_DEFAULT);
	/* The slice ends with task 0's work in flight: its lease is revoked, nothing switches yet. */
	r.f.now = GMX_SLICE_NS_DEFAULT + 1;
	r.ops->on_timer(r.p);
	assert_int_equal(r.f.lease[0].inflight, 0);
	assert_int_equal(r.f.n_sub, 1);
	r.ops->on_complete(r.p, a);
	assert_int_equal(r.f.n_sub, 1);
	/* Its last leased command completes: task 1 gets the device and a lease for its slice. */
	r.ops->on_complete(r.p, b);
	assert_int_equal(r.f.n_sub, 2);
	assert_int_equal(r.f.lease[1].inflight, 2);
	assert_int_equal(r.f.lease[0].inflight, 0);
	/* Task 1 finishing gives its lease up. */
	r.ops->task_done(r.p, 1);
	assert_int_equal(r.f.lease[1].inflight, 0);
	r.ops->destroy(r.p);
}

static void exclusive_lease(void **state)
{
	(void)state;
	rig_t r;
	rig_open(&r, "exclusive", 3);
	assert_int_equal(r.ops->task_add(r.p, 0, 5), 0);
	assert_int_equal(r.ops->task_add(r.p, 1, 5), 0);
	launch(&r, 0, 0);
	launch(&r, 1, 0);
	assert_int_equal(r.f.lease[0].inflight, 3);
	assert_int_equal(r.f.lease[0].until, 0);
	assert_int_equal(r.f.lease[1].inflight, 0);
	r.ops->task_done(r.p, 0);
	assert_int_equal(r.f.lease[0].inflight, 0);
	assert_int_equal(r.f.lease[1].inflight, 3);
	r.ops->destroy(r.p);
}

static void fikit_leases_and_revoke(void **state)
{
	(void)state;
	rig_t r;
	rig_open(&r, "fikit", 2);
	assert_int_equal(r.ops->task_add(r.p, 0, 0), 0); /* HP */
	assert_int_equal(r.ops->task_add(r.p, 1, 7), 0); /* LP */
	/* The HP task, the best priority: a lease of everything it may have in flight. */
	gmx_cmd_t *h = launch(&r, 0, 0);
	assert_int_equal(r.f.n_sub, 1);
	assert_int_equal(r.f.lease[0].inflight, 2);
	assert_int_equal(r.f.lease[1].inflight, 0);
	gmx_cmd_t *h2 = launch(&r, 0, 1); /* leased: accounted, not submitted */
	assert_int_equal(r.f.n_sub, 1);
	r.f.now = 50000;
	r.ops->on_complete(r.p, h);
	r.ops->on_complete(r.p, h2);
	/* The LP task launches while the HP gap is unknown and short: it waits, no lease. */
	r.f.now = 100000;
	launch(&r, 1, 0);
	assert_int_equal(r.f.n_sub, 1);
	assert_int_equal(r.f.lease[1].inflight, 0);
	assert_int_equal(r.f.lease[0].inflight, 2);
	/* Idle past any gap: the LP task runs freely and holds a lease of one command; the HP task
	 * gives its own up (it would launch unseen). */
	r.f.now = 50000 + 1000000 + 1;
	r.ops->on_timer(r.p);
	assert_int_equal(r.f.n_sub, 2);
	assert_int_equal(r.f.lease[1].inflight, 1);
	assert_int_equal(r.f.lease[0].inflight, 0);
	/* The HP task launches: the LP lease is revoked at once, before the HP command is released. */
	r.f.now += 1000;
	r.f.lp_leased_at_hp = 0;
	launch(&r, 0, 0);
	assert_int_equal(r.f.n_sub, 3);
	assert_int_equal(r.f.lease[1].inflight, 0);
	assert_int_equal(r.f.lease[0].inflight, 2);
	assert_int_equal(r.f.lp_leased_at_hp, 0);
	r.ops->destroy(r.p);
}

/* A leased release by the HP task (launched unseen) also ends the LP lease. */
static void fikit_leased_hp_launch_revokes(void **state)
{
	(void)state;
	rig_t r;
	rig_open(&r, "fikit", 2);
	assert_int_equal(r.ops->task_add(r.p, 0, 0), 0);
	assert_int_equal(r.ops->task_add(r.p, 1, 7), 0);
	r.f.now = 2000000; /* the HP task never ran: unknown and idle long */
	gmx_cmd_t *l = launch(&r, 1, 0);
	assert_int_equal(r.f.n_sub, 1);
	assert_int_equal(r.f.lease[1].inflight, 1);
	launch(&r, 0, 1);
	assert_int_equal(r.f.lease[1].inflight, 0);
	assert_int_equal(r.f.lease[0].inflight, 2);
	assert_int_equal(r.f.n_sub, 1);
	r.ops->on_complete(r.p, l);
	r.ops->destroy(r.p);
}

/* fikit with every task at one level: leased work runs and completes with no timer asked for
 * (the level's idle gaps matter only to lower levels with work, and a daemon would wake for each);
 * a lower task with work brings the gap's recheck back. */
static void fikit_one_level_no_timer(void **state)
{
	(void)state;
	rig_t r;
	rig_open(&r, "fikit", 2);
	assert_int_equal(r.ops->task_add(r.p, 0, 3), 0);
	assert_int_equal(r.ops->task_add(r.p, 1, 3), 0);
	for (int i = 0; i < 12; i++) {
		r.f.now += 10000;
		gmx_cmd_t *c = launch(&r, (uint32_t)i % 2, i >= 2); /* granted first, then leased */
		r.f.now += 5000;
		r.ops->on_complete(r.p, c);
	}
	assert_int_equal(r.f.n_sub, 2);
	assert_int_equal(r.f.lease[0].inflight, 2);
	assert_int_equal(r.f.n_timer, 0);
	assert_int_equal(r.ops->task_add(r.p, 2, 7), 0);
	r.f.now += 1000;
	launch(&r, 2, 0); /* the level idle 1 µs, its gap unknown: the LP command waits for it */
	assert_true(r.f.n_timer > 0);
	r.ops->destroy(r.p);
}

/* Task t completes every command it has (those of r's first n) at r.f.now. */
static void complete_task(rig_t *r, uint32_t t)
{
	for (int i = 0; i < r->n; i++)
		if (r->cmd[i].task == t && r->cmd[i].seq) {
			r->ops->on_complete(r->p, &r->cmd[i]);
			r->cmd[i].seq = 0;
		}
}

/* fikit passes only over the levels that have a task: a level left empty when its last task's
 * slot is taken at another priority is passed over, a level that gains one is not, and the HP
 * level, the best lower level with work and the leases follow each move. */
static void fikit_levels_follow_tasks(void **state)
{
	(void)state;
	rig_t r;
	rig_open(&r, "fikit", 2);
	assert_int_equal(r.ops->task_add(r.p, 0, 2), 0);
	assert_int_equal(r.ops->task_add(r.p, 1, 7), 0);
	launch(&r, 0, 0);
	assert_int_equal(r.f.lease[0].inflight, 2); /* level 2 is the HP level */
	assert_int_equal(r.f.lease[1].inflight, 0);
	r.f.now = 10000;
	complete_task(&r, 0);
	/* Task 0 leaves; its slot comes back at level 5: level 2 is empty, level 5 the HP level. */
	r.ops->task_done(r.p, 0);
	assert_int_equal(r.ops->task_add(r.p, 0, 5), 0);
	r.f.now = 20000;
	launch(&r, 0, 0);
	assert_int_equal(r.f.n_sub, 2);
	assert_int_equal(r.f.lease[0].inflight, 2);
	/* The level-7 task has work while level 5 is idle past every gap: it runs freely under a
	 * lease of one, found below level 5 (level 2, empty, is not the HP level). */
	r.f.now = 30000;
	complete_task(&r, 0);
	r.f.now = 40000;
	launch(&r, 1, 0);
	r.f.now = 30000 + 1000000 + 1;
	r.ops->on_timer(r.p);
	assert_int_equal(r.f.n_sub, 3);
	assert_int_equal(r.f.lease[1].inflight, 1);
	assert_int_equal(r.f.lease[0].inflight, 0);
	/* Task 1 leaves and comes back at level 1, above task 0: the HP level is 1 now and level 7 is
	 * empty; task 0 waits for the gap of the new HP task, which has none yet. */
	r.f.now += 1000;
	complete_task(&r, 1);
	r.ops->task_done(r.p, 1);
	assert_int_equal(r.ops->task_add(r.p, 1, 1), 0);
	launch(&r, 1, 0);
	assert_int_equal(r.f.n_sub, 4);
	assert_int_equal(r.f.lease[1].inflight, 2);
	assert_int_equal(r.f.lease[0].inflight, 0);
	launch(&r, 0, 0); /* the HP task busy: level 5 waits */
	assert_int_equal(r.f.n_sub, 4);
	/* The HP task leaves for good: level 5 is the HP level again and its command goes. */
	r.f.now += 1000;
	complete_task(&r, 1);
	r.ops->task_done(r.p, 1);
	assert_int_equal(r.f.n_sub, 5);
	assert_int_equal(r.f.lease[0].inflight, 2);
	r.ops->destroy(r.p);
}

/* Policies with nothing to say about leases grant none: behaviour unchanged. */
static void others_grant_none(void **state)
{
	(void)state;
	const char *names[] = {"streamprio", "mps"};
	for (size_t k = 0; k < sizeof names / sizeof names[0]; k++) {
		rig_t r;
		rig_open(&r, names[k], 2);
		assert_int_equal(r.ops->task_add(r.p, 0, 0), 0);
		assert_int_equal(r.ops->task_add(r.p, 1, 7), 0);
		gmx_cmd_t *a = launch(&r, 0, 0);
		launch(&r, 1, 0);
		r.ops->on_complete(r.p, a);
		assert_int_equal(r.f.n_lease, 0);
		r.ops->destroy(r.p);
	}
}

static void lease_helpers(void **state)
{
	(void)state;
	gmx_lease_t a = {2, 0}, b = {2, 5}, none = {0, 9};
	assert_true(gmx_lease_same(&a, &a));
	assert_false(gmx_lease_same(&a, &b));
	assert_true(gmx_lease_same(&none, NULL));
	fake_t f = {0};
	gmx_device_t dev = {.ctx = &f, .lease = f_lease};
	gmx_lease_t cur = {0};
	gmx_lease_set(&dev, 3, &cur, 2, 0);
	gmx_lease_set(&dev, 3, &cur, 2, 0); /* unchanged: not said again */
	assert_int_equal(f.n_lease, 1);
	gmx_lease_set(&dev, 3, &cur, 0, 7); /* revoke */
	assert_int_equal(f.n_lease, 2);
	assert_int_equal(f.lease[3].inflight, 0);
	gmx_device_t bare = {.ctx = &f};
	gmx_lease_set(&bare, 3, &cur, 2, 0); /* no lease call: nothing */
	assert_int_equal(f.n_lease, 2);
}

/* The time-sized bound (gmx_lease_depth): the budget over the mean of a window's commands within
 * the budget; none when more than GMX_LEASE_LONG_MAX took longer, or it is no deeper than the
 * count bound. */
static void lease_depth_rule(void **state)
{
	(void)state;
	assert_int_equal(gmx_lease_depth(64 * 100, 64, 0, 2), GMX_LEASE_DEPTH_MAX); /* 500 fit: capped */
	assert_int_equal(gmx_lease_depth(0, 64, 0, 2), GMX_LEASE_DEPTH_MAX);	    /* zero-length */
	/* one 5 ms outlier (a descheduled host, or one long kernel) does not count in the mean */
	assert_int_equal(gmx_lease_depth(63 * 10000, 63, 1, 2), 5);
	assert_int_equal(gmx_lease_depth(60 * 1000, 60, GMX_LEASE_LONG_MAX, 2), 50);
	assert_int_equal(gmx_lease_depth(59 * 1000, 59, GMX_LEASE_LONG_MAX + 1, 2), 0); /* too many long */
	assert_int_equal(gmx_lease_depth(64 * 20000, 64, 0, 2), 0);			/* 2 fit: no deeper */
	assert_int_equal(gmx_lease_depth(64 * 10000, 64, 0, 2), 5);
	assert_int_equal(gmx_lease_depth(0, 0, 3, 2), 0);	    /* nothing short */
	assert_int_equal(gmx_lease_depth(64 * 60000, 64, 0, 2), 0); /* figures that do not fit */
}

static gmx_cmd_t many[1024];

/* Task `task` launches kernel `kid` under its lease (many[], seq i + 1) and it runs `dur` ns. */
static void leased_kernel(rig_t *r, int i, uint32_t task, uint64_t kid, int64_t dur)
{
	gmx_cmd_t *c = &many[i];
	*c = (gmx_cmd_t){
	    .seq = 1000 + (uint64_t)i, .task = task, .kind = GMX_OP_KERNEL, .kernel_id = kid, .leased = 1};
	r->ops->on_launch(r->p, c);
	r->f.now += dur;
	r->ops->on_complete(r->p, c);
}

/* fikit: a task alone at the best level whose commands are short holds a lease sized by time
 * (the budget over their mean) instead of inflight_max; a task arriving at its level narrows it
 * back, a better one revokes it, and the backlog the lease admits stays within the budget. */
static void fikit_time_sized_lease(void **state)
{
	(void)state;
	rig_t r;
	rig_open(&r, "fikit", 2);
	assert_int_equal(r.ops->task_add(r.p, 0, 3), 0);
	assert_int_equal(r.ops->task_add(r.p, 1, 7), 0); /* a lower level: not protected from level 3 */
	gmx_cmd_t *a = launch(&r, 0, 0);
	r.f.now += 1000;
	r.ops->on_complete(r.p, a);
	assert_int_equal(r.f.lease[0].inflight, 2);
	int i = 0;
	for (; i < (int)GMX_LEASE_WINDOW - 2; i++)
		leased_kernel(&r, i, 0, 7, 1000);
	assert_int_equal(r.f.lease[0].inflight, 2); /* a window not measured yet: the count bound */
	leased_kernel(&r, i++, 0, 7, 1000);
	/* 64 commands of 1 us each (the first counted from its grant): 50 fit in the 50 us budget */
	assert_int_equal(r.f.lease[0].inflight, GMX_LEASE_BACKLOG_NS / 1000);
	assert_true(r.f.lease[0].inflight * 1000 <= GMX_LEASE_BACKLOG_NS);
	assert_int_equal(r.f.lease[0].until, 0);
	assert_int_equal(r.f.lease[1].inflight, 0);
	/* A second task at its level: the count bound again (peers are served side by side). */
	assert_int_equal(r.ops->task_add(r.p, 2, 3), 0);
	gmx_cmd_t *p = launch(&r, 2, 0);
	assert_int_equal(r.f.lease[0].inflight, 2);
	r.ops->on_complete(r.p, p);
	r.ops->task_done(r.p, 2);
	assert_int_equal(r.f.lease[0].inflight, GMX_LEASE_BACKLOG_NS / 1000);
	/* A better priority arrives: the lease is revoked at its first launch, which goes at once. */
	assert_int_equal(r.ops->task_add(r.p, 3, 0), 0);
	uint32_t sub = r.f.n_sub;
	launch(&r, 3, 0);
	assert_int_equal(r.f.n_sub, sub + 1);
	assert_int_equal(r.f.lease[0].inflight, 0);
	assert_int_equal(r.f.lease[3].inflight, 2);
	r.ops->destroy(r.p);
}

/* The count bound holds where durations are long or unknown: kernels of 100 us never deepen the
 * lease; more than GMX_LEASE_LONG_MAX longer than the budget in a window end a deep one at once;
 * so does a kernel the task's profile has never measured. */
static void fikit_time_sized_lease_falls_back(void **state)
{
	(void)state;
	rig_t r;
	memset(&r, 0, sizeof r);
	r.ops = gmx_sched_find("fikit");
	gmx_kprof_t prof;
	assert_int_equal(gmx_kprof_init(&prof, "t"), 0);
	gmx_kprof_t *profs[1] = {&prof};
	gmx_sched_params_t prm;
	gmx_sched_params_default(&prm);
	prm.inflight_max = 2;
	prm.profiles = profs;
	prm.n_profiles = 1;
	prm.profile_learn = 1;
	gmx_device_t dev = {
	    .ctx = &r.f, .now = f_now, .submit = f_submit, .set_timer = f_timer, .lease = f_lease};
	assert_int_equal(r.ops->create(&prm, &dev, &r.p), 0);
	assert_int_equal(r.ops->task_add(r.p, 0, 3), 0);
	launch(&r, 0, 0);
	int i = 0;
	for (; i < 3 * (int)GMX_LEASE_WINDOW; i++)
		leased_kernel(&r, i, 0, 7, 100000);
	assert_int_equal(r.f.lease[0].inflight, 2);
	for (int k = 0; k < 2 * (int)GMX_LEASE_WINDOW; k++, i++)
		leased_kernel(&r, i, 0, 7, 500);
	assert_int_equal(r.f.lease[0].inflight, GMX_LEASE_DEPTH_MAX);
	for (int k = 0; k < (int)GMX_LEASE_LONG_MAX; k++) /* a few long ones: tolerated */
		leased_kernel(&r, i++, 0, 7, 2 * GMX_LEASE_BACKLOG_NS);
	assert_int_equal(r.f.lease[0].inflight, GMX_LEASE_DEPTH_MAX);
	leased_kernel(&r, i++, 0, 7, 2 * GMX_LEASE_BACKLOG_NS); /* one more in the window: back */
	assert_int_equal(r.f.lease[0].inflight, 2);
	for (int k = 0; k < 2 * (int)GMX_LEASE_WINDOW; k++, i++)
		leased_kernel(&r, i, 0, 7, 500);
	assert_int_equal(r.f.lease[0].inflight, GMX_LEASE_DEPTH_MAX);
	leased_kernel(&r, i++, 0, 99, 500); /* a kernel never measured */
	assert_int_equal(r.f.lease[0].inflight, 2);
	r.ops->destroy(r.p);
	gmx_kprof_free(&prof);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(timeslice_slice_lease),	 cmocka_unit_test(exclusive_lease),
	    cmocka_unit_test(fikit_leases_and_revoke),	 cmocka_unit_test(fikit_leased_hp_launch_revokes),
	    cmocka_unit_test(others_grant_none),	 cmocka_unit_test(lease_helpers),
	    cmocka_unit_test(fikit_one_level_no_timer),	 cmocka_unit_test(lease_depth_rule),
	    cmocka_unit_test(fikit_time_sized_lease),	 cmocka_unit_test(fikit_time_sized_lease_falls_back),
	    cmocka_unit_test(fikit_levels_follow_tasks),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
