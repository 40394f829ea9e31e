/* llm-decode: one decode step (one token) of a llama-style transformer, laid
 * out in memory the way llama.cpp lays it out on a CUDA device: all weights in
 * ONE buffer, the KV cache in a second, activations in a compute buffer.
 * Every kernel touches its slice of the weights (16 KiB norm vectors up to
 * 60 MiB FFN matrices) and the KV slice of its layer, and its launch
 * arguments point at the starts of those slices with integer arguments whose
 * product (times a constant) is the extent: what a template learner sees. */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "gen_internal.h"

struct llm_model {
	const char *preset;
	uint32_t n_layer, d_model, n_head, n_kv_head, head_dim, d_ff, vocab;
	/* Weight matrix storage: bytes = elements * num / den. */
	uint32_t wnum, wden;
	const char *wtype; /* kernel name suffix */
	uint64_t default_context;
};

/* Llama-3-8B: 32 layers, d_model 4096, 32 heads (8 KV heads, GQA), head_dim
 * 128, FFN 14336, vocabulary 128256 (Meta-Llama-3-8B config.json). int8 as
 * llama.cpp's Q8_0: blocks of 32 int8 weights + one fp16 scale = 34 bytes per
 * 32 weights (ggml-common.h block_q8_0). Default context 8192 tokens: Llama
 * 3's context window; with it the instance totals 8.5 GiB, the MSched paper's
 * per-instance allocation. */
static const struct llm_model llama3_8b_int8 = {"llama3-8b-int8", 32, 4096, 32, 8, 128, 14336, 128256, 34, 32, "q8_0",
						8192};
/* Llama-2-7B: 32 layers, d_model 4096, 32 heads (no GQA), head_dim 128, FFN
 * 11008, vocabulary 32000 (Llama 2 paper, Table 1 / config.json); fp16
 * weights; default context 4096, Llama 2's window. */
static const struct llm_model llama2_7b_fp16 = {"llama2-7b-fp16", 32, 4096, 32, 32, 128, 11008, 32000, 2, 1, "f16",
						4096};

/* llama.cpp's CUDA compute buffer (activations, attention scratch, logits) for
 * a decode graph: sized at 75 MiB so that llama3-8b-int8 at its default 8192
 * tokens totals 8.5 GiB (MSched: 8.5 GB per Llama3-8B int8 instance), which is
 * within the tens-to-hundreds of MiB llama.cpp reports for 7-8B models. */
#define LLM_COMPUTE_BUF (75ull << 20)
#define LLM_NORM_BYTES 4u /* llama.cpp keeps norm weights in f32 */
#define LLM_ACT_BYTES 4u  /* activations are f32 */
#define LLM_KV_BYTES 2u   /* KV cache in f16 (llama.cpp default cache type) */
#define LLM_RMS_EPS 1e-5f /* rms_norm epsilon of both models' configs */
#define LLM_ROPE_THETA_L3 500000.0f /* Llama 3 rope_theta (config.json) */
#define LLM_ROPE_THETA_L2 10000.0f  /* Llama 2 rope_theta */

static const struct gen_pspec llm_params[] = {
	{"model", GEN_ENUM, "llama3-8b-int8", 0, 0, "llama3-8b-int8,llama2-7b-fp16", "model preset"},
	{"context", GEN_UINT, NULL, 1, 1u << 20, NULL,
	 "KV-cache capacity in tokens (default: 8192 for llama3-8b-int8, 4096 for llama2-7b-fp16)"},
	{"kv", GEN_UINT, NULL, 1, 1u << 20, NULL,
	 "tokens already cached that this step attends to (default: context, the full cache)"},
	{"think", GEN_UINT, "3000", 0, 1000000000ull, NULL, "host ns between launches"},
	{"footprint", GEN_SIZE, NULL, 1, 1ull << 42, NULL,
	 "total bytes (default: weights + KV + 75 MiB compute buffer); the compute buffer takes the difference"},
	{NULL, 0, NULL, 0, 0, NULL, NULL},
};

