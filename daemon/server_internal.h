/*
 * gpumuxd's internals, shared by its files: the state of the one event loop, its clients and
 * the commands they announced. The daemon is single-threaded: nothing here is locked.
 *
 *   server.c      the state's life (init, fini), the loop: sockets, signals, timers, liveness
 *   admit.c       connections: credentials at accept, budgets before HELLO, the first
 *                 message, WELCOME or REFUSED
 *   client.c      a client's rings, commands and departure; the device the policy drives
 *   mem_orders.c  migration orders for oversubscribed clients (memplan.c plans them)
 *   store.c       the on-disk profile store
 *   status.c      the STATUS reply
 *
 * Message handling never reaches for a socket it did not get: the loop hands it descriptors
 * and credentials (gmxd__admit, gmxd__sock_event, gmxd__poll_rings, gmxd__tick), so tests and
 * the fuzzer (fuzz/fuzz_daemon.c) drive it with socket pairs and a clock of their own.
 */
#ifndef GMXD_SERVER_INTERNAL_H
#define GMXD_SERVER_INTERNAL_H

#define _GNU_SOURCE
#include "daemon.h"
#include "gpumux/kprofile.h"
#include "gpumux/sched.h"
#include "gpumux/template.h"
#include "memplan.h"

#include <stdint.h>
#include <sys/socket.h>
#include <sys/types.h>

#define HASH 256
/* Consecutive seqs that share one cache line of a client's buckets (gmxd__hash_of). */
#define GMXD_HASH_RUN 8

enum { D_QUEUED, D_GRANTED, D_ORPHAN };
enum { EV_LISTEN = 1, EV_SIGNAL, EV_TIMER, EV_PENDING, EV_SOCK, EV_EFD, EV_HTTP };

/* Why a connection was refused (status counts each). */
enum {
	GMXD_REF_NOT_ALLOWED, /* uid not allowed */
	GMXD_REF_BUSY,	      /* max_clients, max_clients_per_user, or too many connections waiting */
	GMXD_REF_MALFORMED,   /* a first message that is not a well-formed HELLO or STATUS_REQ */
	GMXD_REF_VERSION,     /* another protocol version */
	GMXD_REF_TIMEOUT,     /* nothing said within GMXD_PENDING_TIMEOUT_NS */
	GMXD_REF_RESOURCES,   /* the daemon ran out of memory or descriptors */
	GMXD_REF_KINDS
};

typedef struct client client_t;

/* What metrics count per client, and per identity for the clients that have left. Notices,
 * grants and completions are the client's own fields while it is connected. */
typedef struct {
	uint64_t notices, grants, completions, kernels, mig_in_bytes, mig_out_bytes, evictions, cutoffs;
	uint64_t lat_count, lat_sum_ns, lat_bucket[GMXD_LAT_BUCKETS + 1]; /* the last: beyond every bound */
} gmxd_cstats_t;

/* A client identity: the label set of its metric series. */
typedef struct {
	int used;
	char name[GMX_NAME_MAX];
	int priority;
	uid_t uid;
	char container[GMXD_CONTAINER_ID_MAX];
	int64_t last_ns;   /* when a client of it last left or arrived */
	gmxd_cstats_t gone; /* the sums of its clients that have left */
} gmxd_ident_t;

typedef struct dcmd {
	gmx_cmd_t c; /* what the policy sees; first, so a gmx_cmd_t* is a dcmd_t* */
	uint64_t cseq;
	client_t *cl;
	int state;
	int64_t notice_ns;
	gmx_tpl_range_t *ranges; /* predicted working set, or NULL: every allocation */
	uint32_t nranges;
	uint32_t kind; /* the notice's command kind (gmx_proto.h) */
	uint64_t gidx; /* its grant's number among the client's (0: not pushed yet) */
	struct dcmd *hnext, *dnext;
} dcmd_t;

typedef struct {
	uint64_t ptr, size;
} dalloc_t;

/* A client. Its hash holds every command it announced until the policy has let go of it
 * (orphans of a departed client included), so nothing is lost when the daemon stops. */
