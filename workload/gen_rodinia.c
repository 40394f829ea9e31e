/* The Rodinia-like kernels of the MSched paper's mix A: dwt2d, hotspot, cfd
 * and nn, each with the buffers, kernels and launch arguments of the Rodinia
 * 3.1 CUDA program it follows, scaled by a size parameter (or a footprint).
 * One unit = one iteration of the program's main loop, closed by a sync.
 * Durations: bytes moved over the calibrated rtx5080 bandwidth
 * (gen_rtx5080_bw), plus the per-kernel floor; these kernels do a few flops
 * per byte, far below the rtx5080's 56 TFLOPS / 0.8 TB/s balance. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "gen_internal.h"

#define RD_DEFAULT_FOOTPRINT "1G"
#define RD_INT_MAX 2147483647ull /* sizes travel in `int` kernel arguments */

/* Largest x with x * x * per <= fp (x >= 0). */
static uint64_t isqrt_div(uint64_t fp, uint64_t per)
{
	uint64_t x = (uint64_t)sqrt((double)(fp / per));
	while ((x + 1) * (x + 1) * per <= fp)
		x++;
	while (x && x * x * per > fp)
		x--;
	return x;
}

/* The natural size parameter `key` if given, else derived from footprint. */
static int size_or_footprint(struct gen_ctx *g, const char *key, uint64_t derived, uint64_t min, uint64_t *out)
{
	if (gen_given(g, key) && gen_given(g, "footprint"))
		return gen_fail(g, "give %s or footprint, not both", key);
	*out = gen_given(g, key) ? gen_u(g, key) : derived;
	if (*out < min)
		return gen_fail(g, "footprint=%s is too small (%s would be %llu, at least %llu)", gen_s(g, "footprint"), key,
				(unsigned long long)*out, (unsigned long long)min);
	return 0;
}

static int set_meta(struct gen_ctx *g, const char *name)
{
	gmx_workload_t *w = g->w;
	if (gmx_workload_set_str(&w->name, name) || gmx_workload_set_str(&w->device, "rtx5080") ||
	    gmx_workload_set_str(&w->unit, "iteration"))
		return -ENOMEM;
	return 0;
}

static void membound(struct gen_ctx *g, double bw)
{
	gen_dur(g, gen_membound_ns(gen_last_bytes(g), bw));
}

/* ---- hotspot ------------------------------------------------------------- */
/* Rodinia hotspot: transient thermal simulation of a chip on an n x n grid.
 * Buffers: power, and two temperature grids used as ping-pong (temp[0],
 * temp[1]). calculate_temp advances `pyramid` time steps per launch in
 * 16 x 16 blocks whose borders overlap by `pyramid` cells. Every launch reads
 * all of power and the source grid and writes all of the destination: T1. */

#define HS_BLOCK 16 /* hotspot.cu BLOCK_SIZE */
/* hotspot.cu chip constants, for the kernel's float arguments. */
#define HS_T_CHIP 0.0005f
#define HS_CHIP_HEIGHT 0.016f
#define HS_CHIP_WIDTH 0.016f
#define HS_SPEC_HEAT_SI 1.75e6f
#define HS_K_SI 100.0f
#define HS_FACTOR_CHIP 0.5f
#define HS_MAX_PD 3.0e6f
#define HS_PRECISION 0.001f

static const struct gen_pspec hs_params[] = {
	{"n", GEN_UINT, NULL, 16, 46340, NULL, "grid side in cells (default: from footprint)"},
	{"footprint", GEN_SIZE, RD_DEFAULT_FOOTPRINT, 3072, 1ull << 42, NULL,
	 "total bytes of power + 2 temperature grids (n = floor(sqrt(footprint / 12)))"},
	{"pyramid", GEN_UINT, "2", 1, 7, NULL, "time steps per launch (Rodinia pyramid_height)"},
	{"think", GEN_UINT, "5000", 0, 1000000000ull, NULL, "host ns before each launch"},
	{NULL, 0, NULL, 0, 0, NULL, NULL},
};

