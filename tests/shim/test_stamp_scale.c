/* The leased path's tick-to-nanosecond factor (shim/stamp.h): conversions within a nanosecond of
 * the exact product at the TSC rates machines have, the age bound exact to the tick, and the
 * rates and spans it refuses (the clock is read instead). */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "stamp.h"

#define SPAN 1000000 /* GMX_STAMP_REFIT_NS */

/* ns per tick of 1 GHz, 2.1 GHz, 2.4 GHz (a fit's noise in the last digits), 3.0 GHz, 4.0 GHz
 * and 5.3 GHz TSCs, and of slow ones (100 MHz, 25 MHz). */
static const double rates[] = {1.0, 1 / 2.1, 0.416666713, 1 / 3.0, 0.25, 1 / 5.3, 10.0, 40.0};

static void converts_within_a_nanosecond(void **state)
{
	(void)state;
	for (size_t i = 0; i < sizeof rates / sizeof rates[0]; i++) {
		gmx_stamp_scale_t s = {0};
		assert_int_equal(gmx_stamp_scale(rates[i], SPAN, &s), 0);
		for (uint64_t dt = 0; dt < s.max_ticks; dt += 1 + dt / 7) {
			double exact = (double)dt * rates[i];
			double got = (double)gmx_stamp_ticks_ns(dt, s.mult);
			assert_true(fabs(got - exact) <= 1.0);
		}
	}
}

static void bound_is_exact_to_the_tick(void **state)
{
	(void)state;
	for (size_t i = 0; i < sizeof rates / sizeof rates[0]; i++) {
		gmx_stamp_scale_t s = {0};
		assert_int_equal(gmx_stamp_scale(rates[i], SPAN, &s), 0);
		/* Every reading the fast path accepts is younger than the span; the next tick is not. */
		assert_true(gmx_stamp_ticks_ns(s.max_ticks - 1, s.mult) < SPAN);
		assert_true(gmx_stamp_ticks_ns(s.max_ticks, s.mult) >= SPAN);
		/* ... and the bound is where the exact rate puts it, within a tick. */
		assert_true(fabs((double)s.max_ticks - SPAN / rates[i]) <= 1.0 + SPAN / rates[i] * 1e-9);
	}
}

static void refuses_what_it_cannot_hold(void **state)
{
	(void)state;
	gmx_stamp_scale_t s = {0};
	assert_int_equal(gmx_stamp_scale(0.0, SPAN, &s), -1);
	assert_int_equal(gmx_stamp_scale(-0.3, SPAN, &s), -1);
	assert_int_equal(gmx_stamp_scale(NAN, SPAN, &s), -1);
	assert_int_equal(gmx_stamp_scale(1e-9, SPAN, &s), -1);
	assert_int_equal(gmx_stamp_scale(1e9, SPAN, &s), -1);
	assert_int_equal(gmx_stamp_scale(0.3, 0, &s), -1);
	assert_int_equal(gmx_stamp_scale(0.3, (int64_t)1 << 31, &s), -1);
	/* The extremes it takes: the product of the largest accepted age and the factor fits. */
	assert_int_equal(gmx_stamp_scale(1.0 / 65536.0, 1 << 30, &s), 0);
	assert_true(gmx_stamp_ticks_ns(s.max_ticks - 1, s.mult) < (1 << 30));
	assert_int_equal(gmx_stamp_scale(65536.0, 1 << 30, &s), 0);
	assert_true(gmx_stamp_ticks_ns(s.max_ticks - 1, s.mult) < (1 << 30));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(converts_within_a_nanosecond),
	    cmocka_unit_test(bound_is_exact_to_the_tick),
	    cmocka_unit_test(refuses_what_it_cannot_hold),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