/* Where the pieces of the activations live inside the compute buffer. */
struct scratch {
	uint64_t x, xn, q, k, v, att, tmp, gate, up, act, logits, end;
};

static uint64_t wbytes(const struct llm_model *m, uint64_t rows, uint64_t cols)
{
	return rows * cols * m->wnum / m->wden;
}

static uint64_t layer_weight_bytes(const struct llm_model *m)
{
	uint64_t d = m->d_model, kvd = (uint64_t)m->n_kv_head * m->head_dim, ff = m->d_ff;
	return 2 * d * LLM_NORM_BYTES + wbytes(m, d, d) * 2 + wbytes(m, kvd, d) * 2 + wbytes(m, ff, d) * 2 +
	       wbytes(m, d, ff);
}

/* The token embedding table stays in host memory (llama.cpp evaluates
 * get_rows on the CPU), so the device holds the layers, the output norm and
 * the output head. */
static uint64_t weight_bytes(const struct llm_model *m)
{
	return layer_weight_bytes(m) * m->n_layer + (uint64_t)m->d_model * LLM_NORM_BYTES +
	       wbytes(m, m->vocab, m->d_model);
}

static void rms_norm(struct gen_ctx *g, uint64_t think, uint32_t sb, uint64_t src, uint64_t dst, uint32_t n)
{
	gen_kernel(g, "rms_norm_f32<1024>", think, GMX_CLASS_MEMORY, 1, 1, 1, 1024, 1, 1, 0);
	gen_arg_ptr(g, sb, src);
	gen_arg_ptr(g, sb, dst);
	gen_arg_i4(g, n);
	gen_arg_i4(g, gen_f32_bits(LLM_RMS_EPS));
	gen_touch(g, sb, src, (uint64_t)n * LLM_ACT_BYTES);
	gen_touch(g, sb, dst, (uint64_t)n * LLM_ACT_BYTES);
}

/* Element-wise op of two vectors of n f32 into a third (possibly in another buffer). */
static void binary(struct gen_ctx *g, const char *name, uint64_t think, uint32_t ba, uint64_t a, uint32_t bb,
		   uint64_t b, uint32_t bd, uint64_t d, uint32_t n)
{
	gen_kernel(g, name, think, GMX_CLASS_MEMORY, (uint32_t)gen_div_up(n, 256), 1, 1, 256, 1, 1, 0);
	gen_arg_ptr(g, ba, a);
	gen_arg_ptr(g, bb, b);
	gen_arg_ptr(g, bd, d);
	gen_arg_i4(g, n);
	gen_touch(g, ba, a, (uint64_t)n * LLM_ACT_BYTES);
	gen_touch(g, bb, b, (uint64_t)n * LLM_ACT_BYTES);
	gen_touch(g, bd, d, (uint64_t)n * LLM_ACT_BYTES);
}

/* y[nrows] = W[nrows x ncols] x[ncols]: the weight slice is nrows * ncols *
 * wnum/wden bytes, a product of two integer arguments times a constant. */
static void matvec(struct gen_ctx *g, const struct llm_model *m, uint64_t think, uint32_t wb, uint64_t woff,
		   uint32_t sb, uint64_t x, uint64_t y, uint32_t nrows, uint32_t ncols)
{
	char name[48];
	snprintf(name, sizeof(name), "mul_mat_vec_%s", m->wtype);
	gen_kernel(g, name, think, GMX_CLASS_MEMORY, (uint32_t)gen_div_up(nrows, 2), 1, 1, 32, 4, 1, 0);
	gen_arg_ptr(g, wb, woff);
	gen_arg_ptr(g, sb, x);
	gen_arg_ptr(g, sb, y);
	gen_arg_i4(g, ncols);
	gen_arg_i4(g, nrows);
	gen_touch(g, wb, woff, wbytes(m, nrows, ncols));
	gen_touch(g, sb, x, (uint64_t)ncols * LLM_ACT_BYTES);
	gen_touch(g, sb, y, (uint64_t)nrows * LLM_ACT_BYTES);
}

