/*
 * The stand-in's shared execution engine (see engine.h for the model).
 *
 * The shared file is $GPUMUX_STANDIN_DIR/gpumux-standin-<uid> (default directory /dev/shm).
 * Its creator sizes and initialises it under flock(); the engine's own lock is a robust,
 * process-shared mutex, so a process killed at any point never wedges the others.
 */
#define _GNU_SOURCE
#include "engine_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define SI_MAGIC 0x676d78736e6431ull /* "gmxsnd1" */
#define SI_VERSION 5		     /* 5: copy engines (per-engine running commands) */

si_shm_t *si__shm;
static int g_slot = -1;
static int g_log = -1;
static int g_helper;
static int g_fast; /* GPUMUX_STANDIN_FAST=1: waits shorter than 100 µs yield instead of sleeping */
static pthread_mutex_t g_local = PTHREAD_MUTEX_INITIALIZER;

int64_t si_now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static long env_long(const char *name, long def, long lo, long hi)
{
	const char *s = getenv(name);
	if (!s || !*s)
		return def;
	char *end;
	long v = strtol(s, &end, 10);
	if (*end || v < lo || v > hi) {
		fprintf(stderr, "gpumux stand-in: %s=%s out of range [%ld, %ld]; using %ld\n", name, s, lo,
			hi, def);
		return def;
	}
	return v;
}

static void slot_reset(si_slot_t *s)
{
	memset(s, 0, sizeof *s);
	for (int i = 0; i < SI_CMDS; i++)
		s->cmds[i].next = i + 1 < SI_CMDS ? i + 1 : -1;
	for (int i = 0; i < SI_STREAMS; i++)
		s->streams[i].head = s->streams[i].tail = -1;
	s->free_head = 0;
}

/* Lowers si__shm->hi past the slots no longer in use at the top. */
static void hi_shrink(void)
{
	while (si__shm->hi > 0 && !si__shm->slots[si__shm->hi - 1].in_use)
		si__shm->hi--;
}

void si__reap_dead(void)
{
	for (int i = 0; i < si__shm->hi; i++) {
		si_slot_t *s = &si__shm->slots[i];
		if (!s->in_use || i == g_slot)
			continue;
		if (kill(s->pid, 0) == -1 && errno == ESRCH) {
			si__drop_running(i);
			slot_reset(s);
		}
	}
	hi_shrink();
}

static void lock(void)
{
	int r = pthread_mutex_lock(&si__shm->lock);
	if (r == EOWNERDEAD) {
		/* The holder died mid-update: its own slot is reclaimed; the shared fields it may have
		 * been changing (the running commands) are re-validated. */
		si__shm->hi = SI_SLOTS; /* it may have been moving the bound: look at every slot */
		hi_shrink();
		si__reap_dead();
		si__drop_running(-1);
		pthread_mutex_consistent(&si__shm->lock);
	}
}

static void unlock(void)
{
	pthread_mutex_unlock(&si__shm->lock);
}

void si__log_cmd(int slot, const si_cmd_t *c, int64_t start, int64_t end)
{
	if (g_log < 0)
		return;
	static const char *const kinds[] = {"kernel", "copy", "record", "wait", "hostfn"};
	/* The engine that ran a timed command (compute, or copy engine 1..); "-" for the others. */
	char engine[16] = "-";
	if (c->kind == SI_K_KERNEL || c->kind == SI_K_COPY) {
		if (c->engine == 0)
			snprintf(engine, sizeof engine, "compute");
		else
			snprintf(engine, sizeof engine, "copy%d", (int)c->engine);
	}
	char buf[256];
	int n = snprintf(buf, sizeof buf,
			 "start_ns=%lld end_ns=%lld pid=%d stream=%d kind=%s name=%s engine=%s dur_ns=%lld\n",
			 (long long)start, (long long)end, (int)si__shm->slots[slot].pid, c->stream,
			 kinds[c->kind], c->name[0] ? c->name : "-", engine, (long long)c->dur_ns);
	if (n > 0) {
		ssize_t w = write(g_log, buf, (size_t)n < sizeof buf ? (size_t)n : sizeof buf - 1);
		(void)w;
	}
}

