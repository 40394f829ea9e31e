/* Trace import tests: counts that match the shared traces, the CSV importers,
 * error places for bad JSON, and the CLI's behaviour on bad input (one line
 * naming the file, non-zero exit, no output left behind).
 * Usage: test_trace CASE [path-to-gpumux] */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <zlib.h>

#include "gpumux/workload.h"
#include "gpumux/workload_io.h"
#include "trace.h"

#ifndef GMX_SHARED_DIR
#define GMX_SHARED_DIR "../shared"
#endif
#define TRACES GMX_SHARED_DIR "/traces"

static int failures;

#define CHECK(cond, ...)                                                                           \
	do {                                                                                       \
		if (!(cond)) {                                                                     \
			fprintf(stderr, "%s:%d: check failed: %s: ", __FILE__, __LINE__, #cond);   \
			fprintf(stderr, __VA_ARGS__);                                                      \
			fputc('\n', stderr);                                                       \
			failures++;                                                                \
		}                                                                                  \
	} while (0)

static uint64_t count_kind(const gmx_workload_t *w, int kind)
{
	uint64_t n = 0;
	for (uint32_t i = 0; i < w->n_ops; i++)
		n += w->ops[i].kind == kind;
	return n;
}

static uint64_t count_stream(const gmx_workload_t *w, int stream)
{
	uint64_t n = 0;
	for (uint32_t i = 0; i < w->n_ops; i++)
		n += w->ops[i].kind == GMX_OP_KERNEL && w->ops[i].stream == stream;
	return n;
}

/* Imports a shared trace and checks its kernel count and device. */
static void import_counts(const char *rel, uint64_t kernels, const char *device, gmx_workload_t *w,
			  gmx_trace_info_t *info)
{
	char path[1024], err[512];
	snprintf(path, sizeof(path), "%s/%s", TRACES, rel);
	int rc = gmx_trace_import(path, NULL, w, info, err, sizeof(err));
	CHECK(rc == 0, "import %s: %s", rel, err);
	if (rc) {
		gmx_workload_init(w, NULL);
		return;
	}
	CHECK(count_kind(w, GMX_OP_KERNEL) == kernels, "%s: %llu kernels, expected %llu", rel,
	      (unsigned long long)count_kind(w, GMX_OP_KERNEL), (unsigned long long)kernels);
	if (device)
		CHECK(w->device && !strcmp(w->device, device), "%s: device %s, expected %s", rel,
		      w->device ? w->device : "(none)", device);
	char msg[256];
	CHECK(gmx_workload_validate(w, msg, sizeof(msg)) == 0, "%s: %s", rel, msg);
	if (info && info->has_timeline)
		CHECK(info->n_kernels == kernels, "%s: timeline has %u kernels", rel, info->n_kernels);
}

static void t_alexnet(void)
{
	gmx_workload_t w;
	gmx_trace_info_t info;
	import_counts("hta/benchmark_result_2869224_1695835535_trace.json.gz", 79, "a100", &w, &info);
	CHECK(count_kind(&w, GMX_OP_COPY_H2D) > 0, "AlexNet copies its input to the GPU");
	CHECK(count_kind(&w, GMX_OP_SYNC) > 0, "AlexNet synchronises");
	/* Grid and block come through: the first kernel has a 1-D grid of 864 x 256. */
	int found = 0;
	for (uint32_t i = 0; i < w.n_ops && !found; i++)
		if (w.ops[i].kind == GMX_OP_KERNEL) {
			found = 1;
			CHECK(w.ops[i].grid[0] == 864 && w.ops[i].block[0] == 256, "first kernel grid %u block %u",
			      w.ops[i].grid[0], w.ops[i].block[0]);
			CHECK(w.ops[i].duration_ns == 71000, "first kernel lasted %llu ns",
			      (unsigned long long)w.ops[i].duration_ns);
		}
	gmx_trace_info_free(&info);
	gmx_workload_free(&w);
}

static void t_df_index(void)
{
	gmx_workload_t w;
	gmx_trace_info_t info;
	import_counts("hta/df_index_resolver.json.gz", 19370, "v100", &w, &info);
	CHECK(count_stream(&w, 7) == 17350, "compute stream 7: %llu", (unsigned long long)count_stream(&w, 7));
	CHECK(count_stream(&w, 14) == 2020, "NCCL stream 14: %llu", (unsigned long long)count_stream(&w, 14));
	uint64_t mem = count_kind(&w, GMX_OP_ALLOC) + count_kind(&w, GMX_OP_FREE);
	CHECK(mem == 26770, "%llu alloc/free ops, expected 26770", (unsigned long long)mem);
	CHECK(info.memory_events == 26770, "%llu memory events read", (unsigned long long)info.memory_events);
	gmx_trace_stats_t st;
	CHECK(gmx_trace_stats(&w, &info, &st) == 0, "stats");
	/* README: peak allocated 6.2 GiB; five steps of ~345 ms. */
	double gib = (double)st.peak_allocated_bytes / (1024.0 * 1024 * 1024);
	CHECK(gib > 6.1 && gib < 6.3, "peak %.3f GiB", gib);
	CHECK(st.span_s > 1.6 && st.span_s < 1.9, "span %.3f s", st.span_s);
	CHECK(st.kernels_with_regions > st.kernels / 2, "%llu of %llu kernels have a working set",
	      (unsigned long long)st.kernels_with_regions, (unsigned long long)st.kernels);
	/* The replay estimate from the workload alone stays near the recorded span. */
	gmx_trace_stats_t est;
	CHECK(gmx_trace_stats(&w, NULL, &est) == 0, "stats estimate");
	CHECK(est.span_s > st.span_s * 0.9 && est.span_s < st.span_s * 1.1, "estimated %.3f vs recorded %.3f",
	      est.span_s, st.span_s);
	gmx_trace_info_free(&info);
	gmx_workload_free(&w);
}

static void t_rank0(void)
{
	gmx_workload_t w;
	import_counts("hta/rank-0.Apr_03_18_51_38.1102.pt.trace.json.gz", 4350, "v100", &w, NULL);
	CHECK(count_stream(&w, 7) == 4350, "one stream");
	gmx_workload_free(&w);
}

static void t_nccl(void)
{
	gmx_workload_t w;
	gmx_trace_info_t info;
	import_counts("hta/nccl_data.json.gz", 2700, "a100", &w, &info);
	gmx_trace_stats_t st;
	CHECK(gmx_trace_stats(&w, &info, &st) == 0, "stats");
	/* README: host-bound, median host interval ~170 us, median gap ~105 us. */
	CHECK(st.host_interval_us[0] > 150 && st.host_interval_us[0] < 200, "host p50 %.1f", st.host_interval_us[0]);
	CHECK(st.gap_us[0] > 90 && st.gap_us[0] < 120, "gap p50 %.1f", st.gap_us[0]);
	gmx_trace_info_free(&info);
	gmx_workload_free(&w);
}

static void t_kineto(void)
{
	gmx_workload_t w;
	gmx_trace_info_t info;
	import_counts("kineto/worker0.1623143089861.pt.trace.json.gz", 8772, "v100", &w, &info);
	CHECK(count_stream(&w, 7) == 8772, "stream 7 from tid \"stream 7\"");
	CHECK(info.memory_events == 8220, "%llu memory events", (unsigned long long)info.memory_events);
	gmx_trace_info_free(&info);
	gmx_workload_free(&w);
}

/* Bytes every kernel's regions cover, and the kernels that list any. */
static uint64_t touched_bytes(const gmx_workload_t *w, uint64_t *with_regions)
{
	uint64_t b = 0;
	*with_regions = 0;
	for (uint32_t i = 0; i < w->n_ops; i++) {
		const gmx_op_t *o = &w->ops[i];
		*with_regions += o->kind == GMX_OP_KERNEL && o->region_count;
		for (uint32_t r = 0; r < o->region_count; r++)
			b += w->regions[o->region_first + r].length;
	}
	return b;
}

/* The recorded ResNet-50 training trace packed as the caching allocator packs it: 66 segments,
 * 3,351,248,896 bytes (trace stats' packed_bytes of its tensors), where its 281 tensor buffers
 * took 2,191 chunks (4.28 GiB) each on chunks of their own; the same kernels touch the same
 * bytes. */
static void t_pack(void)
{
	char path[1024], err[512];
	snprintf(path, sizeof(path), "%s/kineto/worker0.1623143089861.pt.trace.json.gz", TRACES);
	gmx_workload_t raw, pk;
	gmx_trace_opts_t o = {.pack = 1};
	int rc = gmx_trace_import(path, NULL, &raw, NULL, err, sizeof(err));
	CHECK(rc == 0, "%s", err);
	if (rc)
		return;
	rc = gmx_trace_import(path, &o, &pk, NULL, err, sizeof(err));
	CHECK(rc == 0, "%s", err);
	if (rc) {
		gmx_workload_free(&raw);
		return;
	}
	uint64_t chunks = 0;
	for (uint32_t b = 0; b < raw.n_buffers; b++)
		chunks += (raw.buffers[b].size + (2ull << 20) - 1) >> 21;
	CHECK(raw.n_buffers == 281 && chunks == 2191, "%u tensor buffers, %llu chunks", raw.n_buffers,
	      (unsigned long long)chunks);
	gmx_trace_stats_t st;
	CHECK(gmx_trace_stats(&raw, NULL, &st) == 0, "stats");
	CHECK(st.packed_bytes == 3351248896ull, "packed_bytes %llu", (unsigned long long)st.packed_bytes);
	CHECK(pk.n_buffers == 66, "%u segments", pk.n_buffers);
	CHECK(gmx_workload_footprint(&pk) == 3351248896ull, "packed footprint %llu",
	      (unsigned long long)gmx_workload_footprint(&pk));
	CHECK(count_kind(&pk, GMX_OP_KERNEL) == 8772, "kernels");
	CHECK(count_kind(&pk, GMX_OP_ALLOC) + count_kind(&pk, GMX_OP_FREE) == 0, "no alloc/free left");
	uint64_t kr, kp;
	uint64_t br = touched_bytes(&raw, &kr), bp = touched_bytes(&pk, &kp);
	CHECK(br == bp && kr == kp && kp == 4368, "touched %llu / %llu bytes by %llu / %llu kernels",
	      (unsigned long long)br, (unsigned long long)bp, (unsigned long long)kr, (unsigned long long)kp);
	char msg[256];
	CHECK(gmx_workload_validate(&pk, msg, sizeof(msg)) == 0, "%s", msg);
	gmx_workload_free(&raw);
	gmx_workload_free(&pk);
}

static void t_orion(void)
{
	gmx_workload_t w;
	import_counts("orion/model_kernels/resnet50_4_fwd", 175, "v100", &w, NULL);
	/* README: sum of durations 6.50 ms. */
	double ms = (double)gmx_workload_gpu_ns(&w) / 1e6;
	CHECK(ms > 6.45 && ms < 6.55, "sum %.3f ms", ms);
	CHECK(w.ops[0].klass == GMX_CLASS_COMPUTE && w.ops[0].sm_demand == 98 && w.ops[0].duration_ns == 100480,
	      "first row Conv,1,0,98,100480");
	gmx_workload_free(&w);
}

static void t_orion_commas(void)
{
	const char *csv = "Name,Profile,Memory_footprint,SM_usage,Duration\n"
			  "void f<float, 4, at::A, B>(int, float),0,0,12,3400\n"
			  "Conv,1,0,98,100480\r\n";
	gmx_workload_t w;
	char err[256];
	int rc = gmx_trace_import_mem(csv, strlen(csv), "commas.csv", NULL, &w, NULL, err, sizeof(err));
	CHECK(rc == 0, "%s", err);
	if (rc)
		return;
	CHECK(count_kind(&w, GMX_OP_KERNEL) == 2, "two rows");
	CHECK(!strcmp(w.names[w.ops[0].name], "void f<float, 4, at::A, B>(int, float)"), "name '%s'",
	      w.names[w.ops[0].name]);
	CHECK(w.ops[0].sm_demand == 12 && w.ops[0].duration_ns == 3400 && w.ops[0].klass == GMX_CLASS_MEMORY,
	      "fields from the right");
	gmx_workload_free(&w);
	const char *bad = "Name,Profile,Memory_footprint,SM_usage,Duration\nConv,1,0,98,10x\n";
	rc = gmx_trace_import_mem(bad, strlen(bad), "bad.csv", NULL, &w, NULL, err, sizeof(err));
	CHECK(rc < 0 && strstr(err, "bad.csv:2:") && strstr(err, "Duration"), "error '%s'", err);
}

static void t_vidur(void)
{
	char path[1024], err[512];
	gmx_workload_t a, h;
	gmx_trace_opts_t o = {.tokens = 512};
	snprintf(path, sizeof(path), "%s/vidur/a100/llama-2-7b-mlp.csv", TRACES);
	int rc = gmx_trace_import(path, &o, &a, NULL, err, sizeof(err));
	CHECK(rc == 0, "%s", err);
	snprintf(path, sizeof(path), "%s/vidur/h100/llama-2-7b-mlp.csv", TRACES);
	int rc2 = gmx_trace_import(path, &o, &h, NULL, err, sizeof(err));
	CHECK(rc2 == 0, "%s", err);
	if (rc || rc2)
		return;
	CHECK(count_kind(&a, GMX_OP_KERNEL) == 1 + 32 * 10, "%llu kernels", (unsigned long long)count_kind(&a, GMX_OP_KERNEL));
	CHECK(!strcmp(a.device, "a100") && !strcmp(h.device, "h100"), "devices");
	CHECK(gmx_workload_gpu_ns(&h) < gmx_workload_gpu_ns(&a), "H100 step faster than A100");
	/* Weights of Llama-2-7B: about 13.5 GB in fp16. */
	double gb = (double)gmx_workload_footprint(&a) / 1e9;
	CHECK(gb > 13 && gb < 14.5, "footprint %.2f GB", gb);
	gmx_workload_free(&a);
	gmx_workload_free(&h);
	/* A token count between measured ones is interpolated; outside is refused. */
	o.tokens = 100;
	snprintf(path, sizeof(path), "%s/vidur/a100/llama-2-7b-mlp.csv", TRACES);
	rc = gmx_trace_import(path, &o, &a, NULL, err, sizeof(err));
	CHECK(rc == 0, "%s", err);
	if (!rc)
		gmx_workload_free(&a);
	o.tokens = 5000;
	rc = gmx_trace_import(path, &o, &a, NULL, err, sizeof(err));
	CHECK(rc < 0 && strstr(err, "llama-2-7b-mlp.csv") && strstr(err, "--tokens"), "'%s'", err);
}

/* The Vidur profile at path with every field of the columns named `prefix...` set to value
 * (malloc'd; NULL when it cannot be read). */
static char *vidur_with(const char *path, const char *prefix, const char *value)
{
	FILE *f = fopen(path, "r");
	if (!f)
		return NULL;
	size_t cap = 1 << 20, n = 0, pl = strlen(prefix);
	char *out = malloc(cap), line[65536];
	int match[1024] = {0}, row = 0;
	while (out && fgets(line, sizeof(line), f)) {
		line[strcspn(line, "\r\n")] = 0;
		int col = 0;
		for (char *p = line, *c; p; p = c ? c + 1 : NULL, col++) {
			c = strchr(p, ',');
			if (c)
				*c = 0;
			if (row == 0 && col < 1024)
				match[col] = !strncmp(p, prefix, pl);
			const char *v = row > 0 && col < 1024 && match[col] ? value : p;
			if (n + strlen(v) + 2 >= cap) {
				char *o = realloc(out, cap *= 2);
				if (!o) {
					free(out);
					out = NULL;
					break;
				}
				out = o;
			}
			n += (size_t)sprintf(out + n, "%s%s", col ? "," : "", v);
		}
		if (out)
			out[n++] = '\n';
		row++;
	}
	fclose(f);
	if (out)
		out[n] = 0;
	return out;
}

/* Negative model dimensions or operator times are refused with a message; they used to be
 * converted to integers (undefined for a negative dimension, found by fuzz_trace_vidur). */
static void t_vidur_negative(void)
{
	char path[1024], err[512];
	snprintf(path, sizeof(path), "%s/vidur/a100/llama-2-7b-mlp.csv", TRACES);
	gmx_trace_opts_t o = {.tokens = 512, .device = "a100"};
	const char *cases[][3] = {{"n_embd", "-7826.85", "implausible model dimensions"},
				  {"n_head", "1e11", "implausible model dimensions"},
				  {"time_stats.emb.", "-0.5", "negative time"}};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		char *text = vidur_with(path, cases[i][0], cases[i][1]);
		CHECK(text != NULL, "cannot read %s", path);
		if (!text)
			return;
		gmx_workload_t w;
		int rc = gmx_trace_import_mem(text, strlen(text), "bad.csv", &o, &w, NULL, err, sizeof(err));
		CHECK(rc < 0 && strstr(err, "bad.csv") && strstr(err, cases[i][2]), "%s = %s: rc %d, '%s'",
		      cases[i][0], cases[i][1], rc, rc ? err : "accepted");
		if (rc == 0)
			gmx_workload_free(&w);
		free(text);
	}
}

