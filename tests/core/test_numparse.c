/* Strict decimal numbers: what people write is taken, anything strtod or strtoull would
 * read differently (hex, inf, nan, blanks, signs on integers, fractions of integers) is not. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "gpumux/numparse.h"

static void reals(void **state)
{
	(void)state;
	double d = -1;
	assert_int_equal(gmx_parse_real("1.5", 0, 10, &d), 0);
	assert_true(d == 1.5);
	assert_int_equal(gmx_parse_real("2", 0, 10, &d), 0);
	assert_true(d == 2);
	assert_int_equal(gmx_parse_real(".25", 0, 10, &d), 0);
	assert_true(d == 0.25);
	assert_int_equal(gmx_parse_real("3.", 0, 10, &d), 0);
	assert_true(d == 3);
	assert_int_equal(gmx_parse_real("1e-3", 0, 10, &d), 0);
	assert_true(d == 1e-3);
	assert_int_equal(gmx_parse_real("-0.5", -1, 10, &d), 0);
	assert_true(d == -0.5);
	static const char *const bad[] = {"0x10", "inf", "nan", "", " 1", "1 ", "+1", "1e", "1e+", ".", "-",
					  "1.5s", "1,5", "--1", "0x1p3", "infinity", NULL};
	for (int i = 0; bad[i]; i++) {
		d = 42;
		if (gmx_parse_real(bad[i], -1e9, 1e9, &d) != -EINVAL)
			fail_msg("'%s' was taken", bad[i]);
		assert_true(d == 42);
	}
	assert_int_equal(gmx_parse_real("0.005", 0.01, 60000, &d), -ERANGE);
	assert_int_equal(gmx_parse_real("1e400", 0, 1e308, &d), -ERANGE);
	assert_int_equal(gmx_parse_real("-1", 0, 10, &d), -ERANGE);
	assert_true(d == 42);
}

static void integers(void **state)
{
	(void)state;
	uint64_t v = 7;
	assert_int_equal(gmx_parse_uint("0", 0, 10, &v), 0);
	assert_true(v == 0);
	assert_int_equal(gmx_parse_uint("010", 0, 100, &v), 0); /* decimal, never octal */
	assert_true(v == 10);
	assert_int_equal(gmx_parse_uint("18446744073709551615", 0, UINT64_MAX, &v), 0);
	assert_true(v == UINT64_MAX);
	static const char *const bad[] = {"1.5", "0x10", "-1", "+1", "", " 1", "1 ", "1e3", "12ab", NULL};
	for (int i = 0; bad[i]; i++) {
		v = 7;
		if (gmx_parse_uint(bad[i], 0, UINT64_MAX, &v) != -EINVAL)
			fail_msg("'%s' was taken", bad[i]);
		assert_true(v == 7);
	}
	assert_int_equal(gmx_parse_uint("18446744073709551616", 0, UINT64_MAX, &v), -ERANGE);
	assert_int_equal(gmx_parse_uint("0", 1, 64, &v), -ERANGE);
	assert_int_equal(gmx_parse_uint("65", 1, 64, &v), -ERANGE);
	assert_true(v == 7);
}

int main(void)
{
	const struct CMUnitTest tests[] = {cmocka_unit_test(reals), cmocka_unit_test(integers)};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
