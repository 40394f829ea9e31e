/*
 * The gpumuxd protocol, version 1 (docs/protocol.md is the reference).
 *
 * Two channels per client:
 *  - the control socket (AF_UNIX, SOCK_SEQPACKET, $GPUMUX_RUNTIME_DIR/gpumuxd.sock): HELLO,
 *    WELCOME (with three descriptors: the shared region, the client's and the daemon's
 *    eventfds), REFUSED, STATUS_REQ/STATUS. Its hang-up is how each side learns the other died.
 *  - the shared region (a memfd the daemon creates): two single-producer single-consumer rings
 *    of fixed 32-byte entries, "up" (client to daemon: notices, completions, allocations) and
 *    "down" (daemon to client: grants, migration orders). A producer writes the consumer's
 *    eventfd only when the consumer has said it sleeps (ring.waiting), so a busy pair exchanges
 *    launch notices, grants and completions without a system call.
 *
 * Every field a peer wrote is checked by the reader: indices, types, lengths, strings.
 * The header is shared by the daemon and the shim and depends on nothing but libc.
 */
#ifndef GMX_PROTO_H
#define GMX_PROTO_H

#include <stdint.h>

#define GMX_PROTO_MAGIC 0x50584d47u /* "GMXP" little-endian */
/* 2: HOST_WAIT and RANGE entries; 3: leases; 4: runs; 5: leases of oversubscribed clients (LEASE
 * y, evictions after leased work); 6: evictions that need not wait for granted work (MIGRATE a = 2);
 * 7: AHEAD entries (commands queued behind their stream's head, announced without asking a grant) */
#define GMX_PROTO_VERSION 7u
#define GMX_SOCKET_NAME "gpumuxd.sock"
#define GMX_RUNTIME_DIR_DEFAULT "/run/gpumux"
#define GMX_NAME_MAX 64
#define GMX_RING_ENTRIES 1024u /* power of two */
#define GMX_CTRL_MAX 65536     /* largest control message (a STATUS reply) */

enum {
	GMX_MSG_HELLO = 1,  /* client -> daemon: register */
	GMX_MSG_WELCOME,    /* daemon -> client: accepted, SCM_RIGHTS {region, efd_up, efd_down} */
	GMX_MSG_REFUSED,    /* daemon -> client: refused, with an errno and a reason */
	GMX_MSG_STATUS_REQ, /* anyone allowed -> daemon: a status snapshot */
	GMX_MSG_STATUS,	    /* daemon -> requester: JSON text, NUL-terminated */
	GMX_MSG_METRICS_REQ, /* anyone allowed -> daemon: the metrics (Prometheus text) */
	GMX_MSG_METRICS,     /* daemon -> requester: gmx_msg_metrics_t chunks, the last flagged */
};

/* Every control message starts with this header; length counts the bytes after it. */
typedef struct {
	uint32_t magic;
	uint16_t version;
	uint16_t type;
	uint32_t length;
	uint32_t reserved;
} gmx_msg_hdr_t;

#define GMX_HELLO_OVERSUBSCRIBE 1u /* allocations are managed memory; obey migration orders */

typedef struct {
	gmx_msg_hdr_t h;
	int32_t priority; /* 0 (highest) .. 9 */
	uint32_t flags;
	int32_t pid;
	uint32_t reserved;
	char name[GMX_NAME_MAX]; /* NUL-terminated task name (profile key) */
} gmx_msg_hello_t;

typedef struct {
	gmx_msg_hdr_t h;
	uint32_t client_id;
	uint32_t ring_entries;
	uint64_t region_bytes;
	int64_t slice_ns;
	char policy[32];
} gmx_msg_welcome_t;

typedef struct {
	gmx_msg_hdr_t h;
	int32_t error; /* a positive errno: EACCES, EBUSY, EPROTO, ... */
	uint32_t reserved;
	char reason[200];
} gmx_msg_refused_t;

/* One chunk of the METRICS reply: text (not NUL-terminated) follows, h.length - 8 bytes of it.
 * A reply is one or more chunks; the last has GMX_METRICS_LAST. */
#define GMX_METRICS_LAST 1u
typedef struct {
	gmx_msg_hdr_t h;
	uint32_t flags;
	uint32_t reserved;
} gmx_msg_metrics_t;

