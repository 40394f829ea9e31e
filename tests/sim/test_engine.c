/* The engine: closed-loop timing, determinism, memory modes agreeing when
 * memory suffices, ideal between um and inmem, invariants, exclusive runs. */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "sim_testutil.h"

#include "sim.h"

static gmx_sim_config_t base_config(gmx_sim_task_t *tasks, uint32_t n, const char *sched, gmx_mem_mode_t mem,
				    uint64_t capacity)
{
	gmx_sim_config_t c = {
	    .device = gmx_preset_find("rtx5080"),
	    .capacity_bytes = capacity,
	    .mem = mem,
	    .policy = gmx_sched_find(sched),
	    .duration_ns = 2000000000LL,
	    .seed = 1,
	    .tasks = tasks,
	    .n_tasks = n,
	};
	gmx_sched_params_default(&c.sched);
	return c;
}

static void closed_loop_unit_time_is_think_launch_and_run(void **state)
{
	(void)state;
	gmx_workload_t w;
	tu_sweep(&w, "one", 1 << 20, 1, 4096, 100000 /* 100 us */, 50000 /* 50 us */);
	gmx_sim_task_t t = {.name = "one", .workload = &w};
	gmx_sim_config_t c = base_config(&t, 1, "timeslice", GMX_MEM_INMEM, 1ull << 30);
	gmx_sim_result_t r;
	char err[256];
	assert_int_equal(gmx_sim_run(&c, &r, err, sizeof(err)), 0);
	/* think 50 us + launch 8 us + run 100 us = 158 us per unit */
	double unit = 158e-6;
	assert_int_equal(r.tasks[0].units, (uint64_t)(2.0 / unit));
	assert_true(r.tasks[0].lat_p50_s > 157.9e-6 && r.tasks[0].lat_p50_s < 158.1e-6);
	gmx_workload_free(&w);
}

/* A run with a warm-up W measures exactly what a run of W + D adds to a run of
 * W: the warm-up changes what is reported, never what is simulated. */
static void warmup_reports_the_window_after_it(void **state)
{
	(void)state;
	gmx_workload_t a, b;
	tu_sweep(&a, "a", 64ull << 20, 16, 8ull << 20, 200000, 5000);
	tu_sweep(&b, "b", 48ull << 20, 12, 8ull << 20, 300000, 5000);
	gmx_sim_task_t t[2] = {{.name = "a", .workload = &a}, {.name = "b", .workload = &b}};
	/* ideal under timeline is a bound computed for the window, not a simulation: not here. */
	const gmx_mem_mode_t modes[3] = {GMX_MEM_UM, GMX_MEM_MSCHED_SWITCH, GMX_MEM_MSCHED};
	const int64_t warm = 700000000LL, dur = 1300000000LL;
	char err[256];
	for (int m = 0; m < 3; m++) {
		gmx_sim_result_t *r = calloc(3, sizeof(*r));
		assert_non_null(r);
		gmx_sim_config_t c = base_config(t, 2, "timeline", modes[m], 80ull << 20);
		c.sched.slice_ns = 50000000;
		c.duration_ns = warm;
		assert_int_equal(gmx_sim_run(&c, &r[0], err, sizeof(err)), 0);
		c.duration_ns = warm + dur;
		assert_int_equal(gmx_sim_run(&c, &r[1], err, sizeof(err)), 0);
		c.duration_ns = dur;
		c.warmup_ns = warm;
		assert_int_equal(gmx_sim_run(&c, &r[2], err, sizeof(err)), 0);
		const gmx_sim_result_t *w = &r[2];
		assert_true(w->warmup_s == 0.7);
		assert_true(w->sim_time_s == r[1].sim_time_s);
		assert_true(w->h2d_bytes > 0);
		assert_int_equal(w->h2d_bytes, r[1].h2d_bytes - r[0].h2d_bytes);
		assert_int_equal(w->d2h_bytes, r[1].d2h_bytes - r[0].d2h_bytes);
		assert_int_equal(w->faults, r[1].faults - r[0].faults);
		assert_int_equal(w->kernels, r[1].kernels - r[0].kernels);
		assert_int_equal(w->msched.switches, r[1].msched.switches - r[0].msched.switches);
		assert_int_equal(w->msched.planned_in_bytes,
				 r[1].msched.planned_in_bytes - r[0].msched.planned_in_bytes);
		assert_int_equal(w->msched.topup_in_bytes,
				 r[1].msched.topup_in_bytes - r[0].msched.topup_in_bytes);
		assert_int_equal(w->msched.prefetch_in_bytes,
				 r[1].msched.prefetch_in_bytes - r[0].msched.prefetch_in_bytes);
		if (modes[m] == GMX_MEM_MSCHED)
			assert_true(w->msched.prefetch_in_bytes > 0); /* so the line above can fail */
		for (int i = 0; i < 2; i++) {
			assert_true(w->tasks[i].units > 0);
			assert_int_equal(w->tasks[i].units, r[1].tasks[i].units - r[0].tasks[i].units);
			double progress = r[1].tasks[i].progress - r[0].tasks[i].progress;
			assert_true(fabs(w->tasks[i].progress - progress) < 1e-9);
			assert_true(fabs(w->tasks[i].active_s - 1.3) < 1e-9);
			assert_true(fabs(w->tasks[i].throughput_per_s - progress / 1.3) < 1e-9);
		}
		free(r);
	}
	gmx_workload_free(&a);
	gmx_workload_free(&b);
}