struct client {
	int used, dead, cut;
	uint32_t id, task;
	int fd, efd_up, efd_down;
	gmx_shm_region_t *region;
	pid_t pid;
	uid_t uid;
	char name[GMX_NAME_MAX];
	int priority, oversub;
	_Alignas(64) dcmd_t *hash[HASH]; /* GMXD_HASH_RUN buckets to a cache line */
	uint32_t queued, inflight, refs, evicts;
	uint32_t actions; /* its entries waiting in SRV's action queue (gmxd__send_action) */
	uint64_t notices, grants, completions;
	int64_t last_progress, connected_ns, last_grant_ns;
	dalloc_t *allocs;
	int nallocs;
	uint64_t alloc_bytes;
	/* RANGE entries waiting for the notice of command rseq */
	uint64_t rseq;
	uint32_t nr;
	gmx_tpl_range_t rbuf[GMX_RANGES_MAX];
	uint32_t lat_ns[GMXD_LAT_SAMPLES];
	uint32_t nlat;
	char cut_reason[192];
	int cut_error; /* positive errno told to the client with the reason (EPROTO unless set) */
	char container[GMXD_CONTAINER_ID_MAX]; /* from /proc/PID/cgroup at HELLO; "" outside one */
	int ident;			      /* its identity in SRV.ident */
	/* Leases (docs/protocol.md): those sent and not acknowledged yet, oldest first; the one in
	 * effect in the up ring's order (bound 0: none); leased commands in flight; whether the
	 * policy's latest (pol) waits for lsent to have room. */
	struct {
		uint32_t id, inflight;
		int64_t until;
		uint64_t gmark; /* grants pushed before it */
	} lsent[GMXD_LEASES_PENDING];
	uint32_t nlsent, lease_id, l_inflight, leased_now;
	int64_t l_until;
	uint64_t last_leased_seq;
	int want_set;
	/* Oversubscribed clients (docs/daemon.md, "Leases"): the policy's latest lease, held back
	 * (mem_held) while some of the client's memory is away; ALLOC entries read this session
	 * (each lease carries the count: the client ignores one sent before its latest allocation). */
	gmx_lease_t pol;
	int mem_held;
	int prefetch_due; /* a notice it sent was queued: its plan is refreshed after the batch (rule 6) */
	/* Commands it announced ahead (AHEAD, protocol 7), not yet noticed or released, by rising
	 * seq: rule 6's plan reads them after its queued ones (mem_prefetch.c), nothing else does;
	 * ahead_last: the seq of the last AHEAD read this session (each must be above it). */
	dcmd_t *ahead[GMX_AHEAD_MAX];
	uint32_t nahead;
	uint64_t ahead_last;
	uint64_t allocs_read;
	/* The lease bound counts what the client has in flight, leased or granted (docs/protocol.md).
	 * Grants pushed down the ring (numbered 1, 2, ...); those pushed before the lease acknowledged
	 * last, which the client had applied when it releases under it; those of them in flight. */
	uint64_t g_pushed, g_known;
	uint32_t g_known_inflight;
	uint64_t leased, leases_sent, revokes; /* leased releases; leases and revokes sent */
	gmxd_cstats_t st;		      /* kernels, migrations, latency histogram, cut-off */
};

#define GMXD_LIVE_WORDS ((GMX_MAX_TASKS + 63) / 64)

/* What the loop did (status "loop"; bench/daemon divides them by the kernels run): where the
 * daemon's CPU goes per kernel. */
typedef struct {
	uint64_t iterations; /* turns of the loop */
	uint64_t sleeps;     /* epoll waits that could block (the others only looked) */
	uint64_t deep_sleeps; /* of those, without a drain deadline: any entry wakes the loop */
	uint64_t drains;     /* ring reads that found entries */
	uint64_t entries;    /* ring entries read */
	uint64_t timer_fires; /* the policy's timer */
	uint64_t wakes_sent; /* eventfd writes to clients (a sleeping client's ring got an entry) */
	uint64_t spins, spin_ns, spin_hits; /* busy-polls before sleeping (spin_us), their time, and
					      * those that found an entry */
} gmxd_loop_stats_t;

/* A connection that has not said HELLO or STATUS_REQ yet. */
typedef struct {
	int fd;
	int64_t since;
	struct ucred cr;
} pending_t;

