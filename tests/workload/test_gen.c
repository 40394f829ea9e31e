/* Generators: every kernel's regions lie in its buffers and its pointer
 * arguments are region starts; the calibrated figures hold; parameters are
 * checked; every generator round-trips through the file format. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "gpumux/gen.h"
#include "wl_testutil.h"

#define GIB (1ull << 30)

static void build(const char *kind, const char *const *kv, gmx_workload_t *w)
{
	gmx_param_t p[16] = {{0}};
	size_t n = 0;
	for (; kv && kv[2 * n]; n++)
		p[n] = (gmx_param_t){kv[2 * n], kv[2 * n + 1]};
	char err[1024];
	int rc = gmx_gen_build(kind, p, n, GMX_SHARED_DIR, w, err, sizeof(err));
	if (rc)
		fail_msg("gen %s: %s", kind, err);
}

static void expect_gen_error(const char *kind, const char *const *kv, const char *want)
{
	gmx_param_t p[16] = {{0}};
	size_t n = 0;
	for (; kv && kv[2 * n]; n++)
		p[n] = (gmx_param_t){kv[2 * n], kv[2 * n + 1]};
	gmx_workload_t w;
	char err[1024];
	int rc = gmx_gen_build(kind, p, n, GMX_SHARED_DIR, &w, err, sizeof(err));
	if (rc == 0 || !strstr(err, want))
		fail_msg("gen %s: wanted error \"%s\", got rc %d \"%s\"", kind, want, rc, err);
	assert_int_equal(w.n_ops, 0);
	assert_null(w.name);
}

/* Structural checks every generated workload must pass. */
static void check_consistent(const gmx_workload_t *w)
{
	char why[256];
	if (gmx_workload_validate(w, why, sizeof(why)))
		fail_msg("%s: %s", w->name, why);
	assert_non_null(w->device);
	assert_non_null(w->unit);
	uint32_t kernels = 0;
	for (uint32_t i = 0; i < w->n_ops; i++) {
		const gmx_op_t *o = &w->ops[i];
		if (o->kind != GMX_OP_KERNEL)
			continue;
		kernels++;
		if (o->duration_ns == 0)
			fail_msg("%s: kernel op %u has no duration", w->name, i);
		if (o->region_count == 0)
			fail_msg("%s: kernel op %u touches nothing", w->name, i);
		for (uint32_t a = 0; a < o->arg_count; a++) {
			const gmx_arg_t *g = &w->args[o->arg_first + a];
			if (!g->is_pointer)
				continue;
			int found = 0;
			for (uint32_t r = 0; r < o->region_count && !found; r++) {
				const gmx_region_t *rg = &w->regions[o->region_first + r];
				found = w->buffers[rg->buffer].addr + rg->offset == g->value;
			}
			if (!found)
				fail_msg("%s: op %u (%s) pointer arg %u = 0x%llx is not the start of a touched region", w->name, i,
					 w->names[o->name], a, (unsigned long long)g->value);
		}
	}
	assert_true(kernels > 0);
	/* Every buffer is used by some kernel or copy. */
	for (uint32_t b = 0; b < w->n_buffers; b++) {
		int used = 0;
		for (uint32_t r = 0; r < w->n_regions && !used; r++)
			used = w->regions[r].buffer == b;
		for (uint32_t i = 0; i < w->n_ops && !used; i++)
			used = w->ops[i].buffer == b;
		if (!used)
			fail_msg("%s: buffer %u (%s) is never touched", w->name, b, w->buffers[b].name ? w->buffers[b].name : "");
	}
	gmx_workload_t back;
	char err[512];
	if (wl_round_trip(w, &back, err, sizeof(err)))
		fail_msg("%s: %s", w->name, err);
	const char *diff = wl_diff(w, &back);
	if (diff)
		fail_msg("%s: round trip differs at %s", w->name, diff);
	gmx_workload_free(&back);
}

static uint32_t count_kernels(const gmx_workload_t *w)
{
	uint32_t n = 0;
	for (uint32_t i = 0; i < w->n_ops; i++)
		n += w->ops[i].kind == GMX_OP_KERNEL;
	return n;
}