static void same_seed_same_result(void **state)
{
	(void)state;
	gmx_workload_t a, b;
	tu_sweep(&a, "a", 64ull << 20, 16, 8ull << 20, 200000, 5000);
	tu_sweep(&b, "b", 64ull << 20, 16, 8ull << 20, 300000, 5000);
	gmx_sim_task_t t[2] = {
	    {.name = "a", .workload = &a},
	    {.name = "b", .workload = &b, .arrival = GMX_ARRIVAL_POISSON, .rate_per_s = 50}};
	gmx_sim_result_t r1, r2;
	char err[256];
	gmx_sim_config_t c = base_config(t, 2, "timeslice", GMX_MEM_UM, 80ull << 20);
	assert_int_equal(gmx_sim_run(&c, &r1, err, sizeof(err)), 0);
	assert_int_equal(gmx_sim_run(&c, &r2, err, sizeof(err)), 0);
	assert_true(r1.faults > 0);
	assert_int_equal(r1.faults, r2.faults);
	assert_int_equal(r1.h2d_bytes, r2.h2d_bytes);
	for (int i = 0; i < 2; i++) {
		assert_int_equal(r1.tasks[i].units, r2.tasks[i].units);
		assert_true(r1.tasks[i].throughput_per_s == r2.tasks[i].throughput_per_s);
		assert_true(r1.tasks[i].lat_p99_s == r2.tasks[i].lat_p99_s);
	}
	gmx_workload_free(&a);
	gmx_workload_free(&b);
}

static void modes_agree_when_memory_suffices(void **state)
{
	(void)state;
	gmx_workload_t a, b;
	tu_sweep(&a, "a", 64ull << 20, 16, 8ull << 20, 200000, 5000);
	tu_sweep(&b, "b", 32ull << 20, 8, 8ull << 20, 100000, 5000);
	gmx_sim_task_t t[2] = {{.name = "a", .workload = &a}, {.name = "b", .workload = &b}};
	gmx_sim_result_t r[3];
	char err[256];
	for (int m = 0; m < 3; m++) {
		gmx_sim_config_t c = base_config(t, 2, "timeslice", (gmx_mem_mode_t)m, 1ull << 30);
		assert_int_equal(gmx_sim_run(&c, &r[m], err, sizeof(err)), 0);
	}
	assert_int_equal(r[1].faults, 0);
	assert_int_equal(r[1].h2d_bytes, 0);
	assert_int_equal(r[2].h2d_bytes, 0);
	for (int i = 0; i < 2; i++) {
		assert_true(r[0].tasks[i].throughput_per_s == r[1].tasks[i].throughput_per_s);
		assert_true(r[0].tasks[i].throughput_per_s == r[2].tasks[i].throughput_per_s);
	}
	gmx_workload_free(&a);
	gmx_workload_free(&b);
}