static int hs_build(struct gen_ctx *g)
{
	uint64_t n;
	if (size_or_footprint(g, "n", isqrt_div(gen_u(g, "footprint"), 12), 16, &n))
		return -EINVAL;
	if (n > 46340)
		return gen_fail(g, "n=%llu too large (n * n must fit an int)", (unsigned long long)n);
	uint32_t pyr = (uint32_t)gen_u(g, "pyramid");
	uint64_t think = gen_u(g, "think");
	double bw = gen_rtx5080_bw(g);
	if (set_meta(g, "hotspot"))
		return -ENOMEM;
	uint64_t grid_bytes = n * n * 4;
	uint32_t power = gen_buffer(g, grid_bytes, "power");
	uint32_t temp[2] = {gen_buffer(g, grid_bytes, "temp0"), gen_buffer(g, grid_bytes, "temp1")};

	float grid_h = HS_CHIP_HEIGHT / (float)n, grid_w = HS_CHIP_WIDTH / (float)n;
	float cap = HS_FACTOR_CHIP * HS_SPEC_HEAT_SI * HS_T_CHIP * grid_w * grid_h;
	float rx = grid_w / (2.0f * HS_K_SI * HS_T_CHIP * grid_h);
	float ry = grid_h / (2.0f * HS_K_SI * HS_T_CHIP * grid_w);
	float rz = HS_T_CHIP / (HS_K_SI * grid_h * grid_w);
	float max_slope = HS_MAX_PD / (HS_FACTOR_CHIP * HS_T_CHIP * HS_SPEC_HEAT_SI);
	float step = HS_PRECISION / max_slope;
	uint32_t small = HS_BLOCK - 2 * pyr; /* cells each block computes per side */
	uint32_t blocks = (uint32_t)gen_div_up(n, small);

	/* Two launches: temp0 -> temp1, then back, so the unit repeats unchanged. */
	for (int i = 0; i < 2; i++) {
		uint32_t src = temp[i], dst = temp[1 - i];
		gen_kernel(g, "calculate_temp(int, float*, float*, float*, int, int, int, int, float, float, float, float, float)",
			   think, GMX_CLASS_MEMORY, blocks, blocks, 1, HS_BLOCK, HS_BLOCK, 1, 0);
		gen_arg_i4(g, pyr);
		gen_arg_ptr(g, power, 0);
		gen_arg_ptr(g, src, 0);
		gen_arg_ptr(g, dst, 0);
		gen_arg_i4(g, n); /* grid_cols */
		gen_arg_i4(g, n); /* grid_rows */
		gen_arg_i4(g, pyr); /* border_cols */
		gen_arg_i4(g, pyr); /* border_rows */
		gen_arg_i4(g, gen_f32_bits(cap));
		gen_arg_i4(g, gen_f32_bits(rx));
		gen_arg_i4(g, gen_f32_bits(ry));
		gen_arg_i4(g, gen_f32_bits(rz));
		gen_arg_i4(g, gen_f32_bits(step));
		gen_touch(g, power, 0, grid_bytes);
		gen_touch(g, src, 0, grid_bytes);
		gen_touch(g, dst, 0, grid_bytes);
		membound(g, bw);
	}
	gen_sync(g, 0);
	return g->rc;
}

const struct gen_kind gen_hotspot = {
	"hotspot",
	"Rodinia hotspot: thermal stencil on an n x n grid, power + ping-pong temperature grids, two launches per "
	"iteration, each touching all three grids (T1)",
	hs_params,
	hs_build,
};

/* ---- dwt2d ---------------------------------------------------------------- */
/* Rodinia dwt2d: forward 2D discrete wavelet transform (CDF 5/3) of an RGB
 * image, `levels` levels. c_CopySrcToComponents splits the interleaved 8-bit
 * image into three int planes; then per component, level l transforms the
 * (sx, sy) = (n >> l, n >> l) low-pass band. fdwt53Kernel reads its input
 * band packed (sx * sy ints: T2) and writes the level's four sub-bands into
 * the top-left sx x sy quadrant of the component's output plane, whose rows
 * are n ints apart: sy chunks of sx * 4 bytes at a stride of n * 4 (T3).
 * Before the next level the LL band (the quadrant's top-left sx/2 x sy/2)
 * is copied back packed into the input plane (memCopy): a strided read (T3)
 * and a packed write (T2). */