static void rope(struct gen_ctx *g, const struct llm_model *m, uint64_t think, uint32_t sb, uint64_t x, uint32_t heads,
		 uint64_t pos)
{
	float theta = m == &llama3_8b_int8 ? LLM_ROPE_THETA_L3 : LLM_ROPE_THETA_L2;
	gen_kernel(g, "rope_norm_f32", think, GMX_CLASS_MEMORY, heads, 1, 1, m->head_dim / 2, 1, 1, 0);
	gen_arg_ptr(g, sb, x);
	gen_arg_ptr(g, sb, x);
	gen_arg_i4(g, m->head_dim);
	gen_arg_i4(g, heads);
	gen_arg_i4(g, pos);
	gen_arg_i4(g, gen_f32_bits(theta));
	gen_touch(g, sb, x, (uint64_t)heads * m->head_dim * LLM_ACT_BYTES);
}

/* Stores the new token's K or V row (f32 -> f16) into slot `pos` of the cache. */
static void cpy_to_cache(struct gen_ctx *g, uint64_t think, uint32_t sb, uint64_t src, uint32_t kb, uint64_t dst,
			 uint32_t n)
{
	gen_kernel(g, "cpy_f32_f16", think, GMX_CLASS_MEMORY, (uint32_t)gen_div_up(n, 64), 1, 1, 64, 1, 1, 0);
	gen_arg_ptr(g, sb, src);
	gen_arg_ptr(g, kb, dst);
	gen_arg_i4(g, n);
	gen_touch(g, sb, src, (uint64_t)n * LLM_ACT_BYTES);
	gen_touch(g, kb, dst, (uint64_t)n * LLM_KV_BYTES);
}