static void ideal_lies_between_um_and_inmem_and_conserves_bytes(void **state)
{
	(void)state;
	gmx_workload_t a, b, d;
	tu_sweep(&a, "a", 64ull << 20, 16, 8ull << 20, 200000, 5000);
	tu_sweep(&b, "b", 64ull << 20, 16, 8ull << 20, 300000, 5000);
	tu_sweep(&d, "d", 48ull << 20, 6, 8ull << 20, 100000, 5000);
	gmx_sim_task_t t[3] = {
	    {.name = "a", .workload = &a}, {.name = "b", .workload = &b}, {.name = "d", .workload = &d}};
	gmx_sim_result_t r[3];
	char err[256];
	for (int m = 0; m < 3; m++) {
		gmx_sim_config_t c = base_config(t, 3, "timeslice", (gmx_mem_mode_t)m, 96ull << 20);
		assert_int_equal(gmx_sim_run(&c, &r[m], err, sizeof(err)), 0);
	}
	double um = 0, id = 0;
	for (int i = 0; i < 3; i++) {
		um += r[1].tasks[i].throughput_per_s / r[0].tasks[i].throughput_per_s;
		id += r[2].tasks[i].throughput_per_s / r[0].tasks[i].throughput_per_s;
	}
	assert_true(um < id);
	assert_true(id <= 3.0001);
	assert_true(r[1].faults > 0);
	/* Conservation (checked exactly inside every run): what left the device was
	 * resident at the start or moved in since, and what stayed fits. */
	for (int m = 1; m <= 2; m++) {
		assert_true(r[m].d2h_bytes <= r[m].h2d_bytes + r[m].capacity_bytes);
		assert_true(r[m].h2d_bytes <= r[m].d2h_bytes + r[m].capacity_bytes);
	}
	gmx_workload_free(&a);
	gmx_workload_free(&b);
	gmx_workload_free(&d);
}

static void exclusive_runs_each_task_alone(void **state)
{
	(void)state;
	gmx_workload_t a, b;
	tu_sweep(&a, "a", 1 << 20, 1, 4096, 100000, 50000);
	tu_sweep(&b, "b", 1 << 20, 1, 4096, 100000, 50000);
	gmx_sim_task_t t[2] = {{.name = "a", .workload = &a, .units = 10},
			       {.name = "b", .workload = &b, .units = 10}};
	gmx_sim_config_t c = base_config(t, 2, "exclusive", GMX_MEM_INMEM, 1ull << 30);
	gmx_sim_result_t r;
	char err[256];
	assert_int_equal(gmx_sim_run(&c, &r, err, sizeof(err)), 0);
	assert_int_equal(r.tasks[0].units, 10);
	assert_int_equal(r.tasks[1].units, 10);
	assert_true(r.tasks[0].jct_s > 1.579e-3 && r.tasks[0].jct_s < 1.581e-3);
	assert_true(r.sim_time_s > 3.159e-3 && r.sim_time_s < 3.161e-3);
	gmx_workload_free(&a);
	gmx_workload_free(&b);
}

static void timeslice_shares_the_device_equally(void **state)
{
	(void)state;
	gmx_workload_t a, b;
	tu_sweep(&a, "a", 1 << 20, 1, 4096, 500000, 0);
	tu_sweep(&b, "b", 1 << 20, 1, 4096, 500000, 0);
	gmx_sim_task_t t[2] = {{.name = "a", .workload = &a}, {.name = "b", .workload = &b}};
	gmx_sim_config_t c = base_config(t, 2, "timeslice", GMX_MEM_INMEM, 1ull << 30);
	gmx_sim_result_t r;
	char err[256];
	assert_int_equal(gmx_sim_run(&c, &r, err, sizeof(err)), 0);
	assert_true(r.tasks[0].units > 1000);
	int64_t diff = (int64_t)r.tasks[0].units - (int64_t)r.tasks[1].units;
	assert_true(diff >= -1 && diff <= 1);
	gmx_workload_free(&a);
	gmx_workload_free(&b);
}

/* The GPU's time slicing preempts: beside a task of 1 ms kernels, a task of
 * one 100 ms kernel takes 2 ms turns, so its kernel needs far more than 100 ms
 * of wall time and the short task never waits more than a turn; each task is
 * credited only the time its kernels ran. A scheduler that lets kernels
 * finish (timeline) makes the short task wait 100 ms. */
