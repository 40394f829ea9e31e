/*
 * gpumuxd internals: configuration, clients, the real-time device the core policies drive.
 *
 * The daemon is one thread: an epoll loop over the listening socket, each client's socket and
 * eventfd, a timerfd for the policy's timer and a signalfd. It never blocks on a client: all
 * sockets are non-blocking, and a client whose ring is full or who stops completing granted
 * work is cut off. No locks: nothing is shared between threads.
 */
#ifndef GMX_DAEMON_H
#define GMX_DAEMON_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

#include "gmx_proto.h"
#include "gpumux/sched.h"

/* Tunables: default and bounds in one place (config keys in docs/daemon.md). */
#define GMXD_SLICE_US_DEFAULT 2000
#define GMXD_SLICE_US_MIN (GMX_SLICE_NS_MIN / 1000) /* core's bounds (gpumux/sched.h), in us */
#define GMXD_SLICE_US_MAX (GMX_SLICE_NS_MAX / 1000)
#define GMXD_INFLIGHT_DEFAULT 2
#define GMXD_INFLIGHT_MIN GMX_INFLIGHT_MIN
#define GMXD_INFLIGHT_MAX GMX_INFLIGHT_MAX
#define GMXD_MAX_CLIENTS_DEFAULT 32
#define GMXD_MAX_CLIENTS_MAX (GMX_MAX_TASKS - 1)
#define GMXD_UNRESPONSIVE_MS_DEFAULT 5000 /* longer than any kernel the operator runs */
#define GMXD_UNRESPONSIVE_MS_MIN 100
#define GMXD_UNRESPONSIVE_MS_MAX 3600000
#define GMXD_DEVICE_MEMORY_MB_DEFAULT 16384
#define GMXD_DEVICE_MEMORY_MB_MAX (1 << 24)
#define GMXD_SPIN_US_DEFAULT 0 /* busy-poll the rings before sleeping (0: never) */
#define GMXD_SPIN_US_MAX 10000
/* The combined policy (`gpumux`, docs/combined.md): the host-device link's rate, which turns
 * missing bytes into load time, and the most time one migration order may hold the link. */
#define GMXD_LINK_MB_S_DEFAULT 25000 /* 25 GB/s: PCIe 4.0 x16 in practice, and the stand-in's */
#define GMXD_LINK_MB_S_MAX 10000000
#define GMXD_PIECE_US_DEFAULT 2000 /* about one time slice */
#define GMXD_PIECE_US_MIN 10
#define GMXD_PIECE_US_MAX 1000000
/* The gpumux policy's per-task declarations ([task NAME] sections, docs/daemon.md): a latency
 * target and an arrival period per task name. */
#define GMXD_TASK_CFG_MAX 32
#define GMXD_TARGET_MS_MAX 3600000L	/* 1 h */
#define GMXD_PERIOD_US_MIN 100L		/* 0.1 ms */
#define GMXD_PERIOD_US_MAX 3600000000L /* 1 h */
/* A Poisson arrival rate: from one request an hour to one per GMXD_PERIOD_US_MIN. */
#define GMXD_RATE_PER_S_MIN (1.0 / 3600.0)
#define GMXD_RATE_PER_S_MAX 10000.0
#define GMXD_ALLOW_MAX 32
#define GMXD_CLIENTS_RESERVE 4 /* of max_clients, kept for root and the daemon's user */
#define GMXD_ALLOCS_PER_CLIENT 4096
#define GMXD_CMDS_PER_CLIENT 4096 /* announced and not completed: the interposer tracks as many */
#define GMXD_LAT_SAMPLES 1024	  /* recent notice-to-grant latencies kept per client */
#define GMXD_LEASES_PENDING 16	  /* leases sent to a client and not acknowledged yet */
#define GMXD_LEASE_DRAIN_MS 1	  /* while a client holds a lease, its ring is read every 1 ms at first */
#define GMXD_LEASE_DRAIN_MAX_MS 8 /* ... and at least this often while its batches are small */
#define GMXD_DRAIN_BATCH 128	  /* entries a timed read aims at: fewer double the interval, 4x halve it */
#define GMXD_LEASE_IDLE_DRAIN_MS 50 /* ... but only this often while no client waits for the daemon (nothing queued) */
#define GMXD_TICK_NS 10000000LL /* the loop's housekeeping (liveness, pending connections, saves) at most this often */
#define GMXD_QUIET_DRAINS 4 /* timed reads of leased batches that find nothing before the loop sleeps until woken */
#define GMXD_DCMD_POOL 4096 /* freed commands kept for reuse */
#define GMXD_PROFILE_ENTRIES_MAX 2048 /* (kernel, context) pairs learned per task name */
#define GMXD_SAVE_INTERVAL_NS 10000000000LL /* a task's profile is written at most this often */

