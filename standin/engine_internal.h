/*
 * The stand-in engine's internals, shared by engine.c (the shared file, its lock, the process
 * slots and the calls of engine.h) and engine_run.c (the simulated GPU's timeline: which
 * command runs when). Not a public interface; see engine.h for the model.
 */
#ifndef GMX_STANDIN_ENGINE_INTERNAL_H
#define GMX_STANDIN_ENGINE_INTERNAL_H

#include "engine.h"

#include <pthread.h>
#include <stdint.h>

typedef struct {
	int32_t kind, stream, state, next;
	int32_t event, wait_stream;
	int32_t engine, pad; /* 0 compute, 1..copy_engines a copy engine */
	uint64_t sseq, gseq, wait_seq, bytes;
	int64_t dur_ns, submit_ns;
	uint64_t hostfn, user;
	char name[SI_NAME];
} si_cmd_t;

enum { C_FREE, C_PENDING, C_HOST_RUNNING, C_RUNNING };

#define SI_ENGINES (1 + SI_COPY_MAX)

typedef struct {
	int32_t kind, ctx, head, tail;
	uint64_t submitted, done;
} si_stream_t;

typedef struct {
	int32_t in_use, stream;
	uint64_t seq;
	int64_t time_ns;
} si_event_t;

typedef struct {
	int32_t pid, in_use, free_head, nstreams;
	uint64_t gseq, mem_bytes;
	si_stream_t streams[SI_STREAMS];
	si_event_t events[SI_EVENTS];
	si_cmd_t cmds[SI_CMDS];
} si_slot_t;

typedef struct {
	uint64_t magic, version;
	pthread_mutex_t lock;
	/* gpu_t: the time of the timeline's last event; each engine runs one command at a time
	 * (run_slot -1: idle), engine 0 computing, 1..copy_engines copying. */
	int64_t gpu_t, slice_ns, slice_start, last_reap;
	int64_t run_end[SI_ENGINES];
	int32_t run_slot[SI_ENGINES], run_cmd[SI_ENGINES];
	int32_t cur_slot, copy_engines;
	int32_t hi; /* one past the highest slot in use: every scan stops there */
	uint64_t mem_total;
	si_slot_t slots[SI_SLOTS];
} si_shm_t;

/* The shared file, mapped (NULL before si_engine_attach). */
extern si_shm_t *si__shm;

/* Frees the slots of processes that no longer exist; drops their running commands. Lock held. */
void si__reap_dead(void);

/* Drops the commands of slot `slot` running on any engine (slot < 0: those whose command is no
 * longer C_RUNNING in a slot in use). Lock held. */
void si__drop_running(int slot);

/* The earliest end of a running command (ns), or -1 when every engine is idle. Lock held. */
int64_t si__next_end(void);

/* Appends command c of slot `slot`, run from start to end (ns), to GPUMUX_STANDIN_LOG if set. */
void si__log_cmd(int slot, const si_cmd_t *c, int64_t start, int64_t end);

/* Stream-order and legacy-default-stream rules: may command c of slot s start now? */
int si__eligible(const si_slot_t *s, const si_cmd_t *c);

/* Completes the command at the head of stream si of slot s at time t (an event it records
 * takes t) and frees it. Lock held. */
void si__pop_head(si_slot_t *s, int si, int64_t t);

/* Advances the simulated GPU to `now`. Lock held. */
void si__advance(int64_t now);

#endif
