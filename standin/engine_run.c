/*
 * The stand-in engine's timeline (see engine.h for the model): the stream-order rules, the
 * zero-time commands completed at their stream heads, and the engines' timed commands (the
 * compute engine's processes taking turns in time slices; copy engines beside it). The shared
 * file, its lock and the calls are engine.c's.
 */
#include "engine_internal.h"

#include <stdint.h>

int si__eligible(const si_slot_t *s, const si_cmd_t *c)
{
	const si_stream_t *st = &s->streams[c->stream];
	if (st->kind == SI_S_NONBLOCKING)
		return 1;
	for (int i = 0; i < s->nstreams; i++) {
		const si_stream_t *o = &s->streams[i];
		if (i == c->stream || o->kind == 0 || o->ctx != st->ctx || o->head < 0)
			continue;
		int blocks = (st->kind == SI_S_LEGACY && o->kind == SI_S_BLOCKING) ||
			     (st->kind == SI_S_BLOCKING && o->kind == SI_S_LEGACY);
		if (blocks && s->cmds[o->head].gseq < c->gseq)
			return 0;
	}
	return 1;
}

void si__pop_head(si_slot_t *s, int si, int64_t t)
{
	si_stream_t *st = &s->streams[si];
	int ci = st->head;
	si_cmd_t *c = &s->cmds[ci];
	st->done = c->sseq;
	st->head = c->next;
	if (st->head < 0)
		st->tail = -1;
	if (c->kind == SI_K_RECORD && c->event >= 0 && c->event < SI_EVENTS)
		s->events[c->event].time_ns = t;
	c->state = C_FREE;
	c->next = s->free_head;
	s->free_head = ci;
}

/* Completes zero-time commands at stream heads at time t; returns nonzero on progress. */
static int settle(int64_t t)
{
	int progress = 0;
	for (int i = 0; i < si__shm->hi; i++) {
		si_slot_t *s = &si__shm->slots[i];
		if (!s->in_use)
			continue;
		for (int k = 0; k < s->nstreams; k++) {
			si_stream_t *st = &s->streams[k];
			while (st->head >= 0) {
				si_cmd_t *c = &s->cmds[st->head];
				if (c->kind == SI_K_KERNEL || c->kind == SI_K_COPY || c->kind == SI_K_HOSTFN)
					break;
				if (!si__eligible(s, c))
					break;
				if (c->kind == SI_K_WAIT) {
					const si_stream_t *w = &s->streams[c->wait_stream];
					if (w->kind != 0 && w->done < c->wait_seq)
						break;
				}
				int64_t when = c->submit_ns > t ? c->submit_ns : t;
				si__log_cmd(i, c, when, when);
				si__pop_head(s, k, when);
				progress = 1;
			}
		}
	}
	return progress;
}

static int timed(const si_cmd_t *c)
{
	return c->kind == SI_K_KERNEL || c->kind == SI_K_COPY;
}

/* May command c (a stream head of slot s) start on engine e by time t? */
static int startable(const si_slot_t *s, const si_cmd_t *c, int e, int64_t t)
{
	return timed(c) && c->state == C_PENDING && c->engine == e && c->submit_ns <= t && si__eligible(s, c);
}

/* The startable head for engine e at time t submitted first (ties: the lower slot, then the
 * older command): its slot (its command in *cmd), or -1. A copy engine takes this one (it is
 * not time sliced here: copies go in the order they were submitted, whatever process). */
static int first_head(int e, int64_t t, int *cmd)
{
	int slot = -1;
	int64_t best = INT64_MAX;
	uint64_t best_gseq = UINT64_MAX;
	for (int i = 0; i < si__shm->hi; i++) {
		const si_slot_t *s = &si__shm->slots[i];
		if (!s->in_use)
			continue;
		for (int k = 0; k < s->nstreams; k++) {
			int h = s->streams[k].head;
			if (h < 0 || !startable(s, &s->cmds[h], e, t))
				continue;
			const si_cmd_t *c = &s->cmds[h];
			if (c->submit_ns < best ||
			    (c->submit_ns == best && slot == i && c->gseq < best_gseq)) {
				best = c->submit_ns;
				best_gseq = c->gseq;
				slot = i;
				*cmd = h;
			}
		}
	}
	return slot;
}

/* The earliest time (>= gpu_t) a command could start on engine e, or INT64_MAX. */
static int64_t earliest_start(int e, int64_t now)
{
	int cmd = -1;
	int slot = first_head(e, now, &cmd);
	if (slot < 0)
		return INT64_MAX;
	int64_t sub = si__shm->slots[slot].cmds[cmd].submit_ns;
	return sub > si__shm->gpu_t ? sub : si__shm->gpu_t;
}

/* The compute engine's pick at t0: the current process keeps the engine until its slice
 * ends; then the next process (round robin) with runnable work. Oldest command first within
 * a process. Returns the slot (its command in *cmd), or -1. */
