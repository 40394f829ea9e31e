/*
 * The interposer's link to gpumuxd, shared by the three files of the "daemon" grant policy:
 *   grant_daemon.c  the grant policy (notices, grants, completions), its seq table, set-up, fork
 *   daemon_conn.c   the connection thread: connect, HELLO/WELCOME, the down ring, migrations
 *   daemon_alloc.c  managed allocations (GPUMUX_OVERSUBSCRIBE=1) and their replay per session
 *
 * Locks, in the order they are taken (never the other way round):
 *   D.alloc_lock   the allocation list; held across waits for ring room (the queue lock released
 *                  meanwhile), never taken by a caller that holds the queue lock
 *   the queue lock (queue.c; held around every call of the grant policy) also guards the
 *                  session: socket, region, both rings' client ends, seq table, lease book, the
 *                  run being gathered, the entries' clock. So the policy's calls (a leased launch
 *                  among them) take no lock of their own; the connection thread and allocations
 *                  take the queue lock (gmx_shim_queue_lock) for what they do to the session,
 *                  briefly: never across connect, poll, a wait for ring room, a migration or a
 *                  call into the queue or GPU
 *   D.lock         the connection thread's start only (thread_started, first_done, first_cv)
 * A connection attempt (which may block for GMX_CONNECT_TIMEOUT_MS) is made by the connection
 * thread only, holding no lock at all.
 */
#ifndef GMX_SHIM_DAEMON_LINK_H
#define GMX_SHIM_DAEMON_LINK_H

#include "shim_internal.h"

#include "gmx_proto.h"
#include "lease.h"
#include "stamp.h"

#include <pthread.h>

/* Tunables: default and bounds in one place. */
#define GMX_RECONNECT_MS_DEFAULT 250 /* retry period while no daemon answers */
#define GMX_RECONNECT_MS_MIN 10
#define GMX_RECONNECT_MS_MAX 60000
#define GMX_CONNECT_TIMEOUT_MS 2000 /* connect + HELLO + WELCOME, all told */
#define GMX_RING_WAIT_MS 2000	    /* an up ring the daemon does not drain for this long ends the session */
#define GMX_RING_RESERVE 256	    /* up-ring entries ALLOC/FREE leave to notices and completions */
#define SEQ_TABLE 8192		    /* tracked seqs (held heads plus in-flight), power of two */
#define GMX_LEASE_RING_RESERVE                                                                               \
	16 /* up-ring entries a leased release leaves to acknowledgements and hints                          \
	    */
#define GMX_BATCH_CHECK                                                                                      \
	32	       /* batched up-ring entries pushed between two looks at the daemon (gmx_dl_flush)      \
			*/
#define ALLOC_MAX 4096 /* managed allocations reported to the daemon */
#define GMX_BUDGET_RETRY_MS 5000      /* over its memory budget and nothing freed: first retry after */
#define GMX_BUDGET_RETRY_MAX_MS 60000 /* ... doubling up to this */

/* ST_AHEAD: announced ahead (AHEAD), not yet noticed. Leased commands: the lease book (lease.h). */
enum { ST_FREE = 0, ST_NOTICED, ST_GRANTED, ST_TOMB, ST_AHEAD };

typedef struct {
	uint64_t seq;
	int state;
} seq_slot_t;

typedef struct {
	CUdeviceptr ptr;
	size_t size;
	CUcontext ctx;
} alloc_rec_t;

