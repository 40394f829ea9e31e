/* The seam between scheduling policies and a device.
 *
 * A policy (core/) holds every task's software queues and decides which
 * command goes to the device and when. A device (the simulator now, gpumuxd on
 * a real GPU later) tells the policy what happens: a command was launched by a
 * host, a command completed, a timer fired. The policy answers through the
 * device's four calls: now, submit, migrate, set_timer. Policies never see
 * which world they are in.
 *
 * Locking: none here. Each device calls its policy from one thread at a time,
 * and the policy calls the device back only from inside those calls.
 */
#ifndef GPUMUX_SCHED_H
#define GPUMUX_SCHED_H

#include <stddef.h>
#include <stdint.h>

#include "gpumux/workload.h"

/* Tunables: default and bounds in one place (gmx_sched_params_check holds parameters to
 * them; scenario files and command-line options are checked against the same bounds). */
#define GMX_SLICE_NS_DEFAULT 2000000LL     /* 2 ms: the GPU's default time slice (DESIGN.md) */
#define GMX_SLICE_NS_MIN 10000LL           /* 10 us: below a context switch's own cost */
#define GMX_SLICE_NS_MAX 60000000000LL     /* 60 s */
#define GMX_SLICE_MS_MIN (GMX_SLICE_NS_MIN / 1e6) /* the same bounds in ms, as people give them */
#define GMX_SLICE_MS_MAX (GMX_SLICE_NS_MAX / 1e6)
/* How long an idle active task keeps the device under `timeline` (1 ms; from 0, plain
 * yielding, to its slice). Host gaps inside a unit are microseconds (launch think times of
 * the generators and traces: 5-50 us). */
#define GMX_TIMELINE_GRACE_NS 1000000LL
#define GMX_INFLIGHT_DEFAULT 2u            /* a held task stops within two kernels */
#define GMX_INFLIGHT_MIN 1u
#define GMX_INFLIGHT_MAX 1024u
#define GMX_GAP_QUANTILE_DEFAULT 0.05      /* fikit: a gap shorter than predicted 1 time in 20 (docs/fikit.md) */
#define GMX_GAP_QUANTILE_MIN 0.0           /* 0: the shortest gap ever seen */
#define GMX_GAP_QUANTILE_MAX 0.5           /* the median: above it fills overrun more often than not */
#define GMX_SWITCH_NS_DEFAULT 0LL          /* tasks share one context (MPS-style); 32 us apart (DESIGN.md) */
#define GMX_SWITCH_NS_MAX 10000000LL       /* 10 ms */
#define GMX_STARVE_NS_DEFAULT 100000000LL  /* 100 ms: a training step's order of magnitude */
#define GMX_STARVE_NS_MIN 100000LL         /* 0.1 ms */
#define GMX_STARVE_NS_MAX 60000000000LL    /* 60 s */

#define GMX_MAX_TASKS 128 /* tasks of a scenario; the daemon serves one fewer clients */
#define GMX_PRIORITY_LEVELS 10 /* 0 highest */

/* A command in a task's software queue, as a policy sees it. */
typedef struct gmx_cmd {
	uint64_t seq;			/* device-wide launch order, unique */
	uint32_t task;			/* task index */
	int16_t stream;			/* stream within the task */
	uint8_t kind;			/* gmx_op_kind_t: KERNEL, COPY_*, MEMSET */
	uint64_t kernel_id;		/* identity (name, grid, block, shared memory); 0 if unknown */
	int64_t predicted_ns;		/* expected solo GPU time */
	const gmx_op_t *op;		/* launch details (args, regions) or NULL */
	const gmx_workload_t *workload; /* owner of op's pools, or NULL */
	struct gmx_cmd *next;		/* queue link, owned by the policy while queued */
	/* 1: the device already released it under the task's lease (gmx_lease_t): on_launch
	 * accounts it in flight and never queues or submits it; on_complete follows as usual. */
	uint8_t leased;
} gmx_cmd_t;

/* A lease: a bound within which the device releases a task's commands as they come, without
 * asking the policy (each still reaches on_launch, marked leased, and on_complete). What a
 * policy grants when it would grant the task everything it asks for anyway.
 *   inflight  a command goes under the lease only while the task has fewer commands in flight
 *             (released, not completed; leased or not); 0: no lease (revoked);
 *   until     device time from which nothing more is released under it; 0: no end.
 * A revoke or a narrower bound takes effect at the next kernel boundary: commands already
 * released stay in flight. */
typedef struct gmx_lease {
	uint32_t inflight;
	int64_t until;
} gmx_lease_t;

/* A memory movement a policy orders: a range of a task's memory to the device
 * (load) or to the host (evict). */
typedef struct gmx_migration {
	uint32_t task;
	uint32_t buffer;
	uint64_t offset, length;
	uint8_t to_device; /* 1 load, 0 evict */
} gmx_migration_t;

