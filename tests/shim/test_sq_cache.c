/* The launch path's stream look-up (gmx_q_sq_find, shim/qstreams.c) on a fake driver table: the
 * per-thread cache answers the stream last used while the queues are unchanged, without asking
 * the driver or walking the queues; a queue freed since (the generation), another stream or a
 * default stream (which depends on the current context) is looked up again, and the cache never
 * answers a default stream. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "queue_internal.h"

gmx_qstate_t gmx_q;
GMX_TLS gmx_sq *tl_last_q;
GMX_TLS CUstream tl_last_stream;
GMX_TLS unsigned tl_last_gen;
void *gmx_shim_tbl[GMX_SYM_COUNT];
int gmx_shim_loaded = 1;
void gmx_shim_load(void)
{
}

static int driver_calls;
static int ctx_obj, other_ctx_obj;
static CUcontext current = (CUcontext)&ctx_obj;

static CUresult fake_get_flags(CUstream s, unsigned *flags)
{
	(void)s;
	driver_calls++;
	*flags = 0;
	return CUDA_SUCCESS;
}
static CUresult fake_get_ctx(CUstream s, CUcontext *c)
{
	(void)s;
	driver_calls++;
	*c = current;
	return CUDA_SUCCESS;
}
static CUresult fake_ctx_current(CUcontext *c)
{
	driver_calls++;
	*c = current;
	return CUDA_SUCCESS;
}

static CUstream const app = (CUstream)(uintptr_t)0x1000, app2 = (CUstream)(uintptr_t)0x2000;

static int setup(void **state)
{
	(void)state;
	gmx_q.ring_mask = 63;
	gmx_shim_tbl[GMX_SYM_cuStreamGetFlags] = (void *)fake_get_flags;
	gmx_shim_tbl[GMX_SYM_cuStreamGetCtx] = (void *)fake_get_ctx;
	gmx_shim_tbl[GMX_SYM_cuCtxGetCurrent] = (void *)fake_ctx_current;
	return 0;
}

static void stream_last_used_is_answered_by_the_cache(void **state)
{
	(void)state;
	gmx_sq *q = gmx_q_sq_find(app, 0, 1);
	assert_non_null(q);
	int calls = driver_calls;
	gmx_sq *head = gmx_q.queues;
	gmx_q.queues = NULL; /* a hit does not walk the queues */
	assert_ptr_equal(gmx_q_sq_find(app, 0, 0), q);
	assert_ptr_equal(gmx_q_sq_find(app, 1, 0), q);
	gmx_q.queues = head;
	assert_int_equal(driver_calls, calls);
}

static void other_stream_or_freed_queue_is_looked_up(void **state)
{
	(void)state;
	gmx_sq *q = gmx_q_sq_find(app, 0, 1);
	gmx_sq *q2 = gmx_q_sq_find(app2, 0, 1);
	assert_ptr_not_equal(q, q2);
	assert_ptr_equal(gmx_q_sq_find(app, 0, 0), q);
	gmx_q.gen++; /* a queue was freed: the cached one may be gone */
	gmx_sq *head = gmx_q.queues;
	gmx_q.queues = NULL;
	assert_null(gmx_q_sq_find(app, 0, 0));
	gmx_q.queues = head;
	assert_ptr_equal(gmx_q_sq_find(app, 0, 0), q);
}

static void default_streams_follow_the_current_context(void **state)
{
	(void)state;
	gmx_sq *mine = gmx_q_sq_find(NULL, 0, 1);
	assert_non_null(mine);
	assert_ptr_equal(gmx_q_sq_find(CU_STREAM_LEGACY, 0, 0), mine);
	current = (CUcontext)&other_ctx_obj;
	gmx_sq *other = gmx_q_sq_find(NULL, 0, 1);
	assert_ptr_not_equal(other, mine);
	assert_ptr_equal(other->ctx, current);
	current = (CUcontext)&ctx_obj;
	assert_ptr_equal(gmx_q_sq_find(NULL, 0, 0), mine);
	current = NULL; /* no context: no queue */
	assert_null(gmx_q_sq_find(NULL, 0, 1));
	current = (CUcontext)&ctx_obj;
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(stream_last_used_is_answered_by_the_cache),
	    cmocka_unit_test(other_stream_or_freed_queue_is_looked_up),
	    cmocka_unit_test(default_streams_follow_the_current_context),
	};
	return cmocka_run_group_tests(tests, setup, NULL);
}
