/*
 * The queue lock's bias (docs/shim.md, "The leased path's costs"): one thread that keeps launching
 * under the daemon's lease enters the queue's critical section without the mutex, with two plain
 * stores and a load instead of a locked instruction pair; any other thread, once it holds the
 * mutex, revokes the bias and waits until the holder is out before it touches anything.
 *
 * The holder's side has no hardware fence: the revoker's membarrier(2) orders both sides (an
 * asymmetric Dekker: the holder stores its `busy` and then loads `owner`; the revoker stores
 * `owner`, makes every running thread of the process execute a barrier, then loads `busy`), so
 * either the revoker sees the holder inside or the holder sees itself revoked. Each thread writes
 * only its own slot's `busy` (slots are static: a revoker never reads a dead thread's memory).
 * Without membarrier (an old kernel, a seccomp filter) no bias is granted and the mutex alone
 * serves. Unit-tested in tests/shim/test_qbias.c.
 */
#ifndef GMX_SHIM_QBIAS_H
#define GMX_SHIM_QBIAS_H

#include <linux/membarrier.h>
#include <sched.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define GMX_QBIAS_SLOTS 64    /* threads that may ever hold the bias (more: never biased) */
#define GMX_QBIAS_YIELDS 64u  /* a revoker's yields while the holder is inside, before it sleeps */
#define GMX_QBIAS_STREAK 256u /* notes in a row by one thread, no other thread locking, before a grant */

/* One thread's flag: it is inside without the mutex. A cache line of its own. */
typedef struct {
	_Alignas(64) int busy;
} gmx_qbias_slot_t;

/* A thread's handle: its slot (NULL until it is first granted the bias). Its address is also
 * the thread's identity for the streak, so it lives in thread-local storage. */
typedef struct {
	gmx_qbias_slot_t *slot;
} gmx_qbias_me_t;

typedef struct {
	gmx_qbias_slot_t *owner;    /* the slot that may enter without the mutex; NULL: none */
	const gmx_qbias_me_t *last; /* the thread noted last */
	unsigned streak;	    /* its notes in a row with no other thread taking the mutex */
	int usable;		    /* 1: membarrier registered; -1: unavailable; 0: not asked yet */
	unsigned nslots;
	unsigned long grants, revokes;
	gmx_qbias_slot_t slots[GMX_QBIAS_SLOTS];
} gmx_qbias_t;

/* 1 if the calling thread (me) holds the bias and is now inside without the mutex (leave with
 * gmx_qbias_exit); 0: it must take the mutex. No lock held. */
static inline int gmx_qbias_enter(gmx_qbias_t *b, const gmx_qbias_me_t *me)
{
	gmx_qbias_slot_t *s = me->slot;
	if (!s || __atomic_load_n(&b->owner, __ATOMIC_RELAXED) != s)
		return 0;
	__atomic_store_n(&s->busy, 1, __ATOMIC_RELAXED);
	__atomic_signal_fence(__ATOMIC_SEQ_CST); /* the revoker's membarrier makes it a full fence */
	if (__atomic_load_n(&b->owner, __ATOMIC_RELAXED) == s)
		return 1;
	__atomic_store_n(&s->busy, 0, __ATOMIC_RELEASE);
	return 0;
}

/* Leaves the section gmx_qbias_enter entered: what was written inside is visible to the next
 * thread that revokes. */
static inline void gmx_qbias_exit(const gmx_qbias_me_t *me)
{
	__atomic_store_n(&me->slot->busy, 0, __ATOMIC_RELEASE);
}

/* Called by every thread right after it took the mutex: another thread's bias is revoked, and
 * this returns only once that thread is out of its section. The mutex held. */
static inline void gmx_qbias_locked(gmx_qbias_t *b, const gmx_qbias_me_t *me)
{
	if (b->last != me)
		b->streak = 0;
	gmx_qbias_slot_t *o = b->owner;
	if (!o || o == me->slot)
		return;
	__atomic_store_n(&b->owner, NULL, __ATOMIC_RELAXED);
	/* Registered before any grant, so this cannot fail for want of it; were it to fail anyway,
	 * the process stops granting, and the wait below still sees a holder whose store is visible. */
	if (syscall(SYS_membarrier, MEMBARRIER_CMD_PRIVATE_EXPEDITED, 0, 0) != 0)
		b->usable = -1;
	__atomic_thread_fence(__ATOMIC_SEQ_CST);
	/* The holder may be inside the driver's launch, which can block (a full push buffer): after
	 * a few yields the wait sleeps instead of taking a core from it. */
	for (unsigned spins = 0; __atomic_load_n(&o->busy, __ATOMIC_ACQUIRE); spins++) {
		if (spins < GMX_QBIAS_YIELDS) {
			sched_yield();
		} else {
			struct timespec ts = {0, 20000};
			nanosleep(&ts, NULL);
		}
	}
	b->revokes++;
}

/* The calling thread did, under the mutex, what the bias is for (a leased launch): after
 * GMX_QBIAS_STREAK of them in a row with no other thread taking the mutex, it is granted the
 * bias. 1 if it holds the bias now. The mutex held. */
static inline int gmx_qbias_note(gmx_qbias_t *b, gmx_qbias_me_t *me)
{
	if (b->last != me) {
		b->last = me;
		b->streak = 0;
	}
	if (b->owner)
		return b->owner == me->slot;
	if (++b->streak < GMX_QBIAS_STREAK || b->usable < 0)
		return 0;
	if (b->usable == 0)
		b->usable =
		    syscall(SYS_membarrier, MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED, 0, 0) == 0 ? 1 : -1;
	if (b->usable < 0)
		return 0;
	if (!me->slot) {
		if (b->nslots == GMX_QBIAS_SLOTS)
			return 0;
		me->slot = &b->slots[b->nslots++];
	}
	__atomic_store_n(&b->owner, me->slot, __ATOMIC_RELAXED);
	b->grants++;
	return 1;
}

/* In a forked child (one thread, the mutex held): no bias, and membarrier's registration, which
 * was the parent's, asked again at the next grant. */
static inline void gmx_qbias_atfork_child(gmx_qbias_t *b)
{
	b->owner = NULL;
	b->last = NULL;
	b->streak = 0;
	b->usable = 0;
}

#endif
