/* The combined policy's decisions (gpumux/combined.h, docs/combined.md). */
#include "gpumux/combined.h"

#include <math.h>

int gmx_comb_may_evict(int victim_prio, int for_prio)
{
	return victim_prio >= for_prio;
}

uint64_t gmx_comb_evict_key(int victim_prio, int for_prio, uint32_t rank)
{
	/* Worse priorities first (the worst first), then the later needed first. */
	uint64_t level = victim_prio > for_prio ? (uint64_t)(9 - victim_prio) : 10u;
	return (level << 32) | (uint32_t)(UINT32_MAX - rank);
}

int64_t gmx_comb_link_ns(uint64_t bytes, double link_gbps)
{
	if (!bytes)
		return 0;
	if (!(link_gbps > 0))
		return INT64_MAX;
	return (int64_t)ceil((double)bytes / link_gbps);
}

int gmx_comb_prefetch_ahead(uint64_t least_bytes, int64_t gpu_ns, double link_gbps)
{
	/* Loading early evicts chunks needed sooner than a load on time would and adds bytes;
	 * only a link idle half the time gains more than that costs. */
	int64_t link = gmx_comb_link_ns(least_bytes, link_gbps);
	return link < INT64_MAX / 2 && 2 * link < gpu_ns;
}

uint32_t gmx_comb_prefetch_cmds(const gmx_comb_coming_t *c, uint32_t n, uint64_t cur_bytes, int64_t cur_ns,
				uint64_t room_bytes, double link_gbps, uint32_t *next_cmds)
{
	/* Each window's end (in commands), fresh and missing bytes, and GPU time. */
	uint32_t end[GMX_COMB_AHEAD_WINDOWS_MAX];
	uint64_t fresh[GMX_COMB_AHEAD_WINDOWS_MAX], miss[GMX_COMB_AHEAD_WINDOWS_MAX];
	int64_t run[GMX_COMB_AHEAD_WINDOWS_MAX];
	uint64_t win = room_bytes / 4, all = cur_bytes;
	int64_t gpu = cur_ns > 0 ? cur_ns : 0;
	uint32_t nw = 0;
	if (next_cmds)
		*next_cmds = 0;
	for (uint32_t i = 0; i < n; i++) {
		if (nw == 0 || (fresh[nw - 1] > 0 && fresh[nw - 1] + c[i].fresh_bytes > win)) {
			if (nw == GMX_COMB_AHEAD_WINDOWS_MAX)
				break;
			fresh[nw] = miss[nw] = 0;
			run[nw] = 0;
			nw++;
		}
		fresh[nw - 1] += c[i].fresh_bytes;
		miss[nw - 1] += c[i].missing_bytes;
		run[nw - 1] += c[i].run_ns > 0 ? c[i].run_ns : 0;
		end[nw - 1] = i + 1;
		all += c[i].fresh_bytes;
		gpu += c[i].run_ns > 0 ? c[i].run_ns : 0;
	}
	if (nw == 0)
		return 0;
	if (next_cmds)
		*next_cmds = end[0];
	int spare = gmx_comb_prefetch_ahead(all > room_bytes ? all - room_bytes : 0, gpu, link_gbps);
	if (!spare)
		return end[0];
	/* Forestall's latest start of each window, from the last one back: the earlier of its own
	 * start and the next window's latest start, less the link time of its missing bytes. Kept
	 * in run[] (a window's run is needed only for the starts after it, summed first). */
	int64_t start = cur_ns > 0 ? cur_ns : 0, latest = INT64_MAX;
	for (uint32_t w = 0; w < nw; w++) {
		int64_t r = run[w];
		run[w] = start;
		start = start > INT64_MAX - r ? INT64_MAX : start + r;
	}
	for (uint32_t w = nw; w-- > 0;) {
		int64_t by = run[w] < latest ? run[w] : latest, load = gmx_comb_link_ns(miss[w], link_gbps);
		latest = by > INT64_MIN / 2 + load ? by - load : INT64_MIN / 2;
		run[w] = latest;
	}
	uint64_t used = cur_bytes + fresh[0];
	uint32_t w = 1;
	for (; w < nw; w++) {
		if (run[w] > (cur_ns > 0 ? cur_ns : 0) || used + fresh[w] > room_bytes)
			break; /* a later call can still start it in time, or it does not fit */
		used += fresh[w];
	}
	return end[w - 1];
}

