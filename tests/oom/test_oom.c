/* Every allocation can fail: the workload reader, the scenario loader, a whole
 * simulation in every memory mode, templates and gpumuxd's memory planner are run
 * with the Nth allocation failing, for N = 0, 1, 2,
 * ... until one succeeds. Each failure must come back as an error (never a
 * crash), and under the sanitizers nothing may leak. Allocation failures are
 * injected by wrapping malloc, calloc, realloc and strdup at link time. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "gpumux/template.h"
#include "gpumux/workload_io.h"
#include "memplan.h"
#include "msched.h"
#include "scenario.h"

static long countdown = -1; /* allocations left before one fails; -1: never */
static long failures;
static long current; /* the allocation number failing now: a breakpoint condition */

void *__real_malloc(size_t n);
void *__real_calloc(size_t n, size_t m);
void *__real_realloc(void *p, size_t n);
char *__real_strdup(const char *s);

static int fail_now(void)
{
	if (countdown < 0)
		return 0;
	if (countdown-- == 0) {
		failures++;
		return 1;
	}
	return 0;
}

void *__wrap_malloc(size_t n)
{
	return fail_now() ? NULL : __real_malloc(n);
}

void *__wrap_calloc(size_t n, size_t m)
{
	return fail_now() ? NULL : __real_calloc(n, m);
}

void *__wrap_realloc(void *p, size_t n)
{
	return fail_now() ? NULL : __real_realloc(p, n);
}

char *__wrap_strdup(const char *s)
{
	return fail_now() ? NULL : __real_strdup(s);
}

static const char *write_tmp(const char *suffix, const char *text, char *path, size_t len)
{
	snprintf(path, len, "/tmp/gmx-oom-XXXXXX%s", suffix);
	int fd = mkstemps(path, (int)strlen(suffix));
	assert_true(fd >= 0);
	FILE *f = fdopen(fd, "w");
	assert_non_null(f);
	fputs(text, f);
	fclose(f);
	return path;
}

static const char workload_text[] =
	"gpumux-workload 2\n"
	"name oom\n"
	"unit iteration\n"
	"buffer id=0 size=0x800000 name=a\n"
	"buffer id=1 size=0x400000 name=b\n"
	"kname 0 scale(float const*, float*, int)\n"
	"kname 1 sum(float const*, float*)\n"
	"kernel s=0 think=1000 dur=50000 name=0 grid=64,1,1 block=256,1,1 args=p:0x200000000,p:0x200800000,i4:1024 "
	"touch=0+0:0x800000,1+0:0x400000\n"
	"kernel s=1 think=1000 dur=20000 name=1 args=p:0x200000000,p:0x200800000 touch=0+0:0x100000\n"
	"sync s=all\n"
	"end buffers=2 knames=2 ops=3\n";

/* Runs fn with the Nth allocation failing until it succeeds; each failed run
 * must report an error. Returns how many allocations a successful run made. */
static long until_success(int (*fn)(void *), void *arg)
{
	for (long n = 0;; n++) {
		countdown = n;
		current = n;
		failures = 0;
		int rc = fn(arg);
		countdown = -1;
		if (!failures) {
			assert_int_equal(rc, 0);
			return n;
		}
		if (rc == 0)
			fail_msg("allocation %ld failed but the call reported success", n);
		if (n > 100000)
			fail_msg("still failing after %ld allocations", n);
	}
}

static int read_workload(void *arg)
{
	gmx_workload_t w;
	char err[256];
	int rc = gmx_workload_read(arg, &w, err, sizeof(err));
	if (!rc)
		gmx_workload_free(&w);
	return rc;
}

static void workload_reader_survives_every_failure(void **state)
{
	(void)state;
	char path[64];
	write_tmp(".gmxw", workload_text, path, sizeof(path));
	long n = until_success(read_workload, path);
	assert_true(n > 5);
	remove(path);
}