/* A ring entry waiting for evictions to be acknowledged before it may be sent. */
typedef struct action {
	struct action *next;
	uint32_t task, client_id;
	gmx_ring_entry_t e;
} action_t;

typedef struct {
	const gmxd_config_t *cfg;
	int ep, lfd, sfd, tfd, spare_fd;
	int64_t listen_paused_until; /* out of descriptors: accept again then */
	char sock_path[300];
	const gmx_policy_ops_t *ops;
	gmx_policy_t *pol;
	int in_policy;
	int64_t (*clock)(void); /* CLOCK_MONOTONIC in ns; tests bring their own */
	uint64_t hash_key;	/* odd, random: clients cannot aim their seqs at one bucket */
	client_t cl[GMX_MAX_TASKS];
	pending_t *pend;
	uint32_t pend_max, n_pend;
	uint32_t next_id;
	uint64_t seq, tokens;
	dcmd_t *deferred;
	action_t *act_head, *act_tail;
	uint32_t evicts_outstanding;
	int lease_mem_held; /* some client's lease is held until its memory is in (gmxd__lease_retry) */
	uint64_t mem_cap;
	gmxd_mem_t *mem;
	uint64_t mig_load_bytes, mig_evict_bytes, mig_short_bytes, mig_plans, host_waits;
	/* rule 6's prefetches at LP grants (mem_prefetch.c): plans, bytes loaded, and of those the
	 * ones of windows beyond the next (at most) */
	uint64_t mig_prefetches, mig_prefetch_bytes, mig_ahead_bytes;
	uint64_t ahead_read, ahead_matched; /* AHEAD entries read; of those, matched by their NOTICE */
	int64_t start_ns, timer_at;
	uint64_t refused, refusals[GMXD_REF_KINDS], cut_off, protocol_errors, total_grants;
	uint64_t total_leased, total_leases, total_revokes;
	int64_t now_ovr, last_ovr; /* the policy's clock while a ring entry is read: its time; the
				    * latest time the policy was shown (its clock never goes back) */
	int64_t timer_armed;	   /* when the timerfd fires (0: not armed; only without epoll_pwait2) */
	/* Clients in use and not departed: bit t % 64 of live[t / 64]; the loops visit only these. */
	uint64_t live[GMXD_LIVE_WORDS];
	int64_t tick_due;  /* the loop's next housekeeping (gmxd__tick), unless a cut is pending */
	int cut_pending;   /* a client was marked cut: housekeeping at the top of the loop */
	gmxd_loop_stats_t loop;
	uint32_t ring_batch_max; /* the most entries one ring held at the last read of the rings */
	int stop;
	/* Kernel profiles by task name, kept while there is room so a client that comes back
	 * under the same name is not measured again (policies with GMX_POLICY_PROFILES); the
	 * least recently used one nobody holds makes room for a new name. */
	struct {
		char name[GMX_NAME_MAX];
		gmx_kprof_t prof;
		int used;
		uint64_t last_used; /* store_clock when a client last took it */
		int saved, dirty;   /* written once; learned more since (a save is due) */
		int64_t saved_at;   /* when it was last written */
	} store[GMX_MAX_TASKS];
	uint64_t store_clock;
	gmx_kprof_t *prof_ptr[GMX_MAX_TASKS];
	/* Recent notice-to-grant latencies of high-priority clients (priority 0..2), kept after
	 * the clients leave: what `gpumux status` reports as recent HP latency. */
	uint32_t hp_lat[GMXD_LAT_SAMPLES];
	uint32_t n_hp_lat;
	/* Metrics: identities (a client's series outlive it), refusals by uid, the HTTP endpoint. */
	gmxd_ident_t ident[GMXD_IDENT_MAX];
	struct {
		int used;
		uid_t uid;
		uint64_t n[GMXD_REF_KINDS];
	} ref_uid[GMXD_REF_UIDS];
	uint64_t ref_other[GMXD_REF_KINDS]; /* uids beyond the table, or unknown */
	void *http;			     /* struct MHD_Daemon, or NULL */
	int http_fd;			     /* its epoll descriptor in the loop, or -1 */
	int64_t http_due;		     /* call it then at the latest (0: no timeout) */
	char metrics_url[128];		     /* what it serves, or "" */
} gmxd_server_t;

