/* A fake libcuda for tests/shim/trampoline.c (see fakedrv.h). */
#include "fakedrv.h"

int cuInit(unsigned flags);
int cuInit(unsigned flags)
{
	return (int)flags;
}

int cuMemGetAttribute(double d0, float f1, int i0, long i1, int i2, long i3, int i4, long i5, double d2,
		      double d3, double d4, double d5, double d6, double d7, double d8, int i6,
		      fake_big_t big)
{
	double s = d0 + 2 * f1 + 3 * d2 + 5 * d3 + 7 * d4 + 11 * d5 + 13 * d6 + 17 * d7 + 19 * d8;
	long n = i0 + 2 * i1 + 3 * i2 + 5 * i3 + 7 * i4 + 11 * i5 + 13 * i6;
	for (int k = 0; k < 12; k++)
		n += (k + 1) * big.a[k];
	return (int)(s * 1000) + (int)n;
}

int cuGLGetDevices_v2(unsigned *count, int *devices, unsigned max, int list)
{
	*count = max + 1;
	devices[0] = list * 10;
	return 0;
}