static void atfork_child(void)
{
	/* The child is a new process: it takes its own slot at its first call. */
	pthread_mutex_init(&g_local, NULL);
	g_slot = -1;
	g_helper = 0;
}

int si_engine_attach(void)
{
	pthread_mutex_lock(&g_local);
	if (si__shm && g_slot >= 0) {
		pthread_mutex_unlock(&g_local);
		return 0;
	}
	if (!si__shm) {
		const char *dir = getenv("GPUMUX_STANDIN_DIR");
		char path[4096];
		snprintf(path, sizeof path, "%s/gpumux-standin-%u", dir && *dir ? dir : "/dev/shm",
			 (unsigned)getuid());
		int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
		if (fd < 0) {
			fprintf(stderr,
				"gpumux stand-in: cannot open %s: %s (set GPUMUX_STANDIN_DIR to a "
				"writable directory)\n",
				path, strerror(errno));
			pthread_mutex_unlock(&g_local);
			return -1;
		}
		flock(fd, LOCK_EX);
		struct stat st;
		int fresh = fstat(fd, &st) == 0 && st.st_size == 0;
		if (fresh && ftruncate(fd, sizeof(si_shm_t)) != 0) {
			fprintf(stderr, "gpumux stand-in: cannot size %s: %s\n", path, strerror(errno));
			flock(fd, LOCK_UN);
			close(fd);
			pthread_mutex_unlock(&g_local);
			return -1;
		}
		void *m = mmap(NULL, sizeof(si_shm_t), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
		if (m == MAP_FAILED) {
			fprintf(stderr, "gpumux stand-in: cannot map %s: %s\n", path, strerror(errno));
			flock(fd, LOCK_UN);
			close(fd);
			pthread_mutex_unlock(&g_local);
			return -1;
		}
		si_shm_t *e = m;
		if (fresh || e->magic != SI_MAGIC) {
			/* A fresh file reads as zeroes (every slot free); anything else is cut to nothing
			 * and grown again, so that it does too. Slots are written only when a process
			 * takes one: the file stays sparse however many slots there are. */
			if (!fresh && (ftruncate(fd, 0) != 0 || ftruncate(fd, sizeof(si_shm_t)) != 0)) {
				fprintf(stderr, "gpumux stand-in: cannot reset %s: %s\n", path,
					strerror(errno));
				munmap(m, sizeof(si_shm_t));
				flock(fd, LOCK_UN);
				close(fd);
				pthread_mutex_unlock(&g_local);
				return -1;
			}
			pthread_mutexattr_t a;
			pthread_mutexattr_init(&a);
			pthread_mutexattr_setpshared(&a, PTHREAD_PROCESS_SHARED);
			pthread_mutexattr_setrobust(&a, PTHREAD_MUTEX_ROBUST);
			pthread_mutex_init(&e->lock, &a);
			pthread_mutexattr_destroy(&a);
			e->slice_ns = 1000LL * env_long("GPUMUX_STANDIN_SLICE_US", 2000, 1, 10000000);
			e->mem_total = (uint64_t)env_long("GPUMUX_STANDIN_MEM_MB", 16384, 1, 1 << 24) << 20;
			/* Copy engines: one per direction by default, as most GPUs report
			 * asyncEngineCount 2; 0 keeps every timed command on one timeline. */
			e->copy_engines = (int32_t)env_long("GPUMUX_STANDIN_COPY_ENGINES", 2, 0, SI_COPY_MAX);
			for (int k = 0; k < SI_ENGINES; k++)
				e->run_slot[k] = -1;
			e->cur_slot = -1;
			e->gpu_t = si_now_ns();
			e->version = SI_VERSION;
			__atomic_store_n(&e->magic, SI_MAGIC, __ATOMIC_RELEASE);
		} else if (e->version != SI_VERSION) {
			fprintf(stderr,
				"gpumux stand-in: %s was made by another stand-in version; remove it\n",
				path);
			munmap(m, sizeof(si_shm_t));
			flock(fd, LOCK_UN);
			close(fd);
			pthread_mutex_unlock(&g_local);
			return -1;
		}
		flock(fd, LOCK_UN);
		close(fd);
		si__shm = e;
		const char *log = getenv("GPUMUX_STANDIN_LOG");
		if (log && *log)
			g_log = open(log, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
		g_fast = (int)env_long("GPUMUX_STANDIN_FAST", 0, 0, 1);
		if (g_fast)
			prctl(PR_SET_TIMERSLACK, 1UL, 0, 0, 0);
		pthread_atfork(NULL, NULL, atfork_child);
	}
	lock();
	int slot = -1;
	for (int i = 0; i < SI_SLOTS && slot < 0; i++)
		if (!si__shm->slots[i].in_use)
			slot = i;
	if (slot < 0) {
		si__reap_dead();
		for (int i = 0; i < SI_SLOTS && slot < 0; i++)
			if (!si__shm->slots[i].in_use)
				slot = i;
	}
	if (slot >= 0) {
		slot_reset(&si__shm->slots[slot]);
		si__shm->slots[slot].in_use = 1;
		si__shm->slots[slot].pid = (int32_t)getpid();
		if (slot >= si__shm->hi)
			si__shm->hi = slot + 1;
	}
	unlock();
	g_slot = slot;
	pthread_mutex_unlock(&g_local);
	if (slot < 0) {
		fprintf(stderr,
			"gpumux stand-in: all %d process slots of the simulated GPU are taken (at most %d "
			"processes use it at once; a slot is freed when its process exits)\n",
			SI_SLOTS, SI_SLOTS);
		return -1;
	}
	return 0;
}

void si_engine_forget(void)
{
	if (!si__shm || g_slot < 0)
		return;
	lock();
	si__drop_running(g_slot);
	slot_reset(&si__shm->slots[g_slot]);
	hi_shrink();
	unlock();
	g_slot = -1;
}

int si_copy_engines(void)
{
	return si__shm ? si__shm->copy_engines : 2;
}

static si_slot_t *me(void)
{
	return &si__shm->slots[g_slot];
}

int si_stream_open(int kind, int ctx)
{
	lock();
	si_slot_t *s = me();
	int idx = -1;
	for (int i = 0; i < SI_STREAMS; i++)
		if (s->streams[i].kind == 0) {
			idx = i;
			break;
		}
	if (idx >= 0) {
		si_stream_t *st = &s->streams[idx];
		memset(st, 0, sizeof *st);
		st->kind = kind;
		st->ctx = ctx;
		st->head = st->tail = -1;
		if (idx >= s->nstreams)
			s->nstreams = idx + 1;
	}
	unlock();
	return idx;
}

void si_stream_close(int si)
{
	lock();
	si_slot_t *s = me();
	/* Pending work of a destroyed stream still runs (as on a GPU): close once it drained. */
	si__advance(si_now_ns());
	if (s->streams[si].head < 0)
		s->streams[si].kind = 0;
	else
		s->streams[si].ctx = -1; /* orphaned: nobody can submit to it any more */
	unlock();
}

int si_stream_kind(int si)
{
	return si__shm->slots[g_slot].streams[si].kind;
}

static void start_helper(void);

uint64_t si_submit(const si_submit_t *in)
{
	lock();
	si_slot_t *s = me();
	int64_t now = si_now_ns();
	si__advance(now);
	if (s->free_head < 0) {
		unlock();
		return 0;
	}
	int ci = s->free_head;
	si_cmd_t *c = &s->cmds[ci];
	s->free_head = c->next;
	memset(c, 0, sizeof *c);
	si_stream_t *st = &s->streams[in->stream];
	c->kind = in->kind;
	c->stream = in->stream;
	c->state = C_PENDING;
	c->next = -1;
	c->sseq = ++st->submitted;
	c->gseq = ++s->gseq;
	c->dur_ns = in->dur_ns;
	c->submit_ns = now;
	c->event = in->event;
	c->wait_stream = in->wait_stream;
	c->wait_seq = in->wait_seq;
	c->hostfn = (uint64_t)(uintptr_t)in->hostfn;
	c->user = (uint64_t)(uintptr_t)in->user;
	c->bytes = in->bytes;
	/* Copy directions map onto the copy engines (1: all on one; 2: to device with on-device
	 * copies, and to host; 3: one each); without copy engines everything computes. */
	if (in->kind == SI_K_COPY && in->dir != SI_DIR_COMPUTE && si__shm->copy_engines > 0)
		c->engine = 1 + (in->dir - 1) % si__shm->copy_engines;
	if (in->name)
		snprintf(c->name, sizeof c->name, "%s", in->name);
	if (in->kind == SI_K_RECORD) {
		s->events[in->event].stream = in->stream;
		s->events[in->event].seq = c->sseq;
		s->events[in->event].time_ns = -1;
	}
	if (st->tail >= 0)
		s->cmds[st->tail].next = ci;
	else
		st->head = ci;
	st->tail = ci;
	uint64_t seq = c->sseq;
	si__advance(now);
	unlock();
	if (in->kind == SI_K_HOSTFN)
		start_helper();
	return seq;
}

static int stream_done_locked(int si, uint64_t seq)
{
	const si_stream_t *st = &me()->streams[si];
	return st->done >= (seq ? seq : st->submitted);
}

int si_stream_done(int si, uint64_t seq)
{
	lock();
	si__advance(si_now_ns());
	int r = stream_done_locked(si, seq);
	unlock();
	return r;
}

static int ctx_done_locked(int ctx)
{
	const si_slot_t *s = me();
	for (int i = 0; i < s->nstreams; i++)
		if (s->streams[i].kind && (ctx < 0 || s->streams[i].ctx == ctx) && s->streams[i].head >= 0)
			return 0;
	return 1;
}

int si_ctx_done(int ctx)
{
	lock();
	si__advance(si_now_ns());
	int r = ctx_done_locked(ctx);
	unlock();
	return r;
}

int si_event_open(void)
{
	lock();
	si_slot_t *s = me();
	int idx = -1;
	for (int i = 0; i < SI_EVENTS; i++)
		if (!s->events[i].in_use) {
			idx = i;
			memset(&s->events[i], 0, sizeof s->events[i]);
			s->events[i].in_use = 1;
			s->events[i].stream = -1;
			s->events[i].time_ns = -1;
			break;
		}
	unlock();
	return idx;
}

void si_event_close(int e)
{
	lock();
	me()->events[e].in_use = 0;
	unlock();
}

static int event_done_locked(int e)
{
	const si_event_t *ev = &me()->events[e];
	if (ev->stream < 0)
		return 1;
	return me()->streams[ev->stream].done >= ev->seq || me()->streams[ev->stream].kind == 0;
}

int si_event_done(int e)
{
	lock();
	si__advance(si_now_ns());
	int r = event_done_locked(e);
	unlock();
	return r;
}

int64_t si_event_time(int e)
{
	lock();
	si__advance(si_now_ns());
	int64_t t = event_done_locked(e) ? me()->events[e].time_ns : -1;
	unlock();
	return t;
}

int si_event_target(int e, int *stream, uint64_t *seq)
{
	lock();
	const si_event_t *ev = &me()->events[e];
	*stream = ev->stream;
	*seq = ev->seq;
	unlock();
	return ev->stream >= 0;
}

/* Runs one of this process's host functions that reached its stream head; 1 if it ran one. */
static int run_one_hostfn(void)
{
	lock();
	si__advance(si_now_ns());
	si_slot_t *s = me();
	int found = -1;
	for (int k = 0; k < s->nstreams && found < 0; k++) {
		int h = s->streams[k].head;
		if (h >= 0 && s->cmds[h].kind == SI_K_HOSTFN && s->cmds[h].state == C_PENDING &&
		    si__eligible(s, &s->cmds[h]))
			found = h;
	}
	if (found < 0) {
		unlock();
		return 0;
	}
	si_cmd_t *c = &s->cmds[found];
	c->state = C_HOST_RUNNING;
	void (*fn)(void *) = (void (*)(void *))(uintptr_t)c->hostfn;
	void *user = (void *)(uintptr_t)c->user;
	int stream = c->stream;
	unlock();
	fn(user);
	lock();
	int64_t now = si_now_ns();
	si__log_cmd(g_slot, c, now, now);
	si__pop_head(s, stream, now);
	si__advance(now);
	unlock();
	return 1;
}

static void *helper_main(void *arg)
{
	(void)arg;
	for (;;) {
		while (run_one_hostfn())
			;
		struct timespec ts = {0, 200000};
		nanosleep(&ts, NULL);
	}
	return NULL;
}

static void start_helper(void)
{
	pthread_mutex_lock(&g_local);
	if (!g_helper) {
		pthread_t t;
		pthread_attr_t a;
		pthread_attr_init(&a);
		pthread_attr_setdetachstate(&a, PTHREAD_CREATE_DETACHED);
		if (pthread_create(&t, &a, helper_main, NULL) == 0)
			g_helper = 1;
		pthread_attr_destroy(&a);
	}
	pthread_mutex_unlock(&g_local);
}

void si_wait(int (*check)(const void *), const void *arg)
{
	for (;;) {
		while (run_one_hostfn())
			;
		lock();
		int64_t now = si_now_ns();
		si__advance(now);
		int ok = check(arg);
		int64_t end = si__next_end();
		int64_t wake = end >= 0 ? end : now + 1000000;
		unlock();
		if (ok)
			return;
		int64_t d = wake - now;
		if (g_fast && d < 100000) {
			sched_yield(); /* the GPU finishes within 100 µs: look again at once */
			continue;
		}
		if (d > 1000000)
			d = 1000000; /* others may submit meanwhile: look again within 1 ms */
		if (d < 20000)
			d = 20000;
		struct timespec ts = {0, (long)d};
		nanosleep(&ts, NULL);
	}
}

static int chk_stream(const void *a)
{
	const uint64_t *v = a;
	return stream_done_locked((int)v[0], v[1]);
}

static int chk_ctx(const void *a)
{
	return ctx_done_locked(*(const int *)a);
}

static int chk_event(const void *a)
{
	return event_done_locked(*(const int *)a);
}

void si_wait_stream(int si, uint64_t seq)
{
	uint64_t v[2] = {(uint64_t)si, seq};
	si_wait(chk_stream, v);
}

void si_wait_ctx(int ctx)
{
	si_wait(chk_ctx, &ctx);
}

void si_wait_event(int e)
{
	si_wait(chk_event, &e);
}

int si_mem_reserve(uint64_t bytes)
{
	lock();
	uint64_t used = 0;
	for (int i = 0; i < si__shm->hi; i++)
		if (si__shm->slots[i].in_use)
			used += si__shm->slots[i].mem_bytes;
	int ok = used + bytes <= si__shm->mem_total;
	if (ok)
		me()->mem_bytes += bytes;
	unlock();
	return ok ? 0 : -1;
}

void si_mem_release(uint64_t bytes)
{
	lock();
	si_slot_t *s = me();
	s->mem_bytes = s->mem_bytes > bytes ? s->mem_bytes - bytes : 0;
	unlock();
}

void si_mem_info(uint64_t *free_b, uint64_t *total_b)
{
	lock();
	uint64_t used = 0;
	for (int i = 0; i < si__shm->hi; i++)
		if (si__shm->slots[i].in_use)
			used += si__shm->slots[i].mem_bytes;
	*total_b = si__shm->mem_total;
	*free_b = used < si__shm->mem_total ? si__shm->mem_total - used : 0;
	unlock();
}

void si_engine_hang_locked(void)
{
	lock();
	for (;;)
		pause();
}

void si_log_full(uint64_t want)
{
	if (g_log < 0)
		return;
	uint64_t free_b, total_b;
	si_mem_info(&free_b, &total_b);
	long long t = (long long)si_now_ns();
	char buf[256];
	int n = snprintf(
	    buf, sizeof buf,
	    "start_ns=%lld end_ns=%lld pid=%d stream=-1 kind=memfull name=- dur_ns=0 want=%llu free=%llu "
	    "total=%llu\n",
	    t, t, (int)getpid(), (unsigned long long)want, (unsigned long long)free_b,
	    (unsigned long long)total_b);
	if (n > 0) {
		ssize_t w = write(g_log, buf, (size_t)n < sizeof buf ? (size_t)n : sizeof buf - 1);
		(void)w;
	}
}