static void test_llama3_calibration(void **state)
{
	(void)state;
	gmx_workload_t w;
	build("llm-decode", NULL, &w);
	check_consistent(&w);
	double fp = (double)gmx_workload_footprint(&w);
	assert_true(fp > 8.5 * GIB * 0.99 && fp < 8.5 * GIB * 1.01);
	/* One buffer of weights of ~7.4 GiB, as llama.cpp allocates it. */
	assert_string_equal(w.buffers[0].name, "weights");
	assert_true(w.buffers[0].size > 7.3 * GIB && w.buffers[0].size < 7.7 * GIB);
	/* KV cache: 128 KiB per token x 8192 tokens. */
	assert_true(w.buffers[1].size == 8192ull * 128 * 1024);
	double ms = (double)gmx_workload_gpu_ns(&w) / 1e6;
	assert_true(ms > 12.7 * 0.999 && ms < 12.7 * 1.001);
	assert_string_equal(w.device, "rtx5080");
	assert_string_equal(w.unit, "step");
	/* Every weight slice between 16 KiB and the output head; layers' slices at most ~60 MiB. */
	uint64_t touched_w = 0;
	for (uint32_t r = 0; r < w.n_regions; r++)
		if (w.regions[r].buffer == 0) {
			assert_true(w.regions[r].length >= 16384);
			touched_w += w.regions[r].length;
		}
	/* A decode step reads every weight once (norms twice: read by mul in place). */
	assert_true(touched_w >= w.buffers[0].size);
	assert_true(count_kernels(&w) == 32 * 19 + 3);
	gmx_workload_free(&w);
}

static void test_llm_variants(void **state)
{
	(void)state;
	gmx_workload_t w;
	build("llm-decode", (const char *const[]){"model", "llama2-7b-fp16", NULL}, &w);
	check_consistent(&w);
	/* KV 512 KiB per token at the default 4096 tokens; fp16 weights ~12.3 GiB. */
	assert_true(w.buffers[1].size == 4096ull * 512 * 1024);
	assert_true(w.buffers[0].size > 12 * GIB && w.buffers[0].size < 12.6 * GIB);
	gmx_workload_free(&w);

	/* Attention reads n_kv rows: the extent is the product of two integer args. */
	build("llm-decode", (const char *const[]){"context", "1024", "kv", "100", "think", "0", NULL}, &w);
	check_consistent(&w);
	int seen = 0;
	for (uint32_t i = 0; i < w.n_ops; i++) {
		const gmx_op_t *o = &w.ops[i];
		if (o->kind != GMX_OP_KERNEL || strcmp(w.names[o->name], "flash_attn_ext_vec_f16"))
			continue;
		assert_int_equal(w.args[o->arg_first + 4].value, 100);
		uint64_t extent = w.args[o->arg_first + 4].value * w.args[o->arg_first + 5].value;
		assert_true(w.regions[o->region_first + 1].length == extent);
		assert_int_equal(o->think_ns, 0);
		seen++;
	}
	assert_int_equal(seen, 32);
	gmx_workload_free(&w);

	build("llm-decode", (const char *const[]){"footprint", "10G", NULL}, &w);
	assert_true(gmx_workload_footprint(&w) == 10 * GIB);
	gmx_workload_free(&w);

	expect_gen_error("llm-decode", (const char *const[]){"model", "gpt5", NULL},
			 "llm-decode: model=gpt5 is not one of llama3-8b-int8,llama2-7b-fp16");
	expect_gen_error("llm-decode", (const char *const[]){"contxt", "5", NULL},
			 "llm-decode: unknown parameter 'contxt' (expected model, context, kv, think, footprint)");
	expect_gen_error("llm-decode", (const char *const[]){"context", "0", NULL}, "context=0 is out of range");
	expect_gen_error("llm-decode", (const char *const[]){"context", "12ab", NULL}, "context=12ab is not a non-negative integer");
	expect_gen_error("llm-decode", (const char *const[]){"context", "16", "kv", "17", NULL}, "kv=17 exceeds context=16");
	expect_gen_error("llm-decode", (const char *const[]){"footprint", "1G", NULL}, "footprint=1073741824 is below");
	expect_gen_error("no-such", NULL, "unknown generator 'no-such' (expected one of llm-decode, vector-add");
}