/* The daemon's state (server.c defines it). */
extern gmxd_server_t gmxd__srv;
#define SRV gmxd__srv

/* ---- server.c ---- */

/* Sets up the state for cfg without sockets: policy, memory planner, profile store (checked
 * writable; an empty profile_dir has none), connection budgets. 0, or a negative errno with
 * the reason logged. clock: NULL for CLOCK_MONOTONIC. */
int gmxd__init(const gmxd_config_t *cfg, int64_t (*clock)(void));

/* Ends every client ("daemon stopping"), saves profiles and frees the state. */
void gmxd__fini(void);

/* The daemon's clock, in ns. */
int64_t gmxd__now_ns(void);

/* Housekeeping at `now`: cuts off the unresponsive, ends the clients marked cut, refuses
 * connections silent for too long. */
void gmxd__tick(int64_t now);

/* The policy's timer fired. */
void gmxd__timer_fired(void);

/* Client `task`'s socket is readable: a hang-up ends it, data cuts it off. */
void gmxd__sock_event(uint32_t task);

/* Checks the books: per client, commands against counts, allocations against the planner;
 * evictions outstanding; the planner's own. 0, or -EFAULT with what is wrong in err. */
int gmxd__check(char *err, size_t err_len);

/* Adds fd to the loop's epoll set, tagged with (type, idx); removes it. No-ops without a
 * loop. */
void gmxd__ep_add(int fd, int type, uint32_t idx);
void gmxd__ep_del(int fd);

/* ---- admit.c ---- */

/* A connection was accepted from the peer cr: refused at once if the peer may not be served,
 * answered if its first message is already there, else kept pending within its uid's
 * budget. Takes fd. */
void gmxd__admit(int fd, const struct ucred *cr);

/* Pending connection idx is readable. */
void gmxd__pending_read(uint32_t idx);

/* Answers the first message of a connection (n bytes at msg; n may exceed what msg holds
 * when the peer sent more): WELCOME, STATUS or REFUSED with the reason. Takes fd. */
void gmxd__first_message(int fd, const struct ucred *cr, const void *msg, size_t held, ssize_t n);

/* Refuses pending connections older than GMXD_PENDING_TIMEOUT_NS at `now`. */
void gmxd__pending_expire(int64_t now);

/* Sends REFUSED (error, reason) on fd, counts it under `kind` and the peer's uid (cr; NULL:
 * unknown), and closes fd. */
void gmxd__refuse(int fd, const struct ucred *cr, int kind, int error, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));
/* Client slots kept for root and the daemon's own user: other users together never take the
 * last min(GMXD_CLIENTS_RESERVE, max_clients / 4) of max_clients. */
long gmxd__clients_reserved(void);

/* Clients one uid other than root and the daemon's may have: max_clients_per_user, or half of
 * max_clients (rounded up) when it is 0. */
long gmxd__clients_per_user(void);


/* ---- device.c ---- */

/* The device the policy drives (see server.c's header comment). */
int64_t gmxd__dev_now(void *ctx);
void gmxd__dev_set_timer(void *ctx, int64_t at);

/* Arms the loop's timerfd for `at` (<= 0: at once). */
void gmxd__arm_timer(int64_t at);
int gmxd__dev_submit(void *ctx, gmx_cmd_t *cmd);
int gmxd__dev_migrate(void *ctx, const gmx_migration_t *m);
void gmxd__dev_lease(void *ctx, uint32_t task, const gmx_lease_t *lease);
/* Before any of oversubscribed client c's memory moves out (or a new allocation of it is
 * known): revokes its lease at once (ahead, in its ring, of the eviction about to be pushed;
 * the client runs an eviction only once its commands in flight, leased ones too, completed)
 * and holds the policy's lease until its memory is back. */
void gmxd__lease_memory_moves(client_t *c);
/* Sends the leases held for memory whose clients' memory is in again (after orders went out). */
void gmxd__lease_retry(void);
/* Whether something for c waits in the action queue (what is sent to c keeps its order). */
int gmxd__has_actions(const client_t *c);