#define DWT_WIN_X 192 /* fdwt53.cu: launchFDWT53Kernel<192, 8> for sizeX >= 960 */
#define DWT_WIN_Y 8

static const struct gen_pspec dwt_params[] = {
	{"n", GEN_UINT, NULL, 64, 46340, NULL, "image side in pixels (square image; default: from footprint)"},
	{"footprint", GEN_SIZE, RD_DEFAULT_FOOTPRINT, 27 * 64 * 64, 1ull << 42, NULL,
	 "total bytes: RGB source (3 B/pixel) + 3 component planes + 3 output planes (4 B/pixel each); "
	 "n = floor(sqrt(footprint / 27))"},
	{"levels", GEN_UINT, "3", 1, 10, NULL, "DWT levels (Rodinia's run script uses -l 3)"},
	{"think", GEN_UINT, "5000", 0, 1000000000ull, NULL, "host ns before each launch"},
	{NULL, 0, NULL, 0, 0, NULL, NULL},
};

/* sy rows of `row` bytes, `pitch` bytes apart, from the buffer's start. */
static void touch_rows(struct gen_ctx *g, uint32_t buf, uint64_t row, uint64_t pitch, uint64_t sy)
{
	if (row == pitch) {
		gen_touch(g, buf, 0, row * sy);
		return;
	}
	for (uint64_t y = 0; y < sy; y++)
		gen_touch(g, buf, y * pitch, row);
}

static int dwt_build(struct gen_ctx *g)
{
	uint64_t n;
	if (size_or_footprint(g, "n", isqrt_div(gen_u(g, "footprint"), 27), 64, &n))
		return -EINVAL;
	if (n > 46340)
		return gen_fail(g, "n=%llu too large (n * n * 3 bytes must fit an int)", (unsigned long long)n);
	uint32_t levels = (uint32_t)gen_u(g, "levels");
	if ((n >> (levels - 1)) < 2)
		return gen_fail(g, "levels=%u too many for a %llu-pixel image (the last band would be under 2 pixels)", levels,
				(unsigned long long)n);
	uint64_t think = gen_u(g, "think");
	double bw = gen_rtx5080_bw(g);
	if (set_meta(g, "dwt2d"))
		return -ENOMEM;
	const uint64_t pixels = n * n, plane = pixels * 4;
	uint32_t src = gen_buffer(g, pixels * 3, "src_rgb");
	static const char *const cname[3] = {"c_r", "c_g", "c_b"}, *const oname[3] = {"c_r_out", "c_g_out", "c_b_out"};
	uint32_t comp[3], out[3];
	for (int c = 0; c < 3; c++)
		comp[c] = gen_buffer(g, plane, cname[c]);
	for (int c = 0; c < 3; c++)
		out[c] = gen_buffer(g, plane, oname[c]);

	gen_kernel(g, "c_CopySrcToComponents(int*, int*, int*, unsigned char*, int)", think, GMX_CLASS_MEMORY,
		   (uint32_t)gen_div_up(pixels, 256), 1, 1, 256, 1, 1, 0);
	for (int c = 0; c < 3; c++)
		gen_arg_ptr(g, comp[c], 0);
	gen_arg_ptr(g, src, 0);
	gen_arg_i4(g, pixels);
	gen_touch(g, src, 0, pixels * 3);
	for (int c = 0; c < 3; c++)
		gen_touch(g, comp[c], 0, plane);
	membound(g, bw);

	for (int c = 0; c < 3; c++) {
		uint64_t sx = n, sy = n;
		for (uint32_t l = 0; l < levels; l++) {
			gen_kernel(g, "fdwt53Kernel<192, 8>(int const*, int*, int, int, int)", think, GMX_CLASS_MEMORY,
				   (uint32_t)gen_div_up(sx, DWT_WIN_X), (uint32_t)gen_div_up(sy, DWT_WIN_Y), 1, DWT_WIN_X, 1, 1,
				   0);
			gen_arg_ptr(g, comp[c], 0);
			gen_arg_ptr(g, out[c], 0);
			gen_arg_i4(g, sx);
			gen_arg_i4(g, sy);
			gen_arg_i4(g, n); /* output pitch in elements */
			gen_touch(g, comp[c], 0, sx * sy * 4);
			touch_rows(g, out[c], sx * 4, n * 4, sy);
			membound(g, bw);
			if (l + 1 == levels)
				break;
			uint64_t lx = gen_div_up(sx, 2), ly = gen_div_up(sy, 2);
			gen_kernel(g, "memCopy_ll(int*, int const*, int, int, int)", think, GMX_CLASS_MEMORY,
				   (uint32_t)gen_div_up(lx, 256), (uint32_t)ly, 1, 256, 1, 1, 0);
			gen_arg_ptr(g, comp[c], 0);
			gen_arg_ptr(g, out[c], 0);
			gen_arg_i4(g, lx);
			gen_arg_i4(g, ly);
			gen_arg_i4(g, n);
			touch_rows(g, out[c], lx * 4, n * 4, ly);
			gen_touch(g, comp[c], 0, lx * ly * 4);
			membound(g, bw);
			sx = lx;
			sy = ly;
		}
	}
	gen_sync(g, 0);
	return g->rc;
}

