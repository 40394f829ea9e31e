/* A fake driver for the trampoline test: functions cuda.h gives no prototype, defined here
 * with arguments in every kind of place (integer and vector registers, the stack). */
#ifndef GMX_FAKEDRV_H
#define GMX_FAKEDRV_H

typedef struct {
	long a[12]; /* 96 bytes: passed on the stack */
} fake_big_t;

/* Returns a checksum of every argument; records the call count. */
int cuMemGetAttribute(double d0, float f1, int i0, long i1, int i2, long i3, int i4, long i5, double d2,
		      double d3, double d4, double d5, double d6, double d7, double d8, int i6,
		      fake_big_t big);
int cuGLGetDevices_v2(unsigned *count, int *devices, unsigned max, int list);

#endif