/* The working-set rule on a small made-up trace: an operator's kernel touches
 * what it allocated before the launch; the next operator's kernel touches the
 * previous operator's live output (its input) and its own output. Memory held
 * before the trace becomes buffers live from the start. */
static void t_working_set(void)
{
	const char *j =
		"{\"traceEvents\":[\n"
		"{\"ph\":\"X\",\"cat\":\"cpu_op\",\"name\":\"aten::linear\",\"tid\":1,\"ts\":100,\"dur\":100},\n"
		"{\"ph\":\"i\",\"cat\":\"cpu_instant_event\",\"name\":\"[memory]\",\"tid\":1,\"ts\":110,"
		"\"args\":{\"Device Type\":1,\"Addr\":4096,\"Bytes\":4096,\"Total Allocated\":1000000}},\n"
		"{\"ph\":\"X\",\"cat\":\"cuda_runtime\",\"name\":\"cudaLaunchKernel\",\"tid\":1,\"ts\":150,\"dur\":5,"
		"\"args\":{\"correlation\":1}},\n"
		"{\"ph\":\"X\",\"cat\":\"kernel\",\"name\":\"gemm\",\"tid\":7,\"ts\":160,\"dur\":10,"
		"\"args\":{\"stream\":7,\"correlation\":1,\"grid\":[1,1,1],\"block\":[32,1,1]}},\n"
		"{\"ph\":\"X\",\"cat\":\"cpu_op\",\"name\":\"aten::relu\",\"tid\":1,\"ts\":300,\"dur\":100},\n"
		"{\"ph\":\"i\",\"cat\":\"cpu_instant_event\",\"name\":\"[memory]\",\"tid\":1,\"ts\":310,"
		"\"args\":{\"Device Type\":1,\"Addr\":12288,\"Bytes\":8192,\"Total Allocated\":1008192}},\n"
		"{\"ph\":\"X\",\"cat\":\"cuda_runtime\",\"name\":\"cudaLaunchKernel\",\"tid\":1,\"ts\":350,\"dur\":5,"
		"\"args\":{\"correlation\":2}},\n"
		"{\"ph\":\"X\",\"cat\":\"kernel\",\"name\":\"relu\",\"tid\":7,\"ts\":360,\"dur\":10,"
		"\"args\":{\"stream\":7,\"correlation\":2,\"grid\":[1,1,1],\"block\":[32,1,1]}},\n"
		"{\"ph\":\"i\",\"cat\":\"cpu_instant_event\",\"name\":\"[memory]\",\"tid\":1,\"ts\":390,"
		"\"args\":{\"Device Type\":1,\"Addr\":4096,\"Bytes\":-4096,\"Total Allocated\":1004096}},\n"
		"{\"ph\":\"i\",\"cat\":\"cpu_instant_event\",\"name\":\"[memory]\",\"tid\":1,\"ts\":500,"
		"\"args\":{\"Device Type\":1,\"Addr\":36864,\"Bytes\":-256,\"Total Allocated\":1003840}}\n"
		"]}\n";
	gmx_workload_t w;
	gmx_trace_info_t info;
	char err[256];
	int rc = gmx_trace_import_mem(j, strlen(j), "ws.json", NULL, &w, &info, err, sizeof(err));
	CHECK(rc == 0, "%s", err);
	if (rc)
		return;
	/* alloc, k1, alloc, k2, free, free: in host order */
	static const int kinds[] = {GMX_OP_ALLOC, GMX_OP_KERNEL, GMX_OP_ALLOC, GMX_OP_KERNEL, GMX_OP_FREE, GMX_OP_FREE};
	CHECK(w.n_ops == 6, "%u ops", w.n_ops);
	for (uint32_t i = 0; i < w.n_ops && i < 6; i++)
		CHECK(w.ops[i].kind == kinds[i], "op %u kind %d", i, w.ops[i].kind);
	CHECK(w.ops[1].think_ns == 40000, "launch 40 us after the allocation: %llu",
	      (unsigned long long)w.ops[1].think_ns);
	const gmx_op_t *k1 = &w.ops[1], *k2 = &w.ops[3];
	uint32_t out1 = w.ops[0].buffer, out2 = w.ops[2].buffer;
	CHECK(k1->region_count == 1 && w.regions[k1->region_first].buffer == out1, "k1 touches its output");
	CHECK(k2->region_count == 2 && w.regions[k2->region_first].buffer == out1 &&
		      w.regions[k2->region_first + 1].buffer == out2,
	      "k2 touches its input then its output (%u regions)", k2->region_count);
	CHECK(w.buffers[out1].addr == 4096 && w.buffers[out1].size == 4096, "buffer at the recorded address");
	/* 1,000,000 held at the first event minus its 4096: 256 freed later, the rest held throughout. */
	uint64_t held = 0;
	for (uint32_t b = 0; b < w.n_buffers; b++)
		if (w.buffers[b].name && !strcmp(w.buffers[b].name, "held-before-trace"))
			held = w.buffers[b].size;
	CHECK(held == 1000000 - 4096 - 256, "held-before-trace %llu", (unsigned long long)held);
	gmx_trace_stats_t st;
	gmx_trace_stats(&w, NULL, &st);
	CHECK(st.peak_allocated_bytes == 1008192, "replayed peak %llu", (unsigned long long)st.peak_allocated_bytes);
	CHECK(st.allocations == 2 && st.frees == 2, "2 allocations, 2 frees");
	/* Packed as the caching allocator does (include/gpumux/devalloc.h): all four allocations are
	 * small-pool requests (<= 1 MiB) and share one 2 MiB segment, where a chunk each would be 8 MiB. */
	CHECK(st.packed_bytes == (2ull << 20), "packed %llu bytes, expected one 2 MiB segment",
	      (unsigned long long)st.packed_bytes);
	gmx_trace_info_free(&info);
	gmx_workload_free(&w);
}