/* Command kinds in a notice (the shim's gmx_cmd_kind_t values). */
#define GMX_PROTO_KIND_GRAPH 4u
#define GMX_PROTO_KIND_COPY 5u
#define GMX_PROTO_KIND_MEMSET 6u
/* Kinds that touch device memory: launches (0-2), graphs, copies, memsets (not host functions,
 * event records or stream waits). */
#define GMX_PROTO_KIND_TOUCHES_MEMORY(k)                                                                     \
	((k) <= 2u || ((k) >= GMX_PROTO_KIND_GRAPH && (k) <= GMX_PROTO_KIND_MEMSET))
#define GMX_CMD_KIND_COUNT_PROTO 9u

/* The unit of the daemon's memory planner and of migration orders: 2 MiB, the driver's
 * large-page granularity for managed memory. */
#define GMX_MIG_CHUNK (2ull << 20)

/* Predicted ranges one command may carry (a template's terms, see gpumux/template.h). */
#define GMX_RANGES_MAX 64u

/* Commands a client may have announced ahead (AHEAD) and not yet noticed or released: more is a
 * protocol error, so what a client announces and never launches costs a bounded amount. */
#define GMX_AHEAD_MAX 64u

/* A migration order's direction and when it runs (MIGRATE's a). */
enum {
	GMX_MIGRATE_EVICT = 0,	   /* to host, once the work granted before it has finished */
	GMX_MIGRATE_LOAD = 1,	   /* to device */
	GMX_MIGRATE_EVICT_NOW = 2, /* to host at once: the daemon kept the work it granted off this
				    * memory (the work released under a lease is still waited for) */
};

/* Ring entry types. */
enum {
	/* up */
	GMX_UP_NOTICE = 1, /* seq; a = kind, x = kernel id, y = bytes (copies) */
	GMX_UP_COMPLETE,   /* seq: a granted command completed; of leased ones, a = n - 1: the run
			    * seq .. seq+n-1 completed, seen at y (CLOCK_MONOTONIC ns) */
	GMX_UP_ALLOC,	   /* x = address, y = size: managed allocation made */
	GMX_UP_FREE,	   /* x = address */
	GMX_UP_MIG_DONE,   /* seq = order token: a migration order finished; a = 1 a load, 0 an eviction */
	GMX_UP_HOST_WAIT,  /* a host thread blocks on the device (a synchronisation) */
	GMX_UP_RANGE,	   /* seq: the command's predicted working set includes x .. x+y; sent
			    * before that command's NOTICE, at most GMX_RANGES_MAX per command */
	GMX_UP_RELEASED,   /* seq: released under the lease in effect, never noticed; a = kind
			    * | (n - 1) << GMX_RUN_SHIFT: a run of n (the seqs seq .. seq+n-1, each
			    * with the same kind and kernel id), x = kernel id, y = when (CLOCK_MONOTONIC
			    * ns; of a run: its last release, at most GMX_RUN_SPAN_NS after its first) */
	GMX_UP_LEASE_ACK,  /* seq = the lease id now in effect; x = the last seq released under a
			    * lease before it (0: none yet) */
	GMX_UP_AHEAD,	   /* seq: queued behind its stream's head, announced ahead of its turn (never
			    * granted as such); a, x, y as NOTICE's, its RANGEs before it; seqs rise
			    * from one AHEAD to the next; its NOTICE (or RELEASED) later carries no RANGE
			    * and the same kind and kernel id; at most GMX_AHEAD_MAX outstanding */
	/* down */
	GMX_DOWN_GRANT = 64, /* seq: may be released */
	GMX_DOWN_MIGRATE,    /* seq = token; a = GMX_MIGRATE_*; x = address, y = length */
	GMX_DOWN_LEASE,	     /* seq = lease id (1, 2, ... per session); a = commands in flight (leased
			      * or granted) below which one goes under it (0 revokes); x = no release from this
			      * CLOCK_MONOTONIC ns on (0:      no end) */
};

/* Runs (protocol 4): one RELEASED or leased COMPLETE entry names up to GMX_RUN_MAX consecutive
 * seqs, so that a client launching back to back writes and the daemon reads one entry per run
 * instead of one per command; the daemon hears each command of the run in order, as if sent
 * one by one. A run of releases spans at most GMX_RUN_SPAN_NS (the time the policy hears them at
 * is the last one's). */
