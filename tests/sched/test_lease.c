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

#include "gpumux/sched.h"

typedef struct {
	int64_t now, timer;
	uint32_t n_sub, n_lease, n_timer;
	gmx_lease_t lease[GMX_MAX_TASKS]; /* what each task was last told */
} fake_t;

static int64_t f_now(void *c)
{
	return ((fake_t *)c)->now;
}

static int f_submit(void *c, gmx_cmd_t *cmd)
{
	(void)cmd;
	((fake_t *)c)->n_sub++;
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
	gmx_device_t dev = {.ctx = &r->f, .now = f_now, .submit = f_submit, .set_timer = f_timer, .lease = f_lease};
	assert_int_equal(r->ops->create(&p, &dev, &r->p), 0);
}

/* Task `task` launches a kernel (leased: already released by the device). */
static gmx_cmd_t *launch(rig_t *r, uint32_t task, int leased)
{
	assert_true(r->n < 64);
	gmx_cmd_t *c = &r->cmd[r->n];
	*c = (gmx_cmd_t){.seq = (uint64_t)r->n + 1, .task = task, .kind = GMX_OP_KERNEL, .kernel_id = 7,
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
	/* The HP task launches: the LP lease is revoked at once, the HP command released. */
	r.f.now += 1000;
	launch(&r, 0, 0);
	assert_int_equal(r.f.n_sub, 3);
	assert_int_equal(r.f.lease[1].inflight, 0);
	assert_int_equal(r.f.lease[0].inflight, 2);
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

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(timeslice_slice_lease),  cmocka_unit_test(exclusive_lease),
	    cmocka_unit_test(fikit_leases_and_revoke), cmocka_unit_test(fikit_leased_hp_launch_revokes),
	    cmocka_unit_test(others_grant_none),	   cmocka_unit_test(lease_helpers),
	    cmocka_unit_test(fikit_one_level_no_timer),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
