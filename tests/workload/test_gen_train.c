/* The cnn generator's training iteration (train=1, workload/gen_cnn_train.c):
 * a backward kernel for every forward one, the optimizer's passes over exactly
 * the trained parameters, activations alive from their forward kernel until
 * the backward that reads them, the footprint= search. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "gpumux/gen.h"
#include "gpumux/workload.h"

static void build(const char *const *kv, gmx_workload_t *w)
{
	gmx_param_t p[16] = {{0}};
	size_t n = 0;
	for (; kv && kv[2 * n]; n++)
		p[n] = (gmx_param_t){kv[2 * n], kv[2 * n + 1]};
	char err[1024];
	if (gmx_gen_build("cnn", p, n, GMX_SHARED_DIR, w, err, sizeof(err)))
		fail_msg("gen cnn: %s", err);
	char why[256];
	if (gmx_workload_validate(w, why, sizeof(why)))
		fail_msg("%s: %s", w->name, why);
}

static void expect_error(const char *const *kv, const char *want)
{
	gmx_param_t p[16] = {{0}};
	size_t n = 0;
	for (; kv && kv[2 * n]; n++)
		p[n] = (gmx_param_t){kv[2 * n], kv[2 * n + 1]};
	gmx_workload_t w;
	char err[1024] = "";
	int rc = gmx_gen_build("cnn", p, n, GMX_SHARED_DIR, &w, err, sizeof(err));
	if (rc == 0 || !strstr(err, want))
		fail_msg("wanted error \"%s\", got rc %d \"%s\"", want, rc, err);
}

static int is_kernel(const gmx_workload_t *w, uint32_t i, const char *name)
{
	return w->ops[i].kind == GMX_OP_KERNEL && !strcmp(w->names[w->ops[i].name], name);
}

static uint32_t kernels_named(const gmx_workload_t *w, const char *name)
{
	uint32_t n = 0;
	for (uint32_t i = 0; i < w->n_ops; i++)
		n += is_kernel(w, i, name);
	return n;
}

/* Bytes the kernels named `name` touch (every region). */
static uint64_t bytes_named(const gmx_workload_t *w, const char *name)
{
	uint64_t b = 0;
	for (uint32_t i = 0; i < w->n_ops; i++)
		if (is_kernel(w, i, name))
			for (uint32_t r = 0; r < w->ops[i].region_count; r++)
				b += w->regions[w->ops[i].region_first + r].length;
	return b;
}

static uint64_t ns_named(const gmx_workload_t *w, const char *name)
{
	uint64_t ns = 0;
	for (uint32_t i = 0; i < w->n_ops; i++)
		if (is_kernel(w, i, name))
			ns += w->ops[i].duration_ns;
	return ns;
}

/* Bytes of the buffers whose name starts with `prefix`. */
static uint64_t buffers_named(const gmx_workload_t *w, const char *prefix)
{
	uint64_t b = 0;
	for (uint32_t i = 0; i < w->n_buffers; i++)
		if (w->buffers[i].name && !strncmp(w->buffers[i].name, prefix, strlen(prefix)))
			b += w->buffers[i].size;
	return b;
}

static const gmx_region_t *region(const gmx_workload_t *w, uint32_t op, uint32_t r)
{
	return &w->regions[w->ops[op].region_first + r];
}

static int overlap(const gmx_region_t *a, const gmx_region_t *b)
{
	return a->buffer == b->buffer && a->offset < b->offset + b->length && b->offset < a->offset + a->length;
}

static const char *const models[] = {"resnet152", "vgg19", "densenet201"};
/* trainable parameters: torchvision's published counts (models' documentation) */
static const uint64_t n_params[] = {60192808, 143667240, 20013928};

/* Every forward operation has its backward kernel(s), the forward is the
 * inference pass's in train mode. */
