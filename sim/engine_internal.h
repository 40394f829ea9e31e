/* The simulator's internal state, shared by the device (engine.c), the memory modes' hooks
 * (memmode.c), the host threads (host.c), the run (run.c) and its figures (collect.c). Not a
 * public interface. */
#ifndef GMX_SIM_ENGINE_INTERNAL_H
#define GMX_SIM_ENGINE_INTERNAL_H

#include <stdint.h>

#include "gpumux/combined.h"

#include "events.h"
#include "ideal.h"
#include "memspace.h"
#include "msched.h"
#include "sim.h"
#include "um.h"

enum { EV_HOST, EV_ARRIVAL, EV_START, EV_FAULT, EV_RESUME, EV_END, EV_TIMER, EV_WARMUP, EV_STOP };
enum { ENG_EXEC, ENG_H2D, ENG_D2H, ENG_D2D, ENG_COUNT };
enum { HOST_RUNNING, HOST_BLOCKED, HOST_IDLE, HOST_DONE };

typedef struct scmd {
	gmx_cmd_t c;
	int64_t issue;	 /* host issue time */
	int64_t started; /* when it began on its engine */
	int64_t dur;	 /* scaled solo duration */
	int64_t compute_left;
	uint64_t pages_total, pages_left;
	gmx_access_cursor_t cur;
	uint32_t slot, op_index;
	uint64_t unit;
	uint8_t engine;
	struct scmd *hw_next;
	struct scmd *live_prev, *live_next; /* every command alive, freed at the end */
	/* spatial sharing (GMX_POLICY_SPATIAL): progress at a rate that changes */
	double work_left, slow; /* solo ns still to run; current slowdown */
	int64_t rate_t;		/* when work_left was last brought up to date */
	uint32_t end_gen, ends_pending;
	uint8_t running, dead; /* on the engine; ended but an old end event is still queued */
	/* The one event pending for this command (not spatial): preemption
	 * (dev_preempt) voids it by bumping gen and replays it on resume. */
	uint32_t gen;
	uint8_t pend_kind, held, began;
	int64_t pend_at;
	int64_t seg_start, active_ns; /* time on the execution engine, preempted stretches excluded */
	/* Cross-stream waits (GMX_OP_WAIT) it must honour: it starts only once
	 * slot deps[i].slot has completed deps[i].count commands. */
	struct scmd_dep {
		uint32_t slot;
		uint64_t count;
	} *deps;
	uint32_t n_deps;
} scmd_t;

typedef struct slot {
	int16_t stream;
	scmd_t *hw_head, *hw_tail; /* submitted, not started */
	scmd_t *busy;
	uint32_t outstanding; /* launched, not completed */
	uint64_t issued;      /* commands ever issued on it; completed = issued - outstanding */
	int64_t last_end;
} slot_t;

typedef struct stask {
	const gmx_sim_task_t *cfg;
	const gmx_workload_t *w;
	slot_t *slots;
	uint32_t n_slots;
	uint32_t pc;
	uint64_t unit;
	int host;
	int16_t wait_stream; /* -1 all */
	int wait_unit_end;
	uint64_t outstanding;
	int64_t unit_start;
	int64_t *arrivals;
	uint32_t arr_head, arr_n, arr_cap;
	uint32_t next_gap;
	double *lat;
	uint64_t n_lat, cap_lat;
	uint64_t units_done;
	int done;
	int64_t done_time;
	double scale_mem, scale_compute;
	double unit_gpu_ns; /* scaled solo GPU time of one unit */
	double done_gpu_ns; /* of it, completed in the current unit */
	uint64_t exec_unit;
	uint32_t exec_op;
	int held;			/* preempted: its kernels wait for its next turn */
	/* Its lease (gmx_lease_t; inflight 0: none), its leased commands in flight, and its
	 * commands the policy holds (a command goes leased only when none waits before it). */
	gmx_lease_t lease;
	uint32_t leased_now, waiting;
	uint64_t leased;
	/* Events (GMX_OP_RECORD/WAIT), numbered densely: ev_of_op maps an op to its
	 * event; an event's latest record is (ev_slot, ev_count), ev_count 0 = none. */
	uint32_t *ev_of_op, *ev_slot;
	uint64_t *ev_count;
	/* need[j * n_slots + k]: commands slot k must complete before the next
	 * command issued on slot j may start (waits not yet attached to one). */
	uint64_t *need;
	int64_t gpu_ns, stall_ns;	/* on the execution engine; of it, waiting for faults */
	uint64_t faults, fault_entries; /* batches its kernels raised, pages in them */
} stask_t;

typedef struct sim {
	const gmx_sim_config_t *cfg;
	const gmx_preset_t *dev;
	gmx_event_queue_t q;
	int64_t now;
	int stop;
	stask_t *t;
	uint32_t n;
	gmx_policy_t *policy;
	uint64_t next_seq, timer_gen;
	uint32_t running[ENG_COUNT];
	int ee_task, ee_last_task;
	int64_t h2d_free, d2h_free, um_free; /* ideal: when each copy engine is free; um: the fault handler */
	int64_t mig_last[GMX_MAX_TASKS][2]; /* timeline: 1 + index of the task's last migration span in, out */
	gmx_memspace_t mem;
	gmx_ideal_t *ideal;
	int64_t ideal_last_end, ideal_switch_at; /* ideal: end of its last op; when the running turn's space was freed */
	gmx_msched_t *ms; /* msched modes */
	int64_t *progress;
	uint64_t rng;
	uint64_t faults, fault_entries, throttles, kernels, events, stamp;
	scmd_t *live;
	int spatial;  /* contexts share the execution engine (policy flag) */
	scmd_t **run; /* spatial: kernels running on the execution engine */
	uint32_t n_run, cap_run;
	gmx_sim_result_t *warm; /* the figures at the end of the warm-up, subtracted at the end */
	int error;
	char *err;
	size_t err_len;
} sim_t;