typedef struct {
	pthread_mutex_t lock;	    /* the connection thread's start (the session: the queue lock) */
	pthread_cond_t first_cv;    /* signalled when the first connection attempt concluded */
	pthread_mutex_t alloc_lock; /* allocs[], nallocs */
	int connected;		    /* atomic read on the fast path */
	int thread_started;	    /* atomic read on the fast path */
	int first_done;		    /* the connection thread's first attempt concluded */
	int sock, efd_up, efd_down;
	gmx_shm_region_t *region;
	size_t region_bytes;
	int desync;    /* a push failed where it must not: reconnect */
	int migrating; /* the thread runs an order: later grants wait for it */
	seq_slot_t tbl[SEQ_TABLE];
	unsigned used;	  /* slots not FREE (tombstones included) */
	unsigned granted; /* slots GRANTED: granted by the daemon, not yet completed */
	/* The lease in effect (docs/protocol.md) and its commands in flight (lease.seqs). */
	gmx_shim_lease_t lease;
	uint64_t leased_total; /* releases under a lease, all sessions (the shim's log at exit) */
	/* Batched entries (leased releases, their completions, lease acknowledgements) pushed since
	 * the last look whether the daemon must be woken (gmx_dl_flush). */
	unsigned unchecked;
	/* The batched entry not yet pushed: a run of leased releases or completions (gmx_proto.h,
	 * "Runs") that the next such command may extend; pushed before any other entry, at every look
	 * at the daemon (gmx_dl_flush) and when it cannot grow. run_n: the commands it names (0: none). */
	gmx_ring_entry_t run;
	uint32_t run_n;
	int64_t run_t0;	  /* the time of its first command */
	uint32_t up_room; /* free up-ring entries when last looked (gmx_dl_up_room), less pushes since */
	/* Announcements ahead this session (protocol 7): the last one's seq (each rises above it, so
	 * a command of another stream older than it is noticed in its turn only) and how many are
	 * not yet noticed or released (at most GMX_AHEAD_MAX, as the daemon checks). */
	uint64_t ahead_last;
	uint32_t ahead_now;
	/* counts for the shim log at exit (tests read them) */
	uint64_t n_batched, n_entries, n_looks, n_lease_calls, n_clock, n_ahead;
	char dir[4096], name[GMX_NAME_MAX];
	int priority, oversub;
	long reconnect_ms;
	alloc_rec_t allocs[ALLOC_MAX];
	int nallocs;
	uint64_t alloc_bytes;	/* sum of allocs[].size */
	uint64_t refused_bytes; /* over budget: alloc_bytes when the daemon refused them (0: not) */
	CUcontext mig_ctx;
	CUstream mig_stream;
} gmx_dlink_t;

extern GMX_HIDDEN gmx_dlink_t gmx_dl;

/* Nonzero when the daemon policy is the shim's policy. */
int gmx_dl_active(void);

/* Milliseconds of CLOCK_MONOTONIC. */
int64_t gmx_dl_now_ms(void);

/* Pushes to the up ring, waking the daemon if it sleeps; the queue lock held, region mapped. 0 or -1
 * (full). */
int gmx_dl_push_up(uint32_t type, uint32_t a, uint64_t seq, uint64_t x, uint64_t y);

/* Marks the session for a restart (a push that must not fail did) and wakes the thread; the
 * queue lock held. */
void gmx_dl_desync_locked(void);

/* Unmaps the region, closes the socket and eventfds and forgets the seq table: no session
 * (nothing logged); the queue lock held. */
void gmx_dl_forget_session(void);

/* Forgets the seq table and the lease (a new session, or none); the queue lock held. */
void gmx_dl_seq_clear(void);

/* Pushes an entry that travels in a batch (a leased release, its completion, a lease
 * acknowledgement) without a look at the daemon: every GMX_BATCH_CHECK such entries (and at
 * gmx_dl_flush) it is woken if the up ring passed GMX_RING_FILL_MARK or it sleeps with no
 * deadline to read them. The queue lock held, region mapped. 0 or -1 (full). */
int gmx_dl_push_batched(uint32_t type, uint32_t a, uint64_t seq, uint64_t x, uint64_t y);

/* gmx_dl_push_batched for n commands seq .. seq + n - 1 of one type at one time (completions
 * seen together): the run being gathered grows by as many as it takes at once. 0 or -1 (full). */
int gmx_dl_push_batched_n(uint32_t type, uint32_t a, uint64_t seq, uint32_t n, uint64_t x, uint64_t y);

/* Pushes the run being gathered (if any) to the up ring, into the room reserved when it began
 * (so it never fails: 0; an int for the callers, which treat a failed push of theirs alike). The
 * queue lock held, region mapped. */
int gmx_dl_run_push(void);