static void timeslice_preempts_a_long_kernel(void **state)
{
	(void)state;
	gmx_workload_t a, b;
	tu_sweep(&a, "a", 1 << 20, 1, 4096, 100000000, 0);
	tu_sweep(&b, "b", 1 << 20, 1, 4096, 1000000, 0);
	gmx_sim_task_t t[2] = {{.name = "a", .workload = &a}, {.name = "b", .workload = &b}};
	gmx_sim_config_t c = base_config(t, 2, "timeslice", GMX_MEM_INMEM, 1ull << 30);
	c.duration_ns = 1000000000LL;
	gmx_sim_result_t r;
	char err[256];
	assert_int_equal(gmx_sim_run(&c, &r, err, sizeof(err)), 0);
	/* b's host relaunches each 1 ms unit after a 8 us launch delay, yielding
	 * its turn meanwhile: a runs 2 ms in every 3 and needs ~150 ms a kernel */
	assert_int_equal(r.tasks[0].units, 6);
	assert_true(r.tasks[0].lat_p50_s > 0.14 && r.tasks[0].lat_p50_s < 0.16);
	assert_true(r.tasks[1].lat_p99_s < 0.004);
	for (int i = 0; i < 2; i++) /* completed kernels, preempted stretches excluded */
		assert_true(fabs(r.tasks[i].gpu_s - (i ? 0.001 : 0.1) * (double)r.tasks[i].units) < 1e-6);
	c.policy = gmx_sched_find("timeline");
	assert_int_equal(gmx_sim_run(&c, &r, err, sizeof(err)), 0);
	assert_true(r.tasks[1].lat_p99_s > 0.09);
	gmx_workload_free(&a);
	gmx_workload_free(&b);
}

/* A kernel preempted while it waits for a fault batch resumes where it
 * stopped: a task sweeping 256 MB in one kernel (faulting for tens of ms)
 * does not make a task of short kernels wait for it, both progress, and
 * bytes are conserved (checked at the end of every run). */
static void timeslice_preempts_kernels_stalled_on_faults(void **state)
{
	(void)state;
	gmx_workload_t a, b;
	tu_sweep(&a, "a", 256ull << 20, 1, 256ull << 20, 1000000, 0);
	tu_sweep(&b, "b", 64ull << 20, 64, 1ull << 20, 100000, 0);
	gmx_sim_task_t t[2] = {{.name = "a", .workload = &a}, {.name = "b", .workload = &b}};
	gmx_sim_config_t c = base_config(t, 2, "timeslice", GMX_MEM_UM, 256ull << 20);
	gmx_sim_result_t r;
	char err[256];
	assert_int_equal(gmx_sim_run(&c, &r, err, sizeof(err)), 0);
	assert_true(r.tasks[0].units >= 10 && r.tasks[1].units >= 10);
	assert_true(r.tasks[0].stall_s > 0.5 * r.tasks[0].gpu_s);
	/* a unit of b: 64 kernels of 100 us with its own faults, never a's 30 ms on top */
	assert_true(r.tasks[1].lat_p99_s < r.tasks[0].lat_p50_s / 2);
	assert_true(r.h2d_bytes > 10 * (256ull << 20));
	gmx_workload_free(&a);
	gmx_workload_free(&b);
}

/* The GPU's time slicing is blind to priority: a high-priority task busy for
 * 20 ms at a time takes turns with a low-priority one and needs about twice
 * that; under hpf (round robin within the best level that has work) it waits
 * at most for the slice running when its work arrives. */
static void timeslice_is_blind_to_priority_and_hpf_is_not(void **state)
{
	(void)state;
	gmx_workload_t hp, lp;
	tu_sweep(&hp, "hp", 1 << 20, 20, 4096, 1000000, 0);
	hp.ops[0].think_ns = 5000000; /* 5 ms idle between requests */
	tu_sweep(&lp, "lp", 1 << 20, 1, 4096, 10000000, 0);
	gmx_sim_task_t t[2] = {{.name = "hp", .priority = 0, .workload = &hp},
			       {.name = "lp", .priority = 5, .workload = &lp}};
	gmx_sim_config_t c = base_config(t, 2, "timeslice", GMX_MEM_INMEM, 1ull << 30);
	gmx_sim_result_t blind, hpf;
	char err[256];
	assert_int_equal(gmx_sim_run(&c, &blind, err, sizeof(err)), 0);
	c.policy = gmx_sched_find("hpf");
	assert_non_null(c.policy);
	assert_int_equal(gmx_sim_run(&c, &hpf, err, sizeof(err)), 0);
	/* A unit: 5 ms of host time, then 20 ms of kernels. hpf: after at most
	 * one 2 ms slice of lp and a switch. */
	assert_true(hpf.tasks[0].lat_p99_s < 0.0275);
	/* blind: lp gets every other turn while hp has work */
	assert_true(blind.tasks[0].lat_p50_s > 0.040);
	assert_true(blind.tasks[1].throughput_per_s > 1.5 * hpf.tasks[1].throughput_per_s);
	gmx_workload_free(&hp);
	gmx_workload_free(&lp);
}