/* What a device offers a policy. */
typedef struct gmx_device {
	void *ctx;
	/* Current device time in ns. */
	int64_t (*now)(void *ctx);
	/* Releases a queued command to the hardware. 0 or a negative errno. */
	int (*submit)(void *ctx, gmx_cmd_t *cmd);
	/* Orders a migration; may be NULL on devices that cannot migrate. */
	int (*migrate)(void *ctx, const gmx_migration_t *m);
	/* Asks for on_timer at time `at` (replaces any earlier request). */
	void (*set_timer)(void *ctx, int64_t at);
	/* Preempts `task` (hold = 1): its running kernels stop where they are and
	 * none of its submitted commands starts on the execution engine until
	 * hold = 0 resumes them where they stopped. What the GPU's compute
	 * preemption does at the end of a context's time slice. May be NULL on
	 * devices that cannot (a software queue waits for kernels to finish). */
	void (*preempt)(void *ctx, uint32_t task, int hold);
	/* The slice `task` gets for the turn it starts now, in ns (a memory
	 * scheduler's choice); <= 0 or NULL: the policy's slice_ns. Asked by the
	 * timeline scheduler at each turn. */
	int64_t (*slice_for)(void *ctx, uint32_t task);
	/* How long making `cmd`'s predicted pages resident would take if started
	 * now, in ns (0: they are, or the device has no memory model). Asked by
	 * the combined policy before it admits a low-priority command into a
	 * high-priority gap. May be NULL (0). */
	int64_t (*load_ns)(void *ctx, const gmx_cmd_t *cmd);
	/* Grants, narrows or revokes (lease NULL or inflight 0) `task`'s lease; replaces the one
	 * before. NULL on devices without leases: every command then goes through on_launch and
	 * submit. */
	void (*lease)(void *ctx, uint32_t task, const gmx_lease_t *lease);
	/* Kills `task`'s kernels running on the execution engine (REEF's reset-based
	 * preemption): what they computed is lost, and they run again from their
	 * start once the task is resumed with preempt(task, 0); until then none of
	 * its submitted commands starts there, as under preempt(task, 1). May be
	 * NULL on devices that cannot kill a kernel (a policy then lets it finish). */
	void (*reset)(void *ctx, uint32_t task);
	uint32_t sms; /* streaming multiprocessors of the device; 0 unknown */
} gmx_device_t;

/* Tunables every policy understands; each has a default and bounds in sched.c. */
typedef struct gmx_kprof gmx_kprof_t; /* kernel profile of one task (gpumux/kprofile.h) */

typedef struct gmx_sched_params {
	int64_t slice_ns;      /* timeslice length */
	uint32_t inflight_max; /* commands per task released ahead of completion */
	/* Priority gap filling (fikit, streamprio); see docs/fikit.md. */
	double gap_quantile;	/* gap predicted at this quantile (lower = more conservative) */
	int64_t switch_ns;	/* cost of switching the GPU between contexts, budgeted per fill */
	int64_t starve_ns;	/* a queue head waiting this long is released regardless */
	gmx_kprof_t **profiles; /* per task index, NULL or NULL entries: none; not owned */
	uint32_t n_profiles;
	int profile_learn; /* nonzero: the policy records observations into profiles */
	/* timeline only: this task keeps its place in the rotation while its host is busy, and the
	 * device waits for its work at its turn (the simulator's memory limit grants a task the
	 * best phase of the rotation this way, docs/simulator.md), as 1 + its index; 0: none. */
	uint32_t hold_task;
	/* Per task index: what is known of its arrivals before any is seen (gpumux seeds its
	 * HP gap predictor with it, gpumux/combined.h); NULL or all-zero entries: nothing. Not owned. */
	const struct gmx_comb_arrivals *arrivals;
	uint32_t n_arrivals;
	/* gpumux only: kernel durations learned from completions (gpumux/kdur.h), for commands that
	 * carry no predicted_ns (gpumuxd's); the policy records into it and predicts from it. NULL:
	 * none (the simulator's commands carry their durations). Not owned. */
	struct gmx_kdur *kdur;
} gmx_sched_params_t;

typedef struct gmx_policy gmx_policy_t;

/* A scheduling policy: a name and its event handlers. */
/* Policy flags: what a policy asks of the device. */
#define GMX_POLICY_SPATIAL 1u  /* contexts may share the execution engine at once (MPS-like) */
#define GMX_POLICY_PROFILES 2u /* uses per-task kernel profiles (params.profiles) */
#define GMX_POLICY_PRIORITY_BLOCKS                                                                           \
	4u /* runs tasks on prioritised streams: the hardware dispatches a                                   \
	    * higher-priority kernel's thread blocks first */
#define GMX_POLICY_UM_PRIORITY                                                                               \
	8u /* under unified memory, device memory favours the better priority: pages of                      \
	    * the worst priority level resident are evicted first (TGS) */