int gmx_comb_admit(int64_t gap_ns, int64_t run_ns, int64_t load_ns, int64_t switch_ns)
{
	if (gap_ns == INT64_MAX)
		return 1;
	if (gap_ns < 0 || run_ns < 0 || load_ns < 0 || load_ns == INT64_MAX)
		return 0;
	return run_ns + load_ns + 2 * switch_ns <= gap_ns;
}

uint64_t gmx_comb_piece_bytes(double link_gbps, int64_t max_wait_ns)
{
	double b = link_gbps * (double)(max_wait_ns > 0 ? max_wait_ns : 0);
	uint64_t chunks = (uint64_t)(b / (double)GMX_COMB_PIECE_BYTES_MIN);
	return (chunks ? chunks : 1) * GMX_COMB_PIECE_BYTES_MIN;
}

int64_t gmx_comb_migration_start(int prio, int hp_level, int64_t now, int64_t piece_end, int64_t backlog_end)
{
	int64_t after = prio <= hp_level ? piece_end : backlog_end;
	return after > now ? after : now;
}

int64_t gmx_comb_lp_slice(const int64_t *target_ns, uint32_t n_lp, int64_t lo_ns, int64_t hi_ns)
{
	int64_t s = hi_ns;
	for (uint32_t i = 0; i < n_lp; i++)
		if (target_ns[i] > 0 && target_ns[i] / n_lp < s)
			s = target_ns[i] / n_lp;
	return s < lo_ns ? lo_ns : s > hi_ns ? hi_ns : s;
}

/* The gap an arrival leaves after the HP task's busy time. */
static int64_t left_gap(const gmx_comb_arrivals_t *a, uint32_t i)
{
	int64_t g = a->interarrival_ns[i] - (a->busy_ns > 0 ? a->busy_ns : 0);
	return g > 0 ? g : 0;
}

int64_t gmx_comb_gap_prior(const gmx_comb_arrivals_t *a, int64_t idle_ns, double q)
{
	if (!a)
		return -1;
	if (q < 0)
		q = 0;
	if (q > 0.999999)
		q = 0.999999;
	if (a->rate_per_s > 0)
		return (int64_t)(-log1p(-q) / a->rate_per_s * 1e9);
	if (!a->interarrival_ns || !a->n_interarrival)
		return -1;
	/* The k-th smallest of the gaps longer than idle_ns, by bisection on its value (no copy:
	 * a trace may be long, and this stays allocation-free). */
	uint64_t m = 0;
	int64_t hi = idle_ns;
	for (uint32_t i = 0; i < a->n_interarrival; i++) {
		int64_t g = left_gap(a, i);
		if (g > idle_ns) {
			m++;
			hi = g > hi ? g : hi;
		}
	}
	if (!m)
		return INT64_MAX;
	uint64_t k = (uint64_t)(q * (double)m); /* 0-based rank among them */
	int64_t lo = idle_ns;			/* count(<= lo) <= k; count(<= hi) > k */
	while (hi - lo > 1) {
		int64_t mid = lo + (hi - lo) / 2;
		uint64_t c = 0;
		for (uint32_t i = 0; i < a->n_interarrival; i++) {
			int64_t g = left_gap(a, i);
			c += g > idle_ns && g <= mid;
		}
		if (c > k)
			hi = mid;
		else
			lo = mid;
	}
	return hi - idle_ns;
}

int64_t gmx_comb_slice_rule(int64_t cap_ns, double (*migration_s)(void *ctx, int64_t horizon_ns), void *ctx)
{
	int64_t cap = cap_ns < GMX_COMB_SLICE_NS_MIN ? GMX_COMB_SLICE_NS_MIN : cap_ns;
	int64_t sl = cap;
	for (int round = 0; round < 2; round++) {
		int64_t want = (int64_t)(migration_s(ctx, sl) * 1e9 / GMX_COMB_MIGRATION_SHARE);
		sl = want < GMX_COMB_SLICE_NS_MIN ? GMX_COMB_SLICE_NS_MIN : want > cap ? cap : want;
	}
	return sl;
}