/* One task alone runs exactly as under exclusive whatever the scheduler: a
 * slice that expires with nobody else waiting is renewed without a switch. */
static void one_task_alone_runs_as_under_exclusive(void **state)
{
	(void)state;
	gmx_workload_t w;
	tu_sweep(&w, "one", 1 << 20, 40, 4096, 700000, 3000); /* 28 ms units: many slices */
	gmx_sim_task_t t = {.name = "one", .priority = 3, .workload = &w};
	const char *scheds[] = {"timeslice", "hpf", "timeline", "fikit", "streamprio", "mps"};
	gmx_sim_config_t c = base_config(&t, 1, "exclusive", GMX_MEM_INMEM, 1ull << 30);
	gmx_sim_result_t ex, r;
	char err[256];
	assert_int_equal(gmx_sim_run(&c, &ex, err, sizeof(err)), 0);
	for (size_t i = 0; i < sizeof(scheds) / sizeof(scheds[0]); i++) {
		c.policy = gmx_sched_find(scheds[i]);
		assert_non_null(c.policy);
		assert_int_equal(gmx_sim_run(&c, &r, err, sizeof(err)), 0);
		assert_int_equal(r.tasks[0].units, ex.tasks[0].units);
		assert_true(r.tasks[0].lat_p50_s == ex.tasks[0].lat_p50_s);
		assert_true(r.tasks[0].lat_p99_s == ex.tasks[0].lat_p99_s);
	}
	gmx_workload_free(&w);
}

/* Adds op (kind, stream, duration, event) to w. */
static void add(gmx_workload_t *w, uint8_t kind, int16_t stream, uint64_t dur, uint32_t event)
{
	gmx_op_t op = {.kind = kind, .stream = stream, .duration_ns = dur, .bytes = 1 << 20, .event = event,
		       .buffer = UINT32_MAX, .klass = GMX_CLASS_UNKNOWN};
	assert_int_equal(gmx_workload_add_op(w, &op, NULL), 0);
}

/* cudaEventRecord on stream 1 after its 1 ms kernel, cudaStreamWaitEvent on
 * stream 0: stream 0's 100 us kernel starts only after the 1 ms one. A
 * device-to-device copy runs on a copy engine, beside kernels. */
static void a_stream_waits_for_the_event_it_was_told_to(void **state)
{
	(void)state;
	gmx_workload_t w;
	uint32_t nm;
	assert_int_equal(gmx_workload_init(&w, "ev"), 0);
	assert_int_equal(gmx_workload_intern_name(&w, "k", &nm), 0);
	add(&w, GMX_OP_KERNEL, 1, 1000000, 0);
	add(&w, GMX_OP_RECORD, 1, 0, 7);
	add(&w, GMX_OP_KERNEL, 1, 50000, 0); /* after the record: not waited for */
	add(&w, GMX_OP_WAIT, 0, 0, 7);
	add(&w, GMX_OP_WAIT, 0, 0, 9); /* never recorded: waits for nothing */
	add(&w, GMX_OP_KERNEL, 0, 100000, 0);
	add(&w, GMX_OP_COPY_D2D, 2, 400000, 0);
	gmx_op_t sync = {.kind = GMX_OP_SYNC, .stream = -1, .buffer = UINT32_MAX};
	assert_int_equal(gmx_workload_add_op(&w, &sync, NULL), 0);
	gmx_sim_task_t t = {.name = "ev", .units = 1, .workload = &w};
	gmx_sim_config_t c = base_config(&t, 1, "timeslice", GMX_MEM_INMEM, 1ull << 30);
	c.sched.inflight_max = 8;
	gmx_sim_timeline_t tl = {0};
	c.timeline = &tl;
	gmx_sim_result_t r;
	char err[256];
	assert_int_equal(gmx_sim_run(&c, &r, err, sizeof(err)), 0);
	int64_t k1_end = -1, k0_start = -1, copy_start = -1;
	for (uint64_t i = 0; i < tl.n; i++) {
		if (tl.spans[i].stream == 1 && tl.spans[i].op == 0)
			k1_end = tl.spans[i].end_ns;
		if (tl.spans[i].stream == 0)
			k0_start = tl.spans[i].start_ns;
		if (tl.spans[i].stream == 2)
			copy_start = tl.spans[i].start_ns;
	}
	assert_true(k1_end > 0 && k0_start >= k1_end);
	assert_true(k0_start < k1_end + 10000);
	assert_true(copy_start >= 0 && copy_start < 20000); /* beside the kernel, not after it */
	/* one unit: 8 us launch + 1 ms + 2 us gap + 100 us; the 50 us kernel overlaps */
	assert_true(r.tasks[0].jct_s > 1.100e-3 && r.tasks[0].jct_s < 1.115e-3);
	free(tl.spans);
	gmx_workload_free(&w);
}

