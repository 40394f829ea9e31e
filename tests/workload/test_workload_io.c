/* Reader/writer of the native workload format: every kind of bad input gets
 * its own PATH:LINE message and no workload; write/read round trips exactly;
 * writes are atomic; big files read fast. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include <cmocka.h>

#include "wl_testutil.h"

#define HDR "gpumux-workload 2\n"
#define BUFS "buffer id=0 size=0x100\nbuffer id=1 size=4096 addr=0x900000000 name=b\nkname 0 k(int, float*)\n"

/* Reads `text` as file "t.gmxw" and returns the error (empty on success). */
static int read_text(const char *text, gmx_workload_t *w, char *err, size_t len)
{
	FILE *f = fmemopen((void *)text, strlen(text), "r");
	assert_non_null(f);
	int rc = gmx_workload_read_stream(f, "t.gmxw", w, err, len);
	fclose(f);
	return rc;
}

static void expect_error(const char *text, const char *want)
{
	gmx_workload_t w;
	char err[1024];
	int rc = read_text(text, &w, err, sizeof(err));
	if (rc != -EINVAL || !strstr(err, want))
		fail_msg("input:\n%s\nwanted error containing \"%s\"\ngot rc %d: \"%s\"", text, want, rc, err);
	/* One line, and nothing half-built handed back. */
	assert_null(strchr(err, '\n'));
	assert_null(w.name);
	assert_int_equal(w.n_ops, 0);
	assert_null(w.buffers);
}

static void test_rejects_bad_input(void **state)
{
	(void)state;
	expect_error("", "t.gmxw:1: missing header");
	expect_error("# only a comment\n\nname x\n", "t.gmxw:3: missing header");
	expect_error("gpumux-workload 3\n", "t.gmxw:1: unsupported format version 3 (this reader reads version 2)");
	expect_error("gpumux-workload one\n", "t.gmxw:1: header: expected 'gpumux-workload 2'");
	expect_error(HDR "kernal s=0 dur=1 name=0\n", "t.gmxw:2: unknown keyword 'kernal' (expected name, device");
	expect_error(HDR BUFS "kernel s=0 dur=1 name=0 gird=1,1,1\n",
		     "t.gmxw:5: kernel: unknown key 'gird' (expected s, think, dur, name, grid, block, shm, sm, class, "
		     "args, touch)");
	expect_error(HDR "buffer id=0 size=12x\n", "t.gmxw:2: buffer: bad number '12x' for size");
	expect_error(HDR "wait s=0\n", "t.gmxw:2: wait: missing");
	expect_error(HDR "buffer id=0 size=-5\n", "t.gmxw:2: buffer: size must not be negative, got '-5'");
	expect_error(HDR "buffer id=0 size=0\n", "t.gmxw:2: buffer: size must be greater than 0");
	expect_error(HDR "buffer id=1 size=16\n", "t.gmxw:2: buffer: id 1 out of order (expected id=0)");
	expect_error(HDR "buffer id=0 size=0x10000000000000000\n", "t.gmxw:2: buffer: size=0x10000000000000000 is out of range");
	expect_error(HDR "kname 1 foo\n", "t.gmxw:2: kname: name id 1 out of order (expected 0)");
	expect_error(HDR "kname 0\n", "t.gmxw:2: kname: expected a kernel name");
	expect_error(HDR BUFS "kernel s=0 dur=1 name=0 touch=0+0x10:0x100\n",
		     "t.gmxw:5: touch region 0+0x10:0x100 ends past buffer 0 (size 0x100)");
	expect_error(HDR BUFS "kernel s=0 dur=1 name=0 touch=0+0:0\n", "t.gmxw:5: kernel: touch region 0 '0+0:0' has length 0");
	expect_error(HDR BUFS "kernel s=0 dur=1 name=0 touch=2+0:1\n", "t.gmxw:5: kernel: touch region 0 '2+0:1' names buffer 2, not defined");
	expect_error(HDR BUFS "kernel s=0 dur=1 name=0 touch=0+0\n", "t.gmxw:5: kernel: bad touch region '0+0'");
	expect_error(HDR BUFS "kernel s=0 dur=1 name=1\n", "t.gmxw:5: kernel: name 1 is not defined by a kname line");
	expect_error(HDR BUFS "kernel s=0 name=0\n", "t.gmxw:5: kernel: missing key 'dur'");
	expect_error(HDR BUFS "kernel dur=1 name=0\n", "t.gmxw:5: kernel: missing key 's'");
	expect_error(HDR BUFS "kernel s=40000 dur=1 name=0\n", "t.gmxw:5: kernel: s=40000 is out of range (at most 32767)");
	expect_error(HDR BUFS "kernel s=0 dur=1 dur=2 name=0\n", "t.gmxw:5: kernel: key 'dur' given twice");
	expect_error(HDR BUFS "kernel s=0 dur=1 name=0 grid=1,2\n", "t.gmxw:5: kernel: grid must be three numbers");
	expect_error(HDR BUFS "kernel s=0 dur=1 name=0 class=fast\n", "t.gmxw:5: kernel: class 'fast' (expected compute");
	expect_error(HDR BUFS "kernel s=0 dur=1 name=0 args=q:1\n", "t.gmxw:5: kernel: bad argument 'q:1'");
	expect_error(HDR BUFS "kernel s=0 dur=1 name=0 args=i4:0x100000000\n", "does not fit in 4 bytes");
	expect_error(HDR BUFS "kernel s=0 dur=1 name=0 stray\n", "t.gmxw:5: kernel: expected key=value, got 'stray'");
	expect_error(HDR BUFS "h2d s=0 bytes=0x200 buf=0\n", "t.gmxw:5: h2d: bytes=0x200 exceeds buffer 0 (size 0x100)");
	expect_error(HDR BUFS "d2h s=0 bytes=0\n", "t.gmxw:5: d2h: bytes must be greater than 0");
	expect_error(HDR BUFS "sync s=every\n", "t.gmxw:5: sync: bad number 'every' for s");
	expect_error(HDR BUFS "alloc buf=7\n", "t.gmxw:5: alloc: buffer 7 is not defined");
	expect_error(HDR "name a\nname b\n", "t.gmxw:3: name given twice");
	expect_error(HDR "gpumux-workload 2\n", "t.gmxw:2: header given twice");
	/* A file cut off in the middle of its last line. */
	expect_error(HDR BUFS "kernel s=0 dur=1 name=0 touch=0+0:0x1", "t.gmxw:5: truncated line");
	expect_error(HDR "name a\0b\n", "t.gmxw:2");
}

