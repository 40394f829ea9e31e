/*
 * The stand-in engine's timeline (see engine.h for the model): the stream-order rules, the
 * zero-time commands completed at their stream heads, and the one timed command at a time,
 * processes taking turns in time slices. The shared file, its lock and the calls are engine.c's.
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

void si__advance(int64_t now)
{
	if (now - si__shm->last_reap > 20000000LL) {
		si__shm->last_reap = now;
		si__reap_dead();
	}
	for (int guard = 0; guard < 100000; guard++) {
		settle(si__shm->gpu_t);
		if (si__shm->run_slot >= 0) {
			if (si__shm->run_end > now)
				return;
			si_slot_t *s = &si__shm->slots[si__shm->run_slot];
			si_cmd_t *c = &s->cmds[si__shm->run_cmd];
			si__log_cmd(si__shm->run_slot, c, si__shm->run_end - c->dur_ns, si__shm->run_end);
			si__shm->gpu_t = si__shm->run_end;
			si__shm->run_slot = -1;
			si__pop_head(s, c->stream, si__shm->gpu_t);
			continue;
		}
		/* Earliest time any runnable timed command could start. */
		int64_t t0 = INT64_MAX;
		for (int i = 0; i < si__shm->hi; i++) {
			si_slot_t *s = &si__shm->slots[i];
			if (!s->in_use)
				continue;
			for (int k = 0; k < s->nstreams; k++) {
				int h = s->streams[k].head;
				if (h < 0)
					continue;
				si_cmd_t *c = &s->cmds[h];
				if ((c->kind != SI_K_KERNEL && c->kind != SI_K_COPY) || c->submit_ns > now ||
				    !si__eligible(s, c))
					continue;
				int64_t a = c->submit_ns > si__shm->gpu_t ? c->submit_ns : si__shm->gpu_t;
				if (a < t0)
					t0 = a;
			}
		}
		if (t0 == INT64_MAX) {
			if (si__shm->gpu_t < now)
				si__shm->gpu_t = now;
			return;
		}
		/* Time slicing: the current process keeps the GPU until its slice ends; then the next
		 * process (round robin) with runnable work. Oldest command first within a process. */
		int pick_slot = -1, pick_cmd = -1;
		for (int n = 0; n <= si__shm->hi && pick_slot < 0; n++) {
			int i;
			if (n == 0) {
				if (si__shm->cur_slot < 0 || t0 - si__shm->slice_start >= si__shm->slice_ns)
					continue;
				i = si__shm->cur_slot;
			} else {
				i = ((si__shm->cur_slot < 0 ? -1 : si__shm->cur_slot) + n) % si__shm->hi;
			}
			si_slot_t *s = &si__shm->slots[i];
			if (!s->in_use)
				continue;
			uint64_t best = UINT64_MAX;
			for (int k = 0; k < s->nstreams; k++) {
				int h = s->streams[k].head;
				if (h < 0)
					continue;
				si_cmd_t *c = &s->cmds[h];
				if ((c->kind == SI_K_KERNEL || c->kind == SI_K_COPY) && c->submit_ns <= t0 &&
				    c->gseq < best && si__eligible(s, c)) {
					best = c->gseq;
					pick_slot = i;
					pick_cmd = h;
				}
			}
		}
		if (pick_slot < 0)
			return; /* cannot happen: t0 had a candidate */
		if (pick_slot != si__shm->cur_slot || t0 - si__shm->slice_start >= si__shm->slice_ns) {
			si__shm->cur_slot = pick_slot;
			si__shm->slice_start = t0;
		}
		si__shm->run_slot = pick_slot;
		si__shm->run_cmd = pick_cmd;
		si__shm->run_end = t0 + si__shm->slots[pick_slot].cmds[pick_cmd].dur_ns;
		si__shm->gpu_t = t0;
	}
}
