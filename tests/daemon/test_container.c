/* gmxd_container_id: the container id in /proc/PID/cgroup texts of each runtime. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

int gmxd_container_id(const char *cgroup, char *out, size_t len);

#define ID "3f4e1c2b9a8d7e6f5a4b3c2d1e0f9a8b7c6d5e4f3a2b1c0d9e8f7a6b5c4d3e2f"
#define ID2 "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

static void expect_id(const char *text, const char *want)
{
	char out[65];
	memset(out, 'x', sizeof out);
	int found = gmxd_container_id(text, out, sizeof out);
	assert_int_equal(found, want[0] != 0);
	assert_string_equal(out, want);
}

static void runtimes(void **state)
{
	(void)state;
	expect_id("0::/system.slice/docker-" ID ".scope\n", ID);
	expect_id("12:memory:/docker/" ID "\n11:cpu:/docker/" ID "\n", ID);
	expect_id("0::/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod1a2b3c4d_5e6f_7a8b_9c0d_"
		  "1e2f3a4b5c6d.slice/cri-containerd-" ID ".scope\n",
		  ID);
	expect_id("0::/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-podabc.slice/crio-" ID
		  ".scope\n",
		  ID);
	expect_id("0::/user.slice/user-1000.slice/user@1000.service/user.slice/libpod-" ID
		  ".scope/container\n",
		  ID);
	expect_id("4:memory:/kubepods/burstable/pod1a2b3c4d-5e6f-7a8b-9c0d-1e2f3a4b5c6d/" ID "\n", ID);
}

static void none(void **state)
{
	(void)state;
	expect_id("0::/\n", "");
	expect_id("0::/user.slice/user-1000.slice/session-3.scope\n", "");
	expect_id("4:memory:/process_api/9c20e2e688428b7a1afb677613db8151\n", ""); /* 32 digits */
	expect_id("0::/x/" ID "0\n", "");					   /* 65 */
	expect_id("0::/x/3F4E1C2B9A8D7E6F5A4B3C2D1E0F9A8B7C6D5E4F3A2B1C0D9E8F7A6B5C4D3E2F\n", ""); /* upper */
	expect_id("0::/machine.slice/libpod-conmon-" ID ".scope\n", ""); /* podman's monitor */
	expect_id("", "");
	char small[10];
	assert_int_equal(gmxd_container_id("0::/docker/" ID "\n", small, sizeof small), 0);
	assert_string_equal(small, "");
}

static void innermost(void **state)
{
	(void)state;
	/* Docker in Docker: the inner container's id comes last. */
	expect_id("0::/docker/" ID2 "/docker/" ID "\n", ID);
}

int main(void)
{
	const struct CMUnitTest tests[] = {cmocka_unit_test(runtimes), cmocka_unit_test(none),
					   cmocka_unit_test(innermost)};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
