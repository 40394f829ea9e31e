/*
 * TSC ticks to nanoseconds for the leased path's clock (gmx_dl_stamp_ns): pure, no clock read, so
 * that it is unit-tested alone (tests/shim/test_stamp_scale.c). The fitted rate is kept as a
 * 32.32 fixed-point factor: a tick count becomes nanoseconds in a multiply and a shift, where the
 * double's int-to-float, multiply and float-to-int conversions form a chain of ~15 cycles on
 * every leased release.
 */
#ifndef GMX_SHIM_STAMP_H
#define GMX_SHIM_STAMP_H

#include <stdint.h>

#define GMX_STAMP_FRAC_BITS 32

typedef struct {
	uint64_t mult;	    /* ns per tick << GMX_STAMP_FRAC_BITS, rounded */
	uint64_t max_ticks; /* a span of fewer ticks converts to less than the span asked for */
} gmx_stamp_scale_t;

/* Nanoseconds in dt ticks at s's rate; dt < s's max_ticks (the product then stays far below 2^64). */
static inline int64_t gmx_stamp_ticks_ns(uint64_t dt, uint64_t mult)
{
	return (int64_t)((dt * mult) >> GMX_STAMP_FRAC_BITS);
}

/* The factor for ns_per_tick and the ticks below which a conversion is under span_ns (so that
 * dt < max_ticks is the whole check of a reading's age). 0, or -1 for a rate outside
 * [2^-16, 2^16] ns per tick or a span outside (0, 2^30] ns (the caller then reads the clock). */
static inline int gmx_stamp_scale(double ns_per_tick, int64_t span_ns, gmx_stamp_scale_t *s)
{
	if (!(ns_per_tick >= 1.0 / 65536.0 && ns_per_tick <= 65536.0) || span_ns <= 0 || span_ns > (1 << 30))
		return -1;
	s->mult = (uint64_t)(ns_per_tick * (double)(1ull << GMX_STAMP_FRAC_BITS) + 0.5);
	/* The first dt that converts to span_ns or more: the estimate, then corrected by the
	 * rounding of mult (a few steps at most). With these bounds max_ticks * mult < 2^63. */
	uint64_t t = (uint64_t)((double)span_ns / ns_per_tick);
	while (t > 0 && gmx_stamp_ticks_ns(t - 1, s->mult) >= span_ns)
		t--;
	while (gmx_stamp_ticks_ns(t, s->mult) < span_ns)
		t++;
	s->max_ticks = t;
	return 0;
}

#endif
