/* The shim's tunables: default and bounds in one place (each read from the environment). */
#ifndef GMX_SHIM_TUNABLES_H
#define GMX_SHIM_TUNABLES_H

/* GPUMUX_SHIM_INFLIGHT: commands released to the driver and not yet complete. Small, so a
 * held process stops within a few kernels; large enough to keep the GPU fed. */
#define GMX_INFLIGHT_DEFAULT 4
#define GMX_INFLIGHT_MIN 1
#define GMX_INFLIGHT_MAX 1024
/* Commands in flight at most on the leased path (gmx_q_leased_straight) when GPUMUX_SHIM_INFLIGHT
 * is lower: the daemon's lease bounds them (a time-sized lease, core's GMX_LEASE_DEPTH_MAX, goes
 * up to 64), and each stream's in-flight ring holds at least this many. */
#define GMX_SHIM_LEASED_MAX 64

/* How often a waiting thread or the dispatcher re-checks completions and grants (µs). */
#define GMX_POLL_US_DEFAULT 200
#define GMX_POLL_US_MIN 20
#define GMX_POLL_US_MAX 100000

/* GPUMUX_SHIM_AHEAD: commands queued behind a stream's held head that the daemon policy announces
 * ahead (AHEAD, protocol 7) so that gpumuxd plans an oversubscribed client's coming windows
 * beyond the next; 0 announces none. The process-wide bound is the protocol's (GMX_AHEAD_MAX,
 * 64), which the maximum matches. */
#define GMX_AHEAD_DEFAULT 8
#define GMX_AHEAD_MIN 0
#define GMX_AHEAD_MAX_PER_STREAM 64

/* Bytes of kernel parameters copied per launch (larger layouts are released synchronously). */
#define GMX_PARAM_BYTES_MAX 32768

#endif
