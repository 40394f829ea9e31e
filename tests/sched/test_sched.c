/* Every registered policy refuses out-of-bounds tunables at create (an in-flight bound of 0
 * would divide by zero or never release anything), and fikit measures each command from its
 * own release even when other tasks' commands fall between a task's in-flight commands. */
#include <errno.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "gpumux/kprofile.h"
#include "gpumux/sched.h"

typedef struct {
	int64_t now;
	uint32_t n_sub;
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
	(void)c;
	(void)at;
}

/* Calls fn for each registered policy name. */
static void each_policy(void (*fn)(const gmx_policy_ops_t *ops))
{
	char names[512];
	gmx_sched_names(names, sizeof names);
	int n = 0;
	for (char *save = NULL, *t = strtok_r(names, "|", &save); t; t = strtok_r(NULL, "|", &save)) {
		const gmx_policy_ops_t *ops = gmx_sched_find(t);
		assert_non_null(ops);
		fn(ops);
		n++;
	}
	assert_true(n >= 6);
}

static void refuses_bad_params(const gmx_policy_ops_t *ops)
{
	fake_t f = {0};
	gmx_device_t dev = {.ctx = &f, .now = f_now, .submit = f_submit, .set_timer = f_timer};
	gmx_kprof_t *none[1] = {NULL};
	for (int k = 0; k < 8; k++) {
		gmx_sched_params_t p;
		gmx_sched_params_default(&p);
		switch (k) {
		case 0:
			p.inflight_max = 0;
			break;
		case 1:
			p.inflight_max = 1u << 20;
			break;
		case 2:
			p.slice_ns = 0;
			break;
		case 3:
			p.slice_ns = -1;
			break;
		case 4:
			p.gap_quantile = NAN;
			break;
		case 5:
			p.starve_ns = 0;
			break;
		case 6:
			p.switch_ns = -5;
			break;
		case 7:
			p.n_profiles = 4;
			break; /* profiles NULL */
		}
		char err[200] = "";
		assert_int_equal(gmx_sched_params_check(&p, err, sizeof err), -EINVAL);
		assert_true(err[0] != 0);
		gmx_policy_t *pol = (gmx_policy_t *)&f; /* must stay untouched */
		int rc = ops->create(&p, &dev, &pol);
		if (rc != -EINVAL)
			fail_msg("policy %s accepted bad tunables (case %d): create returned %d", ops->name,
				 k, rc);
		assert_ptr_equal(pol, (gmx_policy_t *)&f);
	}
	gmx_sched_params_t p;
	gmx_sched_params_default(&p);
	p.profiles = none;
	p.n_profiles = 1;
	gmx_policy_t *pol = NULL;
	assert_int_equal(ops->create(&p, &dev, &pol), 0);
	ops->destroy(pol);
}

static void test_create_refuses_out_of_bounds(void **state)
{
	(void)state;
	each_policy(refuses_bad_params);
}

/* Two tasks at the same (top) level, two commands in flight each. Task 0's commands get seqs
 * 1 and 3 (task 1's seq 2 falls between), so a slot chosen by seq % inflight_max would be
 * shared: the first command's release (t = 0) overwritten by the second's (t = 200 us). The
 * first completes at 1 ms: it ran 1 ms, not 800 us. */
static void test_fikit_measures_from_own_release(void **state)
{
	(void)state;
	fake_t f = {0};
	gmx_device_t dev = {.ctx = &f, .now = f_now, .submit = f_submit, .set_timer = f_timer};
	gmx_kprof_t prof[2];
	gmx_kprof_t *pp[2] = {&prof[0], &prof[1]};
	assert_int_equal(gmx_kprof_init(&prof[0], "a"), 0);
	assert_int_equal(gmx_kprof_init(&prof[1], "b"), 0);
	gmx_sched_params_t p;
	gmx_sched_params_default(&p);
	p.inflight_max = 2;
	p.profiles = pp;
	p.n_profiles = 2;
	p.profile_learn = 1;
	const gmx_policy_ops_t *ops = gmx_sched_find("fikit");
	assert_non_null(ops);
	gmx_policy_t *pol;
	assert_int_equal(ops->create(&p, &dev, &pol), 0);
	assert_int_equal(ops->task_add(pol, 0, 0), 0);
	assert_int_equal(ops->task_add(pol, 1, 0), 0);
	gmx_cmd_t c[4];
	const uint64_t id[4] = {11, 21, 12, 22};
	for (int i = 0; i < 4; i++) {
		f.now = (int64_t)i * 100000;
		c[i] = (gmx_cmd_t){.seq = (uint64_t)i + 1,
				   .task = (uint32_t)(i % 2),
				   .kind = GMX_OP_KERNEL,
				   .kernel_id = id[i]};
		ops->on_launch(pol, &c[i]);
	}
	assert_int_equal(f.n_sub, 4); /* all released at once: the top level runs freely */
	f.now = 1000000;
	ops->on_complete(pol, &c[0]); /* task 0's first: released at 0 */
	f.now = 1100000;
	ops->on_complete(pol, &c[1]); /* task 1's first: released at 100 us */
	f.now = 1500000;
	ops->on_complete(pol, &c[2]); /* task 0's second: released at 200 us, after the first ended */
	f.now = 1600000;
	ops->on_complete(pol, &c[3]);
	/* The last kernel's observation waits for its gap, which the next launch ends. */
	gmx_cmd_t more[2];
	f.now = 2000000;
	for (int i = 0; i < 2; i++) {
		more[i] = (gmx_cmd_t){
		    .seq = 5 + (uint64_t)i, .task = (uint32_t)i, .kind = GMX_OP_KERNEL, .kernel_id = 99};
		ops->on_launch(pol, &more[i]);
	}
	const struct {
		int task;
		uint64_t id;
		int64_t dur;
	} want[4] = {{0, 11, 1000000}, {1, 21, 1000000}, {0, 12, 500000}, {1, 22, 500000}};
	for (int i = 0; i < 4; i++) {
		const gmx_kprof_entry_t *e = gmx_kprof_find(&prof[want[i].task], want[i].id, 0);
		assert_non_null(e);
		assert_true(e->n_s >= 1);
		if (e->dur_s[0] != want[i].dur)
			fail_msg("kernel %llu of task %d measured %lld ns, ran %lld ns",
				 (unsigned long long)want[i].id, want[i].task, (long long)e->dur_s[0],
				 (long long)want[i].dur);
	}
	ops->destroy(pol);
	gmx_kprof_free(&prof[0]);
	gmx_kprof_free(&prof[1]);
}

