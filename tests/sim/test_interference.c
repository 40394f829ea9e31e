/* The interference model: symmetric under MPS; with prioritised thread blocks
 * the better priority takes the SMs it needs first. */
#include <math.h>

#include "sim_testutil.h"

#include "interference.h"

#define SMS 80

static void one_task_is_never_slowed(void **state)
{
	(void)state;
	gmx_kernel_load_t k[2] = {{0, 80, GMX_CLASS_MEMORY, 0}, {0, 80, GMX_CLASS_MEMORY, 0}};
	assert_true(gmx_interference_slowdown(k, 2, 0, SMS) == 1.0);
	assert_true(gmx_interference_slowdown_prioritized(k, 2, 0, SMS) == 1.0);
}

static void two_full_kernels_of_a_class_share_the_device(void **state)
{
	(void)state;
	gmx_kernel_load_t k[2] = {{0, 80, GMX_CLASS_MEMORY, 0}, {1, 80, GMX_CLASS_MEMORY, 5}};
	/* bandwidth pressure 2, times the co-location factor */
	assert_true(fabs(gmx_interference_slowdown(k, 2, 0, SMS) - 2.0 * 1.05) < 1e-9);
	assert_true(fabs(gmx_interference_slowdown(k, 2, 1, SMS) - 2.0 * 1.05) < 1e-9);
}

static void complementary_kernels_barely_meet(void **state)
{
	(void)state;
	gmx_kernel_load_t k[2] = {{0, 40, GMX_CLASS_COMPUTE, 0}, {1, 40, GMX_CLASS_MEMORY, 5}};
	assert_true(gmx_interference_slowdown(k, 2, 0, SMS) < 1.1);
	assert_true(gmx_interference_slowdown(k, 2, 1, SMS) < 1.1);
}

static void the_better_priority_takes_its_sms_first(void **state)
{
	(void)state;
	/* A high-priority kernel wanting half the SMs beside a full-device
	 * low-priority one: the high one runs as if alone (but for co-location),
	 * the low one on the half that is left, at half speed. */
	gmx_kernel_load_t k[2] = {{0, 40, GMX_CLASS_MEMORY, 0}, {1, 80, GMX_CLASS_MEMORY, 5}};
	assert_true(fabs(gmx_interference_slowdown_prioritized(k, 2, 0, SMS) - 1.05) < 1e-9);
	assert_true(fabs(gmx_interference_slowdown_prioritized(k, 2, 1, SMS) - 2.0 * 1.05) < 1e-9);
	/* A full-device high-priority kernel leaves the low one almost nothing. */
	gmx_kernel_load_t f[2] = {{0, 80, GMX_CLASS_COMPUTE, 0}, {1, 80, GMX_CLASS_COMPUTE, 5}};
	assert_true(fabs(gmx_interference_slowdown_prioritized(f, 2, 0, SMS) - 1.05) < 1e-9);
	assert_true(gmx_interference_slowdown_prioritized(f, 2, 1, SMS) >= 20.0);
	/* Equal priorities share as under MPS. */
	gmx_kernel_load_t e[2] = {{0, 80, GMX_CLASS_COMPUTE, 3}, {1, 80, GMX_CLASS_COMPUTE, 3}};
	assert_true(fabs(gmx_interference_slowdown_prioritized(e, 2, 0, SMS) - gmx_interference_slowdown(e, 2, 0, SMS)) <
		    1e-9);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(one_task_is_never_slowed),
		cmocka_unit_test(two_full_kernels_of_a_class_share_the_device),
		cmocka_unit_test(complementary_kernels_barely_meet),
		cmocka_unit_test(the_better_priority_takes_its_sms_first),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