/* A file cut at a line boundary has no 'end': refused, whatever line it was cut after; an
 * 'end' whose counts differ from the lines read, a record after 'end', and the old version
 * (which has no 'end') are refused too. */
static void test_rejects_cut_files(void **state)
{
	(void)state;
	expect_error(HDR, "t.gmxw:1: no 'end' record after the last line: the file was cut short");
	expect_error(HDR BUFS, "t.gmxw:4: no 'end' record after the last line: the file was cut short");
	expect_error(HDR BUFS "kernel s=0 dur=1 name=0\nsync s=0\n", "t.gmxw:6: no 'end' record");
	expect_error(HDR BUFS "kernel s=0 dur=1 name=0\nend buffers=2 knames=1 ops=2\n",
		     "t.gmxw:6: end: ops=2 but the file holds 1: lines are missing");
	expect_error(HDR BUFS "end buffers=3 knames=1 ops=0\n", "t.gmxw:5: end: buffers=3 but the file holds 2");
	expect_error(HDR BUFS "end buffers=2 knames=1\n", "t.gmxw:5: end: missing key 'ops'");
	expect_error(HDR BUFS "end buffers=2 knames=1 ops=0\nsync s=0\n",
		     "t.gmxw:6: a record after 'end' (line 5)");
	expect_error("gpumux-workload 1\nname a\n", "t.gmxw:1: format version 1 has no end record");
	/* Every prefix of a written file that ends at a line boundary, the whole file excepted. */
	gmx_workload_t w;
	char err[512];
	assert_int_equal(gmx_workload_init(&w, "cut"), 0);
	uint32_t b, n;
	assert_int_equal(gmx_workload_add_buffer(&w, 0, 4096, NULL, &b), 0);
	assert_int_equal(gmx_workload_intern_name(&w, "k", &n), 0);
	for (int i = 0; i < 4; i++) {
		gmx_op_t k = {.kind = GMX_OP_KERNEL, .name = n, .duration_ns = 10, .grid = {1, 1, 1},
			      .block = {1, 1, 1}, .buffer = UINT32_MAX};
		assert_int_equal(gmx_workload_add_op(&w, &k, NULL), 0);
	}
	char *text = NULL;
	size_t len = 0;
	FILE *mem = open_memstream(&text, &len);
	assert_non_null(mem);
	assert_int_equal(gmx_workload_write_stream(&w, mem), 0);
	fclose(mem);
	gmx_workload_free(&w);
	assert_int_equal(read_text(text, &w, err, sizeof(err)), 0);
	gmx_workload_free(&w);
	for (size_t i = 0; i + 1 < len; i++) {
		if (text[i] != '\n')
			continue;
		char saved = text[i + 1];
		text[i + 1] = '\0';
		if (read_text(text, &w, err, sizeof(err)) != -EINVAL)
			fail_msg("a file cut after byte %zu was accepted", i + 1);
		text[i + 1] = saved;
	}
	free(text);
}

