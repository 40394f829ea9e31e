/*
 * Managed allocations of an oversubscribed client (GPUMUX_OVERSUBSCRIBE=1 under the daemon
 * policy): cuMemAlloc becomes cuMemAllocManaged, and the daemon's memory planner learns every
 * allocation and free through the up ring, so that it can order migrations.
 *
 * The daemon's view must equal the shim's at all times: a FREE of an allocation the daemon
 * never saw makes it cut the client off. So the list is the truth and each session is told all
 * of it: a new session first receives the whole list (in batches, waiting for ring room as the
 * daemon drains it) before it counts as connected; an ALLOC or FREE waits for ring room rather
 * than being dropped; and when the daemon does not drain the ring for GMX_RING_WAIT_MS, the
 * session is ended and the next one is told the list again. D.alloc_lock orders list changes
 * with their ring entries and with the replay; it is never taken by a caller holding the queue
 * lock, and the queue lock (which guards the session and its up ring) is never held while
 * waiting. An ALLOC or FREE goes into the up ring under the queue lock, as the launches' entries
 * do: the ring's order is the order the queue lock was taken in.
 */
#define _GNU_SOURCE
#include "daemon_link.h"
#include "queue.h"

#include <poll.h>
#include <time.h>

static const struct timespec ring_poll = {0, 50000}; /* re-check for room every 50 µs */

/* Pushes one ALLOC or FREE to the current session, waiting for ring room; D.alloc_lock held.
 * Without a session nothing is sent: the next session's replay carries the list. */
static void push_alloc_entry(uint32_t type, uint64_t x, uint64_t y)
{
	int64_t t0 = -1;
	for (;;) {
		gmx_shim_queue_lock();
		if (!gmx_dl.connected || gmx_dl.desync) {
			gmx_shim_queue_unlock();
			return;
		}
		if (gmx_dl_up_room(GMX_RING_RESERVE + 1)) {
			gmx_dl_push_up(type, 0, 0, x, y);
			gmx_shim_queue_unlock();
			return;
		}
		int64_t now = gmx_dl_now_ms();
		if (t0 < 0)
			t0 = now;
		if (now - t0 > GMX_RING_WAIT_MS) {
			gmx_dl_desync_locked(); /* the next session is told the whole list */
			gmx_shim_queue_unlock();
			return;
		}
		gmx_shim_queue_unlock();
		nanosleep(&ring_poll, NULL);
	}
}

int gmx_dl_replay_allocs(int sock)
{
	int i = 0;
	int64_t last = gmx_dl_now_ms();
	while (i < gmx_dl.nallocs) {
		gmx_shim_queue_lock();
		int before = i;
		while (i < gmx_dl.nallocs && gmx_dl_up_room(GMX_RING_RESERVE + 1)) {
			gmx_dl_push_up(GMX_UP_ALLOC, 0, 0, gmx_dl.allocs[i].ptr, gmx_dl.allocs[i].size);
			i++;
		}
		gmx_shim_queue_unlock();
		if (i == gmx_dl.nallocs)
			break;
		int64_t now = gmx_dl_now_ms();
		if (i > before)
			last = now;
		else if (now - last > GMX_RING_WAIT_MS) {
			gmx_shim_log("daemon: the daemon took no allocation for %d ms (%d of %d sent)",
				     GMX_RING_WAIT_MS, i, gmx_dl.nallocs);
			return -1;
		}
		/* Anything on the socket (the reason for a cut-off) or a hang-up ends the session. */
		struct pollfd p = {.fd = sock, .events = POLLIN};
		if (poll(&p, 1, 0) > 0)
			return -1;
		nanosleep(&ring_poll, NULL);
	}
	return 0;
}

CUcontext gmx_dl_alloc_find(uint64_t ptr, uint64_t *len)
{
	CUcontext ctx = NULL;
	pthread_mutex_lock(&gmx_dl.alloc_lock);
	for (int i = 0; i < gmx_dl.nallocs; i++)
		if (gmx_dl.allocs[i].ptr <= ptr && ptr < gmx_dl.allocs[i].ptr + gmx_dl.allocs[i].size) {
			ctx = gmx_dl.allocs[i].ctx;
			if (*len > gmx_dl.allocs[i].ptr + gmx_dl.allocs[i].size - ptr)
				*len = gmx_dl.allocs[i].ptr + gmx_dl.allocs[i].size - ptr;
			break;
		}
	pthread_mutex_unlock(&gmx_dl.alloc_lock);
	return ctx;
}

GMX_EXPORT CUresult CUDAAPI cuMemAlloc_v2(CUdeviceptr *dptr, size_t bytesize)
{
	if (!gmx_dl.oversub || !gmx_dl_active()) {
		GMX_REAL_OR_RETURN(fn, cuMemAlloc_v2);
		return fn(dptr, bytesize);
	}
	GMX_REAL_OR_RETURN(fn, cuMemAllocManaged);
	CUresult r = fn(dptr, bytesize, CU_MEM_ATTACH_GLOBAL);
	if (r != CUDA_SUCCESS)
		return r;
	CUcontext ctx = NULL;
	__typeof__(&cuCtxGetCurrent) getc = GMX_REAL(cuCtxGetCurrent);
	if (getc)
		getc(&ctx);
	pthread_mutex_lock(&gmx_dl.alloc_lock);
	if (gmx_dl.nallocs < ALLOC_MAX) {
		gmx_dl.allocs[gmx_dl.nallocs++] = (alloc_rec_t){*dptr, bytesize, ctx};
		gmx_dl.alloc_bytes += bytesize;
		push_alloc_entry(GMX_UP_ALLOC, *dptr, bytesize);
	}
	pthread_mutex_unlock(&gmx_dl.alloc_lock);
	gmx_shim_log("alloc managed ptr=%#llx size=%zu", (unsigned long long)*dptr, bytesize);
	return CUDA_SUCCESS;
}

/* A free retires memory that queued work may still use: like the generated forwarder it
 * replaces, it first hands every queued command to the driver (whose free then waits for it). */
GMX_EXPORT CUresult CUDAAPI cuMemFree_v2(CUdeviceptr dptr)
{
	GMX_REAL_OR_RETURN(fn, cuMemFree_v2);
	gmx_shim_drain_all();
	if (gmx_dl.oversub) {
		pthread_mutex_lock(&gmx_dl.alloc_lock);
		for (int i = 0; i < gmx_dl.nallocs; i++)
			if (gmx_dl.allocs[i].ptr == dptr) {
				gmx_dl.alloc_bytes -= gmx_dl.allocs[i].size;
				gmx_dl.allocs[i] = gmx_dl.allocs[--gmx_dl.nallocs];
				push_alloc_entry(GMX_UP_FREE, dptr, 0);
				break;
			}
		pthread_mutex_unlock(&gmx_dl.alloc_lock);
	}
	return fn(dptr);
}