/* Imports JSON text and expects an error mentioning `where`. */
static void json_error(const char *text, const char *where)
{
	gmx_workload_t w;
	char err[512];
	int rc = gmx_trace_import_mem(text, strlen(text), "t.json", NULL, &w, NULL, err, sizeof(err));
	CHECK(rc < 0, "accepted: %s", text);
	CHECK(strstr(err, where) != NULL, "error '%s' lacks '%s'", err, where);
	CHECK(strchr(err, '\n') == NULL, "one line");
}

static void t_json_errors(void)
{
	json_error("{\"traceEvents\": [\n  {\"ph\": \"X\",\n   \"cat\": \"kernel\" \"dur\": 1}\n]}", "t.json:3:");
	json_error("{\"traceEvents\": [ {\"ph\": \"X\"}", "t.json:1:");
	json_error("{\"schemaVersion\": 1, \"other\": [1, 2]}", "no \"traceEvents\"");
	json_error("[1, 2, 3]", "t.json: byte 0");
	json_error("{\"traceEvents\": 5}", "not an array");
	json_error("{\"traceEvents\": [], \"x\": }", "t.json:1:");
	json_error("{\"traceEvents\": []} trailing", "after the JSON object");
	json_error("", "empty");
	json_error("\x89PNG\r\n\x1a\n\x00\x00\x00\x0dIHDR", "PNG");
	/* A well-formed minimal trace is accepted. */
	const char *ok = "{\"traceEvents\":[{\"ph\":\"X\",\"cat\":\"kernel\",\"name\":\"k\",\"ts\":10,\"dur\":5,"
			 "\"tid\":\"stream 3\",\"args\":{\"correlation\":1,\"grid\":[2,1,1],\"block\":[32,1,1]}},"
			 "{\"ph\":\"X\",\"cat\":\"cuda_runtime\",\"name\":\"cudaLaunchKernel\",\"ts\":2,\"dur\":3,"
			 "\"tid\":1,\"args\":{\"correlation\":1}}]}";
	gmx_workload_t w;
	char err[256];
	int rc = gmx_trace_import_mem(ok, strlen(ok), "ok.json", NULL, &w, NULL, err, sizeof(err));
	CHECK(rc == 0, "%s", err);
	if (!rc) {
		CHECK(w.n_ops == 1 && w.ops[0].stream == 3 && w.ops[0].duration_ns == 5000 && w.ops[0].grid[0] == 2,
		      "one kernel on stream 3");
		gmx_workload_free(&w);
	}
}