static void test_accepts_documented_example(void **state)
{
	(void)state;
	const char *text = "gpumux-workload 2\n"
			   "# comment line\n"
			   "name vector-add   # trailing comment\n"
			   "unit iteration\n"
			   "buffer id=0 size=0x4000000 name=a\n"
			   "buffer id=1 size=0x4000000 name=b\n"
			   "buffer id=2 size=0x4000000 name=c\n"
			   "kname 0 vector_add(float const*, float const*, float*, int) # not a comment\n"
			   "kernel s=0 think=5000 dur=210000 name=0 grid=65536,1,1 block=256,1,1 sm=84 class=memory "
			   "args=p:0x200000000,p:0x204000000,p:0x208000000,i4:16777216 "
			   "touch=0+0:0x4000000,1+0:0x4000000,2+0:0x4000000\r\n"
			   "sync s=0\n"
			   "sync s=all think=7\n"
			   "memset s=1 bytes=16 buf=2\n"
			   "free buf=1\n"
			   "d2d s=1 bytes=0x10 buf=0 dur=5\n"
			   "record s=1 event=3\n"
			   "wait s=0 event=3 think=2\n"
			   "end buffers=3 knames=1 ops=8\n"
			   "# a comment after the end\n";
	gmx_workload_t w;
	char err[512];
	int rc = read_text(text, &w, err, sizeof(err));
	if (rc)
		fail_msg("%s", err);
	assert_string_equal(w.name, "vector-add");
	assert_null(w.device);
	assert_string_equal(w.unit, "iteration");
	assert_int_equal(w.n_buffers, 3);
	assert_true(w.buffers[1].addr == 0x204000000ull);
	assert_true(w.buffers[2].addr == 0x208000000ull);
	assert_string_equal(w.names[0], "vector_add(float const*, float const*, float*, int) # not a comment");
	assert_int_equal(w.n_ops, 8);
	assert_int_equal(w.ops[5].kind, GMX_OP_COPY_D2D);
	assert_int_equal(w.ops[5].duration_ns, 5);
	assert_int_equal(w.ops[6].kind, GMX_OP_RECORD);
	assert_int_equal(w.ops[6].event, 3);
	assert_int_equal(w.ops[7].kind, GMX_OP_WAIT);
	assert_int_equal(w.ops[7].stream, 0);
	assert_int_equal(w.ops[7].think_ns, 2);
	const gmx_op_t *k = &w.ops[0];
	assert_int_equal(k->kind, GMX_OP_KERNEL);
	assert_int_equal(k->duration_ns, 210000);
	assert_int_equal(k->think_ns, 5000);
	assert_int_equal(k->grid[0], 65536);
	assert_int_equal(k->sm_demand, 84);
	assert_int_equal(k->klass, GMX_CLASS_MEMORY);
	assert_int_equal(k->arg_count, 4);
	assert_true(w.args[1].is_pointer && w.args[1].value == 0x204000000ull && w.args[1].size == 8);
	assert_true(!w.args[3].is_pointer && w.args[3].size == 4 && w.args[3].value == 16777216);
	assert_int_equal(k->region_count, 3);
	assert_int_equal(w.ops[2].stream, -1);
	assert_int_equal(w.ops[2].think_ns, 7);
	assert_int_equal(w.ops[3].kind, GMX_OP_MEMSET);
	assert_int_equal(w.ops[4].kind, GMX_OP_FREE);
	assert_true(w.ops[4].bytes == 0x4000000ull);
	gmx_workload_free(&w);
}