const struct gen_kind gen_dwt2d = {
	"dwt2d",
	"Rodinia dwt2d: multi-level forward 5/3 wavelet of an n x n RGB image; each level reads a packed band (T2) "
	"and writes a shrinking quadrant of the output plane (strided, T3)",
	dwt_params,
	dwt_build,
};

/* ---- cfd ------------------------------------------------------------------ */
/* Rodinia cfd (euler3d.cu): finite-volume Euler solver on an unstructured
 * mesh of nelr elements, structure-of-arrays. Per iteration: save variables
 * (a device-to-device copy), compute_step_factor, then RK = 3 stages of
 * compute_flux and time_step. compute_flux gathers the variables of the 4
 * neighbours of each element through elements_surrounding_elements; every
 * kernel touches whole arrays (T1). */

#define CFD_NVAR 5       /* euler3d.cu NVAR: density, 3 momenta, energy */
#define CFD_NNB 4        /* euler3d.cu NNB: neighbours per element */
#define CFD_NDIM 3       /* euler3d.cu NDIM */
#define CFD_RK 3         /* euler3d.cu RK stages */
#define CFD_BLOCK 192    /* euler3d.cu BLOCK_SIZE_*: nelr is padded to a multiple */
/* Bytes per element: areas 4, neighbours NNB*4, normals NNB*NDIM*4, variables,
 * old_variables and fluxes NVAR*4 each, step_factors 4. */
#define CFD_BYTES_PER_ELEM (4 + CFD_NNB * 4 + CFD_NNB * CFD_NDIM * 4 + 3 * CFD_NVAR * 4 + 4)

static const struct gen_pspec cfd_params[] = {
	{"nelr", GEN_UINT, NULL, CFD_BLOCK, 400000000ull, NULL,
	 "mesh elements, rounded down to a multiple of 192 (default: from footprint; Rodinia's fvcorr.domn.097K has 97,046)"},
	{"footprint", GEN_SIZE, RD_DEFAULT_FOOTPRINT, CFD_BYTES_PER_ELEM * CFD_BLOCK, 1ull << 42, NULL,
	 "total bytes at 132 bytes per element (nelr = footprint / 132)"},
	{"think", GEN_UINT, "5000", 0, 1000000000ull, NULL, "host ns before each launch"},
	{NULL, 0, NULL, 0, 0, NULL, NULL},
};