static void test_micro(void **state)
{
	(void)state;
	gmx_workload_t w;
	build("vector-add", (const char *const[]){"footprint", "1536M", NULL}, &w);
	check_consistent(&w);
	assert_true(gmx_workload_footprint(&w) == 1536ull << 20);
	const gmx_op_t *k = &w.ops[0];
	/* n is the 4th argument; every vector is n * 4 bytes (T2). */
	assert_true(w.args[k->arg_first + 3].value * 4 == w.regions[k->region_first].length);
	assert_int_equal(k->klass, GMX_CLASS_MEMORY);
	gmx_workload_free(&w);

	build("matmul", (const char *const[]){"n", "4096", NULL}, &w);
	check_consistent(&w);
	k = &w.ops[0];
	assert_int_equal(k->klass, GMX_CLASS_COMPUTE);
	/* 2 * 4096^3 flops at 70% of 56.28 TFLOPS = 3.49 ms. */
	double ms = (double)k->duration_ns / 1e6;
	assert_true(ms > 3.45 && ms < 3.53);
	gmx_workload_free(&w);

	/* n and footprint together: as many n x n multiplications as fit. */
	build("matmul", (const char *const[]){"n", "64", "footprint", "3M", NULL}, &w);
	assert_int_equal(w.n_buffers, 3 * 64);
	assert_int_equal(w.n_ops, 64 + 1);
	gmx_workload_free(&w);
	build("vector-add", (const char *const[]){"n", "1024", "footprint", "1M", NULL}, &w);
	assert_int_equal(w.n_ops, 85 + 1);
	assert_int_equal(gmx_workload_footprint(&w), 85ull * 12 * 1024);
	gmx_workload_free(&w);
	expect_gen_error("matmul", (const char *const[]){"n", "4096", "footprint", "1M", NULL}, "is below one 4096 x 4096");
	expect_gen_error("vector-add", (const char *const[]){"footprint", "-1G", NULL}, "footprint=-1G is not a size");
	expect_gen_error("vector-add", (const char *const[]){"footprint", "100T", NULL}, "out of range");
}

static void test_rodinia(void **state)
{
	(void)state;
	gmx_workload_t w;
	const char *kinds[] = {"hotspot", "dwt2d", "cfd", "nn"};
	for (int i = 0; i < 4; i++) {
		build(kinds[i], (const char *const[]){"footprint", "64M", NULL}, &w);
		check_consistent(&w);
		double fp = (double)gmx_workload_footprint(&w);
		if (fp > 64.0 * (1 << 20) || fp < 0.97 * 64.0 * (1 << 20))
			fail_msg("%s: footprint %.0f not within 3%% below 64 MiB", kinds[i], fp);
		assert_string_equal(w.unit, "iteration");
		gmx_workload_free(&w);
	}

	/* hotspot: two launches, ping-pong between the temperature grids. */
	build("hotspot", (const char *const[]){"n", "1000", NULL}, &w);
	assert_int_equal(count_kernels(&w), 2);
	assert_int_equal(w.regions[w.ops[0].region_first + 2].buffer, w.regions[w.ops[1].region_first + 1].buffer);
	assert_true(w.buffers[0].size == 1000ull * 1000 * 4);
	gmx_workload_free(&w);

	/* dwt2d: level 1's output quadrant is n/2 rows of n/2 ints, n ints apart (T3). */
	build("dwt2d", (const char *const[]){"n", "1024", "levels", "3", NULL}, &w);
	check_consistent(&w);
	assert_int_equal(count_kernels(&w), 1 + 3 * 5);
	int strided = 0;
	for (uint32_t i = 0; i < w.n_ops; i++) {
		const gmx_op_t *o = &w.ops[i];
		if (o->kind != GMX_OP_KERNEL || strncmp(w.names[o->name], "fdwt53", 6) || w.args[o->arg_first + 2].value != 512)
			continue;
		uint64_t sx = w.args[o->arg_first + 2].value, sy = w.args[o->arg_first + 3].value,
			 pitch = w.args[o->arg_first + 4].value;
		/* region 0: the packed input band (T2: sx * sy * 4) */
		assert_true(w.regions[o->region_first].length == sx * sy * 4);
		assert_int_equal(o->region_count, 1 + sy);
		const gmx_region_t *r1 = &w.regions[o->region_first + 1], *r2 = &w.regions[o->region_first + 2];
		assert_true(r1->length == sx * 4 && r2->offset - r1->offset == pitch * 4);
		strided++;
	}
	assert_int_equal(strided, 3);
	gmx_workload_free(&w);

	/* cfd: 8 kernels per iteration; nelr padded to 192. */
	build("cfd", (const char *const[]){"nelr", "97046", NULL}, &w);
	check_consistent(&w);
	assert_int_equal(count_kernels(&w), 8);
	assert_true(w.buffers[0].size == 96960ull * 4);
	gmx_workload_free(&w);

	/* nn: extents linear in numRecords; distances read back. */
	build("nn", (const char *const[]){"records", "42764", NULL}, &w);
	check_consistent(&w);
	const gmx_op_t *k = &w.ops[0];
	assert_true(w.regions[k->region_first].length == 8 * w.args[k->arg_first + 2].value);
	assert_true(w.regions[k->region_first + 1].length == 4 * w.args[k->arg_first + 2].value);
	assert_int_equal(w.ops[1].kind, GMX_OP_COPY_D2H);
	gmx_workload_free(&w);

	expect_gen_error("hotspot", (const char *const[]){"n", "100", "footprint", "1G", NULL}, "give n or footprint, not both");
	expect_gen_error("dwt2d", (const char *const[]){"n", "64", "levels", "9", NULL}, "levels=9 too many");
	expect_gen_error("nn", (const char *const[]){"readback", "2", NULL}, "readback=2 is out of range (expected 0..1)");
	expect_gen_error("cfd", (const char *const[]){"mesh", "x", NULL}, "unknown parameter 'mesh' (expected nelr, footprint, think)");
}