/* A workload that uses every op kind and field. */
static void build_everything(gmx_workload_t *w)
{
	uint32_t b0, b1, n0, n1;
	assert_int_equal(gmx_workload_init(w, "every op"), 0);
	assert_int_equal(gmx_workload_set_str(&w->device, "v100"), 0);
	assert_int_equal(gmx_workload_set_str(&w->unit, "iteration"), 0);
	assert_int_equal(gmx_workload_add_buffer(w, 0, 1 << 20, "weights", &b0), 0);
	assert_int_equal(gmx_workload_add_buffer(w, 0x7f0000001000ull, 12345, NULL, &b1), 0);
	assert_int_equal(gmx_workload_intern_name(w, "void at::native::kernel<float, 4>(int, char const*) #2", &n0), 0);
	assert_int_equal(gmx_workload_intern_name(w, "  odd name, with commas  ", &n1), 0);
	gmx_op_t k = {.kind = GMX_OP_KERNEL, .klass = GMX_CLASS_COMPUTE, .stream = 3, .name = n0, .think_ns = 17,
		      .duration_ns = 123456789, .grid = {0, 0, 0}, .block = {128, 2, 1}, .shared_mem = 49152,
		      .sm_demand = 80, .buffer = UINT32_MAX};
	assert_int_equal(gmx_workload_add_op(w, &k, NULL), 0);
	assert_int_equal(gmx_workload_add_arg(w, w->buffers[b0].addr + 64, 1, 8), 0);
	assert_int_equal(gmx_workload_add_arg(w, 0xffffffffu, 0, 4), 0);
	assert_int_equal(gmx_workload_add_arg(w, UINT64_MAX, 0, 8), 0);
	assert_int_equal(gmx_workload_add_region(w, b0, 64, 1000), 0);
	assert_int_equal(gmx_workload_add_region(w, b1, 12344, 1), 0);
	k.klass = GMX_CLASS_UNKNOWN;
	k.name = n1;
	k.grid[0] = k.grid[1] = k.grid[2] = 1;
	k.think_ns = 0;
	k.shared_mem = 0;
	k.sm_demand = 0;
	assert_int_equal(gmx_workload_add_op(w, &k, NULL), 0);
	gmx_op_t c = {.kind = GMX_OP_COPY_H2D, .stream = 1, .bytes = 12345, .buffer = b1, .think_ns = 5};
	assert_int_equal(gmx_workload_add_op(w, &c, NULL), 0);
	c.kind = GMX_OP_COPY_D2H;
	c.buffer = UINT32_MAX;
	c.duration_ns = 99;
	assert_int_equal(gmx_workload_add_op(w, &c, NULL), 0);
	c.kind = GMX_OP_MEMSET;
	assert_int_equal(gmx_workload_add_op(w, &c, NULL), 0);
	c.kind = GMX_OP_COPY_D2D;
	c.buffer = b0;
	assert_int_equal(gmx_workload_add_op(w, &c, NULL), 0);
	gmx_op_t e = {.kind = GMX_OP_RECORD, .stream = 1, .event = 4000000000u, .buffer = UINT32_MAX};
	assert_int_equal(gmx_workload_add_op(w, &e, NULL), 0);
	e.kind = GMX_OP_WAIT;
	e.stream = 3;
	e.think_ns = 11;
	assert_int_equal(gmx_workload_add_op(w, &e, NULL), 0);
	gmx_op_t s = {.kind = GMX_OP_SYNC, .stream = -1, .buffer = UINT32_MAX};
	assert_int_equal(gmx_workload_add_op(w, &s, NULL), 0);
	s.stream = 2;
	s.think_ns = 1;
	assert_int_equal(gmx_workload_add_op(w, &s, NULL), 0);
	gmx_op_t a = {.kind = GMX_OP_ALLOC, .buffer = b1, .bytes = 12345};
	assert_int_equal(gmx_workload_add_op(w, &a, NULL), 0);
	a.kind = GMX_OP_FREE;
	a.think_ns = 3;
	assert_int_equal(gmx_workload_add_op(w, &a, NULL), 0);
}

static void test_round_trip(void **state)
{
	(void)state;
	gmx_workload_t w, back;
	char err[512];
	build_everything(&w);
	int rc = wl_round_trip(&w, &back, err, sizeof(err));
	if (rc)
		fail_msg("%s", err);
	const char *diff = wl_diff(&w, &back);
	if (diff)
		fail_msg("round trip differs at %s", diff);
	gmx_workload_free(&back);
	gmx_workload_free(&w);
}