int gen_llm_build_with(struct gen_ctx *g, double bw)
{
	const char *preset = gen_s(g, "model");
	const struct llm_model *m = !strcmp(preset, llama2_7b_fp16.preset) ? &llama2_7b_fp16 : &llama3_8b_int8;
	uint64_t ctx = gen_given(g, "context") ? gen_u(g, "context") : m->default_context;
	uint64_t nkv = gen_given(g, "kv") ? gen_u(g, "kv") : ctx;
	uint64_t think = gen_u(g, "think");
	if (nkv > ctx)
		return gen_fail(g, "kv=%llu exceeds context=%llu (the step cannot attend to more tokens than the cache holds)",
				(unsigned long long)nkv, (unsigned long long)ctx);
	const uint64_t d = m->d_model, kvd = (uint64_t)m->n_kv_head * m->head_dim, ff = m->d_ff;
	const uint64_t kv_row = kvd * LLM_KV_BYTES; /* bytes per token per layer for K (and for V) */
	const uint64_t kv_layer = 2 * ctx * kv_row;

	struct scratch s;
	uint64_t at = 0;
#define PLACE(field, bytes) (s.field = at, at += ((bytes) + 255) / 256 * 256)
	PLACE(x, d * LLM_ACT_BYTES);
	PLACE(xn, d * LLM_ACT_BYTES);
	PLACE(q, d * LLM_ACT_BYTES);
	PLACE(k, kvd * LLM_ACT_BYTES);
	PLACE(v, kvd * LLM_ACT_BYTES);
	PLACE(att, d * LLM_ACT_BYTES);
	PLACE(tmp, d * LLM_ACT_BYTES);
	PLACE(gate, ff * LLM_ACT_BYTES);
	PLACE(up, ff * LLM_ACT_BYTES);
	PLACE(act, ff * LLM_ACT_BYTES);
	PLACE(logits, (uint64_t)m->vocab * LLM_ACT_BYTES);
#undef PLACE
	s.end = at;

	uint64_t wsize = weight_bytes(m), kvsize = kv_layer * m->n_layer, compute = LLM_COMPUTE_BUF;
	if (gen_given(g, "footprint")) {
		uint64_t fp = gen_u(g, "footprint");
		if (fp < wsize + kvsize + s.end)
			return gen_fail(g, "footprint=%llu is below the %s minimum of %llu bytes (weights %llu + KV cache %llu for "
					"context=%llu + activations %llu)",
					(unsigned long long)fp, m->preset, (unsigned long long)(wsize + kvsize + s.end),
					(unsigned long long)wsize, (unsigned long long)kvsize, (unsigned long long)ctx,
					(unsigned long long)s.end);
		compute = fp - wsize - kvsize;
	}

	gmx_workload_t *w = g->w;
	char wname[64];
	snprintf(wname, sizeof(wname), "llm-decode %s", m->preset);
	if (gmx_workload_set_str(&w->name, wname) || gmx_workload_set_str(&w->device, "rtx5080") ||
	    gmx_workload_set_str(&w->unit, "step"))
		return -ENOMEM;
	uint32_t wb = gen_buffer(g, wsize, "weights");
	uint32_t kb = gen_buffer(g, kvsize, "kv_cache");
	uint32_t sb = gen_buffer(g, compute, "compute");

	/* The host computes the token's embedding row and uploads it. */
	gen_copy(g, GMX_OP_COPY_H2D, sb, d * LLM_ACT_BYTES, think);
	const uint64_t pos = nkv - 1; /* the new token's slot */
	for (uint32_t l = 0; l < m->n_layer; l++) {
		uint64_t wl = layer_weight_bytes(m) * l;
		uint64_t attn_norm = wl, wq = attn_norm + d * LLM_NORM_BYTES, wk = wq + wbytes(m, d, d),
			 wv = wk + wbytes(m, kvd, d), wo = wv + wbytes(m, kvd, d), ffn_norm = wo + wbytes(m, d, d),
			 wgate = ffn_norm + d * LLM_NORM_BYTES, wup = wgate + wbytes(m, ff, d), wdown = wup + wbytes(m, ff, d);
		uint64_t kl = kv_layer * l, vl = kl + ctx * kv_row;

		rms_norm(g, think, sb, s.x, s.xn, (uint32_t)d);
		binary(g, "mul_f32", think, sb, s.xn, wb, attn_norm, sb, s.xn, (uint32_t)d);
		matvec(g, m, think, wb, wq, sb, s.xn, s.q, (uint32_t)d, (uint32_t)d);
		matvec(g, m, think, wb, wk, sb, s.xn, s.k, (uint32_t)kvd, (uint32_t)d);
		matvec(g, m, think, wb, wv, sb, s.xn, s.v, (uint32_t)kvd, (uint32_t)d);
		rope(g, m, think, sb, s.q, m->n_head, pos);
		rope(g, m, think, sb, s.k, m->n_kv_head, pos);
		cpy_to_cache(g, think, sb, s.k, kb, kl + pos * kv_row, (uint32_t)kvd);
		cpy_to_cache(g, think, sb, s.v, kb, vl + pos * kv_row, (uint32_t)kvd);

		/* Attention over the cached tokens: K and V extents are n_kv * nb11
		 * (row bytes), both integer arguments. */
		gen_kernel(g, "flash_attn_ext_vec_f16", think, GMX_CLASS_MEMORY, m->n_head, 1, 1, m->head_dim, 1, 1, 0);
		gen_arg_ptr(g, sb, s.q);
		gen_arg_ptr(g, kb, kl);
		gen_arg_ptr(g, kb, vl);
		gen_arg_ptr(g, sb, s.att);
		gen_arg_i4(g, nkv);
		gen_arg_i4(g, kv_row);
		gen_arg_i4(g, m->head_dim);
		gen_arg_i4(g, m->n_head);
		gen_touch(g, sb, s.q, d * LLM_ACT_BYTES);
		gen_touch(g, kb, kl, nkv * kv_row);
		gen_touch(g, kb, vl, nkv * kv_row);
		gen_touch(g, sb, s.att, d * LLM_ACT_BYTES);

		matvec(g, m, think, wb, wo, sb, s.att, s.tmp, (uint32_t)d, (uint32_t)d);
		binary(g, "add_f32", think, sb, s.x, sb, s.tmp, sb, s.x, (uint32_t)d);
		rms_norm(g, think, sb, s.x, s.xn, (uint32_t)d);
		binary(g, "mul_f32", think, sb, s.xn, wb, ffn_norm, sb, s.xn, (uint32_t)d);
		matvec(g, m, think, wb, wgate, sb, s.xn, s.gate, (uint32_t)ff, (uint32_t)d);
		matvec(g, m, think, wb, wup, sb, s.xn, s.up, (uint32_t)ff, (uint32_t)d);
		binary(g, "swiglu_f32", think, sb, s.gate, sb, s.up, sb, s.act, (uint32_t)ff);
		matvec(g, m, think, wb, wdown, sb, s.act, s.tmp, (uint32_t)d, (uint32_t)ff);
		binary(g, "add_f32", think, sb, s.x, sb, s.tmp, sb, s.x, (uint32_t)d);
	}
	uint64_t out_norm = layer_weight_bytes(m) * m->n_layer, out_w = out_norm + d * LLM_NORM_BYTES;
	rms_norm(g, think, sb, s.x, s.xn, (uint32_t)d);
	binary(g, "mul_f32", think, sb, s.xn, wb, out_norm, sb, s.xn, (uint32_t)d);
	matvec(g, m, think, wb, out_w, sb, s.xn, s.logits, m->vocab, (uint32_t)d);
	/* The sampler reads the logits on the host: the step ends there. */
	gen_copy(g, GMX_OP_COPY_D2H, sb, (uint64_t)m->vocab * LLM_ACT_BYTES, think);
	gen_sync(g, 0);
	if (g->rc || bw <= 0)
		return g->rc;

	/* Memory-bound durations: the floor plus bytes over the calibrated bandwidth. */
	for (uint32_t i = 0; i < w->n_ops; i++) {
		gmx_op_t *o = &w->ops[i];
		if (o->kind != GMX_OP_KERNEL)
			continue;
		uint64_t bytes = 0;
		for (uint32_t r = 0; r < o->region_count; r++)
			bytes += w->regions[o->region_first + r].length;
		o->duration_ns = gen_membound_ns(bytes, bw);
	}
	return 0;
}