#define RESNET152 "traces/reef/resnet152/resnet152.json"

static void test_reef(void **state)
{
	(void)state;
	gmx_workload_t w, big;
	build("reef", (const char *const[]){"graph", RESNET152, NULL}, &w);
	check_consistent(&w);
	/* The graph's 207 fused kernels over its 317 storage entries. */
	assert_int_equal(count_kernels(&w), 207);
	assert_int_equal(w.n_buffers, 317);
	assert_string_equal(w.unit, "request");
	/* storage[0] is "data": 12288 float32 elements. */
	assert_true(w.buffers[0].size == 12288 * 4);
	assert_int_equal(w.ops[0].kind, GMX_OP_COPY_H2D);
	/* Request = model latency 13,233 us (MI50) x 0.504 on rtx5080. */
	double ms = (double)gmx_workload_gpu_ns(&w) / 1e6;
	assert_true(ms > 6.6 && ms < 6.75);
	/* The first kernel: launch dims and args straight from the graph. */
	const gmx_op_t *k = &w.ops[1];
	assert_string_equal(w.names[k->name], "fused_add_14_kernel0");
	assert_int_equal(k->grid[0], 48);
	assert_int_equal(k->block[0], 256);
	assert_int_equal(k->arg_count, 3);
	assert_true(w.args[k->arg_first].value == w.buffers[2].addr);

	build("reef", (const char *const[]){"graph", RESNET152, "batch", "8", NULL}, &big);
	check_consistent(&big);
	for (uint32_t b = 0; b < w.n_buffers; b++) {
		const char *n = w.buffers[b].name;
		int param = n[0] == 'p' && n[1] >= '0' && n[1] <= '9';
		assert_true(big.buffers[b].size == w.buffers[b].size * (param ? 1 : 8));
	}
	assert_true(gmx_workload_gpu_ns(&big) > gmx_workload_gpu_ns(&w));
	gmx_workload_free(&big);
	gmx_workload_free(&w);

	/* Every shipped graph builds. */
	const char *models[] = {"vgg", "resnet18", "resnet", "alexnet", "mobilenet", "bert"};
	for (int i = 0; i < 6; i++) {
		char path[128];
		snprintf(path, sizeof(path), "traces/reef/%s/%s.json", models[i], models[i]);
		build("reef", (const char *const[]){"graph", path, NULL}, &w);
		check_consistent(&w);
		gmx_workload_free(&w);
	}

	/* JSON errors carry the file, line and column. */
	char bad[] = "/tmp/gmx-reef-XXXXXX";
	int fd = mkstemp(bad);
	assert_true(fd >= 0);
	assert_true(write(fd, "{\"storage\": [1,\n  ]}\n", 20) == 20);
	close(fd);
	char want[96];
	snprintf(want, sizeof(want), "reef: %s:2:", bad);
	expect_gen_error("reef", (const char *const[]){"graph", bad, "profile", bad, NULL}, want);
	unlink(bad);
	expect_gen_error("reef", NULL, "reef: graph= is required");
	expect_gen_error("reef", (const char *const[]){"graph", "traces/reef/none.json", NULL}, "cannot open graph");
	expect_gen_error("reef", (const char *const[]){"graph", RESNET152, "batch", "0", NULL}, "batch=0 is out of range");
	expect_gen_error("reef", (const char *const[]){"graph", RESNET152, "bach", "2", NULL},
			 "unknown parameter 'bach' (expected graph, profile, batch, footprint, think)");
	expect_gen_error("reef", (const char *const[]){"graph", RESNET152, "batch", "2", "footprint", "1G", NULL},
			 "give batch= or footprint=, not both");
	build("reef", (const char *const[]){"graph", RESNET152, "footprint", "1G", NULL}, &w);
	assert_true(gmx_workload_footprint(&w) <= (1ull << 30));
	assert_true(gmx_workload_footprint(&w) > (1ull << 30) - (1ull << 20));
	gmx_workload_free(&w);
}