#define GMX_RUN_SHIFT 8u
#define GMX_RUN_MAX 64u
#define GMX_RUN_SPAN_NS 2000

/* The commands after the first that an up entry of this type and `a` names (0: one command). */
static inline uint32_t gmx_run_more(uint32_t type, uint32_t a)
{
	return type == GMX_UP_RELEASED ? a >> GMX_RUN_SHIFT : type == GMX_UP_COMPLETE ? a : 0;
}

/* Up-ring entries that travel in batches (leased releases, their completions, lease
 * acknowledgements) wake a sleeping daemon only once the ring holds this many; otherwise it
 * reads them when it wakes for another reason or at the latest every GMXD_LEASE_DRAIN_MS. */
#define GMX_RING_FILL_MARK (GMX_RING_ENTRIES / 2)

/* ring.waiting: 0 the consumer is awake, GMX_RING_WAIT_BATCH it sleeps but reads batched
 * entries by itself soon (wake it for the others), GMX_RING_WAIT_ANY it sleeps with no such
 * deadline (wake it for any entry). */
#define GMX_RING_WAIT_BATCH 1u
#define GMX_RING_WAIT_ANY 2u

typedef struct {
	uint32_t type;
	uint32_t a;
	uint64_t seq;
	uint64_t x, y;
} gmx_ring_entry_t;

/* A single-producer single-consumer ring. head is the consumer's, tail the producer's;
 * each on its own cache line. waiting: the consumer is going to sleep on its eventfd. */
typedef struct {
	_Alignas(64) uint32_t head;
	_Alignas(64) uint32_t tail;
	_Alignas(64) uint32_t waiting;
	_Alignas(64) gmx_ring_entry_t e[GMX_RING_ENTRIES];
} gmx_ring_t;

typedef struct {
	uint32_t magic, version;
	uint32_t client_id, reserved;
	gmx_ring_t up, down;
} gmx_shm_region_t;

/* Pushes one entry; 0, or -1 when the ring is full (or its indices are corrupt). Returns
 * through *wake whether the consumer sleeps and must be woken through its eventfd. */
static inline int gmx_ring_push(gmx_ring_t *r, const gmx_ring_entry_t *e, int *wake)
{
	uint32_t tail = __atomic_load_n(&r->tail, __ATOMIC_RELAXED);
	uint32_t head = __atomic_load_n(&r->head, __ATOMIC_ACQUIRE);
	if (tail - head >= GMX_RING_ENTRIES)
		return -1;
	r->e[tail & (GMX_RING_ENTRIES - 1)] = *e;
	__atomic_store_n(&r->tail, tail + 1, __ATOMIC_RELEASE);
	/* Pairs with the consumer's fence between setting waiting and re-checking the ring. */
	__atomic_thread_fence(__ATOMIC_SEQ_CST);
	*wake = __atomic_load_n(&r->waiting, __ATOMIC_RELAXED) != 0;
	if (*wake)
		__atomic_store_n(&r->waiting, 0, __ATOMIC_RELAXED);
	return 0;
}

/* Pushes one entry without waking the consumer: for hints it needs only by the time it next
 * wakes for another reason (entries are read in order). 0, or -1 when the ring is full. */
static inline int gmx_ring_push_quiet(gmx_ring_t *r, const gmx_ring_entry_t *e)
{
	uint32_t tail = __atomic_load_n(&r->tail, __ATOMIC_RELAXED);
	uint32_t head = __atomic_load_n(&r->head, __ATOMIC_ACQUIRE);
	if (tail - head >= GMX_RING_ENTRIES)
		return -1;
	r->e[tail & (GMX_RING_ENTRIES - 1)] = *e;
	__atomic_store_n(&r->tail, tail + 1, __ATOMIC_RELEASE);
	return 0;
}

/* Pushes an entry that travels in a batch (docs/protocol.md, "Batching") when the caller knows
 * the ring has room (gmx_ring_space, counted down since): the entry and tail, no fence and no
 * look at the consumer. The producer calls gmx_ring_batch_wake within a bounded number of such
 * pushes (or pushes with gmx_ring_push), which wakes a consumer that must be woken. */