double gen_rtx5080_bw(struct gen_ctx *g)
{
	/* Build the reference step (llama3-8b-int8, defaults) without durations
	 * and solve bytes / (step - kernels * floor) for the bandwidth. The value
	 * depends on constants only: computed once. */
	static double cached;
	if (cached > 0)
		return cached;
	gmx_workload_t w;
	struct gen_ctx ref = {.w = &w};
	double bw = 0;
	memset(&w, 0, sizeof(w));
	if (gen_defaults(&ref, &gen_llm_decode) == 0 && gmx_workload_init(&w, "ref") == 0 &&
	    gen_llm_build_with(&ref, 0) == 0) {
		uint64_t bytes = 0, kernels = 0;
		for (uint32_t i = 0; i < w.n_ops; i++)
			if (w.ops[i].kind == GMX_OP_KERNEL)
				kernels++;
		for (uint32_t r = 0; r < w.n_regions; r++)
			bytes += w.regions[r].length;
		bw = (double)bytes * 1e9 / (double)(GMX_LLAMA3_STEP_NS - kernels * GMX_KERNEL_MIN_NS);
	}
	gmx_workload_free(&w);
	if (bw > 0) {
		cached = bw;
		return bw;
	}
	/* Only out of memory gets here: the caller's build fails with it. */
	if (g && !g->rc)
		g->rc = -ENOMEM;
	return GMX_RTX5080_PEAK_BW;
}

static int llm_build(struct gen_ctx *g)
{
	double bw = gen_rtx5080_bw(g);
	return g->rc ? g->rc : gen_llm_build_with(g, bw);
}

const struct gen_kind gen_llm_decode = {
	"llm-decode",
	"one decode step of a llama-style LLM as llama.cpp runs it: weights in one buffer, KV cache, compute buffer "
	"(unit: step; durations memory-bound, llama3-8b-int8 = 12.7 ms on rtx5080)",
	llm_params,
	llm_build,
};