/* Nonzero while some client holds or is being sent a lease (its ring is read every
 * GMXD_LEASE_DRAIN_MS). */
int gmxd__leases_active(void);

/* Nonzero while some client waits for the daemon: a command queued for its grant, an eviction
 * outstanding or a grant behind one, a lease held back until an acknowledgement makes room. */
int gmxd__someone_waits(void);

/* How long the loop may sleep before it reads leased batches (ns), given the adaptive interval
 * (GMXD_LEASE_DRAIN_MS .. GMXD_LEASE_DRAIN_MAX_MS): that interval while some client waits for
 * the daemon (the policy must hear a leased task go idle soon), GMXD_LEASE_IDLE_DRAIN_MS while
 * none does (the batches then only feed accounts and profiles, which carry their own times; a
 * ring at GMX_RING_FILL_MARK wakes the loop anyway). */
int64_t gmxd__drain_interval(int64_t adaptive_ns);

/* Pushes e to c's down ring, waking it if it sleeps; a full ring cuts it off. */
void gmxd__push_down(client_t *c, const gmx_ring_entry_t *e);

/* Sends e to c now, or after the outstanding evictions (keeps ring order). */
void gmxd__send_action(client_t *c, const gmx_ring_entry_t *e);

/* Sends what waited for evictions, once none is outstanding. */
void gmxd__flush_actions(void);

/* ---- client.c ---- */

/* c is about to owe a completion or an eviction's acknowledgement: when it owed nothing, its
 * liveness clock (unresponsive_ms) starts now, not at its last progress, however old. */
void gmxd__owe(client_t *c, int64_t now);

/* Marks c to be cut off (closed at the top of the loop) for `why`. */
void gmxd__cut(client_t *c, const char *why);

/* The same, telling the client `error` (a positive errno: E2BIG for a memory budget). */
void gmxd__cut_err(client_t *c, int error, const char *why);

/* c's command of seq cseq, NULL when it has none; with remove, taken out of c's table. */
dcmd_t *gmxd__hash_take(client_t *c, uint64_t cseq, int remove);
/* The bucket of seq cseq in a client's hash: each aligned run of GMXD_HASH_RUN seqs in the
 * GMXD_HASH_RUN buckets of one cache line, the line chosen by SRV.hash_key. */
size_t gmxd__hash_of(uint64_t cseq);

/* Completes for the policy what was deferred during policy calls. */
void gmxd__run_deferred(void);

/* Frees the commands kept for reuse (gmxd__fini). */
void gmxd__dcmd_pool_free(void);

/* Ends client c (hung up, cut off, or the daemon stopping): releases all it held. */
void gmxd__drop_client(client_t *c, const char *why);

/* Frees a departed client's slot and the commands the policy still held (at shutdown, once
 * the policy is gone). */
void gmxd__free_slot(client_t *c);

/* Granted (not leased) commands of c in flight whose grant c had applied when it acknowledged
 * its last lease: counted from c's commands (gmxd__check compares). */
uint32_t gmxd__known_grants(const client_t *c);

/* Drains every client's up ring, the batches of all rings merged by the times their entries
 * carry (the policy's clock never goes back); returns the number of entries taken. */
int gmxd__poll_rings(void);

/* Makes command d's working set resident before its grant (oversubscribed clients). Returns 1
 * when it ordered loads (the grant must follow them, and the evictions they wait for), else 0. */
int gmxd__plan_memory(client_t *c, dcmd_t *d);

/* The memory planner's orders (mem_orders.c). gmxd__send_load sends a load of v's ptr..ptr+len
 * after the outstanding evictions; gmxd__emit_order is the planner's emit: evictions pushed to
 * their owner at once (its lease revoked ahead), loads as gmxd__send_load (ctx: an int set). */
void gmxd__send_load(client_t *v, uint64_t ptr, uint64_t len);
/* Sends an eviction of v's ptr..ptr+len to v at once, its lease revoked ahead; untouched: the
 * plan kept the work granted to v off this memory, so v runs it without waiting for that work
 * (GMX_MIGRATE_EVICT_NOW; leased work is still waited for). */