/* gzip in memory: the same trace compressed reads the same; cut short it fails. */
static void t_gzip_mem(void)
{
	const char *ok = "{\"traceEvents\":[{\"ph\":\"X\",\"cat\":\"kernel\",\"name\":\"k\",\"ts\":10,\"dur\":5,"
			 "\"tid\":7,\"args\":{\"stream\":7}}]}";
	unsigned char gz[512];
	z_stream zs;
	memset(&zs, 0, sizeof(zs));
	CHECK(deflateInit2(&zs, 6, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) == Z_OK, "deflateInit2");
	zs.next_in = (unsigned char *)ok;
	zs.avail_in = (uInt)strlen(ok);
	zs.next_out = gz;
	zs.avail_out = sizeof(gz);
	CHECK(deflate(&zs, Z_FINISH) == Z_STREAM_END, "deflate");
	size_t n = sizeof(gz) - zs.avail_out;
	deflateEnd(&zs);
	gmx_workload_t w;
	char err[256];
	int rc = gmx_trace_import_mem(gz, n, "ok.json.gz", NULL, &w, NULL, err, sizeof(err));
	CHECK(rc == 0 && count_kind(&w, GMX_OP_KERNEL) == 1, "%s", err);
	if (!rc)
		gmx_workload_free(&w);
	rc = gmx_trace_import_mem(gz, n - 10, "cut.json.gz", NULL, &w, NULL, err, sizeof(err));
	CHECK(rc < 0 && strstr(err, "cut.json.gz: byte") && strstr(err, "truncated"), "'%s'", err);
	unsigned char bad[512];
	memcpy(bad, gz, n);
	for (size_t i = 12; i < n - 8; i++)
		bad[i] ^= 0x5a;
	rc = gmx_trace_import_mem(bad, n, "bad.json.gz", NULL, &w, NULL, err, sizeof(err));
	CHECK(rc < 0 && strstr(err, "bad.json.gz"), "'%s'", err);
}

