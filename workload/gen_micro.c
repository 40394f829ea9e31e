/* The MSched microbenchmark's two process kinds: vector-add (memory-bound)
 * and matmul (compute-bound). One unit = one iteration: by default one kernel
 * over the whole footprint; given both a size (n) and a footprint, as many
 * independent operations of that size as fit (each its own buffers, one
 * kernel each), then a synchronisation. */
#include <errno.h>
#include <math.h>
#include <stdio.h>

#include "gen_internal.h"

#define MICRO_ELEM 4u                 /* fp32 elements */
#define MICRO_MAX_N 2147483647ull     /* n is an `int` kernel argument */
#define MICRO_MAX_DIM 46340ull        /* matmul: n * n must fit an `int` index */

static const struct gen_pspec vadd_params[] = {
	{"n", GEN_UINT, NULL, 1, MICRO_MAX_N, NULL, "elements per vector (default: from footprint, one addition)"},
	{"footprint", GEN_SIZE, "4G", 12, 1ull << 42, NULL,
	 "total bytes of all vectors; alone: n = footprint / 12; with n: as many n-element additions "
	 "(each its own a, b, c, one kernel each) as fit"},
	{"think", GEN_UINT, "5000", 0, 1000000000ull, NULL, "host ns before each launch"},
	{NULL, 0, NULL, 0, 0, NULL, NULL},
};

static int vadd_build(struct gen_ctx *g)
{
	uint64_t n, count = 1;
	if (gen_given(g, "n")) {
		n = gen_u(g, "n");
		if (gen_given(g, "footprint")) {
			count = gen_u(g, "footprint") / (3 * MICRO_ELEM * n);
			if (count == 0 || count > 1000000)
				return gen_fail(g, "footprint / (12 n) = %llu additions (expected 1..1000000)",
						(unsigned long long)count);
		}
	} else {
		n = gen_u(g, "footprint") / (3 * MICRO_ELEM);
	}
	if ((n == 0 || n > MICRO_MAX_N) && !gen_given(g, "n"))
		return gen_fail(g, "footprint=%s gives n = footprint / 12 = %llu, out of range (expected 1..%llu, an int "
				"argument)", gen_s(g, "footprint"), (unsigned long long)n, MICRO_MAX_N);
	if (n == 0 || n > MICRO_MAX_N)
		return gen_fail(g, "n=%llu out of range (expected 1..%llu, an int argument)", (unsigned long long)n,
				MICRO_MAX_N);
	gmx_workload_t *w = g->w;
	if (gmx_workload_set_str(&w->device, "rtx5080") || gmx_workload_set_str(&w->unit, "iteration"))
		return -ENOMEM;
	uint64_t bytes = n * MICRO_ELEM;
	for (uint64_t i = 0; i < count && !g->rc; i++) {
		uint32_t a = gen_buffer(g, bytes, "a"), b = gen_buffer(g, bytes, "b"), c = gen_buffer(g, bytes, "c");
		gen_kernel(g, "vector_add(float const*, float const*, float*, int)", gen_u(g, "think"),
			   GMX_CLASS_MEMORY, (uint32_t)gen_div_up(n, 256), 1, 1, 256, 1, 1, 0);
		gen_arg_ptr(g, a, 0);
		gen_arg_ptr(g, b, 0);
		gen_arg_ptr(g, c, 0);
		gen_arg_i4(g, n);
		gen_touch(g, a, 0, bytes);
		gen_touch(g, b, 0, bytes);
		gen_touch(g, c, 0, bytes);
		gen_dur(g, gen_membound_ns(3 * bytes, gen_rtx5080_bw(g)));
	}
	gen_sync(g, 0);
	return g->rc;
}

const struct gen_kind gen_vector_add = {
	"vector-add",
	"c = a + b over n floats, one kernel per addition (MSched microbenchmark; memory-bound at the "
	"calibrated rtx5080 bandwidth)",
	vadd_params,
	vadd_build,
};