/* Bytes of the distinct buffers the kernels point into, over the bytes they touch:
 * what whole-allocation prediction would move per byte needed. */
static double whole_alloc_over_touched(const gmx_workload_t *w)
{
	double touched = 0, whole = 0;
	for (uint32_t i = 0; i < w->n_ops; i++) {
		const gmx_op_t *o = &w->ops[i];
		if (o->kind != GMX_OP_KERNEL)
			continue;
		for (uint32_t r = 0; r < o->region_count; r++) {
			const gmx_region_t *rg = &w->regions[o->region_first + r];
			int seen = 0;
			for (uint32_t q = 0; q < r && !seen; q++)
				seen = w->regions[o->region_first + q].buffer == rg->buffer;
			touched += (double)rg->length;
			if (!seen)
				whole += (double)w->buffers[rg->buffer].size;
		}
	}
	return touched > 0 ? whole / touched : 0;
}

static void test_cnn(void **state)
{
	(void)state;
	static const char *const models[] = {"resnet152", "vgg19", "inception3", "densenet201"};
	/* kernels per request, as PyTorch eager runs them (conv, bn, relu, add, pool, cat copies, gemm) */
	static const uint32_t kernels[] = {514, 43, 347, 2509};
	for (int i = 0; i < 4; i++) {
		gmx_workload_t w, big;
		build("cnn", (const char *const[]){"model", models[i], NULL}, &w);
		check_consistent(&w);
		assert_int_equal(count_kernels(&w), kernels[i]);
		assert_string_equal(w.unit, "request");
		/* parameters are packed as the caching allocator packs them: far fewer
		 * 2 MiB-aligned buffers than parameter tensors (resnet152 alone has 777) */
		assert_true(w.n_buffers < 60);
		build("cnn", (const char *const[]){"model", models[i], "footprint", "6G", NULL}, &big);
		check_consistent(&big);
		assert_true(gmx_workload_footprint(&big) <= 6ull << 30);
		assert_true(gmx_workload_footprint(&big) > 5ull << 30);
		/* kernels touch their tensors, not whole segments: whole-allocation
		 * prediction would move several times the bytes (the paper's Table 1:
		 * 78-91% false positives on PyTorch inference) */
		assert_true(whole_alloc_over_touched(&big) > 2.0);
		assert_true(gmx_workload_gpu_ns(&big) > 100 * gmx_workload_gpu_ns(&w));
		gmx_workload_free(&big);
		gmx_workload_free(&w);
	}
	/* resnet152 at batch 1: 11.5 GMAC; compute-bound at batch 64 */
	gmx_workload_t w;
	build("cnn", (const char *const[]){"model", "resnet152", "batch", "64", NULL}, &w);
	double ms = (double)gmx_workload_gpu_ns(&w) / 1e6;
	assert_true(ms > 80 && ms < 130);
	gmx_workload_free(&w);
	expect_gen_error("cnn", (const char *const[]){"model", "alexnet", NULL}, "model");
	expect_gen_error("cnn", (const char *const[]){"batch", "2", "footprint", "1G", NULL}, "not both");
	expect_gen_error("cnn", (const char *const[]){"model", "vgg19", "footprint", "100M", NULL}, "below");
}

