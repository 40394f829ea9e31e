/*
 * The stand-in driver's execution engine: one simulated GPU shared by every process that
 * loads the stand-in, kept in a shared-memory file and advanced lazily in real time.
 *
 * Each process owns a slot; each stream of the process owns a FIFO of commands in the
 * slot. Whenever any process calls in, the engine is advanced to "now": the GPU's compute
 * engine runs one kernel or memset at a time and each copy engine one copy (memcpy, prefetch)
 * at a time, the engines concurrently; zero-time commands (event records, waits, host
 * functions) complete when they reach their stream's head. On the compute engine processes
 * take turns in time slices (a kernel is never cut), the oldest runnable command of a process
 * first; a copy engine takes copies in the order they became runnable.
 * Locking: one robust, process-shared mutex; a process killed while holding it leaves the
 * state to the next locker, which repairs it and reclaims the dead process's slot.
 */
#ifndef GMX_STANDIN_ENGINE_H
#define GMX_STANDIN_ENGINE_H

#include <stddef.h>
#include <stdint.h>

#define SI_SLOTS 128  /* processes at once (each slot ~290 KB of the shared file, written once used) */
#define SI_STREAMS 64 /* streams per process (legacy and per-thread included) */
#define SI_EVENTS 256 /* events per process */
#define SI_CMDS 2048  /* pending commands per process */
#define SI_NAME 48
#define SI_COPY_MAX 3 /* copy engines at most: one per direction (to device, to host, on device) */

enum { SI_K_KERNEL, SI_K_COPY, SI_K_RECORD, SI_K_WAIT, SI_K_HOSTFN };
enum { SI_S_LEGACY = 1, SI_S_BLOCKING, SI_S_NONBLOCKING };
/* Which engine a timed command needs: the compute engine, or the copy engine of a direction. */
enum { SI_DIR_COMPUTE, SI_DIR_H2D, SI_DIR_D2H, SI_DIR_D2D };

/* Submits a command; returns 0 or -1 when the process's command pool is full. Times in ns. */
typedef struct {
	int kind;
	int stream;
	int64_t dur_ns;
	int event;	 /* SI_K_RECORD: event index */
	int wait_stream; /* SI_K_WAIT: satisfied when wait_stream has done wait_seq */
	uint64_t wait_seq;
	void (*hostfn)(void *);
	void *user;
	const char *name;
	uint64_t bytes;
	int dir; /* SI_K_COPY: SI_DIR_*; a memset is SI_DIR_COMPUTE (a kernel's work on a GPU) */
} si_submit_t;

/* Attaches this process to the shared engine (creating it); 0, or -1 with a message. */
int si_engine_attach(void);
/* Detaches (process exit or forked child before re-attaching). */
void si_engine_forget(void);
/* The simulated GPU's copy engines (GPUMUX_STANDIN_COPY_ENGINES, 0..SI_COPY_MAX), 2 unattached. */
int si_copy_engines(void);

int si_stream_open(int kind, int ctx);
void si_stream_close(int s);
int si_stream_kind(int s);

/* Returns the stream-local sequence number of the submitted command, or 0 on overflow. */
uint64_t si_submit(const si_submit_t *c);

/* Nonzero if the stream has completed every command up to seq (0: everything submitted). */
int si_stream_done(int s, uint64_t seq);
/* Nonzero if every stream of the context (ctx < 0: of the process) is idle. */
int si_ctx_done(int ctx);

int si_event_open(void);
void si_event_close(int e);
/* 1 complete (or never recorded), 0 not yet. */
int si_event_done(int e);
/* Completion time (ns) of the event's last record, or -1. */
int64_t si_event_time(int e);
/* The stream and seq the event's last record is waiting on (for stream waits). */
int si_event_target(int e, int *stream, uint64_t *seq);

/* Blocks (sleeping, never spinning) until check() holds; runs this process's host functions. */
void si_wait(int (*check)(const void *), const void *arg);

/* Blocking waits: a stream up to seq (0: all submitted), a context (-1: process), an event. */
void si_wait_stream(int s, uint64_t seq);
void si_wait_ctx(int ctx);
void si_wait_event(int e);

/* Device memory accounting: 0, or -1 when it does not fit. */
int si_mem_reserve(uint64_t bytes);
void si_mem_release(uint64_t bytes);
void si_mem_info(uint64_t *free_b, uint64_t *total_b);
/* Logs (GPUMUX_STANDIN_LOG) that a managed chunk of `want` bytes found the device full: the
 * driver had to evict on its own or leave the chunk on the host. */
void si_log_full(uint64_t want);

/* Test hook: takes the engine lock and never returns (the test kills the process). */
void si_engine_hang_locked(void);

int64_t si_now_ns(void);

#endif