static void footprint_beyond_host_memory_is_refused(void **state)
{
	(void)state;
	gmx_workload_t a;
	tu_sweep(&a, "a", 200ull << 30, 1, 4096, 1000, 0);
	gmx_sim_task_t t = {.name = "a", .workload = &a};
	gmx_sim_config_t c = base_config(&t, 1, "timeslice", GMX_MEM_UM, 1ull << 30);
	gmx_sim_result_t r;
	char err[256];
	assert_true(gmx_sim_run(&c, &r, err, sizeof(err)) < 0);
	assert_non_null(strstr(err, "exceeds the host memory"));
	gmx_workload_free(&a);
}

/* One rule for a kernel that needs more memory than the device holds: every
 * memory mode but inmem refuses the scenario up front, naming the kernel. */
static void kernel_larger_than_the_device_is_refused_by_every_mode(void **state)
{
	(void)state;
	gmx_workload_t w;
	tu_sweep(&w, "big", 96ull << 20, 2, 96ull << 20, 100000, 5000); /* each kernel: all 96 MiB */
	gmx_sim_task_t t = {.name = "big", .workload = &w};
	char err[512];
	for (int m = 0; m < GMX_MEM_MODE_COUNT; m++) {
		gmx_sim_config_t c = base_config(&t, 1, m >= GMX_MEM_MSCHED ? "timeline" : "timeslice",
						 (gmx_mem_mode_t)m, 64ull << 20);
		c.duration_ns = 10000000LL;
		gmx_sim_result_t *r = calloc(1, sizeof(*r));
		assert_non_null(r);
		int rc = gmx_sim_run(&c, r, err, sizeof(err));
		if (m == GMX_MEM_INMEM) {
			assert_int_equal(rc, 0);
		} else {
			assert_int_equal(rc, -E2BIG);
			assert_non_null(strstr(err, "task big: kernel sweep (op 0) touches 0.09 GiB"));
			assert_non_null(strstr(err, "only inmem can"));
		}
		free(r);
	}
	gmx_workload_free(&w);
}

/* Runs tasks t[0..n) under timeline at slice_ns, first with unlimited memory (r[0]), then
 * the limit (r[1]), on capacity bytes for duration_ns after warmup_ns. Returns r (free it). */
static gmx_sim_result_t *inmem_and_limit(gmx_sim_task_t *t, uint32_t n, uint64_t capacity, int64_t slice_ns,
					 int64_t duration_ns, int64_t warmup_ns)
{
	gmx_sim_result_t *r = calloc(2, sizeof(*r));
	assert_non_null(r);
	char err[256];
	for (int m = 0; m < 2; m++) {
		gmx_sim_config_t c = base_config(t, n, "timeline", m ? GMX_MEM_IDEAL : GMX_MEM_INMEM, capacity);
		c.sched.slice_ns = slice_ns;
		c.duration_ns = duration_ns;
		c.warmup_ns = warmup_ns;
		assert_int_equal(gmx_sim_run(&c, &r[m], err, sizeof(err)), 0);
	}
	return r;
}

