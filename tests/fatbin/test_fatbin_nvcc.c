/*
 * The fatbin parser on nvcc's own output: kernels.cu compiled into every container, compression
 * and architecture mix nvcc makes (tests/fatbin/CMakeLists.txt). Each kernel's layout must
 * equal the one the host compiler gives the same parameter list laid out as a struct (the CUDA
 * parameter buffer follows the C ABI's alignment rules), and the ELF and PTX of one build must
 * agree. The image is parsed from a buffer of exactly its size (so an over-read is caught under
 * AddressSanitizer), with and without a known length, and through the wrapper nvcc registers.
 *
 * Usage: test_fatbin_nvcc DIR | --skip REASON (exit 77: skipped)
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "gpumux/fatbin.h"

static const char *g_dir;

/* C mirrors of the kernels' parameter lists (kernels.cu). */
struct S {
	double a;
	char b;
	int c[3];
};
struct A16 {
	_Alignas(16) float x;
	float y, z, w;
};
struct char3_ {
	char x, y, z;
};
struct float4_ {
	_Alignas(16) float x;
	float y, z, w;
};
struct double2_ {
	_Alignas(16) double x;
	double y;
};
struct short2_ {
	_Alignas(4) short x;
	short y;
};
struct p_vecadd {
	const float *a, *b;
	float *c;
	int n;
};
struct p_mixed {
	char c;
	short s;
	struct S st;
	struct A16 v;
	double d;
	unsigned long long u;
};
struct p_big {
	char b[5000];
	int k;
};
struct p_edge {
	char e[4084];
	int k;
	double *q;
};
struct p_huge {
	float *p;
	char h[32000];
	int k;
	double d;
};
struct p_vectors {
	struct char3_ a;
	struct float4_ b;
	_Bool flag;
	struct double2_ c;
	unsigned short h;
	struct short2_ s;
};
struct p_filld {
	double *p;
	double v;
	int n;
};
struct p_fillc {
	char *p;
	char v;
	int n;
};
struct p_cfun {
	int a;
	void *p;
};
struct p_calls {
	float *p;
};

typedef struct {
	const char *name;
	uint32_t n, bytes;
	gmx_kparam_t p[8];
} expect_t;

#define M(T, m)                                                                                              \
	{                                                                                                    \
		offsetof(struct T, m), sizeof(((struct T *)0)->m)                                            \
	}
#define END(T, m) (uint32_t)(offsetof(struct T, m) + sizeof(((struct T *)0)->m))

static const expect_t g_expect[] = {
    {"_Z6vecaddPKfS0_Pfi",
     4,
     END(p_vecadd, n),
     {M(p_vecadd, a), M(p_vecadd, b), M(p_vecadd, c), M(p_vecadd, n)}},
    {"_Z5mixedcs1S3A16dy",
     6,
     END(p_mixed, u),
     {M(p_mixed, c), M(p_mixed, s), M(p_mixed, st), M(p_mixed, v), M(p_mixed, d), M(p_mixed, u)}},
    {"_Z6noargsv", 0, 0, {{0, 0}}},
    {"_Z3big3Bigi", 2, END(p_big, k), {M(p_big, b), M(p_big, k)}},
    {"_Z4edge4EdgeiPd", 3, END(p_edge, q), {M(p_edge, e), M(p_edge, k), M(p_edge, q)}},
    {"_Z4hugePf4Hugeid", 4, END(p_huge, d), {M(p_huge, p), M(p_huge, h), M(p_huge, k), M(p_huge, d)}},
    {"_Z7vectors5char36float4b7double26__half6short2",
     6,
     END(p_vectors, s),
     {M(p_vectors, a), M(p_vectors, b), M(p_vectors, flag), M(p_vectors, c), M(p_vectors, h),
      M(p_vectors, s)}},
    {"_Z4fillIdEvPT_S0_i", 3, END(p_filld, n), {M(p_filld, p), M(p_filld, v), M(p_filld, n)}},
    {"_Z4fillIcEvPT_S0_i", 3, END(p_fillc, n), {M(p_fillc, p), M(p_fillc, v), M(p_fillc, n)}},
    {"cfun", 2, END(p_cfun, p), {M(p_cfun, a), M(p_cfun, p)}},
    {"_Z5callsPf", 1, END(p_calls, p), {M(p_calls, p)}},
};
#define N_EXPECT (sizeof g_expect / sizeof g_expect[0])