static void test_train_kernels(void **state)
{
	(void)state;
	for (int m = 0; m < 3; m++) {
		gmx_workload_t inf, tr;
		build((const char *const[]){"model", models[m], "batch", "2", NULL}, &inf);
		build((const char *const[]){"model", models[m], "batch", "2", "train", "1", NULL}, &tr);
		assert_string_equal(tr.unit, "iteration");
		uint32_t conv = kernels_named(&inf, "cudnn_conv2d_fwd") + kernels_named(&inf, "cudnn_conv2d_fwd_bias");
		assert_int_equal(kernels_named(&tr, "cudnn_conv2d_fwd") + kernels_named(&tr, "cudnn_conv2d_fwd_bias"), conv);
		assert_int_equal(kernels_named(&tr, "cudnn_conv2d_bwd_filter"), conv);
		/* the first convolution's input (the images) needs no gradient */
		assert_int_equal(kernels_named(&tr, "cudnn_conv2d_bwd_data"), conv - 1);
		uint32_t bn = kernels_named(&inf, "cudnn_batch_norm_infer");
		assert_int_equal(kernels_named(&tr, "cudnn_batch_norm_infer"), 0);
		assert_int_equal(kernels_named(&tr, "cudnn_batch_norm_fwd_train"), bn);
		assert_int_equal(kernels_named(&tr, "cudnn_batch_norm_bwd"), bn);
		assert_int_equal(kernels_named(&tr, "relu_inplace"), kernels_named(&inf, "relu_inplace"));
		assert_int_equal(kernels_named(&tr, "threshold_backward"), kernels_named(&inf, "relu_inplace"));
		assert_int_equal(kernels_named(&tr, "max_pool2d_with_indices_backward"),
				 kernels_named(&inf, "max_pool2d"));
		assert_int_equal(kernels_named(&tr, "avg_pool2d_backward"), kernels_named(&inf, "avg_pool2d"));
		uint32_t gemm = kernels_named(&inf, "cublas_sgemm_bias");
		assert_int_equal(kernels_named(&tr, "cublas_sgemm_bwd_data"), gemm);
		assert_int_equal(kernels_named(&tr, "cublas_sgemm_bwd_weight"), gemm);
		assert_int_equal(kernels_named(&tr, "cat_backward_slice_copy"), kernels_named(&inf, "cat_copy"));
		/* VGG19's two dropouts are active in train mode */
		assert_int_equal(kernels_named(&tr, "fused_dropout"), m == 1 ? 2 : 0);
		assert_int_equal(kernels_named(&tr, "masked_scale"), m == 1 ? 2 : 0);
		assert_int_equal(kernels_named(&tr, "log_softmax_fwd"), 1);
		assert_int_equal(kernels_named(&tr, "log_softmax_backward"), 1);
		gmx_workload_free(&inf);
		gmx_workload_free(&tr);
	}
	/* ResNet152: each of its 50 residual adds sends one gradient to a tensor that
	 * already has one (the block input, or for a first block the downsample's
	 * input, read by two convolutions); nothing else holds it, so in place */
	gmx_workload_t r;
	build((const char *const[]){"model", "resnet152", "batch", "2", "train", "1", NULL}, &r);
	assert_int_equal(kernels_named(&r, "grad_accumulate_add_"), 50);
	assert_int_equal(kernels_named(&r, "grad_accumulate_add"), 0);
	gmx_workload_free(&r);
}

/* The optimizer touches every trained parameter once per list, and its state
 * is allocated with the parameters: SGD one state, Adam two. */