/* A departed task's queued commands are submitted at task_done, whatever its priority and
 * whoever owns the device (the daemon frees a dead client's slot only once its policy lets
 * go of them: a low-priority task's orphans waited behind busy high-priority work, and dead
 * clients' slots ran out). Task 0 (priority 0) keeps the device busy; task 1 (priority 9)
 * has 6 commands queued. */
static uint32_t sub_by_task[2];
static int64_t fd_now(void *c)
{
	return ((fake_t *)c)->now;
}
static int fd_submit(void *c, gmx_cmd_t *cmd)
{
	((fake_t *)c)->n_sub++;
	sub_by_task[cmd->task & 1]++;
	return 0;
}

static void done_releases_queue(const gmx_policy_ops_t *ops)
{
	fake_t f = {.now = 1000};
	gmx_device_t dev = {.ctx = &f, .now = fd_now, .submit = fd_submit, .set_timer = f_timer};
	gmx_sched_params_t p;
	gmx_sched_params_default(&p);
	gmx_policy_t *pol = NULL;
	assert_int_equal(ops->create(&p, &dev, &pol), 0);
	assert_int_equal(ops->task_add(pol, 0, 0), 0);
	assert_int_equal(ops->task_add(pol, 1, 9), 0);
	gmx_cmd_t c[16];
	sub_by_task[0] = sub_by_task[1] = 0;
	for (int i = 0; i < 16; i++) {
		c[i] = (gmx_cmd_t){.seq = (uint64_t)i + 1,
				   .task = i < 10 ? 0u : 1u,
				   .kind = GMX_OP_KERNEL,
				   .kernel_id = 7,
				   .predicted_ns = 1000000};
		ops->on_launch(pol, &c[i]);
	}
	uint32_t before = sub_by_task[1];
	ops->task_done(pol, 1);
	if (sub_by_task[1] != 6)
		fail_msg("policy %s: %u of the departed task's 6 commands submitted at task_done (%u before)",
			 ops->name, sub_by_task[1], before);
	ops->destroy(pol);
}

static void test_task_done_releases_queue(void **state)
{
	(void)state;
	each_policy(done_releases_queue);
}

/* fikit learns nothing from a departed task's work: the daemon completes a killed client's
 * in-flight commands when it leaves, at whatever time that is. */
static void test_fikit_learns_nothing_after_done(void **state)
{
	(void)state;
	fake_t f = {0};
	gmx_device_t dev = {.ctx = &f, .now = f_now, .submit = f_submit, .set_timer = f_timer};
	gmx_kprof_t prof;
	gmx_kprof_t *pp[1] = {&prof};
	assert_int_equal(gmx_kprof_init(&prof, "a"), 0);
	gmx_sched_params_t p;
	gmx_sched_params_default(&p);
	p.profiles = pp;
	p.n_profiles = 1;
	p.profile_learn = 1;
	const gmx_policy_ops_t *ops = gmx_sched_find("fikit");
	gmx_policy_t *pol;
	assert_int_equal(ops->create(&p, &dev, &pol), 0);
	assert_int_equal(ops->task_add(pol, 0, 0), 0);
	gmx_cmd_t c[2] = {{.seq = 1, .task = 0, .kind = GMX_OP_KERNEL, .kernel_id = 11},
			  {.seq = 2, .task = 0, .kind = GMX_OP_KERNEL, .kernel_id = 12}};
	ops->on_launch(pol, &c[0]);
	ops->on_launch(pol, &c[1]);
	assert_int_equal(f.n_sub, 2);
	ops->task_done(pol, 0); /* killed while its kernels ran */
	f.now = 5000000000LL;
	ops->on_complete(pol, &c[0]);
	ops->on_complete(pol, &c[1]); /* would flush the first one's observation */
	assert_null(gmx_kprof_find(&prof, 11, 0));
	assert_int_equal(prof.n, 0);
	ops->destroy(pol);
	gmx_kprof_free(&prof);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_create_refuses_out_of_bounds),
	    cmocka_unit_test(test_fikit_measures_from_own_release),
	    cmocka_unit_test(test_task_done_releases_queue),
	    cmocka_unit_test(test_fikit_learns_nothing_after_done),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