#define GMX_POLICY_MEM_PRIORITY                                                                              \
	16u /* a device that plans memory keeps priorities in it (docs/combined.md): a better priority's \
	     * working set is never evicted for a worse one, and migrations go in pieces */

typedef struct gmx_policy_ops {
	const char *name;
	const char *summary;
	unsigned flags; /* GMX_POLICY_* */
	/* Allocates the policy's state into *out. 0 or -ENOMEM/-EINVAL. */
	int (*create)(const gmx_sched_params_t *p, const gmx_device_t *dev, gmx_policy_t **out);
	/* Frees the state; queued commands are not owned by the policy. */
	void (*destroy)(gmx_policy_t *p);
	/* Registers task `task` with a priority 0..9 (0 highest). */
	int (*task_add)(gmx_policy_t *p, uint32_t task, int priority);
	/* Task `task` has finished its work and will launch nothing more: what it still has queued
	 * is submitted at once, whatever its priority (a device whose task died completes it
	 * unrun), and what completes from now on is not learned from. */
	void (*task_done)(gmx_policy_t *p, uint32_t task);
	/* A host launched `cmd` (queued in stream order). */
	void (*on_launch)(gmx_policy_t *p, gmx_cmd_t *cmd);
	/* The device finished `cmd`. */
	void (*on_complete)(gmx_policy_t *p, gmx_cmd_t *cmd);
	/* The timer set with set_timer fired. */
	void (*on_timer)(gmx_policy_t *p);
	/* The host of `task` is blocked waiting for the device (a synchronisation). */
	void (*on_host_wait)(gmx_policy_t *p, uint32_t task);
} gmx_policy_ops_t;

/* Fills *p with the documented defaults (2 ms slice, 2 commands in flight, fikit's). */
void gmx_sched_params_default(gmx_sched_params_t *p);

/* Checks params against their bounds; writes the reason into err (may be NULL when err_len
 * is 0). 0 or -EINVAL. Every policy's create refuses what this refuses. */
int gmx_sched_params_check(const gmx_sched_params_t *p, char *err, size_t err_len);

/* The policy registered under `name`, or NULL. */
const gmx_policy_ops_t *gmx_sched_find(const char *name);

/* Writes the registered policy names, separated by '|', into buf. */
void gmx_sched_names(char *buf, size_t len);

/* Nonzero when leases a and b bound the same (NULL: none). */
int gmx_lease_same(const gmx_lease_t *a, const gmx_lease_t *b);

/* Gives `task` the lease {inflight, until} through dev->lease when it differs from *cur (the
 * policy's record of the task's lease), and records it in *cur; inflight 0 revokes. Nothing
 * on devices without leases. */
void gmx_lease_set(const gmx_device_t *dev, uint32_t task, gmx_lease_t *cur, uint32_t inflight, int64_t until);

/* A lease sized by time (fikit's lone best-priority task, docs/daemon.md "Leases"): the task may
 * have more than inflight_max commands in flight while their predicted total duration stays
 * within GMX_LEASE_BACKLOG_NS, what a better-priority task arriving may wait for the backlog
 * besides the few long kernels it may hold. The prediction is the mean of the task's last
 * GMX_LEASE_WINDOW measured commands (each from the later of its release and the previous
 * completion to its completion) but those longer than the budget, taken only when at most
 * GMX_LEASE_LONG_MAX of them are (a measurement also catches its host being descheduled, and
 * the first command of a batch whose completion the host sees only at its synchronisation). */
#define GMX_LEASE_BACKLOG_NS 50000LL /* 50 us: a round trip through the daemon's own scale */
#define GMX_LEASE_WINDOW 64u         /* commands measured per decision */
#define GMX_LEASE_DEPTH_MAX 64u      /* commands in flight under such a lease at most */
#define GMX_LEASE_LONG_MAX 4u        /* commands of a window longer than the budget, at most */

/* The in-flight bound a time-sized lease gives after a window of measured commands: n_short of
 * them within the budget, taking short_sum_ns in all, and n_long longer: GMX_LEASE_BACKLOG_NS over
 * the short ones' mean, at most GMX_LEASE_DEPTH_MAX; 0 (no deeper bound: keep inflight_max) when
 * none is short, more than GMX_LEASE_LONG_MAX are long, the figures do not fit together, or the
 * bound is not above inflight_max. */
uint32_t gmx_lease_depth(int64_t short_sum_ns, uint32_t n_short, uint32_t n_long, uint32_t inflight_max);

/* Per-stream FIFO of commands: the building block every policy queues with. */
typedef struct gmx_cmd_queue {
	gmx_cmd_t *head, *tail;
	uint32_t length;
} gmx_cmd_queue_t;

/* Appends cmd at the tail. */
void gmx_cmd_queue_push(gmx_cmd_queue_t *q, gmx_cmd_t *cmd);

/* Removes and returns the head, or NULL when empty. */
gmx_cmd_t *gmx_cmd_queue_pop(gmx_cmd_queue_t *q);

#endif
