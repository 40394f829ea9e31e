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