static void t_roundtrip(void)
{
	gmx_workload_t w, r;
	gmx_trace_info_t info;
	import_counts("hta/benchmark_result_2869224_1695835535_trace.json.gz", 79, NULL, &w, &info);
	char dir[] = "/tmp/gmx-trace-XXXXXX", path[256], err[512];
	CHECK(mkdtemp(dir) != NULL, "mkdtemp");
	snprintf(path, sizeof(path), "%s/alexnet.gmxw", dir);
	int rc = gmx_trace_write(&w, path, err, sizeof(err));
	CHECK(rc == 0, "%s", err);
	rc = gmx_workload_read(path, &r, err, sizeof(err));
	CHECK(rc == 0, "%s", err);
	if (!rc) {
		CHECK(r.n_ops == w.n_ops && count_kind(&r, GMX_OP_KERNEL) == 79, "ops survive the round trip");
		gmx_trace_stats_t a, b;
		gmx_trace_stats(&w, NULL, &a);
		gmx_trace_stats(&r, NULL, &b);
		CHECK(a.span_s == b.span_s && a.kernels == b.kernels, "same estimate");
		gmx_workload_free(&r);
	}
	/* stats through the importer: a .gmxw is detected as native. */
	gmx_trace_info_t ni;
	rc = gmx_trace_import(path, NULL, &r, &ni, err, sizeof(err));
	CHECK(rc == 0 && ni.format == GMX_TRACE_NATIVE, "native detected: %s", err);
	if (!rc)
		gmx_workload_free(&r);
	gmx_trace_info_free(&ni);
	unlink(path);
	rmdir(dir);
	gmx_trace_info_free(&info);
	gmx_workload_free(&w);
}