static void test_train_optimizer(void **state)
{
	(void)state;
	for (int m = 0; m < 3; m++) {
		gmx_workload_t inf, sgd, adam;
		build((const char *const[]){"model", models[m], NULL}, &inf);
		build((const char *const[]){"model", models[m], "train", "1", NULL}, &sgd);
		build((const char *const[]){"model", models[m], "train", "1", "optimizer", "adam", NULL}, &adam);
		uint64_t pb = n_params[m] * 4;
		/* buf *= momentum; exp_avg_sq *= beta2: each state once */
		assert_int_equal(bytes_named(&sgd, "foreach_mul_scalar_"), pb);
		assert_int_equal(bytes_named(&adam, "foreach_mul_scalar_"), pb);
		/* SGD: g' = grad + wd p (3 lists), buf += g', p -= lr buf (2 lists each) */
		assert_int_equal(bytes_named(&sgd, "foreach_add_list_alpha"), 3 * pb);
		assert_int_equal(bytes_named(&sgd, "foreach_add_list_"), 4 * pb);
		assert_int_equal(bytes_named(&adam, "foreach_addcdiv_scalarlist_"), 3 * pb);
		assert_int_equal(kernels_named(&sgd, "foreach_sqrt"), 0);
		assert_true(kernels_named(&adam, "foreach_sqrt") > 0);
		/* a launch holds at most 320 chunks of 65536 elements */
		assert_true(kernels_named(&sgd, "foreach_mul_scalar_") >= (n_params[m] + 320 * 65536 - 1) / (320 * 65536));
		/* the parameter allocator holds the parameters (and BN's running stats) and
		 * the state: SGD's momentum doubles it, Adam's two states treble it */
		uint64_t par = buffers_named(&inf, "param_seg");
		assert_true(par >= pb);
		double s = (double)buffers_named(&sgd, "param_seg") / par, a = (double)buffers_named(&adam, "param_seg") / par;
		assert_true(s > 1.9 && s < 2.1);
		assert_true(a > 2.85 && a < 3.15);
		gmx_workload_free(&inf);
		gmx_workload_free(&sgd);
		gmx_workload_free(&adam);
	}
}

/* Backward ~2x forward: each convolution and GEMM backward is two of the
 * forward's flops (dX and dW); the iteration is ~3x an autograd inference
 * request where convolutions dominate (compute-bound at batch 64). */
static void test_train_flops(void **state)
{
	(void)state;
	gmx_workload_t inf, tr;
	build((const char *const[]){"model", "resnet152", "batch", "64", "autograd", "1", NULL}, &inf);
	build((const char *const[]){"model", "resnet152", "batch", "64", "train", "1", NULL}, &tr);
	double fwd = (double)ns_named(&tr, "cudnn_conv2d_fwd");
	double bwd = (double)(ns_named(&tr, "cudnn_conv2d_bwd_data") + ns_named(&tr, "cudnn_conv2d_bwd_filter"));
	assert_true(bwd > 1.9 * fwd && bwd < 2.0 * fwd); /* less the first layer's dX */
	double ratio = (double)gmx_workload_gpu_ns(&tr) / (double)gmx_workload_gpu_ns(&inf);
	assert_true(ratio > 2.7 && ratio < 3.3);
	gmx_workload_free(&inf);
	gmx_workload_free(&tr);
}

/* Activations live from their forward kernel until their backward: the input a
 * convolution (or batch norm) reads forward is where its backward reads it,
 * and no kernel in between writes there (a kernel's last region is its
 * output). And they are freed in backward: later backward kernels write where
 * forward activations were. */