void gmxd__send_evict(client_t *v, uint64_t ptr, uint64_t len, int untouched);
void gmxd__emit_order(void *ctx, uint32_t task, int to_device, uint64_t ptr, uint64_t len);

#define GMXD_SLICE_CMDS 256 /* the earliest commands of a task that make its slice */

/* c's commands in `state` that touch memory, but skip: the GMXD_SLICE_CMDS earliest, in launch
 * order, into q (*nq of them). Returns 1 when one of them has no prediction (needs every
 * allocation), else 0. */
int gmxd__task_cmds(client_t *c, const dcmd_t *skip, int state, dcmd_t **q, uint32_t *nq);

/* The order of the oversubscribed clients with queued work in the planner's timeline, next first
 * (core's gmx_timeline_order: best priority first, round robin within a level), into order.
 * Returns how many. */
uint32_t gmxd__timeline_order(uint32_t next, uint32_t *order);

/* Appends the predicted ranges of q[0..nq) to *buf (*len used of *cap). 0 or -ENOMEM. */
int gmxd__append_ranges(dcmd_t *const *q, uint32_t nq, gmx_tpl_range_t **buf, uint32_t *len, uint32_t *cap);

/* One slice of task c: its commands in `state` that touch memory (but skip) in launch order, their
 * ranges appended to *buf from *start on; whole when one of them has no prediction. sl->r is set
 * by the caller once *buf stops moving. 0 or -ENOMEM. */
int gmxd__task_slice(client_t *c, const dcmd_t *skip, int state, gmxd_mem_slice_t *sl, gmx_tpl_range_t **buf,
		     uint32_t *len, uint32_t *cap, uint32_t *start);

/* Rule 6 of the combined policy (docs/combined.md) at the grant of LP command d of c
 * (mem_prefetch.c): the windows of c's queued commands after d that core's
 * gmx_comb_prefetch_cmds takes are planned resident now, never evicting a better priority's
 * memory or what granted work needs; the evictions are pushed at once, the loads kept in *pf
 * for gmxd__prefetch_send, after d's grant, so that they run while d computes. d NULL: a
 * refresh between grants, the work in flight being the current. gmxd__prefetch_refresh is that
 * refresh with its loads sent at once, when c has work in flight and queued (after a batch of
 * its ring that held a notice not granted at once). */
typedef struct {
	gmx_ring_entry_t *e;
	uint32_t n, cap;
} gmxd_prefetch_t;
void gmxd__prefetch_plan(client_t *c, dcmd_t *d, gmxd_prefetch_t *pf);
void gmxd__prefetch_send(client_t *c, gmxd_prefetch_t *pf);
void gmxd__prefetch_refresh(client_t *c);

/* Predicted GPU time of command d (the learned durations of the combined policy; the task's
 * mean when its kernel has none yet; 0 when nothing is known or for other policies). */
int64_t gmxd__comb_run_ns(const dcmd_t *d);

/* Sets the memory planner up for the policy: with GMX_POLICY_MEM_PRIORITY, priorities in every
 * plan and orders cut in pieces of piece_us at link_mb_s. */
void gmxd__mem_policy_init(void);

/* The device's load_ns: how long making cmd's predicted pages resident would take from now at
 * link_mb_s (0 for clients not oversubscribed, or when they are resident). */
int64_t gmxd__dev_load_ns(void *ctx, const gmx_cmd_t *cmd);

/* The gpumux policy's device side (memplan_slice.c). gmxd__comb_params gives the policy learned
 * kernel durations and declared arrivals when it is the combined policy (0 or -ENOMEM);
 * gmxd__comb_fini frees them; gmxd__comb_task_added takes client c's declarations ([task
 * NAME] sections) before the policy hears of it; gmxd__dev_slice_for is the device's
 * slice_for: core's slice rule over the turn's predicted migration, capped by latency
 * targets (0, the policy's slice, for other policies). */
int gmxd__comb_params(gmx_sched_params_t *p);
void gmxd__comb_fini(void);
void gmxd__comb_task_added(const client_t *c);
int64_t gmxd__dev_slice_for(void *ctx, uint32_t task);

/* Marks client c live (in use, not departed) or not: the loops visit only live clients. */
void gmxd__live(const client_t *c, int on);