static int cfd_build(struct gen_ctx *g)
{
	uint64_t nelr;
	if (size_or_footprint(g, "nelr", gen_u(g, "footprint") / CFD_BYTES_PER_ELEM, CFD_BLOCK, &nelr))
		return -EINVAL;
	nelr = nelr / CFD_BLOCK * CFD_BLOCK;
	if (nelr * CFD_NNB * CFD_NDIM > RD_INT_MAX)
		return gen_fail(g, "nelr=%llu too large (array indices are int)", (unsigned long long)nelr);
	uint64_t think = gen_u(g, "think");
	double bw = gen_rtx5080_bw(g);
	if (set_meta(g, "cfd"))
		return -ENOMEM;
	const uint64_t var_bytes = nelr * CFD_NVAR * 4;
	uint32_t areas = gen_buffer(g, nelr * 4, "areas");
	uint32_t ese = gen_buffer(g, nelr * CFD_NNB * 4, "elements_surrounding_elements");
	uint32_t normals = gen_buffer(g, nelr * CFD_NNB * CFD_NDIM * 4, "normals");
	uint32_t vars = gen_buffer(g, var_bytes, "variables");
	uint32_t old = gen_buffer(g, var_bytes, "old_variables");
	uint32_t fluxes = gen_buffer(g, var_bytes, "fluxes");
	uint32_t step = gen_buffer(g, nelr * 4, "step_factors");
	uint32_t blocks = (uint32_t)(nelr / CFD_BLOCK);

	/* copy<float>(old_variables, variables, nelr*NVAR): cudaMemcpy device to
	 * device, modelled as a copy kernel so that it carries its regions. */
	gen_kernel(g, "copy<float>(float*, float const*, int)", think, GMX_CLASS_MEMORY, blocks * CFD_NVAR, 1, 1,
		   CFD_BLOCK, 1, 1, 0);
	gen_arg_ptr(g, old, 0);
	gen_arg_ptr(g, vars, 0);
	gen_arg_i4(g, nelr * CFD_NVAR);
	gen_touch(g, vars, 0, var_bytes);
	gen_touch(g, old, 0, var_bytes);
	membound(g, bw);

	gen_kernel(g, "cuda_compute_step_factor(int, float*, float*, float*)", think, GMX_CLASS_MEMORY, blocks, 1, 1,
		   CFD_BLOCK, 1, 1, 0);
	gen_arg_i4(g, nelr);
	gen_arg_ptr(g, vars, 0);
	gen_arg_ptr(g, areas, 0);
	gen_arg_ptr(g, step, 0);
	gen_touch(g, vars, 0, var_bytes);
	gen_touch(g, areas, 0, nelr * 4);
	gen_touch(g, step, 0, nelr * 4);
	membound(g, bw);

	for (int j = 0; j < CFD_RK; j++) {
		gen_kernel(g, "cuda_compute_flux(int, int*, float*, float*, float*)", think, GMX_CLASS_MEMORY, blocks, 1, 1,
			   CFD_BLOCK, 1, 1, 0);
		gen_arg_i4(g, nelr);
		gen_arg_ptr(g, ese, 0);
		gen_arg_ptr(g, normals, 0);
		gen_arg_ptr(g, vars, 0);
		gen_arg_ptr(g, fluxes, 0);
		gen_touch(g, ese, 0, nelr * CFD_NNB * 4);
		gen_touch(g, normals, 0, nelr * CFD_NNB * CFD_NDIM * 4);
		gen_touch(g, vars, 0, var_bytes);
		gen_touch(g, fluxes, 0, var_bytes);
		/* Plus the neighbours' variables, gathered: NNB more reads of NVAR floats
		 * per element that caches mostly miss on a large unstructured mesh. */
		gen_dur(g, gen_membound_ns(gen_last_bytes(g) + CFD_NNB * var_bytes, bw));

		gen_kernel(g, "cuda_time_step(int, int, float*, float*, float*, float*)", think, GMX_CLASS_MEMORY, blocks, 1,
			   1, CFD_BLOCK, 1, 1, 0);
		gen_arg_i4(g, (uint64_t)j);
		gen_arg_i4(g, nelr);
		gen_arg_ptr(g, old, 0);
		gen_arg_ptr(g, vars, 0);
		gen_arg_ptr(g, step, 0);
		gen_arg_ptr(g, fluxes, 0);
		gen_touch(g, old, 0, var_bytes);
		gen_touch(g, step, 0, nelr * 4);
		gen_touch(g, fluxes, 0, var_bytes);
		gen_touch(g, vars, 0, var_bytes);
		membound(g, bw);
	}
	gen_sync(g, 0);
	return g->rc;
}

