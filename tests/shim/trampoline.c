/*
 * The interposer's trampolines (exports cuda.h gives no prototype) pass every argument and the
 * result through untouched, on the first call (which resolves the target) and after; a
 * function the driver beneath lacks returns CUDA_ERROR_NOT_SUPPORTED. Run against
 * tests/shim/fakedrv.c as the real driver.
 */
#include <stdio.h>
#include <string.h>

#include "fakedrv.h"

int cuGLInit(void);

static int expected(double d0, float f1, int i0, long i1, int i2, long i3, int i4, long i5, double d2,
		    double d3, double d4, double d5, double d6, double d7, double d8, int i6, fake_big_t big)
{
	double s = d0 + 2 * f1 + 3 * d2 + 5 * d3 + 7 * d4 + 11 * d5 + 13 * d6 + 17 * d7 + 19 * d8;
	long n = i0 + 2 * i1 + 3 * i2 + 5 * i3 + 7 * i4 + 11 * i5 + 13 * i6;
	for (int k = 0; k < 12; k++)
		n += (k + 1) * big.a[k];
	return (int)(s * 1000) + (int)n;
}

int main(void)
{
	fake_big_t big;
	for (int k = 0; k < 12; k++)
		big.a[k] = 100 * k + 7;
	int fails = 0;
	for (int round = 0; round < 3; round++) { /* the first call takes the resolving path */
		int want = expected(1.5, 2.25f, 3, 4, 5, 6, 7, 8, 9.5, 10.5, 11.5, 12.5, 13.5, 14.5, 15.5,
				    16 + round, big);
		int got = cuMemGetAttribute(1.5, 2.25f, 3, 4, 5, 6, 7, 8, 9.5, 10.5, 11.5, 12.5, 13.5, 14.5,
					    15.5, 16 + round, big);
		printf("round %d: 17 arguments (9 in vector registers, 1 struct on the stack): %d, expected "
		       "%d\n",
		       round, got, want);
		fails += got != want;
	}
	unsigned count = 0;
	int dev[1] = {0};
	int rc = cuGLGetDevices_v2(&count, dev, 4, 3);
	printf("cuGLGetDevices_v2: rc=%d count=%u dev=%d (expected 0 5 30)\n", rc, count, dev[0]);
	fails += rc != 0 || count != 5 || dev[0] != 30;
	rc = cuGLInit(); /* the fake driver lacks it */
	printf("cuGLInit (missing beneath): %d, expected %d (CUDA_ERROR_NOT_SUPPORTED)\n", rc, 801);
	fails += rc != 801;
	printf("%s\n", fails ? "FAILED" : "ok");
	return fails != 0;
}