static unsigned char *slurp(const char *name, size_t *len)
{
	char path[4096];
	snprintf(path, sizeof path, "%s/%s", g_dir, name);
	FILE *f = fopen(path, "rb");
	if (!f)
		fail_msg("cannot open %s", path);
	fseek(f, 0, SEEK_END);
	long n = ftell(f);
	fseek(f, 0, SEEK_SET);
	unsigned char *buf = malloc((size_t)n + 1); /* +1: PTX gets its NUL */
	assert_non_null(buf);
	assert_int_equal(fread(buf, 1, (size_t)n, f), (size_t)n);
	fclose(f);
	buf[n] = '\0';
	*len = (size_t)n;
	return buf;
}

/* Every expected kernel, with exactly the expected layout, and nothing else. */
static void check_set(const gmx_fatbin_t *fb, const char *what)
{
	if (gmx_fatbin_count(fb) != N_EXPECT)
		fail_msg("%s: %zu kernels, expected %zu", what, gmx_fatbin_count(fb), N_EXPECT);
	for (size_t i = 0; i < N_EXPECT; i++) {
		const expect_t *e = &g_expect[i];
		const gmx_kernel_info_t *k = gmx_fatbin_find(fb, e->name);
		if (!k)
			fail_msg("%s: kernel %s not found", what, e->name);
		assert_string_equal(k->name, e->name);
		if (k->n_params != e->n || k->param_bytes != e->bytes)
			fail_msg("%s: %s: %u params / %u bytes, expected %u / %u", what, e->name, k->n_params,
				 k->param_bytes, e->n, e->bytes);
		for (uint32_t j = 0; j < e->n; j++)
			if (k->params[j].offset != e->p[j].offset || k->params[j].size != e->p[j].size)
				fail_msg("%s: %s param %u: %u:%u, expected %u:%u", what, e->name, j,
					 k->params[j].offset, k->params[j].size, e->p[j].offset,
					 e->p[j].size);
	}
	assert_null(gmx_fatbin_find(fb, "_Z6helperf"));
}

static void parse_file(const char *name, int unbounded)
{
	size_t len;
	unsigned char *buf = slurp(name, &len);
	/* An exact-size copy: a read past the image is an ASan error. PTX keeps its NUL. */
	size_t n = len + (strstr(name, ".ptx") ? 1 : 0);
	unsigned char *exact = malloc(n);
	assert_non_null(exact);
	memcpy(exact, buf, n);
	gmx_fatbin_t *fb = NULL;
	char err[256] = "";
	int rc = gmx_fatbin_parse(exact, unbounded ? SIZE_MAX : n, &fb, err, sizeof err);
	if (rc)
		fail_msg("%s: %s", name, err);
	char what[128];
	snprintf(what, sizeof what, "%s (%s)", name, unbounded ? "pointer only" : "with length");
	check_set(fb, what);
	gmx_fatbin_free(fb);
	free(exact);
	free(buf);
}

static const char *const g_files[] = {"default.fatbin", "none.fatbin",	"lz4all.fatbin",
				      "zstdall.fatbin", "debug.fatbin", "multi.fatbin",
				      "ptxonly.fatbin", "sm80.cubin",	"kernels.ptx"};

static void test_every_variant(void **state)
{
	(void)state;
	for (size_t i = 0; i < sizeof g_files / sizeof g_files[0]; i++) {
		parse_file(g_files[i], 0);
		parse_file(g_files[i], 1);
	}
}