static void t_formats(void)
{
	CHECK(gmx_trace_detect("  {\"traceEvents\"", 16) == GMX_TRACE_KINETO, "json");
	CHECK(gmx_trace_detect("Name,Profile,Memory_footprint,SM_usage,Duration\n", 48) == GMX_TRACE_ORION, "orion");
	CHECK(gmx_trace_detect("# c\ngpumux-workload 1\n", 22) == GMX_TRACE_NATIVE, "native");
	CHECK(gmx_trace_detect("hello", 5) == GMX_TRACE_UNKNOWN, "unknown");
	CHECK(gmx_trace_format_parse("vidur") == GMX_TRACE_VIDUR, "parse");
	CHECK(gmx_trace_format_parse("nope") == GMX_TRACE_UNKNOWN, "parse unknown");
}

/* Runs the CLI; returns its exit status and its stderr (first 1 KB). */
static int run(const char *cmd, char *out, size_t len)
{
	FILE *p = popen(cmd, "r");
	if (!p)
		return -1;
	size_t n = fread(out, 1, len - 1, p);
	out[n] = 0;
	int st = pclose(p);
	return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static void write_file(const char *path, const void *data, size_t n)
{
	FILE *f = fopen(path, "wb");
	if (!f)
		return;
	fwrite(data, 1, n, f);
	fclose(f);
}

static void bad_case(const char *gpumux, const char *dir, const char *name, const void *data, size_t n)
{
	char src[512], out[512], cmd[2048], msg[1024];
	snprintf(src, sizeof(src), "%s/%s", dir, name);
	snprintf(out, sizeof(out), "%s/%s.gmxw", dir, name);
	write_file(src, data, n);
	snprintf(cmd, sizeof(cmd), "'%s' trace import '%s' -o '%s' 2>&1 >/dev/null", gpumux, src, out);
	int st = run(cmd, msg, sizeof(msg));
	CHECK(st != 0, "%s: exit %d", name, st);
	CHECK(strstr(msg, src) != NULL, "%s: message does not name the file: %s", name, msg);
	size_t lines = 0;
	for (char *p = msg; *p; p++)
		lines += *p == '\n';
	CHECK(lines == 1, "%s: %zu lines: %s", name, lines, msg);
	struct stat sb;
	CHECK(stat(out, &sb) != 0, "%s: output file left behind", name);
	/* nor a temporary beside it */
	snprintf(cmd, sizeof(cmd), "ls '%s' | grep -c tmp", dir);
	run(cmd, msg, sizeof(msg));
	CHECK(atoi(msg) == 0, "%s: temporary left behind", name);
	unlink(src);
}

static void t_bad_inputs(const char *gpumux)
{
	char dir[] = "/tmp/gmx-trace-bad-XXXXXX";
	CHECK(mkdtemp(dir) != NULL, "mkdtemp");
	/* The first 3000 bytes of a real gzip trace: a truncated gzip. */
	char path[1024];
	snprintf(path, sizeof(path), "%s/hta/df_index_resolver.json.gz", TRACES);
	unsigned char head[3000];
	FILE *f = fopen(path, "rb");
	CHECK(f != NULL, "open %s", path);
	size_t n = f ? fread(head, 1, sizeof(head), f) : 0;
	if (f)
		fclose(f);
	bad_case(gpumux, dir, "trunc.json.gz", head, n);
	static const unsigned char png[] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n', 0, 0, 0, 13, 'I', 'H', 'D', 'R',
					    0, 0, 0, 1, 0, 0, 0, 1, 8, 6, 0, 0, 0};
	bad_case(gpumux, dir, "image.png", png, sizeof(png));
	bad_case(gpumux, dir, "empty.json", "", 0);
	const char *shape = "{\"name\": \"not a trace\", \"events\": [1, 2, 3]}\n";
	bad_case(gpumux, dir, "shape.json", shape, strlen(shape));
	const char *cut = "{\"traceEvents\": [\n {\"ph\": \"X\", \"cat\": \"kernel\", \"na";
	bad_case(gpumux, dir, "cut.json", cut, strlen(cut));
	/* A good import into a directory that does not exist fails cleanly too. */
	char cmd[2048], msg[1024];
	snprintf(cmd, sizeof(cmd), "'%s' trace import '%s/orion/model_kernels/resnet50_4_fwd' -o '%s/no/such/dir/x' 2>&1",
		 gpumux, TRACES, dir);
	CHECK(run(cmd, msg, sizeof(msg)) != 0, "unwritable output accepted");
	rmdir(dir);
}

