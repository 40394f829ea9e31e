/* Scenario files: every kind of bad input gives one line naming file and line. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "sim_testutil.h"

#include "preset.h"
#include "scenario.h"

static char path[64];

/* Loads text as a scenario file into *sc (gmx_scenario_load's result). */
static int load_scenario(const char *text, gmx_scenario_t *sc, char *err, size_t len)
{
	strcpy(path, "/tmp/gmx-scenario-XXXXXX.ini");
	int fd = mkstemps(path, 4);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, text, strlen(text)), (ssize_t)strlen(text));
	close(fd);
	int rc = gmx_scenario_load(path, sc, err, len);
	unlink(path);
	return rc;
}

static int load_text(const char *text, char *err, size_t len)
{
	gmx_scenario_t sc;
	int rc = load_scenario(text, &sc, err, len);
	if (!rc)
		gmx_scenario_free(&sc);
	return rc;
}

static void expect_error(const char *text, int line, const char *needle)
{
	char err[1024], where[96];
	assert_true(load_text(text, err, sizeof(err)) < 0);
	snprintf(where, sizeof(where), "%s:%d:", path, line);
	if (!strstr(err, where) || !strstr(err, needle))
		fail_msg("expected '%s' ... '%s', got: %s", where, needle, err);
	assert_null(strchr(err, '\n'));
}

static void valid_scenario_loads(void **state)
{
	(void)state;
	char err[512];
	int rc = load_text("[scenario]\ndevice = rtx3080\nslice_ms = 4\n[task a]\nworkload = vector-add\n"
			   "footprint = 12000000\ncount = 2\n",
			   err, sizeof(err));
	if (rc)
		fail_msg("%s", err);
}

static void unknown_scenario_key(void **state)
{
	(void)state;
	expect_error("[scenario]\nname = x\ndurration_s = 3\n", 3, "unknown key 'durration_s'");
}

static void bad_warmup(void **state)
{
	(void)state;
	expect_error("[scenario]\nname = x\nwarmup_s = -2\n", 3, "warmup_s '-2' is not a number of seconds");
	expect_error("[scenario]\nwarmup_s = soon\n", 2, "warmup_s 'soon'");
}

static void warmup_is_read_and_defaults_to_zero(void **state)
{
	(void)state;
	const char *texts[2] = {
	    "[scenario]\nwarmup_s = 1.5\n[task a]\nworkload = vector-add\nfootprint = 12000000\n",
	    "[scenario]\n[task a]\nworkload = vector-add\nfootprint = 12000000\n"};
	const int64_t want[2] = {1500000000LL, 0};
	for (int i = 0; i < 2; i++) {
		gmx_scenario_t sc;
		char err[512];
		int rc = load_scenario(texts[i], &sc, err, sizeof(err));
		if (rc)
			fail_msg("%s", err);
		assert_int_equal(sc.warmup_ns, want[i]);
		gmx_scenario_free(&sc);
	}
}

static void unknown_section(void **state)
{
	(void)state;
	expect_error("[scenario]\n[tasks a]\nworkload = vector-add\n", 3, "unknown section [tasks a]");
}

static void unknown_preset(void **state)
{
	(void)state;
	expect_error("[scenario]\ndevice = rtx9090\n", 2, "unknown device preset 'rtx9090'");
}

static void bad_priority(void **state)
{
	(void)state;
	expect_error("[task a]\nworkload = vector-add\npriority = 10\n", 3, "priority '10'");
}

static void negative_units(void **state)
{
	(void)state;
	expect_error("[task a]\nworkload = vector-add\nunits = -4\n", 3, "units '-4'");
}

static void unknown_generator(void **state)
{
	(void)state;
	expect_error("[scenario]\n[task a]\nworkload = warp-drive\n", 3, "unknown workload 'warp-drive'");
}

static void bad_generator_parameter(void **state)
{
	(void)state;
	expect_error("[task a]\nworkload = vector-add\nfootprint = -5\n", 3, "footprint=-5");
}

static void missing_workload(void **state)
{
	(void)state;
	expect_error("[scenario]\n[task a]\npriority = 1\n", 2, "has no workload"); /* the section's line */
}

/* One name, one task: a second [task a] (even an empty one, even spelt with more blanks) and a
 * name that a count = N expansion also makes are refused, with the lines of both. */
static void duplicate_task_names(void **state)
{
	(void)state;
	expect_error("[task a]\nworkload = vector-add\n[task a]\nworkload = matmul\n", 3,
		     "[task a] is defined twice");
	expect_error("[task a]\nworkload = vector-add\n[task a]\n", 3, "[task a] is defined twice");
	expect_error("[task a]\nworkload = vector-add\n[task   a]\n", 3, "[task a] is defined twice");
	expect_error("[task a]\nworkload = vector-add\n[task a]\n", 3, ".ini:1)");
	expect_error("[task a0]\nworkload = vector-add\n[task a]\nworkload = vector-add\ncount = 2\n", 5,
		     "names a task 'a0' that [task a0] at");
	expect_error("[task a]\nworkload = vector-add\ncount = 2\n[task a1]\nworkload = vector-add\n", 4,
		     "[task a1] names a task 'a1' that [task a] with count at");
	_Static_assert(GMX_MAX_TASKS == 128, "two sections of count 64 fill a scenario");
	expect_error(
	    "[task a]\nworkload = vector-add\ncount = 64\n[task b]\nworkload = vector-add\ncount = 64\n"
	    "[task c]\nworkload = vector-add\n",
	    7, "[task c] brings the scenario to 129 tasks");
}

