/* An imported trace's allocations packed as PyTorch's caching allocator packs
 * them (gmx_trace_pack, include/gpumux/devalloc.h): a trace of many small
 * tensors holds the allocator's segments on the simulated device, not a 2 MiB
 * chunk per tensor, and its kernels touch the same bytes. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "trace.h"

#include "sim_testutil.h"

#include "memspace.h"
#include "sim.h"

#define MIB (1ull << 20)

typedef struct text {
	char *p;
	size_t n, cap;
} text_t;

static void put(text_t *t, const char *fmt, ...)
{
	va_list ap;
	for (;;) {
		va_start(ap, fmt);
		int k = vsnprintf(t->p + t->n, t->cap - t->n, fmt, ap);
		va_end(ap);
		assert_true(k >= 0);
		if ((size_t)k < t->cap - t->n) {
			t->n += (size_t)k;
			return;
		}
		t->cap = 2 * t->cap + (size_t)k + 1024;
		t->p = realloc(t->p, t->cap);
		assert_non_null(t->p);
	}
}

/* One operator at ts (us): it allocates `bytes` at addr, then launches a 10 us kernel. */
static void op(text_t *t, uint64_t ts, uint64_t addr, uint64_t bytes, uint32_t corr)
{
	put(t,
	    "{\"ph\":\"X\",\"cat\":\"cpu_op\",\"name\":\"aten::add\",\"tid\":1,\"ts\":%llu,\"dur\":100},\n"
	    "{\"ph\":\"i\",\"cat\":\"cpu_instant_event\",\"name\":\"[memory]\",\"tid\":1,\"ts\":%llu,"
	    "\"args\":{\"Device Type\":1,\"Addr\":%llu,\"Bytes\":%llu}},\n"
	    "{\"ph\":\"X\",\"cat\":\"cuda_runtime\",\"name\":\"cudaLaunchKernel\",\"tid\":1,\"ts\":%llu,\"dur\":5,"
	    "\"args\":{\"correlation\":%u}},\n"
	    "{\"ph\":\"X\",\"cat\":\"kernel\",\"name\":\"add\",\"tid\":7,\"ts\":%llu,\"dur\":10,"
	    "\"args\":{\"stream\":7,\"correlation\":%u,\"grid\":[1,1,1],\"block\":[32,1,1]}},\n",
	    (unsigned long long)ts, (unsigned long long)ts + 10, (unsigned long long)addr, (unsigned long long)bytes,
	    (unsigned long long)ts + 50, corr, (unsigned long long)ts + 60, corr);
}

/* 200 tensors of 10,000 B, one of 3 MiB, one of 24 MiB; every other small one
 * freed; then 100 tensors of 5,000 B. Each operator's kernel touches its output
 * and the previous operator's. */
static char *many_small(size_t *len)
{
	text_t t = {0};
	put(&t, "{\"traceEvents\":[\n");
	uint32_t corr = 1;
	uint64_t ts = 1000;
	for (uint32_t i = 0; i < 200; i++, ts += 1000)
		op(&t, ts, 0x10000000ull + i * 0x4000ull, 10000, corr++);
	op(&t, ts, 0x20000000ull, 3 * MIB, corr++);
	ts += 1000;
	op(&t, ts, 0x30000000ull, 24 * MIB, corr++);
	ts += 1000;
	for (uint32_t i = 0; i < 200; i += 2, ts += 10)
		put(&t,
		    "{\"ph\":\"i\",\"cat\":\"cpu_instant_event\",\"name\":\"[memory]\",\"tid\":1,\"ts\":%llu,"
		    "\"args\":{\"Device Type\":1,\"Addr\":%llu,\"Bytes\":-10000}},\n",
		    (unsigned long long)ts, 0x10000000ull + i * 0x4000ull);
	ts += 1000;
	for (uint32_t i = 0; i < 100; i++, ts += 1000)
		op(&t, ts, 0x40000000ull + i * 0x4000ull, 5000, corr++);
	put(&t, "{\"ph\":\"i\",\"cat\":\"Trace\",\"name\":\"end\",\"ts\":%llu}]}\n", (unsigned long long)ts);
	*len = t.n;
	return t.p;
}

static uint64_t kernels_of(const gmx_workload_t *w)
{
	uint64_t n = 0;
	for (uint32_t i = 0; i < w->n_ops; i++)
		n += w->ops[i].kind == GMX_OP_KERNEL;
	return n;
}

static uint64_t chunks_of(const gmx_workload_t *w)
{
	gmx_memspace_t m;
	const gmx_workload_t *ws[1] = {w};
	assert_int_equal(gmx_memspace_init(&m, ws, 1, 1ull << 30), 0);
	uint64_t n = m.n_chunks;
	gmx_memspace_free(&m);
	return n;
}

static void import(const char *j, size_t len, int pack, gmx_workload_t *w)
{
	gmx_trace_opts_t o = {.pack = pack};
	char err[512];
	int rc = gmx_trace_import_mem(j, len, "small.json", &o, w, NULL, err, sizeof(err));
	if (rc)
		fail_msg("%s", err);
}