static void t_cli_help(const char *gpumux)
{
	char cmd[1024], msg[1024];
	snprintf(cmd, sizeof(cmd), "'%s' trace import --help", gpumux);
	CHECK(run(cmd, msg, sizeof(msg)) == 0 && strstr(msg, "--tokens") && strstr(msg, "--tensors"), "import --help");
	snprintf(cmd, sizeof(cmd), "'%s' trace stats --help", gpumux);
	CHECK(run(cmd, msg, sizeof(msg)) == 0 && strstr(msg, "--json"), "stats --help");
	snprintf(cmd, sizeof(cmd), "'%s' trace stats '%s/orion/model_kernels/resnet50_4_fwd' --json", gpumux, TRACES);
	CHECK(run(cmd, msg, sizeof(msg)) == 0 && strstr(msg, "\"kernels\":175") && strstr(msg, "\"gap_us\""),
	      "stats --json: %s", msg);
	char dir[] = "/tmp/gmx-trace-cli-XXXXXX";
	CHECK(mkdtemp(dir) != NULL, "mkdtemp");
	snprintf(cmd, sizeof(cmd), "'%s' trace import '%s/orion/model_kernels/resnet50_4_fwd' -o '%s/r.gmxw' && '%s' trace stats '%s/r.gmxw' --json",
		 gpumux, TRACES, dir, gpumux, dir);
	CHECK(run(cmd, msg, sizeof(msg)) == 0 && strstr(msg, "\"kernels\":175") && strstr(msg, "\"streams\":{\"0\":175}") &&
		      strstr(msg, "\"span_source\":\"estimated\""),
	      "stats of the imported workload: %s", msg);
	/* kineto: packed by default (66 segments), one buffer per tensor with --tensors (281) */
	const char *kin = "kineto/worker0.1623143089861.pt.trace.json.gz";
	snprintf(cmd, sizeof(cmd), "'%s' trace import '%s/%s' -o '%s/p.gmxw' && grep -c '^buffer' '%s/p.gmxw'", gpumux,
		 TRACES, kin, dir, dir);
	CHECK(run(cmd, msg, sizeof(msg)) == 0 && atoi(msg) == 66, "packed import: %s buffers", msg);
	snprintf(cmd, sizeof(cmd), "'%s' trace import '%s/%s' --tensors -o '%s/t.gmxw' && grep -c '^buffer' '%s/t.gmxw'",
		 gpumux, TRACES, kin, dir, dir);
	CHECK(run(cmd, msg, sizeof(msg)) == 0 && atoi(msg) == 281, "--tensors import: %s buffers", msg);
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	run(cmd, msg, sizeof(msg));
	snprintf(cmd, sizeof(cmd), "'%s' trace import 2>/dev/null", gpumux);
	CHECK(run(cmd, msg, sizeof(msg)) == 2, "usage error exits 2");
}

