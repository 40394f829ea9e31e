/*
 * Kernel identity from real nvcc images, through every way a program loads them, against a
 * fake driver (fakecuda.c) that never reads an image: cuModuleLoadData of a fatbin, a
 * cuLibraryLoadData of the wrapper nvcc registers with launches of the CUkernel itself, of
 * cuKernelGetFunction's function and of a function of cuLibraryGetModule's module, the
 * runtime's private load (CUDART_INTERFACE slot 6 of cuGetExportTable, as cudart 11.8 does),
 * and an image nobody can read. For each launch it prints the hash of each parameter's bytes
 * as the program passed them; images.sh compares them with what reached the driver.
 * Usage: shimtest_images FATBIN
 */
#include <cuda.h>

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cu_test.h"

static void launch(CUfunction f, char kind, const char *name, void **params, const size_t *sizes, int n)
{
	printf("launch %c %s", kind, name);
	for (int i = 0; i < n; i++) {
		uint64_t x = 1469598103934665603ull;
		for (size_t b = 0; b < sizes[i]; b++)
			x = (x ^ ((const unsigned char *)params[i])[b]) * 1099511628211ull;
		printf(" %016llx", (unsigned long long)x);
	}
	printf("\n");
	CU(cuLaunchKernel(f, 1, 1, 1, 32, 1, 1, 0, NULL, params, NULL));
}

struct S {
	double a;
	char b;
	int c[3];
};
struct A16 {
	_Alignas(16) float v[4];
};

int main(int argc, char **argv)
{
	if (argc != 2) {
		fprintf(stderr, "usage: shimtest_images FATBIN\n");
		return 2;
	}
	FILE *f = fopen(argv[1], "rb");
	if (!f) {
		perror(argv[1]);
		return 1;
	}
	fseek(f, 0, SEEK_END);
	long len = ftell(f);
	fseek(f, 0, SEEK_SET);
	unsigned char *fat = malloc((size_t)len);
	if (!fat || fread(fat, 1, (size_t)len, f) != (size_t)len)
		return 1;
	fclose(f);
	struct {
		uint32_t magic, version;
		const void *data, *unused;
	} wrapper = {0x466243B1u, 1, fat, NULL};
	CU(cuInit(0));

	/* vecadd, from a module loaded from the fatbin itself. */
	CUmodule m;
	CUfunction fn;
	CU(cuModuleLoadData(&m, fat));
	CU(cuModuleGetFunction(&fn, m, "_Z6vecaddPKfS0_Pfi"));
	for (int i = 0; i < 2; i++) {
		CUdeviceptr a = 0x1000 + (CUdeviceptr)i, b = 0x2000, c = 0x3000;
		int n = 0x1234 + i;
		void *p[] = {&a, &b, &c, &n};
		launch(fn, 'f', "_Z6vecaddPKfS0_Pfi", p, (const size_t[]){8, 8, 8, 4}, 4);
	}

	/* mixed: a library loaded from the wrapper; the CUkernel itself, then its function. */
	CUlibrary lib;
	CUkernel k;
	CU(cuLibraryLoadData(&lib, &wrapper, NULL, NULL, 0, NULL, NULL, 0));
	CU(cuLibraryGetKernel(&k, lib, "_Z5mixedcs1S3A16dy"));
	char ch = 'x';
	short sh = -2;
	struct S st = {1.5, 'q', {7, 8, 9}};
	struct A16 v = {{1, 2, 3, 4}};
	double d = 2.5;
	unsigned long long u = 0x0102030405060708ull;
	void *pm[] = {&ch, &sh, &st, &v, &d, &u};
	const size_t sm[] = {1, 2, 24, 16, 8, 8};
	launch((CUfunction)k, 'k', "_Z5mixedcs1S3A16dy", pm, sm, 6);
	CU(cuKernelGetFunction(&fn, k));
	u++;
	launch(fn, 'f', "_Z5mixedcs1S3A16dy", pm, sm, 6);

	/* cfun: a function of the library's module. */
	CUmodule lm;
	CU(cuLibraryGetModule(&lm, lib));
	CU(cuModuleGetFunction(&fn, lm, "cfun"));
	int ca = 77;
	void *cp = (void *)0xabcdef;
	void *pc[] = {&ca, &cp};
	launch(fn, 'f', "cfun", pc, (const size_t[]){4, 8}, 2);

	/* big: the runtime's private load, CUDART_INTERFACE slot 6 (cudart 11.8). */
	static const CUuuid cudart = {{(char)0x6b, (char)0xd5, (char)0xfb, (char)0x6c, 0x5b, (char)0xf4,
				       (char)0xe7, 0x4a, (char)0x89, (char)0x87, (char)0xd9, 0x39, 0x12,
				       (char)0xfd, (char)0x9d, (char)0xf9}};
	const void *table = NULL;
	CU(cuGetExportTable(&table, &cudart));
	CUresult (*load6)(CUmodule *, const void *, void *, void *, unsigned) =
	    (CUresult(*)(CUmodule *, const void *, void *, void *, unsigned))((void *const *)table)[6];
	CUmodule m6;
	CU(load6(&m6, &wrapper, NULL, NULL, 0));
	CU(cuModuleGetFunction(&fn, m6, "_Z3big3Bigi"));
	static char big[5000];
	for (size_t i = 0; i < sizeof big; i++)
		big[i] = (char)(i * 7);
	int bk = 5;
	void *pb[] = {big, &bk};
	launch(fn, 'f', "_Z3big3Bigi", pb, (const size_t[]){5000, 4}, 2);

	/* An image nobody can read: its kernel stays unidentified. */
	static const char junk[] = "\x01\x02\x03 not an image";
	CU(cuModuleLoadData(&m, junk));
	CU(cuModuleGetFunction(&fn, m, "nowhere"));
	CUdeviceptr w = 0x4242;
	void *pw[] = {&w};
	launch(fn, 'f', "nowhere", pw, (const size_t[]){8}, 1);
	CU(cuCtxSynchronize());
	CU(cuLibraryUnload(lib));
	free(fat);
	printf("ok\n");
	return 0;
}