const struct gen_kind gen_cfd = {
	"cfd",
	"Rodinia cfd (euler3d): unstructured finite-volume solver, 8 kernels per iteration (copy, step factor, "
	"3 x flux + time step) over whole arrays (T1)",
	cfd_params,
	cfd_build,
};

/* ---- nn ------------------------------------------------------------------- */
/* Rodinia nn: k nearest neighbours of a query point among n (lat, lng)
 * records. euclid writes one distance per record (reads n * 8 bytes, writes
 * n * 4: T2 in numRecords); the host copies the distances back and scans them
 * for the k smallest before the next query. */

#define NN_BLOCK 256            /* nn_cuda.cu threadsPerBlock */
#define NN_MAX_GRID_X 65535u    /* nn_cuda.cu splits the grid when it exceeds this */
#define NN_QUERY_LAT 30.0f      /* Rodinia run script: -lat 30 -lng 90 */
#define NN_QUERY_LNG 90.0f
/* Host scan of the distances for the k smallest: one compare per record at
 * ~1 ns (an estimate for one core streaming 4 bytes per record). */
#define NN_HOST_NS_PER_RECORD 1.0

static const struct gen_pspec nn_params[] = {
	{"records", GEN_UINT, NULL, 1, RD_INT_MAX, NULL, "number of records (default: from footprint)"},
	{"footprint", GEN_SIZE, RD_DEFAULT_FOOTPRINT, 12, 12 * RD_INT_MAX, NULL,
	 "total bytes: 8 B location + 4 B distance per record (records = footprint / 12)"},
	{"readback", GEN_UINT, "1", 0, 1, NULL,
	 "1: copy the distances to the host and scan them each query, as Rodinia does; 0: kernel only"},
	{"think", GEN_UINT, "5000", 0, 1000000000ull, NULL, "host ns before each launch (plus the scan when readback=1)"},
	{NULL, 0, NULL, 0, 0, NULL, NULL},
};

static int nn_build(struct gen_ctx *g)
{
	uint64_t n;
	if (size_or_footprint(g, "records", gen_u(g, "footprint") / 12, 1, &n))
		return -EINVAL;
	int readback = gen_u(g, "readback") != 0;
	uint64_t think = gen_u(g, "think");
	if (readback)
		think += (uint64_t)llround((double)n * NN_HOST_NS_PER_RECORD);
	double bw = gen_rtx5080_bw(g);
	if (set_meta(g, "nn"))
		return -ENOMEM;
	uint32_t loc = gen_buffer(g, n * 8, "d_locations");
	uint32_t dist = gen_buffer(g, n * 4, "d_distances");
	uint64_t blocks = gen_div_up(n, NN_BLOCK);
	uint64_t gy = gen_div_up(blocks, NN_MAX_GRID_X), gx = gen_div_up(blocks, gy);
	gen_kernel(g, "euclid(latLong*, float*, int, float, float)", think, GMX_CLASS_MEMORY, (uint32_t)gx, (uint32_t)gy, 1,
		   NN_BLOCK, 1, 1, 0);
	gen_arg_ptr(g, loc, 0);
	gen_arg_ptr(g, dist, 0);
	gen_arg_i4(g, n);
	gen_arg_i4(g, gen_f32_bits(NN_QUERY_LAT));
	gen_arg_i4(g, gen_f32_bits(NN_QUERY_LNG));
	gen_touch(g, loc, 0, n * 8);
	gen_touch(g, dist, 0, n * 4);
	membound(g, bw);
	if (readback)
		gen_copy(g, GMX_OP_COPY_D2H, dist, n * 4, 0);
	gen_sync(g, 0);
	return g->rc;
}

const struct gen_kind gen_nn = {
	"nn",
	"Rodinia nn: distances from a query to n records (T2 in numRecords), copied back and scanned on the host",
	nn_params,
	nn_build,
};
