/* The event queue pops in (time, insertion) order. */
#include "sim_testutil.h"

#include "events.h"

static void pops_in_time_then_insertion_order(void **state)
{
	(void)state;
	gmx_event_queue_t q = {0};
	uint64_t x = 12345;
	for (uint32_t i = 0; i < 5000; i++) {
		x = x * 6364136223846793005ull + 1442695040888963407ull;
		assert_int_equal(gmx_events_push(&q, (int64_t)(x >> 54), 0, i, 0), 0);
	}
	gmx_event_t prev = {.time = -1}, e;
	uint32_t n = 0;
	while (!gmx_events_pop(&q, &e)) {
		assert_true(e.time > prev.time || (e.time == prev.time && e.seq > prev.seq));
		prev = e;
		n++;
	}
	assert_int_equal(n, 5000);
	gmx_events_free(&q);
}

static void empty_queue_reports_enoent(void **state)
{
	(void)state;
	gmx_event_queue_t q = {0};
	gmx_event_t e;
	assert_int_equal(gmx_events_pop(&q, &e), -2 /* -ENOENT */);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(pops_in_time_then_insertion_order),
		cmocka_unit_test(empty_queue_reports_enoent),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
