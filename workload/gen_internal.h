/* Shared machinery of the workload generators: parameter tables, the
 * reference-device constants every generator derives durations from, and a
 * builder with a sticky error so that generator bodies read as the shape of
 * the work rather than as error handling. */
#ifndef GMX_WORKLOAD_GEN_INTERNAL_H
#define GMX_WORKLOAD_GEN_INTERNAL_H

#include <stdint.h>

#include "gpumux/gen.h"
#include "gpumux/workload.h"

/* ---- Reference device: rtx5080 (the MSched paper's main machine) ------- */

/* Peak DRAM bandwidth: 256-bit GDDR7 at 30 Gbps = 960 GB/s (NVIDIA RTX 5080
 * specifications). Only used to report the calibrated efficiency. */
#define GMX_RTX5080_PEAK_BW 960e9
/* Peak FP32 rate: 10,752 CUDA cores x 2 flop x 2.617 GHz boost = 56.28 TFLOPS
 * (NVIDIA RTX 5080 specifications). */
#define GMX_RTX5080_FP32_PEAK 56.28e12
/* Fraction of the FP32 peak a large single-precision GEMM sustains: an
 * estimate (cuBLAS SGEMM on large square problems runs at 60-80% of peak on
 * recent GeForce parts); 0.70 is the middle. */
#define GMX_SGEMM_EFFICIENCY 0.70
/* Execution time of the smallest kernel (a few threads, a few KB): ~2 us on
 * recent NVIDIA GPUs. Every generated kernel costs at least this; the
 * launch gap between kernels is the simulator's business, not this. */
#define GMX_KERNEL_MIN_NS 2000ull
/* One llama3-8b-int8 decode step on the RTX 5080 takes 12.7 ms (MSched paper
 * v2, section 3). This is the anchor of every memory-bound duration: see
 * gen_rtx5080_bw(). */
#define GMX_LLAMA3_STEP_NS 12700000ull

/* Effective DRAM bandwidth of the reference device in bytes/s, derived so that
 * the reference llama3-8b-int8 step (default parameters) totals
 * GMX_LLAMA3_STEP_NS: bytes touched / (step - kernels x GMX_KERNEL_MIN_NS).
 * Computed from the llm-decode preset (cheap: one build of ~600 kernels). */
struct gen_ctx;
/* Sets g->rc to -ENOMEM (when g is not NULL) if the reference cannot be built. */
double gen_rtx5080_bw(struct gen_ctx *g);

/* Duration of a memory-bound kernel that touches `bytes`. */
uint64_t gen_membound_ns(uint64_t bytes, double bw);

/* ---- Parameters ---------------------------------------------------------- */

enum gen_ptype {
	GEN_UINT, /* decimal or 0x number */
	GEN_SIZE, /* bytes: a number with an optional binary suffix K, M, G, T (8.5G, 512M) */
	GEN_STR,  /* free text (a path) */
	GEN_ENUM, /* one of choices (comma-separated list) */
};

struct gen_pspec {
	const char *key;
	enum gen_ptype type;
	const char *def; /* default as written by a user; NULL: derived or optional (see help) */
	uint64_t min, max; /* bounds for GEN_UINT / GEN_SIZE */
	const char *choices; /* GEN_ENUM */
	const char *help;
};

#define GEN_MAX_PARAMS 12

struct gen_ctx;

struct gen_kind {
	const char *kind;
	const char *summary;
	const struct gen_pspec *params; /* terminated by key == NULL */
	int (*build)(struct gen_ctx *g);
};

struct gen_ctx {
	const struct gen_kind *k;
	uint64_t u[GEN_MAX_PARAMS];
	const char *s[GEN_MAX_PARAMS];
	int given[GEN_MAX_PARAMS];
	const char *base_dir;
	gmx_workload_t *w;
	char *err;
	size_t err_len;
	int rc; /* sticky: the first builder failure */
};

/* Value of a numeric parameter (its default when not given). */
uint64_t gen_u(const struct gen_ctx *g, const char *key);
/* Value of a string/enum parameter (its default when not given; may be NULL). */
const char *gen_s(const struct gen_ctx *g, const char *key);
/* Whether the user gave `key`. */
int gen_given(const struct gen_ctx *g, const char *key);

/* Loads kind k and its parameters' defaults into g. 0 or -EINVAL. */
int gen_defaults(struct gen_ctx *g, const struct gen_kind *k);

/* Sets err to "KIND: message" and returns -EINVAL. */
int gen_fail(struct gen_ctx *g, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Parses a size with optional binary suffix (K, M, G, T, optionally followed
 * by "iB" or "B"; fractions allowed before a suffix). 0 or -EINVAL. */
int gen_parse_size(const char *s, uint64_t *out);

/* ---- Builder (sticky errors in g->rc) ------------------------------------ */

uint32_t gen_buffer(struct gen_ctx *g, uint64_t size, const char *name);
uint64_t gen_addr(const struct gen_ctx *g, uint32_t buf, uint64_t offset);
/* Begins a kernel; its duration is set later with gen_dur(). */
void gen_kernel(struct gen_ctx *g, const char *name, uint64_t think_ns, int8_t klass, uint32_t gx, uint32_t gy,
		uint32_t gz, uint32_t bx, uint32_t by, uint32_t bz, uint32_t shm);
void gen_arg_ptr(struct gen_ctx *g, uint32_t buf, uint64_t offset);
void gen_arg_i4(struct gen_ctx *g, uint64_t v);
void gen_arg_i8(struct gen_ctx *g, uint64_t v);
void gen_touch(struct gen_ctx *g, uint32_t buf, uint64_t offset, uint64_t length);
/* Bytes touched by the last op. */
uint64_t gen_last_bytes(const struct gen_ctx *g);
void gen_dur(struct gen_ctx *g, uint64_t ns);
void gen_copy(struct gen_ctx *g, gmx_op_kind_t kind, uint32_t buf, uint64_t bytes, uint64_t think_ns);
void gen_sync(struct gen_ctx *g, uint64_t think_ns);

/* IEEE-754 bits of a float argument, as it sits in a launch buffer. */
uint32_t gen_f32_bits(float f);

static inline uint64_t gen_div_up(uint64_t a, uint64_t b)
{
	return (a + b - 1) / b;
}

/* ---- The generators ------------------------------------------------------ */

extern const struct gen_kind gen_llm_decode;
extern const struct gen_kind gen_vector_add;
extern const struct gen_kind gen_matmul;
extern const struct gen_kind gen_dwt2d;
extern const struct gen_kind gen_hotspot;
extern const struct gen_kind gen_cfd;
extern const struct gen_kind gen_nn;
extern const struct gen_kind gen_reef;
extern const struct gen_kind gen_cnn;

/* Builds llm-decode with explicit parameters; bw <= 0 leaves durations at 0
 * (used to derive the calibration itself). */
int gen_llm_build_with(struct gen_ctx *g, double bw);

#endif