/* The first live client slot at or after `from`, or -1. */
static inline int gmxd__live_next(int from)
{
	for (int w = from >> 6; w < GMXD_LIVE_WORDS; w++) {
		uint64_t m = SRV.live[w];
		if (w == from >> 6)
			m &= ~0ull << (from & 63);
		if (m)
			return w * 64 + __builtin_ctzll(m);
	}
	return -1;
}
#define GMXD_FOR_LIVE(t) for (int t = gmxd__live_next(0); t >= 0; t = gmxd__live_next(t + 1))

/* ---- store.c ---- */

/* Prepares the profile store: creates profile_dir (mode 0700) and proves it writable, makes
 * the files already there private, removes unfinished saves. 0, or a negative errno with the
 * reason in err. */
int gmxd__store_open(char *err, size_t err_len);

/* Loads the stored profile of task `name` into *p when there is one (a bad file is logged). */
void gmxd__store_load(const char *name, gmx_kprof_t *p);

/* Writes a snapshot of task `name`'s profile to the store, when it has learned anything:
 * mode 0600, flushed to disk before it replaces the previous file. */
void gmxd__store_save(const char *name, gmx_kprof_t *p);

/* The last client of task `name` left at `now`: its profile is saved now, or, when it was
 * saved less than GMXD_SAVE_INTERVAL_NS ago, by gmxd__store_tick once that interval has
 * passed (clients coming and going cannot make the loop write and flush at their pace). */
void gmxd__store_left(const char *name, int64_t now);

/* Saves the profiles whose save is due at `now`; with flush_all, every one that learned
 * anything since its last save (shutdown). */
void gmxd__store_tick(int64_t now, int flush_all);

/* The profile of task `name` for a new client: the one kept, else loaded from the store (or
 * empty, to be measured) into a free entry or the least recently used one no client holds.
 * NULL when every entry is held or out of memory (the task is then not measured). */
gmx_kprof_t *gmxd__store_get(const char *name);

/* ---- status.c ---- */

/* Sends the STATUS reply (JSON) on fd, without blocking. */
void gmxd__status_reply(int fd);

/* ---- metrics.c ---- */

/* Gives client c its identity (name, priority, uid, container), creating it if needed: a free
 * entry, else the one unused longest with no client connected. */
void gmxd__metrics_join(client_t *c);

/* Adds departing client c's counters to its identity's. */
void gmxd__metrics_leave(client_t *c);

/* Counts a grant after latency_ns for c (kernel: a kernel launch). */
void gmxd__metrics_grant(client_t *c, int64_t latency_ns, int kernel);

/* Counts a refusal of `kind` for the peer cr (NULL: unknown). */
void gmxd__metrics_refusal(const struct ucred *cr, int kind);

/* Renders the Prometheus text exposition (format 0.0.4) of the daemon's state at `now` into
 * buf (cap bytes, NUL-terminated); returns its length. Cut at a line when cap is short. */
size_t gmxd__metrics_render(char *buf, size_t cap, int64_t now);

/* Sends the METRICS reply on fd (chunks of GMXD_METRICS_CHUNK, the last flagged), without
 * blocking. */
void gmxd__metrics_reply(int fd);

/* The container id (64 hex digits) named in a /proc/PID/cgroup text, into out: the last path
 * component holding exactly 64 hex digits (docker-ID.scope, cri-containerd-ID.scope,
 * crio-ID.scope, libpod-ID.scope, /docker/ID, /kubepods/.../ID). 1 if found, else 0 and "". */
int gmxd_container_id(const char *cgroup, char *out, size_t len);

/* ---- http.c ---- */

/* Starts the HTTP metrics endpoint on cfg->metrics_listen (nothing when empty): binds it,
 * adds it to the loop. 0, or a negative errno with the reason logged. */
int gmxd__http_start(void);

/* Serves what is ready on the endpoint, without blocking. */
void gmxd__http_run(void);

/* Milliseconds until the endpoint needs gmxd__http_run for its own timeouts, capped at cap
 * (-1: never, when cap is -1). */
int gmxd__http_timeout(int cap);

/* Stops the endpoint and closes its connections. */
void gmxd__http_stop(void);

#endif