/* Kernels of w named `name`. */
static uint32_t kernels_named(const gmx_workload_t *w, const char *name)
{
	uint32_t n = 0;
	for (uint32_t i = 0; i < w->n_ops; i++)
		n += w->ops[i].kind == GMX_OP_KERNEL && !strcmp(w->names[w->ops[i].name], name);
	return n;
}

/* autograd=1: inference without torch.no_grad(), as a plain PyTorch script runs it. The
 * autograd graph keeps the activations saved for backward until the request ends, so the
 * caching allocator cannot reuse them within the pass: the footprint of a batch is the sum of
 * its activations, and at a given footprint a request does far less work. */
static void test_cnn_autograd(void **state)
{
	(void)state;
	static const char *const models[] = {"resnet152", "vgg19", "inception3", "densenet201"};
	for (int i = 0; i < 4; i++) {
		gmx_workload_t nog, ag, nog_fp, ag_fp;
		build("cnn", (const char *const[]){"model", models[i], "batch", "64", NULL}, &nog);
		build("cnn", (const char *const[]){"model", models[i], "batch", "64", "autograd", "1", NULL}, &ag);
		check_consistent(&ag);
		/* the same kernels (max pooling also writes its indices), the same work */
		assert_int_equal(count_kernels(&ag), count_kernels(&nog));
		assert_true(gmx_workload_gpu_ns(&ag) >= gmx_workload_gpu_ns(&nog));
		assert_true(gmx_workload_gpu_ns(&ag) < gmx_workload_gpu_ns(&nog) * 11 / 10);
		/* held activations: over twice the no-grad pass's reused blocks (VGG19: 2.5x with its
		 * 548 MB of weights; ResNet152: 11x) */
		assert_true(gmx_workload_footprint(&ag) > 2 * gmx_workload_footprint(&nog));
		if (strcmp(models[i], "densenet201")) /* DenseNet's pools are average pools after its stem */
			assert_true(kernels_named(&ag, "max_pool2d_with_indices") > 0);
		assert_int_equal(kernels_named(&nog, "max_pool2d_with_indices"), 0);
		/* at the MSched mixes' footprints: far less work per byte held (VGG19 3.0x less,
		 * Inception 5.1x, DenseNet 10x, ResNet152 14x) */
		build("cnn", (const char *const[]){"model", models[i], "footprint", "6G", NULL}, &nog_fp);
		build("cnn", (const char *const[]){"model", models[i], "footprint", "6G", "autograd", "1", NULL}, &ag_fp);
		check_consistent(&ag_fp);
		assert_true(gmx_workload_footprint(&ag_fp) <= 6ull << 30);
		assert_true(gmx_workload_footprint(&ag_fp) > 5ull << 30);
		assert_true(gmx_workload_gpu_ns(&ag_fp) * 5 < gmx_workload_gpu_ns(&nog_fp) * 2);
		assert_true(whole_alloc_over_touched(&ag_fp) >= 1.0);
		gmx_workload_free(&nog);
		gmx_workload_free(&ag);
		gmx_workload_free(&nog_fp);
		gmx_workload_free(&ag_fp);
	}
	expect_gen_error("cnn", (const char *const[]){"autograd", "2", NULL}, "autograd");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_llama3_calibration),
		cmocka_unit_test(test_llm_variants),
		cmocka_unit_test(test_micro),
		cmocka_unit_test(test_rodinia),
		cmocka_unit_test(test_reef),
		cmocka_unit_test(test_cnn),
		cmocka_unit_test(test_cnn_autograd),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
