/*
 * The grant interface: who decides when queued work may reach the GPU.
 *
 * The shim queues stream work per stream and asks the policy, for each queue head, whether it
 * may be released now. The built-in policies are "passthrough" (no queue at all: the shim is
 * transparent), "queue" (everything queued and granted at once, bounded in flight) and "hold"
 * (a test policy: held while a file exists). The daemon plugs in as another policy.
 */
#ifndef GMX_GRANT_H
#define GMX_GRANT_H

#include <stddef.h>
#include <stdint.h>

typedef enum {
	GMX_CMD_LAUNCH,	     /* cuLaunchKernel */
	GMX_CMD_LAUNCH_EX,   /* cuLaunchKernelEx */
	GMX_CMD_LAUNCH_COOP, /* cuLaunchCooperativeKernel */
	GMX_CMD_HOSTFN,	     /* cuLaunchHostFunc */
	GMX_CMD_GRAPH,	     /* cuGraphLaunch */
	GMX_CMD_COPY,	     /* cuMemcpyAsync and the typed async copies */
	GMX_CMD_MEMSET,	     /* cuMemsetD{8,16,32}Async */
	GMX_CMD_EVENT_RECORD,
	GMX_CMD_STREAM_WAIT,
	GMX_CMD_KIND_COUNT
} gmx_cmd_kind_t;

/* What the policies see of one queued command. */
typedef struct {
	gmx_cmd_kind_t kind;
	uint64_t seq;	  /* process-wide submission order */
	uintptr_t stream; /* the application's stream handle (0 legacy, 2 per-thread) */
	const char *name; /* kernel name (cuFuncGetName) or NULL */
	uint64_t name_hash; /* gmx_shim_name_hash(name) when the shim has it cached, else 0 */
	unsigned grid[3], block[3];
	unsigned shared_mem;
	size_t nparams; /* from cuFuncGetParamInfo; 0 when unknown */
	const size_t *param_offset, *param_size;
	const unsigned char *param_data; /* the values, laid out at param_offset */
	size_t bytes;			 /* copies and memsets */
} gmx_shim_cmd_t;

/* FNV-1a over a kernel's name: where its identity (the daemon's kernel id) starts. */
static inline uint64_t gmx_shim_name_hash(const char *name)
{
	uint64_t h = 1469598103934665603ull;
	for (const char *p = name; *p; p++)
		h = (h ^ (unsigned char)*p) * 1099511628211ull;
	return h;
}

/* A grant policy: a table of functions, called with the shim's queue lock held (but prepare),
 * so none of them may block. */
typedef struct gmx_grant_ops {
	const char *name;
	/* Nonzero: stream work goes straight to the driver, never queued. */
	int passthrough;
	/* 1 if the command at the head of its queue may be released now, 0 to hold it. */
	int (*may_release)(void *self, const gmx_shim_cmd_t *cmd);
	/* Called after the command reached the driver (may be NULL). */
	void (*released)(void *self, const gmx_shim_cmd_t *cmd);
	void *self;
	/* Called when a released command (by seq) completed on the GPU, or at its release when no
	 * completion is tracked for it (event records, stream waits, refused releases); may be NULL. */
	void (*completed)(void *self, uint64_t seq);
	/* A host thread is about to block until the GPU has run its work (may be NULL). */
	void (*host_wait)(void *self);
	/* Called before a command is queued, WITHOUT the queue lock (may be NULL): the one place a
	 * policy may block, and then only the calling thread (the daemon policy starts its
	 * connection there). */
	void (*prepare)(void *self);
	/* May be NULL. For a launch that would head an empty queue (nothing of the process queued),
	 * after the ndone commands in done[] that were just seen complete (as completed() for each):
	 * GMX_GRANT_LEASED if it may go to the driver now under the policy's lease, booked as
	 * released (its completion follows through completed()); GMX_GRANT_HELD if the lease's bound
	 * holds it until a completion; GMX_GRANT_QUEUE if it must be queued and asked for
	 * (may_release); GMX_GRANT_FULL as GMX_GRANT_HELD, but for room to report it (asked again
	 * soon). After GMX_GRANT_LEASED, *room says how many more the lease admits now (0: the
	 * next needs a completion first). Under the queue lock; never blocks. */
	int (*lease_release)(void *self, const gmx_shim_cmd_t *cmd, const uint64_t *done, unsigned ndone,
			     unsigned *room);
	/* May be NULL. Called by the dispatcher at each poll and before it sleeps without a timeout:
	 * the policy hands over what it keeps back to report in batches. Under the queue lock. */
	void (*flush)(void *self);
	/* May be NULL. completed() for each of the n commands in seqs[] (oldest first), seen complete
	 * together: one call where a policy would otherwise take its lock n times. */
	void (*completed_n)(void *self, const uint64_t *seqs, unsigned n);
	/* May be NULL. cmd waits in its stream's queue (its head, held, or one of the next
	 * GPUMUX_SHIM_AHEAD behind it; oldest first, offered again at later looks): the policy may
	 * announce it ahead of its turn. Never releases it; 0 when the policy takes no more now (the
	 * rest of the stream is not offered). Under the queue lock; never blocks. */
	int (*ahead)(void *self, const gmx_shim_cmd_t *cmd);
} gmx_grant_ops_t;

/* lease_release's answers; GMX_GRANT_FULL: the lease admits the command, but the policy's channel
 * to its scheduler has no room to report it now (the scheduler was told to read): ask again soon. */
enum { GMX_GRANT_QUEUE = -1, GMX_GRANT_HELD = 0, GMX_GRANT_LEASED = 1, GMX_GRANT_FULL = 2 };

/* Picks the policy named by GPUMUX_SHIM_POLICY; unknown names fall back to passthrough. */
const gmx_grant_ops_t *gmx_grant_from_env(void);

/* Nonzero for a policy whose may_release always says 1 and that hears no completions (queue):
 * nothing released is then tracked to completion (no driver event per command) and no
 * in-flight bound applies, as nothing is ever held that a bound would have to stop. */
int gmx_grant_never_holds(const gmx_grant_ops_t *p);

#endif
