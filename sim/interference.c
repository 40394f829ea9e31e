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
 * barely slow each other: the complementarity Orion's profiles exploit.
 *
 * When the tasks run on prioritised streams (fikit, streamprio), the block
 * scheduler hands free SMs to the better priority first: each priority level
 * gets its demand out of what better levels left, a kernel's SM pressure is
 * its demand over the share it got, and its bandwidth use shrinks with the
 * SMs it holds. A running lower kernel's resident blocks are not evicted; the
 * wait for them to drain (one block's time) is not modelled. */
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
/* With prioritised blocks, the least fraction of its demanded SMs a lower
 * kernel keeps (blocks already resident drain; new ones wait). */
#define MIN_SHARE 0.05

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

/* With prioritised thread blocks, a kernel gets SMs only after every better
 * priority has taken what it needs: its effective share is its demand scaled
 * by what its level could get. */
static double effective_share(const gmx_kernel_load_t *k, uint32_t n, uint32_t i, uint32_t sms)
{
	double above = 0, level = 0;
	for (uint32_t j = 0; j < n; j++) {
		if (k[j].priority < k[i].priority)
			above += sm_share(&k[j], sms);
		else if (k[j].priority == k[i].priority)
			level += sm_share(&k[j], sms);
	}
	double left = above < 1 ? 1 - above : 0;
	double g = level > left ? left / level : 1;
	return sm_share(&k[i], sms) * g;
}

static double slowdown(const gmx_kernel_load_t *k, uint32_t n, uint32_t i, uint32_t sms, int prioritized)
{
	int mixed = 0;
	double p = 0, b = 0;
	for (uint32_t j = 0; j < n; j++) {
		mixed |= k[j].task != k[i].task;
		if (prioritized) {
			/* Bandwidth follows the SMs a kernel actually holds. */
			double e = effective_share(k, n, j, sms);
			b += bw_share(&k[j], sms) * (e / sm_share(&k[j], sms));
		} else {
			p += sm_share(&k[j], sms);
			b += bw_share(&k[j], sms);
		}
	}
	if (prioritized) {
		/* SM pressure: how far short of its demand the kernel's share falls
		 * (a kernel left with almost nothing runs at MIN_SHARE of it). */
		double e = effective_share(k, n, i, sms), d = sm_share(&k[i], sms);
		p = d / (e > MIN_SHARE * d ? e : MIN_SHARE * d);
	}
	if (!mixed)
		return 1.0;
	double f;
	if (prioritized) {
		/* Short of SMs, any kernel slows by its shortfall; bandwidth is
		 * shared by what the kernels' SMs can draw. */
		f = k[i].klass == GMX_CLASS_COMPUTE ? max2(p, 1 + CROSS * (b - 1)) : max2(p, b);
		return max2(f, 1.0) * (1 + COLOCATION);
	}
	if (k[i].klass == GMX_CLASS_COMPUTE)
		f = max2(p, 1 + CROSS * (b - 1));
	else if (k[i].klass == GMX_CLASS_MEMORY)
		f = max2(b, 1 + CROSS * (p - 1));
	else
		f = max2(p, b);
	return max2(f, 1.0) * (1 + COLOCATION);
}

double gmx_interference_slowdown(const gmx_kernel_load_t *k, uint32_t n, uint32_t i, uint32_t sms)
{
	return slowdown(k, n, i, sms, 0);
}

double gmx_interference_slowdown_prioritized(const gmx_kernel_load_t *k, uint32_t n, uint32_t i, uint32_t sms)
{
	return slowdown(k, n, i, sms, 1);
}