/* sched and mem are checked where they are written, and the slice against the bounds the
 * run holds it to. */
static void scenario_keys_checked_at_their_line(void **state)
{
	(void)state;
	expect_error("[scenario]\nsched = bogus\n[task a]\nworkload = vector-add\n", 2,
		     "unknown scheduler 'bogus'");
	expect_error("[scenario]\nmem = bogus\n[task a]\nworkload = vector-add\n", 2,
		     "unknown memory mode 'bogus'");
	expect_error("[scenario]\nslice_ms = 0.005\n[task a]\nworkload = vector-add\n", 2,
		     "slice_ms '0.005'");
	expect_error("[scenario]\nmem_slice_ms = 0.005\n[task a]\nworkload = vector-add\n", 2,
		     "mem_slice_ms '0.005'");
	expect_error("[scenario]\nduration_s = 0x10\n[task a]\nworkload = vector-add\n", 2,
		     "duration_s '0x10'");
	expect_error("[scenario]\nseed = 1.5\n[task a]\nworkload = vector-add\n", 2, "seed '1.5'");
	expect_error("[scenario]\nwarmup_s = inf\n[task a]\nworkload = vector-add\n", 2, "warmup_s 'inf'");
	expect_error("[task a]\nworkload = vector-add\ncount = 0x2\n", 3, "count '0x2'");
	expect_error(
	    "[scenario]\n\n[task a]\nworkload = vector-add\narrival = trace\narrivals = nonexist.json\n", 6,
	    "arrivals file: unable to open");
	/* A line too long for the INI reader is named as such, at its own line. */
	char text[1024];
	snprintf(text, sizeof(text), "[task a]\nworkload = %0300d\nunits = 1\n", 0);
	expect_error(text, 2, "line longer than");
	/* The smallest slice the parser takes runs. */
	char err[512];
	gmx_scenario_t sc;
	int rc =
	    load_scenario("[scenario]\nslice_ms = 0.01\nduration_s = 0.001\n[task a]\nworkload = vector-add\n"
			  "footprint = 1200000\n",
			  &sc, err, sizeof(err));
	if (rc)
		fail_msg("%s", err);
	gmx_sim_result_t *res = calloc(1, sizeof(*res));
	assert_non_null(res);
	rc = gmx_scenario_run(&sc, sc.sched, sc.mem, res, err, sizeof(err));
	if (rc)
		fail_msg("%s", err);
	free(res);
	gmx_scenario_free(&sc);
}

static void missing_file(void **state)
{
	(void)state;
	gmx_scenario_t sc;
	char err[256];
	assert_true(gmx_scenario_load("/nonexistent/s.ini", &sc, err, sizeof(err)) < 0);
	assert_non_null(strstr(err, "/nonexistent/s.ini: cannot open"));
}

static void missing_workload_file(void **state)
{
	(void)state;
	expect_error("[task a]\nworkload = nothere/w.gmxw\n", 2, "w.gmxw");
}

/* One unit convention: every preset's capacity is the size its name gives ("16 GB",
 * "141 GB") read as GiB, within 2% (the H200 was 141 * 10^9 bytes, 131.3 GiB). */
static void preset_capacities_are_gib(void **state)
{
	(void)state;
	char names[512];
	gmx_preset_names(names, sizeof(names));
	int n = 0;
	for (char *save = NULL, *t = strtok_r(names, ", ", &save); t; t = strtok_r(NULL, ", ", &save)) {
		const gmx_preset_t *p = gmx_preset_find(t);
		assert_non_null(p);
		const char *gb = strstr(p->description, " GB");
		assert_non_null(gb);
		const char *d = gb;
		while (d > p->description && d[-1] >= '0' && d[-1] <= '9')
			d--;
		double said = strtod(d, NULL), gib = (double)p->hbm_bytes / (1ull << 30);
		if (gib < 0.98 * said || gib > 1.02 * said)
			fail_msg("%s: %.1f GiB, described as %.0f GB", t, gib, said);
		n++;
	}
	assert_true(n >= 7);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(valid_scenario_loads),
	    cmocka_unit_test(unknown_scenario_key),
	    cmocka_unit_test(unknown_section),
	    cmocka_unit_test(unknown_preset),
	    cmocka_unit_test(bad_priority),
	    cmocka_unit_test(negative_units),
	    cmocka_unit_test(unknown_generator),
	    cmocka_unit_test(bad_generator_parameter),
	    cmocka_unit_test(missing_workload),
	    cmocka_unit_test(duplicate_task_names),
	    cmocka_unit_test(scenario_keys_checked_at_their_line),
	    cmocka_unit_test(missing_file),
	    cmocka_unit_test(missing_workload_file),
	    cmocka_unit_test(bad_warmup),
	    cmocka_unit_test(warmup_is_read_and_defaults_to_zero),
	    cmocka_unit_test(preset_capacities_are_gib),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