static void test_write_is_atomic(void **state)
{
	(void)state;
	gmx_workload_t w;
	char err[512];
	build_everything(&w);
	/* Into a folder that does not exist: fails, leaves nothing. */
	assert_int_equal(gmx_workload_write(&w, "/nonexistent-gmx-dir/x.gmxw", err, sizeof(err)), -ENOENT);
	assert_non_null(strstr(err, "/nonexistent-gmx-dir/x.gmxw"));
	/* Over an existing file: replaced whole, no temporary left beside it. */
	char dir[] = "/tmp/gmx-wl-dir-XXXXXX";
	assert_non_null(mkdtemp(dir));
	char path[128], tmp[160];
	snprintf(path, sizeof(path), "%s/out.gmxw", dir);
	FILE *f = fopen(path, "w");
	assert_non_null(f);
	fputs("old content\n", f);
	fclose(f);
	assert_int_equal(gmx_workload_write(&w, path, err, sizeof(err)), 0);
	snprintf(tmp, sizeof(tmp), "%s.tmp.%ld", path, (long)getpid());
	struct stat st;
	assert_int_not_equal(stat(tmp, &st), 0);
	gmx_workload_t back;
	assert_int_equal(gmx_workload_read(path, &back, err, sizeof(err)), 0);
	assert_null(wl_diff(&w, &back));
	gmx_workload_free(&back);
	/* A string that cannot round-trip is refused before anything is written. */
	assert_int_equal(gmx_workload_set_str(&w.unit, "step # one"), 0);
	assert_int_equal(gmx_workload_write(&w, path, err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "unit"));
	assert_int_equal(gmx_workload_read(path, &back, err, sizeof(err)), 0);
	assert_string_equal(back.unit, "iteration");
	gmx_workload_free(&back);
	unlink(path);
	rmdir(dir);
	gmx_workload_free(&w);
}

static void test_missing_file(void **state)
{
	(void)state;
	gmx_workload_t w;
	char err[512];
	assert_int_equal(gmx_workload_read("/nonexistent-gmx.gmxw", &w, err, sizeof(err)), -ENOENT);
	assert_non_null(strstr(err, "/nonexistent-gmx.gmxw"));
	assert_int_equal(w.n_ops, 0);
}

/* A big file (300,000 kernel lines) reads back identical. */
static void test_big_file_round_trip(void **state)
{
	(void)state;
	gmx_workload_t w, back;
	uint32_t b, n;
	char err[512];
	assert_int_equal(gmx_workload_init(&w, "big"), 0);
	assert_int_equal(gmx_workload_add_buffer(&w, 0, 1ull << 30, NULL, &b), 0);
	assert_int_equal(gmx_workload_intern_name(&w, "k", &n), 0);
	const uint32_t N = 300000;
	for (uint32_t i = 0; i < N; i++) {
		gmx_op_t k = {.kind = GMX_OP_KERNEL, .name = n, .duration_ns = 1000 + i, .think_ns = 3000,
			      .grid = {64, 1, 1}, .block = {256, 1, 1}, .buffer = UINT32_MAX};
		assert_int_equal(gmx_workload_add_op(&w, &k, NULL), 0);
		uint64_t off = (uint64_t)(i % 1000) << 20;
		assert_int_equal(gmx_workload_add_arg(&w, w.buffers[b].addr + off, 1, 8), 0);
		assert_int_equal(gmx_workload_add_arg(&w, 4096, 0, 4), 0);
		assert_int_equal(gmx_workload_add_region(&w, b, off, 16384), 0);
	}
	char path[] = "/tmp/gmx-wl-big-XXXXXX";
	int fd = mkstemp(path);
	assert_true(fd >= 0);
	close(fd);
	assert_int_equal(gmx_workload_write(&w, path, err, sizeof(err)), 0);
	struct timespec t0, t1;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	int rc = gmx_workload_read(path, &back, err, sizeof(err));
	clock_gettime(CLOCK_MONOTONIC, &t1);
	unlink(path);
	if (rc)
		fail_msg("%s", err);
	double s = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
	/* Informational: speed is measured by bench/workload (build/bench_workload), not asserted. */
	print_message("read %u kernel lines in %.3f s (%.0f lines/s)\n", N, s, N / s);
	assert_null(wl_diff(&w, &back));
	gmx_workload_free(&back);
	gmx_workload_free(&w);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_rejects_bad_input),   cmocka_unit_test(test_rejects_cut_files),
		cmocka_unit_test(test_accepts_documented_example),
		cmocka_unit_test(test_round_trip),          cmocka_unit_test(test_write_is_atomic),
		cmocka_unit_test(test_missing_file),        cmocka_unit_test(test_big_file_round_trip),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
