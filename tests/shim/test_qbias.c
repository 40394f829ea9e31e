/* The queue lock's bias (shim/qbias.h): granted only after a streak of one thread's notes, revoked
 * by any other thread that takes the mutex, never while the holder is inside; and mutual exclusion
 * between a thread entering through the bias and threads taking the mutex (a plain counter that
 * both increment ends exact). */
#define _GNU_SOURCE
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "qbias.h"

static pthread_mutex_t g_m = PTHREAD_MUTEX_INITIALIZER;
static gmx_qbias_t g_b;
static __thread gmx_qbias_me_t t_me;

static void take(void)
{
	pthread_mutex_lock(&g_m);
	gmx_qbias_locked(&g_b, &t_me);
}

/* Notes as the launching thread does under the mutex; 1 once it holds the bias. */
static int note_n(unsigned n)
{
	int held = 0;
	for (unsigned i = 0; i < n; i++) {
		take();
		held = gmx_qbias_note(&g_b, &t_me);
		pthread_mutex_unlock(&g_m);
	}
	return held;
}

static int membarrier_ok(void)
{
	return syscall(SYS_membarrier, MEMBARRIER_CMD_QUERY, 0, 0) > 0 &&
	       (syscall(SYS_membarrier, MEMBARRIER_CMD_QUERY, 0, 0) & MEMBARRIER_CMD_PRIVATE_EXPEDITED);
}

/* A test's start: a bias no thread was ever granted. */
static void fresh(void)
{
	memset(&g_b, 0, sizeof g_b);
}

/* Starts a thread running fn and waits for it. */
static void run_thread(void *(*fn)(void *))
{
	pthread_t t;
	assert_int_equal(pthread_create(&t, NULL, fn, NULL), 0);
	pthread_join(t, NULL);
}

static void *other_locks_once(void *arg)
{
	(void)arg;
	take();
	pthread_mutex_unlock(&g_m);
	return NULL;
}

static void granted_after_streak_revoked_by_another(void **state)
{
	(void)state;
	fresh();
	assert_int_equal(gmx_qbias_enter(&g_b, &t_me), 0); /* no bias: the mutex */
	assert_int_equal(note_n(GMX_QBIAS_STREAK - 1), 0);
	assert_int_equal(gmx_qbias_enter(&g_b, &t_me), 0);
	assert_int_equal(note_n(1), 1);
	assert_int_equal(g_b.grants, 1);
	assert_int_equal(gmx_qbias_enter(&g_b, &t_me), 1);
	gmx_qbias_exit(&t_me);
	/* Its own way through the mutex (a synchronisation) keeps the bias. */
	take();
	pthread_mutex_unlock(&g_m);
	assert_int_equal(gmx_qbias_enter(&g_b, &t_me), 1);
	gmx_qbias_exit(&t_me);
	/* Another thread taking the mutex revokes it. */
	run_thread(other_locks_once);
	assert_int_equal(g_b.revokes, 1);
	assert_int_equal(gmx_qbias_enter(&g_b, &t_me), 0);
	/* ... and the streak starts over. */
	assert_int_equal(note_n(GMX_QBIAS_STREAK - 1), 0);
	assert_int_equal(note_n(1), 1);
	assert_int_equal(g_b.grants, 2);
	assert_int_equal(gmx_qbias_enter(&g_b, &t_me), 1);
	gmx_qbias_exit(&t_me);
}

static void another_thread_breaks_the_streak(void **state)
{
	(void)state;
	fresh();
	assert_int_equal(note_n(GMX_QBIAS_STREAK - 1), 0);
	run_thread(other_locks_once);
	assert_int_equal(note_n(1), 0);
	assert_int_equal(g_b.grants, 0);
	assert_int_equal(g_b.revokes, 0);
}

/* A revoker waits while the holder is inside: the holder enters, a thread takes the mutex (it
 * must not return from gmx_qbias_locked before the holder exits). */
static volatile int g_inside, g_revoked;

static void *revoker(void *arg)
{
	(void)arg;
	take();
	g_revoked = 1;
	assert_int_equal(g_inside, 0);
	pthread_mutex_unlock(&g_m);
	return NULL;
}

static void revoker_waits_for_the_holder(void **state)
{
	(void)state;
	fresh();
	assert_int_equal(note_n(GMX_QBIAS_STREAK), 1);
	assert_int_equal(gmx_qbias_enter(&g_b, &t_me), 1);
	g_inside = 1;
	pthread_t t;
	assert_int_equal(pthread_create(&t, NULL, revoker, NULL), 0);
	/* The revoker has taken the bias away (owner cleared) but waits on this thread's flag. */
	while (__atomic_load_n(&g_b.owner, __ATOMIC_ACQUIRE) != NULL)
		sched_yield();
	for (int i = 0; i < 100; i++)
		sched_yield();
	assert_int_equal(g_revoked, 0);
	g_inside = 0;
	gmx_qbias_exit(&t_me);
	pthread_join(t, NULL);
	assert_int_equal(g_revoked, 1);
	assert_int_equal(gmx_qbias_enter(&g_b, &t_me), 0);
}

/* Mutual exclusion under contention: the launching thread enters through the bias whenever it
 * holds it (and notes, through the mutex, when it does not), another thread takes the mutex now
 * and then; both increment one plain counter. */
#define ROUNDS 200000L
#define OTHER 2000L
static long g_count;

static void *launcher(void *arg)
{
	(void)arg;
	for (long i = 0; i < ROUNDS; i++) {
		if (gmx_qbias_enter(&g_b, &t_me)) {
			g_count++;
			gmx_qbias_exit(&t_me);
		} else {
			take();
			g_count++;
			gmx_qbias_note(&g_b, &t_me);
			pthread_mutex_unlock(&g_m);
		}
	}
	return NULL;
}

static void *locker(void *arg)
{
	(void)arg;
	for (long i = 0; i < OTHER; i++) {
		take();
		g_count++;
		pthread_mutex_unlock(&g_m);
		for (int k = 0; k < 20; k++)
			sched_yield();
	}
	return NULL;
}

static void exclusion_holds(void **state)
{
	(void)state;
	fresh();
	g_count = 0;
	pthread_t a, b;
	assert_int_equal(pthread_create(&a, NULL, launcher, NULL), 0);
	assert_int_equal(pthread_create(&b, NULL, locker, NULL), 0);
	pthread_join(a, NULL);
	pthread_join(b, NULL);
	assert_int_equal(g_count, ROUNDS + OTHER);
}

/* A forked child starts with no bias and asks membarrier again. */
static void atfork_child_clears(void **state)
{
	(void)state;
	fresh();
	assert_int_equal(note_n(GMX_QBIAS_STREAK), 1);
	gmx_qbias_atfork_child(&g_b);
	assert_null(g_b.owner);
	assert_int_equal(g_b.usable, 0);
	assert_int_equal(gmx_qbias_enter(&g_b, &t_me), 0);
}

int main(void)
{
	/* Without membarrier the interposer never grants the bias: nothing here can run, and ctest
	 * reports the test skipped (77), not passed. */
	if (!membarrier_ok()) {
		fprintf(stderr, "test_qbias: skipped: membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED) is not "
				"available here, so the queue lock's bias is never granted\n");
		return 77;
	}
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(granted_after_streak_revoked_by_another),
	    cmocka_unit_test(another_thread_breaks_the_streak),
	    cmocka_unit_test(revoker_waits_for_the_holder),
	    cmocka_unit_test(exclusion_holds),
	    cmocka_unit_test(atfork_child_clears),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