/* Looks whether the daemon must be woken for the batched entries pushed since the last look
 * (gmx_ring_batch_wake) and wakes it; 1 if there were any, else 0. The queue lock held, region mapped. */
int gmx_dl_flush(void);

/* Nonzero when the up ring has room for need more entries: counted down from the last look at
 * the daemon's head, which is read again only when that count falls short. The queue lock held, region
 * mapped. */
int gmx_dl_up_room(uint32_t need);

/* Applies one down-ring entry that is not a migration order: a GRANT marks its seq, a LEASE
 * replaces the lease in effect and is acknowledged. Returns 1 for a grant that counted, else 0.
 * the queue lock held. */
int gmx_dl_apply_down(const gmx_ring_entry_t *e);

/* Nanoseconds of CLOCK_MONOTONIC. */
int64_t gmx_dl_now_ns(void);

/* The leased path's clock (daemon_conn.c): the TSC's fit against CLOCK_MONOTONIC. */
#define GMX_STAMP_REFIT_NS 1000000 /* an anchor serves this long; then clock_gettime again */
typedef struct {
	int state;		 /* 0 not looked yet, -1 clock_gettime only, 1 fitting, 2 fitted */
	uint64_t c0, ca;	 /* TSC at the start of the fit, at the anchor */
	int64_t t0, ta;		 /* CLOCK_MONOTONIC ns at the same moments */
	gmx_stamp_scale_t scale; /* the fitted rate (state 2); its max_ticks spans GMX_STAMP_REFIT_NS */
	int64_t last;		 /* the last stamp given: they never go back */
} gmx_dl_stamp_t;
extern GMX_HIDDEN gmx_dl_stamp_t gmx_dl_stamp;

/* gmx_dl_stamp_ns when the fitted TSC cannot serve: looks, anchors, fits, or reads the clock. */
int64_t gmx_dl_stamp_slow(void);

/* CLOCK_MONOTONIC nanoseconds for the times entries carry, cheaply: from the TSC where it is
 * invariant (fitted to the clock, re-anchored every millisecond), else the clock itself; never
 * less than the stamp before. Inline: it is read on every leased release. The queue lock held. */
static inline int64_t gmx_dl_stamp_ns(void)
{
#if defined(__x86_64__)
	if (GMX_LIKELY(gmx_dl_stamp.state == 2)) {
		/* A TSC behind the anchor wraps to a count above max_ticks: the slow path re-anchors. */
		uint64_t dt = __builtin_ia32_rdtsc() - gmx_dl_stamp.ca;
		if (GMX_LIKELY(dt < gmx_dl_stamp.scale.max_ticks)) {
			int64_t t = gmx_dl_stamp.ta + gmx_stamp_ticks_ns(dt, gmx_dl_stamp.scale.mult);
			return t < gmx_dl_stamp.last ? gmx_dl_stamp.last : (gmx_dl_stamp.last = t);
		}
	}
#endif
	return gmx_dl_stamp_slow();
}

/* Nonzero when gmx_dl_stamp_ns reads the TSC (it has looked, and the TSC is invariant). */
int gmx_dl_stamp_tsc(void);

/* The slot of a seq that is noticed or granted, or NULL; the queue lock held. */
seq_slot_t *gmx_dl_seq_find(uint64_t s);

/* Starts the connection thread if it is not running; the caller that starts it waits (holding
 * no lock) until its first attempt concluded, so a process started under a running daemon is
 * scheduled from its first command on. Never called with the queue lock held. */
void gmx_dl_start(void);

/* Sends the allocation list to a new session, waiting for ring room as the daemon drains it;
 * D.alloc_lock held, the queue lock not. 0, or -1 when the daemon hung up or took nothing for
 * GMX_RING_WAIT_MS (the attempt then fails and is retried; the daemon never keeps a partial
 * list, since a failed session is closed). */
int gmx_dl_replay_allocs(int sock);

/* Looks up the allocation holding ptr: its context and the length from ptr to its end, or
 * NULL when none holds it (freed meanwhile). Takes D.alloc_lock. */
CUcontext gmx_dl_alloc_find(uint64_t ptr, uint64_t *len);

#endif