/* The wrapper nvcc registers (__fatBinC_Wrapper_t): magic, version, pointer to the fatbin. */
static void test_wrapper(void **state)
{
	(void)state;
	size_t len;
	unsigned char *fat = slurp("default.fatbin", &len);
	struct {
		uint32_t magic, version;
		const void *data;
		const void *unused;
	} w = {GMX_FATBIN_WRAPPER_MAGIC, 1, fat, NULL};
	gmx_fatbin_t *fb = NULL;
	char err[256];
	assert_int_equal(gmx_fatbin_parse(&w, SIZE_MAX, &fb, err, sizeof err), 0);
	check_set(fb, "wrapper, pointer only");
	assert_int_equal(gmx_fatbin_image_size(fb), len);
	gmx_fatbin_free(fb);
	/* With a known length, the fatbin must lie within it. */
	assert_int_not_equal(gmx_fatbin_parse(&w, sizeof w, &fb, err, sizeof err), 0);
	assert_non_null(strstr(err, "outside"));
	assert_null(fb);
	unsigned char *both = malloc(sizeof w + len);
	assert_non_null(both);
	w.data = both + sizeof w;
	memcpy(both, &w, sizeof w);
	memcpy(both + sizeof w, fat, len);
	assert_int_equal(gmx_fatbin_parse(both, sizeof w + len, &fb, err, sizeof err), 0);
	check_set(fb, "wrapper and fatbin in one buffer");
	gmx_fatbin_free(fb);
	free(both);
	free(fat);
}

/* The ELF and the PTX of the same build name the same kernels with the same layouts. */
static void test_elf_and_ptx_agree(void **state)
{
	(void)state;
	size_t l1, l2;
	unsigned char *elf = slurp("sm80.cubin", &l1), *ptx = slurp("kernels.ptx", &l2);
	gmx_fatbin_t *a = NULL, *b = NULL;
	char err[256];
	assert_int_equal(gmx_fatbin_parse(elf, l1, &a, err, sizeof err), 0);
	assert_int_equal(gmx_fatbin_parse(ptx, l2 + 1, &b, err, sizeof err), 0);
	assert_int_equal(gmx_fatbin_count(a), gmx_fatbin_count(b));
	for (size_t i = 0; i < gmx_fatbin_count(a); i++) {
		const gmx_kernel_info_t *x = gmx_fatbin_kernel(a, i), *y = gmx_fatbin_find(b, x->name);
		assert_non_null(y);
		assert_int_equal(x->n_params, y->n_params);
		assert_int_equal(x->param_bytes, y->param_bytes);
		assert_memory_equal(x->params, y->params, x->n_params * sizeof *x->params);
	}
	gmx_fatbin_free(a);
	gmx_fatbin_free(b);
	free(elf);
	free(ptx);
}

/* Every truncation and every flipped byte of real images: an error or a set, never a crash
 * or a read outside the buffer (exact-size copies under ASan). */
static void mutate(const char *name)
{
	size_t len;
	unsigned char *buf = slurp(name, &len);
	char err[256];
	size_t step = len > 40000 ? len / 20000 : 1;
	for (size_t cut = 0; cut < len; cut += step) {
		unsigned char *c = malloc(cut ? cut : 1);
		assert_non_null(c);
		memcpy(c, buf, cut);
		gmx_fatbin_t *fb = NULL;
		err[0] = '\0';
		int rc = gmx_fatbin_parse(c, cut, &fb, err, sizeof err);
		if (rc)
			assert_true(err[0] != '\0');
		else
			assert_non_null(fb);
		gmx_fatbin_free(fb);
		free(c);
	}
	unsigned char *c = malloc(len);
	assert_non_null(c);
	for (size_t i = 0; i < len; i += step) {
		memcpy(c, buf, len);
		c[i] ^= 0xff;
		gmx_fatbin_t *fb = NULL;
		err[0] = '\0';
		if (gmx_fatbin_parse(c, len, &fb, err, sizeof err))
			assert_true(err[0] != '\0');
		gmx_fatbin_free(fb);
	}
	free(c);
	free(buf);
}

static void test_mutations(void **state)
{
	(void)state;
	mutate("default.fatbin");
	mutate("lz4all.fatbin");
	mutate("sm80.cubin");
}

int main(int argc, char **argv)
{
	if (argc == 3 && strcmp(argv[1], "--skip") == 0) {
		printf("SKIPPED: %s\n", argv[2]);
		return 77;
	}
	if (argc != 2) {
		fprintf(stderr, "usage: test_fatbin_nvcc DIR | --skip REASON\n");
		return 2;
	}
	g_dir = argv[1];
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_every_variant),
	    cmocka_unit_test(test_wrapper),
	    cmocka_unit_test(test_elf_and_ptx_agree),
	    cmocka_unit_test(test_mutations),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