/* Metrics (docs/metrics.md): the Prometheus text is rendered on request into a buffer of at most
 * GMXD_METRICS_MAX bytes; the HTTP endpoint serves at most GMXD_HTTP_CONNECTIONS connections
 * (GMXD_HTTP_PER_IP from one address), each within GMXD_HTTP_MEMORY bytes of request (headers
 * included: larger requests get 431/413) and GMXD_HTTP_TIMEOUT_S seconds of inactivity. */
#define GMXD_METRICS_MAX (1u << 20)
#define GMXD_METRICS_CHUNK 60000u /* bytes of text per METRICS message on the socket */
#define GMXD_IDENT_MAX 160	  /* client identities (name, priority, uid, container) with series */
#define GMXD_REF_UIDS 32	  /* uids with refusal series of their own; the rest are "other" */
#define GMXD_LAT_BUCKETS 14	  /* finite buckets of the notice-to-grant histogram */
#define GMXD_CONTAINER_ID_MAX 65 /* 64 hex digits and a NUL */
#define GMXD_HTTP_CONNECTIONS 8
#define GMXD_HTTP_PER_IP 4
#define GMXD_HTTP_MEMORY 16384
#define GMXD_HTTP_TIMEOUT_S 5

/* Connections before their first message (docs/daemon.md, "Connections"). Disallowed peers
 * never wait: they are refused at accept. */
#define GMXD_PENDING_MAX 256		     /* at most; fewer when the descriptor limit is low */
#define GMXD_PENDING_PER_UID 16		     /* per uid other than root and the daemon's own */
#define GMXD_PENDING_RESERVE 32		     /* of GMXD_PENDING_MAX, kept for root and the daemon's user */
#define GMXD_PENDING_TIMEOUT_NS 2000000000LL /* a connection must say HELLO or STATUS_REQ by then */
#define GMXD_LISTEN_BACKLOG 512		     /* connections the kernel queues before accept */
#define GMXD_ACCEPT_BATCH 64		     /* accepted per loop iteration, so rings are not starved */

typedef struct {
	char runtime_dir[256];
	char policy[32];
	long slice_us, inflight, max_clients, unresponsive_ms, device_memory_mb, spin_us;
	long max_clients_per_user; /* clients of one uid other than root and the daemon's; 0: half of max_clients */
	long link_mb_s, piece_us; /* the combined policy's link rate (MB/s) and migration piece (us) */
	uid_t allow_uid[GMXD_ALLOW_MAX];
	int n_allow_uid;
	gid_t allow_gid[GMXD_ALLOW_MAX];
	int n_allow_gid;
	char profile_dir[256];
	int oversubscribe_default; /* oversubscription for every client, not only --oversubscribe */
	char metrics_listen[80]; /* HOST:PORT of the HTTP metrics endpoint; empty: none */
	/* [task NAME] sections: what a task of that name declares to the gpumux policy */
	struct gmxd_task_cfg {
		char name[GMX_NAME_MAX];
		long latency_target_ms; /* 0: none */
		long arrival_period_us; /* 0: not known */
		double arrival_rate_per_s; /* Poisson arrivals at this mean rate; 0: not known */
	} task[GMXD_TASK_CFG_MAX];
	int n_task;
} gmxd_config_t;

/* Fills *c with the defaults (runtime dir from $GPUMUX_RUNTIME_DIR or /run/gpumux). */
void gmxd_config_default(gmxd_config_t *c);

/* Reads an INI file into *c; 0, or a negative errno with the file, line and reason in err. */
int gmxd_config_load(gmxd_config_t *c, const char *path, char *err, size_t err_len);

/* Parses a comma-separated list of user names or uids (users=1) or groups into *c. */
int gmxd_config_allow(gmxd_config_t *c, const char *list, int users, char *err, size_t err_len);

/* Runs the daemon until SIGTERM/SIGINT; 0 on a clean stop, a negative errno otherwise. */
int gmxd_run(const gmxd_config_t *c);

/* Logs one line to stderr with a monotonic timestamp (journald keeps it). */
void gmxd_log(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Sends the log to f instead (NULL: nowhere; tests and the fuzzer). */
void gmxd_log_to(FILE *f);

#endif