int main(int argc, char **argv)
{
	if (argc < 2) {
		fprintf(stderr, "usage: test_trace CASE [gpumux]\n");
		return 2;
	}
	const char *c = argv[1];
	if (!strcmp(c, "alexnet"))
		t_alexnet();
	else if (!strcmp(c, "df_index"))
		t_df_index();
	else if (!strcmp(c, "rank0"))
		t_rank0();
	else if (!strcmp(c, "nccl"))
		t_nccl();
	else if (!strcmp(c, "kineto"))
		t_kineto();
	else if (!strcmp(c, "orion"))
		t_orion();
	else if (!strcmp(c, "pack"))
		t_pack();
	else if (!strcmp(c, "orion_commas"))
		t_orion_commas();
	else if (!strcmp(c, "vidur")) {
		t_vidur();
		t_vidur_negative();
	}
	else if (!strcmp(c, "working_set"))
		t_working_set();
	else if (!strcmp(c, "json_errors"))
		t_json_errors();
	else if (!strcmp(c, "gzip_mem"))
		t_gzip_mem();
	else if (!strcmp(c, "roundtrip"))
		t_roundtrip();
	else if (!strcmp(c, "formats"))
		t_formats();
	else if (!strcmp(c, "bad_inputs") && argc > 2)
		t_bad_inputs(argv[2]);
	else if (!strcmp(c, "cli_help") && argc > 2)
		t_cli_help(argv[2]);
	else {
		fprintf(stderr, "unknown case %s\n", c);
		return 2;
	}
	if (failures)
		fprintf(stderr, "%s: %d check(s) failed\n", c, failures);
	return failures ? 1 : 0;
}