/* The switch constraint: two tasks whose units each touch 600 MiB share
 * 1000 MiB, so at each switch at most 400 MiB of the next task's pages can be
 * in (the previous turn's last kernel holds its 600 MiB): 200 MiB cross the
 * link after the switch (6.6 ms at 31.75 GB/s), whatever the policy. With
 * 50 ms turns of 1 ms kernels that costs about 13% of every turn; the limit
 * (sim/limit.c: the first kernel of a turn waits for what the room left out)
 * keeps 92.7% with its window's edges; without the constraint it kept 100%. */
static void ideal_pays_the_loads_a_switch_forces(void **state)
{
	(void)state;
	gmx_workload_t a, b;
	tu_sweep(&a, "a", 600ull << 20, 1, 600ull << 20, 1000000, 5000);
	tu_sweep(&b, "b", 600ull << 20, 1, 600ull << 20, 1000000, 5000);
	gmx_sim_task_t t[2] = {{.name = "a", .workload = &a}, {.name = "b", .workload = &b}};
	gmx_sim_result_t *r = inmem_and_limit(t, 2, 1000ull << 20, 50000000, 3000000000LL, 1000000000LL);
	for (int i = 0; i < 2; i++) {
		double share = r[1].tasks[i].throughput_per_s / r[0].tasks[i].throughput_per_s;
		assert_true(share > 0.80);
		assert_true(share < 0.95); /* the limit with its window's edges: 0.927; without the switch, 1.0 */
	}
	free(r);
	gmx_workload_free(&a);
	gmx_workload_free(&b);
}

/* One stream of short kernels: each starts at least the device's kernel gap (1 us) after the
 * previous one ended, so a 50 ms turn of 20 us kernels completes about 20/21 of a slice of work,
 * under unlimited memory as under any policy. The limit counts those gaps (gmx_limit_stream_work):
 * it stays at or above inmem and within 3% of it (1.014, the window's edges); counting a turn
 * as a slice of work it was 1.059. */
static void ideal_counts_the_kernel_gaps_of_a_stream(void **state)
{
	(void)state;
	gmx_workload_t a, b;
	tu_sweep(&a, "a", 64ull << 20, 64, 1ull << 20, 20000, 3000);
	tu_sweep(&b, "b", 64ull << 20, 64, 1ull << 20, 20000, 3000);
	gmx_sim_task_t t[2] = {{.name = "a", .workload = &a}, {.name = "b", .workload = &b}};
	gmx_sim_result_t *r = inmem_and_limit(t, 2, 1ull << 30, 50000000, 2000000000LL, 0);
	assert_true(r[1].limit_valid);
	print_message("limit %.4f (rotation %.4f, reuse %.4f)\n", r[1].limit_bound, r[1].limit_rotation_bound,
		      r[1].limit_reuse_bound);
	assert_true(r[1].limit_bound >= 1.0);
	assert_true(r[1].limit_bound < 1.03);
	free(r);
	gmx_workload_free(&a);
	gmx_workload_free(&b);
}

/* A task whose host leaves the device (one 5 ms kernel, then 60 ms on its host) beside two steady
 * tasks at 50 ms slices, memory ample: its host is ready at each of its turns, so under inmem it
 * completes one unit per rotation (about 105 ms: two slices, its kernel, the turns' drains). The
 * limit may grant it no more turns than round robin allows in the window, the cut ones included
 * (floor(T / (n_s S)) + 1), and charges their GPU time to the device and their wall time to the
 * window; it stays at or above inmem (inmem is a memory policy too; 1.041) and within what two
 * more turns of the host-paced task (a rotation without drains: 105 ms, 20 in the window, and the
 * window's phase) and the steady turns' edges give. Before, it gave the host-paced task two more
 * turns at the window's edges, its work for free and let a steady task skip turns: 1.074. */