static int pick_compute(int64_t t0, int *cmd)
{
	for (int n = 0; n <= si__shm->hi; n++) {
		int i;
		if (n == 0) {
			if (si__shm->cur_slot < 0 || t0 - si__shm->slice_start >= si__shm->slice_ns)
				continue;
			i = si__shm->cur_slot;
		} else {
			i = ((si__shm->cur_slot < 0 ? -1 : si__shm->cur_slot) + n) % si__shm->hi;
		}
		const si_slot_t *s = &si__shm->slots[i];
		if (!s->in_use)
			continue;
		uint64_t best = UINT64_MAX;
		for (int k = 0; k < s->nstreams; k++) {
			int h = s->streams[k].head;
			if (h >= 0 && startable(s, &s->cmds[h], 0, t0) && s->cmds[h].gseq < best) {
				best = s->cmds[h].gseq;
				*cmd = h;
			}
		}
		if (best != UINT64_MAX) {
			if (i != si__shm->cur_slot || t0 - si__shm->slice_start >= si__shm->slice_ns) {
				si__shm->cur_slot = i;
				si__shm->slice_start = t0;
			}
			return i;
		}
	}
	return -1;
}

int64_t si__next_end(void)
{
	int64_t end = -1;
	for (int e = 0; e <= si__shm->copy_engines; e++)
		if (si__shm->run_slot[e] >= 0 && (end < 0 || si__shm->run_end[e] < end))
			end = si__shm->run_end[e];
	return end;
}

void si__drop_running(int slot)
{
	for (int e = 0; e < SI_ENGINES; e++) {
		int r = si__shm->run_slot[e];
		if (r < 0)
			continue;
		if (slot >= 0 ? r == slot
			      : !si__shm->slots[r].in_use ||
				    si__shm->slots[r].cmds[si__shm->run_cmd[e]].state != C_RUNNING)
			si__shm->run_slot[e] = -1;
	}
	if (slot >= 0)
		return;
	/* A command marked running that no engine runs (its engine was cleared just before it
	 * ended) starts again rather than wedging its stream. */
	for (int i = 0; i < si__shm->hi; i++) {
		si_slot_t *s = &si__shm->slots[i];
		for (int k = 0; s->in_use && k < s->nstreams; k++) {
			int h = s->streams[k].head;
			if (h < 0 || s->cmds[h].state != C_RUNNING)
				continue;
			int held = 0;
			for (int e = 0; e < SI_ENGINES; e++)
				held |= si__shm->run_slot[e] == i && si__shm->run_cmd[e] == h;
			if (!held)
				s->cmds[h].state = C_PENDING;
		}
	}
}

/* Ends the command running on engine e at its end time. */
static void finish(int e)
{
	si_slot_t *s = &si__shm->slots[si__shm->run_slot[e]];
	si_cmd_t *c = &s->cmds[si__shm->run_cmd[e]];
	si__log_cmd(si__shm->run_slot[e], c, si__shm->run_end[e] - c->dur_ns, si__shm->run_end[e]);
	si__shm->gpu_t = si__shm->run_end[e];
	si__shm->run_slot[e] = -1;
	si__pop_head(s, c->stream, si__shm->gpu_t);
}

/* The timeline is a discrete-event simulation: the earliest of the engines' next events (a
 * running command's end; an idle engine's next start) is taken first, ends before starts at
 * the same instant so that a stream's next command may start when its predecessor ends. */
void si__advance(int64_t now)
{
	if (now - si__shm->last_reap > 20000000LL) {
		si__shm->last_reap = now;
		si__reap_dead();
	}
	int engines = 1 + si__shm->copy_engines;
	for (int guard = 0; guard < 100000; guard++) {
		settle(si__shm->gpu_t);
		int end_e = -1, start_e = -1;
		int64_t t_end = INT64_MAX, t_start = INT64_MAX;
		for (int e = 0; e < engines; e++) {
			if (si__shm->run_slot[e] >= 0) {
				if (si__shm->run_end[e] < t_end) {
					t_end = si__shm->run_end[e];
					end_e = e;
				}
				continue;
			}
			int64_t t = earliest_start(e, now);
			if (t < t_start) {
				t_start = t;
				start_e = e;
			}
		}
		if (end_e >= 0 && t_end <= now && t_end <= t_start) {
			finish(end_e);
			continue;
		}
		if (start_e < 0 || t_start > now) {
			if (end_e < 0 && si__shm->gpu_t < now)
				si__shm->gpu_t = now;
			return;
		}
		int cmd = -1;
		int slot = start_e == 0 ? pick_compute(t_start, &cmd) : first_head(start_e, t_start, &cmd);
		if (slot < 0)
			return; /* cannot happen: t_start had a candidate */
		si_cmd_t *c = &si__shm->slots[slot].cmds[cmd];
		si__shm->run_cmd[start_e] = cmd;
		si__shm->run_end[start_e] = t_start + c->dur_ns;
		si__shm->run_slot[start_e] = slot;
		c->state = C_RUNNING;
		si__shm->gpu_t = t_start;
	}
}
