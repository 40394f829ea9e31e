/* reef: one DNN inference request from a REEF model graph (TVM-compiled,
 * traces/reef/<model>/<model>.json) and its kernel profile
 * (<model>.profile.json). The graph names, for every kernel, the storage
 * entries it reads and writes: the only public ground truth of which buffers
 * each kernel of a real DNN touches. Each storage entry becomes a buffer;
 * each kernel touches the whole buffers of its arguments (T1) and receives
 * pointers to them, with the graph's launch dimensions.
 *
 * Durations: the profile's per-kernel latencies (AMD MI50, batch 1) are used
 * relative to each other and rescaled so that the request totals the model
 * latency times GMX_REEF_MI50_TO_RTX5080. Batch-1 kernels are latency-bound,
 * so their time says nothing about larger batches; at batch N a kernel takes
 * the longest of three bounds (a roofline):
 *   t(N) = max(t(1), bytes(N) / bandwidth, flops(N) / (fp32 peak x efficiency))
 * with bytes(N) the parameters plus N times the activations it touches, and
 * flops(N) = 2 x output elements x K for kernels with a weight (conv, dense):
 * K = weight elements / output channels, the channels being the smallest
 * parameter's elements (the bias or scale). Kernels without a weight are
 * bound by bytes. */
#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gen_internal.h"

/* MI50 -> RTX 5080 time ratio for batch-1 inference: the geometric mean of the
 * FP32 ratio (MI50 13.41 TFLOPS, AMD specifications / RTX 5080 56.28 TFLOPS)
 * and the DRAM ratio (MI50 1024 GB/s HBM2 / RTX 5080 960 GB/s), since small-
 * batch inference is bound by neither alone: sqrt(0.2383 * 1.0667) = 0.504.
 * An estimate, not a measurement; e.g. resnet152 13.2 ms -> 6.7 ms. */
#define GMX_MI50_FP32 13.41e12
#define GMX_MI50_BW 1024e9
/* Fraction of the fp32 peak a convolution sustains at large batch: an estimate
 * (cuDNN fp32 convolutions run at roughly half of peak on recent parts). */
#define GMX_REEF_CONV_EFFICIENCY 0.5
#define GMX_REEF_MI50_TO_RTX5080 sqrt((GMX_MI50_FP32 / GMX_RTX5080_FP32_PEAK) * (GMX_MI50_BW / GMX_RTX5080_PEAK_BW))

static const struct gen_pspec reef_params[] = {
	{"graph", GEN_STR, NULL, 0, 0, NULL,
	 "REEF model graph <model>.json (required; relative to the scenario's folder), e.g. "
	 "traces/reef/resnet152/resnet152.json"},
	{"profile", GEN_STR, NULL, 0, 0, NULL, "kernel profile (default: the graph path with .json -> .profile.json)"},
	{"batch", GEN_UINT, "1", 1, 65536, NULL, "batch size: activation buffers scale with it; kernel times follow a roofline (see docs/generators.md)"},
	{"footprint", GEN_SIZE, NULL, 1, 1ull << 42, NULL,
	 "total bytes wanted: picks the largest batch whose footprint fits (instead of batch=)"},
	{"think", GEN_UINT, "5000", 0, 1000000000ull, NULL, "host ns before each launch"},
	{NULL, 0, NULL, 0, 0, NULL, NULL},
};

/* Bytes per element of a TVM storage type; 0 if unknown. TVM stores bool
 * ("uint1") in one byte. */
static uint64_t stype_bytes(const char *t)
{
	static const struct {
		const char *name;
		uint64_t bytes;
	} types[] = {{"float32", 4}, {"float16", 2}, {"float64", 8}, {"int64", 8}, {"int32", 4}, {"int16", 2},
		     {"int8", 1},    {"uint8", 1},   {"byte", 1},    {"uint1", 1}, {"bool", 1},  {"uint32", 4}};
	for (size_t i = 0; i < sizeof(types) / sizeof(types[0]); i++)
		if (!strcmp(t, types[i].name))
			return types[i].bytes;
	return 0;
}

/* Parameters (weights) do not grow with the batch: TVM names them p<N>; the
 * alexnet graph names them *_weight. Everything else (data, null
 * intermediates, output, input0, temp_arg workspaces) is per-sample. */
static int is_param(const char *name)
{
	if (name[0] == 'p' && name[1]) {
		const char *c = name + 1;
		while (*c >= '0' && *c <= '9')
			c++;
		if (!*c)
			return 1;
	}
	size_t len = strlen(name);
	return len > 7 && !strcmp(name + len - 7, "_weight");
}