static void test_train_lifetimes(void **state)
{
	(void)state;
	static const char *const pairs[][2] = {{"cudnn_conv2d_fwd", "cudnn_conv2d_bwd_filter"},
					       {"cudnn_batch_norm_fwd_train", "cudnn_batch_norm_bwd"}};
	for (int m = 0; m < 3; m++) {
		gmx_workload_t w;
		build((const char *const[]){"model", models[m], "batch", "4", "train", "1", NULL}, &w);
		for (int p = 0; p < 2; p++) {
			uint32_t nf = kernels_named(&w, pairs[p][0]) + (p ? 0 : kernels_named(&w, "cudnn_conv2d_fwd_bias")), nb = kernels_named(&w, pairs[p][1]);
			uint32_t *f = calloc(nf, sizeof(*f)), *b = calloc(nb, sizeof(*b)), kf = 0, kb = 0;
			for (uint32_t i = 0; i < w.n_ops; i++) {
				if (is_kernel(&w, i, pairs[p][0]) || (!p && is_kernel(&w, i, "cudnn_conv2d_fwd_bias")))
					f[kf++] = i;
				if (is_kernel(&w, i, pairs[p][1]))
					b[kb++] = i;
			}
			assert_int_equal(kb, kf);
			for (uint32_t k = 0; k < kf; k++) {
				uint32_t fi = f[k], bi = b[kb - 1 - k]; /* backward runs the tape in reverse */
				const gmx_region_t *x = region(&w, fi, 0), *xb = region(&w, bi, 0);
				assert_int_equal(x->buffer, xb->buffer);
				assert_int_equal(x->offset, xb->offset);
				assert_int_equal(x->length, xb->length);
				for (uint32_t i = fi + 1; i < bi; i++)
					if (w.ops[i].kind == GMX_OP_KERNEL && w.ops[i].region_count &&
					    overlap(region(&w, i, w.ops[i].region_count - 1), x))
						fail_msg("%s: %s %u's input overwritten by op %u (%s) before its backward", w.name,
							 pairs[p][0], k, i, w.names[w.ops[i].name]);
			}
			free(f);
			free(b);
		}
		/* memory of activations whose backward ran is reused by later backward kernels */
		uint32_t first_bwd = 0, reused = 0;
		for (uint32_t i = 0; i < w.n_ops && !first_bwd; i++)
			if (is_kernel(&w, i, "log_softmax_backward"))
				first_bwd = i;
		for (uint32_t i = first_bwd; i < w.n_ops && !reused; i++) {
			if (w.ops[i].kind != GMX_OP_KERNEL || !w.ops[i].region_count)
				continue;
			const gmx_region_t *out = region(&w, i, w.ops[i].region_count - 1);
			for (uint32_t j = 0; j < first_bwd && !reused; j++)
				if ((is_kernel(&w, j, "cudnn_conv2d_fwd") || is_kernel(&w, j, "cudnn_conv2d_fwd_bias")) &&
				    overlap(region(&w, j, w.ops[j].region_count - 1), out))
					reused = 1;
		}
		if (!reused)
			fail_msg("%s: no backward kernel writes where a forward activation was", w.name);
		gmx_workload_free(&w);
	}
}

/* footprint= takes the largest batch whose training iteration fits; parameters. */
static void test_train_footprint(void **state)
{
	(void)state;
	gmx_workload_t w, inf;
	build((const char *const[]){"model", "resnet152", "footprint", "12G", "train", "1", NULL}, &w);
	build((const char *const[]){"model", "resnet152", "footprint", "12G", "autograd", "1", NULL}, &inf);
	assert_true(gmx_workload_footprint(&w) <= 12ull << 30);
	assert_true(gmx_workload_footprint(&w) > 11ull << 30);
	/* fewer images than an autograd inference request at the same memory (the
	 * gradients, the optimizer state), each ~3x the work */
	unsigned bt = 0, bi = 0;
	assert_int_equal(sscanf(w.name, "resnet152 batch %u train sgd", &bt), 1);
	assert_int_equal(sscanf(inf.name, "resnet152 batch %u autograd", &bi), 1);
	assert_true(bt < bi && bt > bi / 2);
	gmx_workload_free(&w);
	gmx_workload_free(&inf);
	expect_error((const char *const[]){"model", "inception3", "train", "1", NULL}, "auxiliary classifier");
	expect_error((const char *const[]){"optimizer", "adam", NULL}, "train=1 only");
	expect_error((const char *const[]){"train", "1", "autograd", "0", NULL}, "needs autograd");
	expect_error((const char *const[]){"train", "1", "optimizer", "lamb", NULL}, "optimizer");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_train_kernels),	  cmocka_unit_test(test_train_optimizer),
		cmocka_unit_test(test_train_flops),	  cmocka_unit_test(test_train_lifetimes),
		cmocka_unit_test(test_train_footprint),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
