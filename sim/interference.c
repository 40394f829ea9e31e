/* The MPS interference model. Each running kernel claims a share of the SMs,
 * s = min(1, sm_demand / SMs) (unknown demand: the whole device), and of the
 * memory bandwidth, b = s x BW_SHARE[class]. When kernels of more than one
 * task run together:
 *   SM pressure P = sum of s, bandwidth pressure B = sum of b (over all of them);
 *   a compute-bound kernel slows by max(P, 1 + CROSS (B - 1)),
 *   a memory-bound kernel by max(B, 1 + CROSS (P - 1)),
 *   a kernel of unknown class by max(P, B),
 * each floored at 1, times (1 + COLOCATION) for the caches and TLBs they share.
 * So two full-device kernels of the same class each run at about half speed,
 * while a compute-bound and a memory-bound kernel that fit side by side
 * barely slow each other: the complementarity Orion's profiles exploit. */
#include "interference.h"

#include "gpumux/workload.h"

/* Share of a kernel's SMs' worth of bandwidth it uses, by class (Orion's
 * profiles: memory-bound kernels saturate bandwidth, compute-bound ones use
 * little). */
#define BW_SHARE_MEMORY 1.0
#define BW_SHARE_COMPUTE 0.3
#define BW_SHARE_UNKNOWN 0.6
/* How much the pressure on the resource a kernel does not depend on still slows it. */
#define CROSS 0.25
/* Shared L2, TLB and scheduler: the slowdown of any co-location. */
#define COLOCATION 0.05

static double sm_share(const gmx_kernel_load_t *k, uint32_t sms)
{
	if (!k->sm_demand || !sms || k->sm_demand >= sms)
		return 1.0;
	return (double)k->sm_demand / (double)sms;
}

static double bw_share(const gmx_kernel_load_t *k, uint32_t sms)
{
	double f = k->klass == GMX_CLASS_MEMORY ? BW_SHARE_MEMORY : k->klass == GMX_CLASS_COMPUTE ? BW_SHARE_COMPUTE
												   : BW_SHARE_UNKNOWN;
	return sm_share(k, sms) * f;
}

static double max2(double a, double b)
{
	return a > b ? a : b;
}

double gmx_interference_slowdown(const gmx_kernel_load_t *k, uint32_t n, uint32_t i, uint32_t sms)
{
	int mixed = 0;
	double p = 0, b = 0;
	for (uint32_t j = 0; j < n; j++) {
		mixed |= k[j].task != k[i].task;
		p += sm_share(&k[j], sms);
		b += bw_share(&k[j], sms);
	}
	if (!mixed)
		return 1.0;
	double f;
	if (k[i].klass == GMX_CLASS_COMPUTE)
		f = max2(p, 1 + CROSS * (b - 1));
	else if (k[i].klass == GMX_CLASS_MEMORY)
		f = max2(b, 1 + CROSS * (p - 1));
	else
		f = max2(p, b);
	return max2(f, 1.0) * (1 + COLOCATION);
}
