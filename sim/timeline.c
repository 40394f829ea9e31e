/* The simulator's recorded timeline (gmx_sim_config_t.timeline): the commands as they ran, and
 * what happened to each task besides (waits, stalls for pages, migrations), for charts. */
#include <errno.h>
#include <stdlib.h>

#include "engine_internal.h"

/* Appends a span to the recorded timeline; a migration that starts before the task's previous
 * one of the same direction has ended extends it (one bar per burst, not one per chunk). */
void gmx_sim__record(sim_t *s, gmx_sim_span_t sp)
{
	gmx_sim_timeline_t *tl = s->cfg->timeline;
	if (tl->until_ns && sp.start_ns > tl->until_ns)
		return;
	if (sp.kind == GMX_SPAN_MIG_IN || sp.kind == GMX_SPAN_MIG_OUT) {
		int64_t *last = &s->mig_last[sp.task][sp.kind == GMX_SPAN_MIG_OUT];
		if (*last > 0 && *last - 1 < (int64_t)tl->n && tl->spans[*last - 1].end_ns >= sp.start_ns) {
			tl->spans[*last - 1].end_ns += sp.end_ns - sp.start_ns;
			return;
		}
		*last = (int64_t)tl->n + 1;
	}
	if (tl->limit && tl->n >= tl->limit)
		return;
	if (tl->n == tl->cap) {
		uint64_t ncap = tl->cap ? tl->cap * 2 : 4096;
		gmx_sim_span_t *p = realloc(tl->spans, ncap * sizeof(*p));
		if (!p) {
			gmx_sim__fail(s, -ENOMEM, "out of memory for the timeline");
			return;
		}
		tl->spans = p;
		tl->cap = ncap;
	}
	tl->spans[tl->n++] = sp;
}

void gmx_sim__record_cmd(sim_t *s, const scmd_t *x)
{
	gmx_sim__record(s, (gmx_sim_span_t){.task = x->c.task,
					    .op = x->op_index,
					    .unit = x->unit,
					    .stream = x->c.stream,
					    .kind = x->c.kind,
					    .start_ns = x->seg_start, /* since its last resumption */
					    .end_ns = s->now});
}

/* The memory space decided a migration of `bytes` of task's memory at `now`. */
void gmx_sim__note_migration(void *ctx, uint32_t task, int out, uint64_t bytes, int64_t now)
{
	sim_t *s = ctx;
	double gbps = out ? s->dev->link_out_gbps : s->dev->link_in_gbps;
	gmx_sim__record(s, (gmx_sim_span_t){.task = task,
					    .kind = out ? GMX_SPAN_MIG_OUT : GMX_SPAN_MIG_IN,
					    .stream = -1,
					    .start_ns = now,
					    .end_ns = now + (int64_t)((double)bytes / gbps) + 1});
}

void gmx_sim__record_for(sim_t *s, const scmd_t *x, int kind, int64_t from, int64_t to)
{
	if (s->cfg->timeline)
		gmx_sim__record(s, (gmx_sim_span_t){.task = x->c.task,
						    .op = x->op_index,
						    .unit = x->unit,
						    .stream = x->c.stream,
						    .kind = (uint8_t)kind,
						    .start_ns = from,
						    .end_ns = to});
}