static int load_and_run(void *arg)
{
	gmx_scenario_t sc;
	char err[512];
	int rc = gmx_scenario_load(arg, &sc, err, sizeof(err));
	if (rc)
		return rc;
	gmx_sim_result_t *res = calloc(1, sizeof(*res));
	if (!res) {
		gmx_scenario_free(&sc);
		return -ENOMEM;
	}
	static const char *const modes[] = {"inmem", "um", "ideal", "msched"};
	for (int m = 0; m < 4 && !rc; m++)
		rc = gmx_scenario_run(&sc, "timeslice", modes[m], res, err, sizeof(err));
	free(res);
	gmx_scenario_free(&sc);
	return rc;
}

static void scenario_and_simulation_survive_every_failure(void **state)
{
	(void)state;
	char wpath[64], spath[64], text[512];
	write_tmp(".gmxw", workload_text, wpath, sizeof(wpath));
	snprintf(text, sizeof(text),
		 "[scenario]\nduration_s = 0.01\ncapacity_gb = 0.02\n"
		 "[task a]\nworkload = %s\n[task b]\nworkload = %s\n[task c]\nworkload = vector-add\nn = 65536\n"
		 "footprint = 3M\n",
		 wpath, wpath);
	write_tmp(".ini", text, spath, sizeof(spath));
	long n = until_success(load_and_run, spath);
	assert_true(n > 20);
	remove(wpath);
	remove(spath);
}

/* Templates: learned from a workload, formatted, parsed back. */
static int templates_round_trip(void *arg)
{
	gmx_workload_t w;
	char err[256];
	int rc = gmx_workload_read(arg, &w, err, sizeof(err));
	if (rc)
		return rc;
	gmx_tpl_set_t set = {0}, back = {0};
	char *text = NULL;
	rc = gmx_msched_learn(&w, &set);
	if (!rc)
		rc = gmx_tpl_format(&set, &text);
	if (!rc)
		rc = gmx_tpl_parse(text, &back, err, sizeof(err));
	if (!rc && back.n != set.n)
		fail_msg("templates lost in the round trip");
	free(text);
	gmx_tpl_set_free(&set);
	gmx_tpl_set_free(&back);
	gmx_workload_free(&w);
	return rc;
}

static void templates_survive_every_failure(void **state)
{
	(void)state;
	char path[64];
	write_tmp(".gmxw", workload_text, path, sizeof(path));
	long n = until_success(templates_round_trip, path);
	assert_true(n > 5);
	remove(path);
}

/* gpumuxd's memory planner: a failed plan emits nothing and leaves residency as it was. */
static int orders;
static void count_order(void *ctx, uint32_t task, int to_device, uint64_t ptr, uint64_t len)
{
	(void)ctx, (void)task, (void)to_device, (void)ptr, (void)len;
	orders++;
}

static int plan_switches(void *arg)
{
	(void)arg;
	gmxd_mem_t *m;
	const uint64_t ch = 2ull << 20;
	int rc = gmxd_mem_create(6 * ch, &m);
	if (rc)
		return rc;
	for (uint32_t t = 0; t < 3 && !rc; t++)
		rc = gmxd_mem_alloc(m, t, 0x100000000ull * (t + 1), 4 * ch);
	gmx_tpl_range_t r = {0x100000000ull + ch, ch};
	for (uint32_t step = 0; step < 6 && !rc; step++) {
		uint32_t t = step % 3;
		gmxd_mem_slice_t sl[3] = {{.task = t, .whole = 1}, {.task = (t + 1) % 3, .whole = 1}, {.task = 0, .r = &r, .n = 1}};
		uint64_t before = gmxd_mem_resident(m, GMX_MAX_TASKS);
		gmxd_mem_stats_t st;
		orders = 0;
		rc = gmxd_mem_plan(m, sl, 3, 2, count_order, NULL, &st);
		if (rc && (orders || gmxd_mem_resident(m, GMX_MAX_TASKS) != before))
			fail_msg("a failed plan sent %d orders or changed residency", orders);
	}
	gmxd_mem_destroy(m);
	return rc;
}

static void memory_planner_survives_every_failure(void **state)
{
	(void)state;
	long n = until_success(plan_switches, NULL);
	assert_true(n > 5);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(workload_reader_survives_every_failure),
		cmocka_unit_test(scenario_and_simulation_survive_every_failure),
		cmocka_unit_test(templates_survive_every_failure),
		cmocka_unit_test(memory_planner_survives_every_failure),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