/* Records an error (the first one wins) and stops the run. */
void gmx_sim__fail(sim_t *s, int rc, const char *msg);

/* ---- timeline.c: the recorded timeline (only when cfg->timeline is set) ---- */

/* Appends span sp; a task's migration that starts before its previous one in the same direction
 * ended extends that one. Spans starting after until_ns are dropped. */
void gmx_sim__record(sim_t *s, gmx_sim_span_t sp);

/* Records command x's stretch on its engine: from its start or last resumption to now. */
void gmx_sim__record_cmd(sim_t *s, const scmd_t *x);

/* When recording, a span of `kind` (GMX_SPAN_*) for command x's task from `from` to `to`. */
void gmx_sim__record_for(sim_t *s, const scmd_t *x, int kind, int64_t from, int64_t to);

/* The memory space's migration hook: bytes of task's memory moved in or out, decided at now. */
void gmx_sim__note_migration(void *ctx, uint32_t task, int out, uint64_t bytes, int64_t now);

/* Schedules an event; out of memory stops the run with an error. */
void gmx_sim__push(sim_t *s, int64_t at, uint32_t kind, uint32_t a, uint64_t b);

/* The run's seeded generator (splitmix64). */
uint64_t gmx_sim__rng_next(sim_t *s);

/* Solo time of a GPU op on this device, rescaled from the workload's device. */
int64_t gmx_sim__op_duration(const sim_t *s, const stask_t *tk, const gmx_op_t *op);

/* Releases command x of a task that holds a lease when the lease allows it at now: the device
 * releases it itself (marked leased) before the policy hears of it; the caller starts it
 * (gmx_sim__start_ready) once the policy has. 1 if it did. */
int gmx_sim__lease_release(sim_t *s, scmd_t *x);

/* Starts every submitted command that may start now. */
void gmx_sim__start_ready(sim_t *s);


/* ---- engine.c: the device ---- */

/* Schedules the one pending event of command x (START, END, FAULT or RESUME) at `at`, tagged
 * with its generation so that a preemption can void it. */
void gmx_sim__cmd_push(sim_t *s, scmd_t *x, int64_t at, uint32_t kind);

/* The device the policy drives (gmx_device_t), its callbacks bound to run s. */
gmx_device_t gmx_sim__device(sim_t *s);

/* Handles event e popped at s->now: a host step, an arrival, a command's start, fault, resume or
 * end (stale ones ignored), the policy's timer, the end of the warm-up or of the run. */
void gmx_sim__dispatch(sim_t *s, const gmx_event_t *e);

/* ---- memmode.c: the memory modes' hooks (a kernel with regions, not inmem) ---- */

/* ideal: brings the kernel's pages in as early as the links allow and schedules its end. */
void gmx_sim__ideal_begin(sim_t *s, scmd_t *x);

/* msched: starts the kernel once its planned pages are in; what was missed faults in (um). */
void gmx_sim__msched_begin(sim_t *s, scmd_t *x);
/* A kernel begun by gmx_sim__msched_begin ended now: tells the planner (its host may leave the
 * device after it). Fails the run on the planner's errors. */
void gmx_sim__msched_end(sim_t *s, scmd_t *x);

/* Unified memory: starts the kernel from its first page; it runs until its next missing page. */
void gmx_sim__um_begin(sim_t *s, scmd_t *x);

/* Runs kernel x up to its next missing page (a FAULT event) or to its end (an END event). */
void gmx_sim__um_resume(sim_t *s, scmd_t *x);

/* Services kernel x's fault batch on the one fault handler and schedules its RESUME. */
void gmx_sim__um_fault(sim_t *s, scmd_t *x);

/* ---- collect.c: the run's figures ---- */

/* Adds the run's figures so far to r (tasks' figures are set, totals added). */
void gmx_sim__collect(sim_t *s, gmx_sim_result_t *r);

/* Ends the warm-up: keeps its figures (s->warm) to subtract, restarts latency samples. */
void gmx_sim__warmup_end(sim_t *s);

/* Turns whole-run figures r into the measured window's, given the warm-up's w. */
void gmx_sim__subtract_warmup(gmx_sim_result_t *r, const gmx_sim_result_t *w);
/* Host threads (host.c). */
void gmx_sim__start_unit(sim_t *s, uint32_t t, int64_t started);
void gmx_sim__next_arrival(sim_t *s, uint32_t t);
void gmx_sim__on_arrival(sim_t *s, uint32_t t);
void gmx_sim__host_run(sim_t *s, uint32_t t);
void gmx_sim__host_wake(sim_t *s, uint32_t t);
/* What is known of each task's arrivals (its arrival process and its unit's GPU time), for the
 * policy's params.arrivals; gaps[t] receives the trace copy out[t] points to (the caller frees
 * each). 0 or -ENOMEM. */
int gmx_sim__arrivals(const sim_t *s, gmx_comb_arrivals_t *out, int64_t **gaps);

#endif