static inline void gmx_ring_push_lazy(gmx_ring_t *r, const gmx_ring_entry_t *e)
{
	uint32_t tail = __atomic_load_n(&r->tail, __ATOMIC_RELAXED);
	r->e[tail & (GMX_RING_ENTRIES - 1)] = *e;
	__atomic_store_n(&r->tail, tail + 1, __ATOMIC_RELEASE);
}

/* After batched entries were pushed: nonzero when the consumer must be woken through its
 * eventfd, which is when the ring holds GMX_RING_FILL_MARK entries or more, or when the consumer
 * sleeps without a deadline (GMX_RING_WAIT_ANY); a busy consumer, or one that reads batches by
 * itself soon, is never woken. */
static inline int gmx_ring_batch_wake(gmx_ring_t *r)
{
	/* Pairs with the consumer's fence between setting waiting and re-checking the ring. */
	__atomic_thread_fence(__ATOMIC_SEQ_CST);
	uint32_t fill = __atomic_load_n(&r->tail, __ATOMIC_RELAXED) - __atomic_load_n(&r->head, __ATOMIC_ACQUIRE);
	uint32_t w = __atomic_load_n(&r->waiting, __ATOMIC_RELAXED);
	if (w == GMX_RING_WAIT_ANY || (w && fill >= GMX_RING_FILL_MARK))
		return __atomic_exchange_n(&r->waiting, 0, __ATOMIC_RELAXED) != 0;
	return 0;
}

/* Pushes an entry that travels in a batch and looks at once whether the consumer must be woken
 * (gmx_ring_batch_wake; through *wake). 0, or -1 when the ring is full. */
static inline int gmx_ring_push_batched(gmx_ring_t *r, const gmx_ring_entry_t *e, int *wake)
{
	*wake = 0;
	if (gmx_ring_push_quiet(r, e) != 0)
		return -1;
	*wake = gmx_ring_batch_wake(r);
	return 0;
}

/* Free entries for a producer; 0 when the indices are corrupt. */
static inline uint32_t gmx_ring_space(const gmx_ring_t *r)
{
	uint32_t tail = __atomic_load_n(&r->tail, __ATOMIC_RELAXED);
	uint32_t head = __atomic_load_n(&r->head, __ATOMIC_ACQUIRE);
	return tail - head > GMX_RING_ENTRIES ? 0 : GMX_RING_ENTRIES - (tail - head);
}

/* Pops one entry into *e; 1 if one was taken, 0 if empty, -1 if the producer's index is
 * impossible (a corrupt or hostile peer). */
static inline int gmx_ring_pop(gmx_ring_t *r, gmx_ring_entry_t *e)
{
	uint32_t head = __atomic_load_n(&r->head, __ATOMIC_RELAXED);
	uint32_t tail = __atomic_load_n(&r->tail, __ATOMIC_ACQUIRE);
	if (tail == head)
		return 0;
	if (tail - head > GMX_RING_ENTRIES)
		return -1;
	*e = r->e[head & (GMX_RING_ENTRIES - 1)];
	__atomic_store_n(&r->head, head + 1, __ATOMIC_RELEASE);
	return 1;
}

/* The consumer announces it will sleep (how: GMX_RING_WAIT_BATCH or GMX_RING_WAIT_ANY);
 * returns nonzero if the ring is already non-empty (then it must not sleep). */
static inline int gmx_ring_prepare_sleep_as(gmx_ring_t *r, uint32_t how)
{
	__atomic_store_n(&r->waiting, how, __ATOMIC_RELAXED);
	__atomic_thread_fence(__ATOMIC_SEQ_CST);
	return __atomic_load_n(&r->tail, __ATOMIC_ACQUIRE) != __atomic_load_n(&r->head, __ATOMIC_RELAXED);
}

/* The consumer announces it will sleep until woken (GMX_RING_WAIT_BATCH, the wake-ups of
 * every unbatched push); nonzero if the ring is already non-empty. */
static inline int gmx_ring_prepare_sleep(gmx_ring_t *r)
{
	return gmx_ring_prepare_sleep_as(r, GMX_RING_WAIT_BATCH);
}

/* Fills a control header. */
static inline void gmx_msg_init(gmx_msg_hdr_t *h, uint16_t type, uint32_t total)
{
	h->magic = GMX_PROTO_MAGIC;
	h->version = GMX_PROTO_VERSION;
	h->type = type;
	h->length = total - (uint32_t)sizeof *h;
	h->reserved = 0;
}

#endif