static const struct gen_pspec mm_params[] = {
	{"n", GEN_UINT, NULL, 16, MICRO_MAX_DIM, NULL,
	 "square matrix dimension M = N = K (default: from footprint, one multiplication)"},
	{"footprint", GEN_SIZE, "4G", 12 * 16 * 16, 12 * MICRO_MAX_DIM * MICRO_MAX_DIM, NULL,
	 "total bytes of all A, B, C; alone: n = floor(sqrt(footprint / 12)); with n: as many n x n "
	 "multiplications (each its own A, B, C, one kernel each) as fit"},
	{"think", GEN_UINT, "5000", 0, 1000000000ull, NULL, "host ns before each launch"},
	{NULL, 0, NULL, 0, 0, NULL, NULL},
};

static int mm_build(struct gen_ctx *g)
{
	uint64_t n = 0, count = 1;
	if (gen_given(g, "n")) {
		n = gen_u(g, "n");
		if (gen_given(g, "footprint")) {
			count = gen_u(g, "footprint") / (3 * MICRO_ELEM * n * n);
			if (count == 0)
				return gen_fail(g, "footprint=%llu is below one %llu x %llu multiplication (%llu bytes)",
						(unsigned long long)gen_u(g, "footprint"), (unsigned long long)n,
						(unsigned long long)n, (unsigned long long)(3 * MICRO_ELEM * n * n));
			if (count > 1000000)
				return gen_fail(g, "footprint / (12 n^2) = %llu multiplications; at most 1000000",
						(unsigned long long)count);
		}
	} else {
		n = (uint64_t)sqrt((double)(gen_u(g, "footprint") / (3 * MICRO_ELEM)));
		while (3 * MICRO_ELEM * (n + 1) * (n + 1) <= gen_u(g, "footprint"))
			n++;
		while (n && 3 * MICRO_ELEM * n * n > gen_u(g, "footprint"))
			n--;
	}
	if (n < 16 || n > MICRO_MAX_DIM)
		return gen_fail(g, "matrix dimension %llu out of range (expected 16..%llu)", (unsigned long long)n,
				MICRO_MAX_DIM);
	gmx_workload_t *w = g->w;
	if (gmx_workload_set_str(&w->device, "rtx5080") || gmx_workload_set_str(&w->unit, "iteration"))
		return -ENOMEM;
	uint64_t bytes = n * n * MICRO_ELEM;
	double flops = 2.0 * (double)n * (double)n * (double)n;
	uint64_t compute_ns = (uint64_t)llround(flops * 1e9 / (GMX_RTX5080_FP32_PEAK * GMX_SGEMM_EFFICIENCY));
	uint64_t memory_ns = gen_membound_ns(3 * bytes, gen_rtx5080_bw(g)) - GMX_KERNEL_MIN_NS;
	for (uint64_t i = 0; i < count && !g->rc; i++) {
		uint32_t a = gen_buffer(g, bytes, "A"), b = gen_buffer(g, bytes, "B"), c = gen_buffer(g, bytes, "C");
		/* 16x16 thread tiles over C. */
		gen_kernel(g, "matmul(float const*, float const*, float*, int, int, int)", gen_u(g, "think"),
			   GMX_CLASS_COMPUTE, (uint32_t)gen_div_up(n, 16), (uint32_t)gen_div_up(n, 16), 1, 16, 16, 1, 0);
		gen_arg_ptr(g, a, 0);
		gen_arg_ptr(g, b, 0);
		gen_arg_ptr(g, c, 0);
		gen_arg_i4(g, n); /* M */
		gen_arg_i4(g, n); /* N */
		gen_arg_i4(g, n); /* K */
		gen_touch(g, a, 0, bytes);
		gen_touch(g, b, 0, bytes);
		gen_touch(g, c, 0, bytes);
		gen_dur(g, GMX_KERNEL_MIN_NS + (compute_ns > memory_ns ? compute_ns : memory_ns));
	}
	gen_sync(g, 0);
	return g->rc;
}

const struct gen_kind gen_matmul = {
	"matmul",
	"C = A x B, square fp32, one kernel per multiplication (MSched microbenchmark; compute-bound: 2n^3 "
	"flops at 70% of the rtx5080 fp32 peak)",
	mm_params,
	mm_build,
};