static void ideal_counts_the_turns_of_a_host_paced_task(void **state)
{
	(void)state;
	gmx_workload_t a, b, h;
	tu_sweep(&a, "a", 64ull << 20, 16, 4ull << 20, 1000000, 5000);
	tu_sweep(&b, "b", 64ull << 20, 16, 4ull << 20, 1000000, 5000);
	tu_sweep(&h, "host", 64ull << 20, 1, 64ull << 20, 5000000, 60000000);
	gmx_sim_task_t t[3] = {{.name = "a", .workload = &a}, {.name = "b", .workload = &b}, {.name = "host", .workload = &h}};
	gmx_sim_result_t *r = inmem_and_limit(t, 3, 1ull << 30, 50000000, 2000000000LL, 500000000LL);
	assert_true(r[1].limit_valid);
	double host_units = r[0].tasks[2].throughput_per_s * 2.0;
	print_message("limit %.4f (rotation %.4f, reuse %.4f); host %.1f units under inmem\n", r[1].limit_bound,
		      r[1].limit_rotation_bound, r[1].limit_reuse_bound, host_units);
	assert_true(host_units > 15 && host_units < 21);
	assert_true(r[1].limit_bound >= 1.0);
	assert_true(r[1].limit_bound < 1.05);
	free(r);
	gmx_workload_free(&a);
	gmx_workload_free(&b);
	gmx_workload_free(&h);
}

/* timeline with hold_task: the held task keeps its place in the rotation while
 * its host thinks, and the device waits for it at its turn. */
static void timeline_holds_the_turn_of_the_held_task(void **state)
{
	(void)state;
	gmx_workload_t h, b;
	tu_sweep(&h, "host", 1 << 20, 1, 4096, 1000000 /* 1 ms */, 20000000 /* 20 ms */);
	tu_sweep(&b, "busy", 1 << 20, 1, 4096, 1000000, 5000);
	gmx_sim_task_t t[2] = {{.name = "host", .workload = &h}, {.name = "busy", .workload = &b}};
	gmx_sim_result_t *r = calloc(2, sizeof(*r));
	assert_non_null(r);
	char err[256];
	for (int k = 0; k < 2; k++) {
		gmx_sim_config_t c = base_config(t, 2, "timeline", GMX_MEM_INMEM, 1ull << 30);
		c.sched.slice_ns = 5000000;
		c.sched.hold_task = k ? 1 : 0; /* task 0, held in the second run */
		assert_int_equal(gmx_sim_run(&c, &r[k], err, sizeof(err)), 0);
	}
	/* Unheld, busy runs while host thinks (host waits at most a slice for its
	 * turn); held, the device idles through host's think time at every turn. */
	assert_true(r[1].tasks[1].units * 2 < r[0].tasks[1].units);
	assert_true(r[1].tasks[0].units >= r[0].tasks[0].units);
	/* A cycle of host is its 20 ms think, launch and 1 ms kernel, plus at most
	 * busy's 5 ms turn: about 21-26 ms, so 77-95 units in 2 s. */
	assert_true(r[1].tasks[0].units >= 75 && r[1].tasks[0].units <= 96);
	free(r);
	gmx_workload_free(&h);
	gmx_workload_free(&b);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(closed_loop_unit_time_is_think_launch_and_run),
	    cmocka_unit_test(same_seed_same_result),
	    cmocka_unit_test(warmup_reports_the_window_after_it),
	    cmocka_unit_test(modes_agree_when_memory_suffices),
	    cmocka_unit_test(ideal_lies_between_um_and_inmem_and_conserves_bytes),
	    cmocka_unit_test(ideal_pays_the_loads_a_switch_forces),
	    cmocka_unit_test(ideal_counts_the_kernel_gaps_of_a_stream),
	    cmocka_unit_test(ideal_counts_the_turns_of_a_host_paced_task),
	    cmocka_unit_test(timeline_holds_the_turn_of_the_held_task),
	    cmocka_unit_test(exclusive_runs_each_task_alone),
	    cmocka_unit_test(timeslice_shares_the_device_equally),
	    cmocka_unit_test(timeslice_preempts_a_long_kernel),
	    cmocka_unit_test(timeslice_preempts_kernels_stalled_on_faults),
	    cmocka_unit_test(timeslice_is_blind_to_priority_and_hpf_is_not),
	    cmocka_unit_test(one_task_alone_runs_as_under_exclusive),
	    cmocka_unit_test(a_stream_waits_for_the_event_it_was_told_to),
	    cmocka_unit_test(footprint_beyond_host_memory_is_refused),
	    cmocka_unit_test(kernel_larger_than_the_device_is_refused_by_every_mode),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