static char *resolve(const char *base_dir, const char *path)
{
	size_t need = strlen(path) + (base_dir ? strlen(base_dir) : 0) + 2;
	char *out = malloc(need);
	if (!out)
		return NULL;
	if (path[0] == '/' || !base_dir || !*base_dir)
		snprintf(out, need, "%s", path);
	else
		snprintf(out, need, "%s/%s", base_dir, path);
	return out;
}

static json_t *load(struct gen_ctx *g, const char *path, const char *what)
{
	json_error_t e;
	FILE *f = fopen(path, "r");
	if (!f) {
		int err = errno;
		gen_fail(g, "cannot open %s %s: %s", what, path, strerror(err));
		g->rc = -err;
		return NULL;
	}
	json_t *root = json_loadf(f, JSON_REJECT_DUPLICATES, &e);
	fclose(f);
	if (!root) {
		gen_fail(g, "%s:%d:%d: %s", path, e.line, e.column, e.text);
		return NULL;
	}
	if (!json_is_object(root)) {
		gen_fail(g, "%s: expected a JSON object at the top", path);
		json_decref(root);
		return NULL;
	}
	return root;
}

static int reef_build(struct gen_ctx *g)
{
	if (!gen_given(g, "graph"))
		return gen_fail(g, "graph= is required (a REEF <model>.json, e.g. traces/reef/resnet152/resnet152.json)");
	uint64_t batch = gen_u(g, "batch"), think = gen_u(g, "think");
	char *gpath = resolve(g->base_dir, gen_s(g, "graph")), *ppath = NULL;
	json_t *graph = NULL, *prof = NULL;
	double *lat = NULL, *flops = NULL;
	uint64_t *act_bytes = NULL, *par_bytes = NULL;
	int rc = 0;
	if (!gpath)
		return -ENOMEM;
	if (gen_given(g, "profile")) {
		ppath = resolve(g->base_dir, gen_s(g, "profile"));
	} else {
		size_t len = strlen(gpath);
		if (len < 5 || strcmp(gpath + len - 5, ".json")) {
			rc = gen_fail(g, "graph=%s does not end in .json: give profile= explicitly", gen_s(g, "graph"));
			goto out;
		}
		ppath = malloc(len + 16);
		if (ppath)
			snprintf(ppath, len + 16, "%.*s.profile.json", (int)(len - 5), gpath);
	}
	if (!ppath) {
		rc = -ENOMEM;
		goto out;
	}
	if (!(graph = load(g, gpath, "graph")) || !(prof = load(g, ppath, "profile"))) {
		rc = g->rc;
		goto out;
	}

	json_t *storage = json_object_get(graph, "storage"), *kernels = json_object_get(graph, "kernels");
	json_t *shm = json_object_get(graph, "shared_memory");
	json_t *klat = json_object_get(prof, "kernel_latency"), *mlat = json_object_get(prof, "model_latency");
	if (!json_is_array(storage) || !json_array_size(storage) || !json_is_array(kernels) || !json_array_size(kernels)) {
		rc = gen_fail(g, "%s: expected non-empty arrays \"storage\" and \"kernels\"", gpath);
		goto out;
	}
	if (!json_is_object(klat) || !json_is_number(mlat) || json_number_value(mlat) <= 0) {
		rc = gen_fail(g, "%s: expected \"model_latency\" (> 0) and a \"kernel_latency\" object", ppath);
		goto out;
	}
	size_t ns = json_array_size(storage), nk = json_array_size(kernels);
	if (gen_given(g, "footprint")) {
		if (gen_given(g, "batch")) {
			rc = gen_fail(g, "give batch= or footprint=, not both");
			goto out;
		}
		/* footprint(b) = P + b * A: parameters fixed, activations per sample. */
		uint64_t fixed = 0, per_sample = 0;
		for (size_t i = 0; i < ns; i++) {
			json_t *s = json_array_get(storage, i);
			const char *sn = json_string_value(json_object_get(s, "name"));
			uint64_t bytes = (uint64_t)json_integer_value(json_object_get(s, "size")) *
					 stype_bytes(json_string_value(json_object_get(s, "stype")));
			if (sn && is_param(sn))
				fixed += bytes;
			else
				per_sample += bytes;
		}
		uint64_t want = gen_u(g, "footprint");
		if (!per_sample || want < fixed + per_sample) {
			rc = gen_fail(g, "footprint=%llu is below the model's batch-1 footprint (%llu bytes)",
				      (unsigned long long)want, (unsigned long long)(fixed + per_sample));
			goto out;
		}
		batch = (want - fixed) / per_sample;
		if (batch > 65536) {
			rc = gen_fail(g, "footprint=%llu needs batch %llu, above the limit of 65536",
				      (unsigned long long)want, (unsigned long long)batch);
			goto out;
		}
	}

	gmx_workload_t *w = g->w;
	const char *base = strrchr(gpath, '/');
	char wname[128];
	snprintf(wname, sizeof(wname), "reef %.*s batch %llu", (int)(strcspn(base ? base + 1 : gpath, ".")),
		 base ? base + 1 : gpath, (unsigned long long)batch);
	if (gmx_workload_set_str(&w->name, wname) || gmx_workload_set_str(&w->device, "rtx5080") ||
	    gmx_workload_set_str(&w->unit, "request")) {
		rc = -ENOMEM;
		goto out;
	}
	uint32_t input = UINT32_MAX, output = UINT32_MAX;
	for (size_t i = 0; i < ns; i++) {
		json_t *s = json_array_get(storage, i);
		json_t *name = json_object_get(s, "name"), *size = json_object_get(s, "size"), *type = json_object_get(s, "stype");
		if (!json_is_string(name) || !json_is_integer(size) || !json_is_string(type) || json_integer_value(size) <= 0) {
			rc = gen_fail(g, "%s: storage[%zu]: expected {\"name\": string, \"size\": elements > 0, \"stype\": string}",
				      gpath, i);
			goto out;
		}
		uint64_t eb = stype_bytes(json_string_value(type));
		if (!eb) {
			rc = gen_fail(g, "%s: storage[%zu]: unknown stype '%s' (expected float32, float16, float64, int64, int32, "
				      "int16, int8, uint8, uint32, byte, uint1, bool)",
				      gpath, i, json_string_value(type));
			goto out;
		}
		const char *sn = json_string_value(name);
		uint64_t elems = (uint64_t)json_integer_value(size), scale = is_param(sn) ? 1 : batch;
		if (elems > (1ull << 40) / eb / scale) {
			rc = gen_fail(g, "%s: storage[%zu] is too large at batch %llu", gpath, i, (unsigned long long)batch);
			goto out;
		}
		char bname[96];
		snprintf(bname, sizeof(bname), "%.64s_%zu", sn, i);
		for (char *c = bname; *c; c++)
			if (*c == ' ' || *c == '\t' || *c == '#')
				*c = '_';
		uint32_t b = gen_buffer(g, elems * eb * scale, bname);
		if ((!strcmp(sn, "data") || !strcmp(sn, "input0")) && input == UINT32_MAX)
			input = b;
		if (!strcmp(sn, "output"))
			output = b;
	}
	if (g->rc) {
		rc = g->rc;
		goto out;
	}

	lat = calloc(nk, sizeof(*lat));
	act_bytes = calloc(nk, sizeof(*act_bytes));
	par_bytes = calloc(nk, sizeof(*par_bytes));
	flops = calloc(nk, sizeof(*flops));
	if (!lat || !act_bytes || !par_bytes || !flops) {
		rc = -ENOMEM;
		goto out;
	}
	double lat_sum = 0;
	if (input != UINT32_MAX)
		gen_copy(g, GMX_OP_COPY_H2D, input, w->buffers[input].size, think);
	for (size_t k = 0; k < nk; k++) {
		json_t *kj = json_array_get(kernels, k);
		json_t *name = json_object_get(kj, "name"), *lp = json_object_get(kj, "launch_params"),
		       *args = json_object_get(kj, "args");
		if (!json_is_string(name) || !json_is_array(lp) || json_array_size(lp) != 6 || !json_is_array(args)) {
			rc = gen_fail(g, "%s: kernels[%zu]: expected {\"name\", \"launch_params\": [6 integers], \"args\": [...]}",
				      gpath, k);
			goto out;
		}
		const char *kn = json_string_value(name);
		uint32_t dims[6];
		for (int d = 0; d < 6; d++) {
			json_t *v = json_array_get(lp, (size_t)d);
			if (!json_is_integer(v) || json_integer_value(v) < 1 || json_integer_value(v) > UINT32_MAX) {
				rc = gen_fail(g, "%s: kernels[%zu] (%s): launch_params[%d] is not a positive integer", gpath, k, kn, d);
				goto out;
			}
			dims[d] = (uint32_t)json_integer_value(v);
		}
		json_t *entry = json_object_get(klat, kn), *tl = json_object_get(entry, "total_latency");
		if (!json_is_number(tl) || json_number_value(tl) < 0) {
			rc = gen_fail(g, "%s: no kernel_latency.%s.total_latency for kernels[%zu]", ppath, kn, k);
			goto out;
		}
		lat[k] = json_number_value(tl);
		lat_sum += lat[k];
		json_t *sj = json_is_object(shm) ? json_object_get(shm, kn) : NULL;
		uint64_t shm_bytes = json_is_integer(sj) && json_integer_value(sj) > 0 ? (uint64_t)json_integer_value(sj) : 0;
		gen_kernel(g, kn, think, GMX_CLASS_UNKNOWN, dims[0], dims[1], dims[2], dims[3], dims[4], dims[5],
			   (uint32_t)(shm_bytes > UINT32_MAX ? UINT32_MAX : shm_bytes));
		uint64_t pmin = UINT64_MAX, pmax = 0, out_elems = 0;
		for (size_t a = 0; a < json_array_size(args); a++) {
			json_t *v = json_array_get(args, a);
			if (!json_is_integer(v) || json_integer_value(v) < 0 || (size_t)json_integer_value(v) >= ns) {
				rc = gen_fail(g, "%s: kernels[%zu] (%s): args[%zu] is not a storage index below %zu", gpath, k, kn, a, ns);
				goto out;
			}
			uint32_t b = (uint32_t)json_integer_value(v);
			gen_arg_ptr(g, b, 0);
			gen_touch(g, b, 0, w->buffers[b].size);
			const char *sn = json_string_value(json_object_get(json_array_get(storage, b), "name"));
			uint64_t elems = (uint64_t)json_integer_value(json_object_get(json_array_get(storage, b), "size"));
			if (is_param(sn)) {
				par_bytes[k] += w->buffers[b].size;
				pmin = elems < pmin ? elems : pmin;
				pmax = elems > pmax ? elems : pmax;
			} else {
				act_bytes[k] += w->buffers[b].size / batch;
			}
			if (a + 1 == json_array_size(args))
				out_elems = elems * (is_param(sn) ? 1 : batch); /* TVM passes the output last */
		}
		if (pmax && pmin != UINT64_MAX && pmax / pmin >= 2)
			flops[k] = 2.0 * (double)out_elems * (double)(pmax / pmin);
		if (!json_array_size(args)) {
			rc = gen_fail(g, "%s: kernels[%zu] (%s) has no arguments: it touches nothing", gpath, k, kn);
			goto out;
		}
	}
	if (output != UINT32_MAX)
		gen_copy(g, GMX_OP_COPY_D2H, output, w->buffers[output].size, 0);
	gen_sync(g, 0);
	if (g->rc) {
		rc = g->rc;
		goto out;
	}
	if (lat_sum <= 0) {
		rc = gen_fail(g, "%s: every kernel latency is 0", ppath);
		goto out;
	}
	/* Rescale: the kernels' relative times, summing to the rtx5080 estimate of
	 * the model latency (microseconds -> ns). */
	double request_ns = json_number_value(mlat) * 1e3 * GMX_REEF_MI50_TO_RTX5080;
	size_t k = 0;
	for (uint32_t i = 0; i < w->n_ops; i++) {
		gmx_op_t *o = &w->ops[i];
		if (o->kind != GMX_OP_KERNEL)
			continue;
		double ns_k = request_ns * lat[k] / lat_sum;
		double bytes = (double)(par_bytes[k] + batch * act_bytes[k]);
		double mem_ns = bytes / gen_rtx5080_bw(g) * 1e9;
		double flop_ns = flops[k] / (GMX_RTX5080_FP32_PEAK * GMX_REEF_CONV_EFFICIENCY) * 1e9;
		ns_k = ns_k > mem_ns ? ns_k : mem_ns;
		ns_k = ns_k > flop_ns ? ns_k : flop_ns;
		o->duration_ns = ns_k < 1 ? 1 : (uint64_t)llround(ns_k);
		k++;
	}
out:
	free(lat);
	free(act_bytes);
	free(par_bytes);
	free(flops);
	json_decref(graph);
	json_decref(prof);
	free(gpath);
	free(ppath);
	return rc;
}

const struct gen_kind gen_reef = {
	"reef",
	"DNN inference request from a REEF graph (traces/reef): per-kernel buffers, launch dims and relative "
	"latencies (MI50) rescaled to rtx5080; activations scale with batch",
	reef_params,
	reef_build,
};