static void small_tensors_share_segments(void **state)
{
	(void)state;
	size_t len;
	char *j = many_small(&len);
	gmx_workload_t raw, pk;
	import(j, len, 0, &raw);
	import(j, len, 1, &pk);
	/* the allocator: 200 x 10,240 B in one 2 MiB segment (the 5,000 B tensors reuse the
	 * freed blocks), 3 MiB in a 20 MiB segment, 24 MiB in its own: 46 MiB */
	assert_int_equal(pk.n_buffers, 3);
	assert_int_equal(pk.buffers[0].size, 2 * MIB);
	assert_int_equal(pk.buffers[1].size, 20 * MIB);
	assert_int_equal(pk.buffers[2].size, 24 * MIB);
	assert_int_equal(gmx_workload_footprint(&pk), 46 * MIB);
	assert_int_equal(chunks_of(&pk), 23);
	/* one buffer per tensor, laid out as separate cudaMallocs (no reuse of the freed
	 * ones): the 10,240 B and 5,120 B tensors share two 2 MiB chunks, 2 + 12 for the
	 * others */
	assert_int_equal(raw.n_buffers, 302);
	assert_int_equal(chunks_of(&raw), 16);
	/* trace stats' figure for the tensors is the packed workload's footprint */
	gmx_trace_stats_t st;
	assert_int_equal(gmx_trace_stats(&raw, NULL, &st), 0);
	assert_int_equal(st.packed_bytes, 46 * MIB);
	assert_int_equal(gmx_trace_stats(&pk, NULL, &st), 0);
	assert_int_equal(st.packed_bytes, 46 * MIB);
	assert_int_equal(st.allocations + st.frees, 0);
	/* the same kernels, in the same order, touching the same bytes; two tensors of one
	 * kernel never share a byte */
	assert_int_equal(kernels_of(&raw), 302);
	assert_int_equal(kernels_of(&pk), 302);
	uint32_t k = 0;
	uint64_t touched = 0;
	for (uint32_t i = 0; i < raw.n_ops; i++) {
		const gmx_op_t *a = &raw.ops[i];
		if (a->kind != GMX_OP_KERNEL)
			continue;
		while (pk.ops[k].kind != GMX_OP_KERNEL)
			k++;
		const gmx_op_t *b = &pk.ops[k++];
		assert_int_equal(a->name, b->name);
		assert_int_equal(a->duration_ns, b->duration_ns);
		assert_int_equal(a->region_count, b->region_count);
		for (uint32_t r = 0; r < a->region_count; r++) {
			const gmx_region_t *x = &raw.regions[a->region_first + r], *y = &pk.regions[b->region_first + r];
			assert_int_equal(x->length, y->length);
			touched += y->length;
			assert_true(y->offset + y->length <= pk.buffers[y->buffer].size);
			for (uint32_t q = 0; q < r; q++) {
				const gmx_region_t *z = &pk.regions[b->region_first + q];
				if (raw.regions[a->region_first + q].buffer != x->buffer && z->buffer == y->buffer)
					assert_true(z->offset + z->length <= y->offset ||
						    y->offset + y->length <= z->offset);
			}
		}
	}
	assert_true(touched > 0);
	/* host time kept: the ALLOC/FREE ops' think moves to the next op */
	uint64_t think_raw = 0, think_pk = 0;
	for (uint32_t i = 0; i < raw.n_ops; i++)
		think_raw += raw.ops[i].think_ns;
	for (uint32_t i = 0; i < pk.n_ops; i++)
		think_pk += pk.ops[i].think_ns;
	assert_int_equal(think_raw, think_pk);
	gmx_workload_free(&raw);
	gmx_workload_free(&pk);
	free(j);
}

/* On a 64 MiB device both the packed trace (46 MiB) and the trace of one buffer
 * per tensor (32 MiB: the small tensors share chunks) fit: no byte moves in any
 * mode. */
static void packed_and_raw_trace_fit(void **state)
{
	(void)state;
	size_t len;
	char *j = many_small(&len);
	gmx_workload_t raw, pk;
	import(j, len, 0, &raw);
	import(j, len, 1, &pk);
	const gmx_mem_mode_t modes[] = {GMX_MEM_UM, GMX_MEM_IDEAL, GMX_MEM_MSCHED};
	for (size_t m = 0; m < sizeof(modes) / sizeof(modes[0]); m++) {
		for (int packed = 0; packed < 2; packed++) {
			gmx_sim_result_t *r =
			    tu_run_alone(packed ? &pk : &raw, modes[m], 64 * MIB, 1000000000LL);
			assert_int_equal(r->h2d_bytes + r->d2h_bytes, 0);
			free(r);
		}
	}
	gmx_workload_free(&raw);
	gmx_workload_free(&pk);
	free(j);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(small_tensors_share_segments),
	    cmocka_unit_test(packed_and_raw_trace_fit),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
