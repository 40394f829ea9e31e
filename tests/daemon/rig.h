/*
 * The rig of gpumuxd's tests without a loop (daemon/server_internal.h's seam): socket pairs
 * handed to gmxd__admit with the credentials of the test's choosing, the rings driven by hand,
 * a clock of the test's own. Included by one test file each (static functions).
 */
#ifndef GMXD_TEST_RIG_H
#define GMXD_TEST_RIG_H

#include "server_internal.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cmocka.h>

static int64_t now_ns = 1000000000LL;
static inline int64_t test_clock(void)
{
	return now_ns;
}

typedef struct {
	int fd, efd_up, efd_down;
	uint32_t id;
	gmx_shm_region_t *r;
	char reason[200];
} tconn_t;

static gmxd_config_t cfg;

static inline void start(const char *policy, long max_clients)
{
	gmxd_config_default(&cfg);
	snprintf(cfg.policy, sizeof cfg.policy, "%s", policy);
	cfg.profile_dir[0] = 0;
	cfg.max_clients = max_clients;
	cfg.allow_uid[0] = 1000;
	cfg.allow_uid[1] = 1001;
	cfg.n_allow_uid = 2;
	assert_int_equal(gmxd__init(&cfg, test_clock), 0);
}

static inline void books(void)
{
	char err[512];
	if (gmxd__check(err, sizeof err) != 0)
		fail_msg("books: %s", err);
}

/* Connects as uid with a HELLO: 'W' welcomed (c filled), 'R' refused (c->reason). */
static inline int hello_flags(tconn_t *c, uid_t uid, const char *name, int prio, uint32_t flags)
{
	memset(c, 0, sizeof *c);
	int sv[2];
	assert_int_equal(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv), 0);
	gmx_msg_hello_t h;
	memset(&h, 0, sizeof h);
	gmx_msg_init(&h.h, GMX_MSG_HELLO, sizeof h);
	h.priority = prio;
	h.flags = flags;
	snprintf(h.name, sizeof h.name, "%s", name);
	assert_int_equal(send(sv[0], &h, sizeof h, 0), (ssize_t)sizeof h);
	struct ucred cr = {.pid = 100, .uid = uid, .gid = uid};
	gmxd__admit(sv[1], &cr);
	c->fd = sv[0];
	union {
		gmx_msg_welcome_t w;
		gmx_msg_refused_t r;
	} m;
	char cbuf[CMSG_SPACE(3 * sizeof(int))];
	struct iovec iov = {.iov_base = &m, .iov_len = sizeof m};
	struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = cbuf, .msg_controllen = sizeof cbuf};
	ssize_t n = recvmsg(c->fd, &mh, MSG_DONTWAIT);
	assert_true(n >= (ssize_t)sizeof(gmx_msg_hdr_t));
	if (m.w.h.type == GMX_MSG_REFUSED) {
		snprintf(c->reason, sizeof c->reason, "%s", m.r.reason);
		close(c->fd);
		c->fd = -1;
		return 'R';
	}
	assert_int_equal(m.w.h.type, GMX_MSG_WELCOME);
	int fds[3];
	memcpy(fds, CMSG_DATA(CMSG_FIRSTHDR(&mh)), sizeof fds);
	c->r = mmap(NULL, sizeof(gmx_shm_region_t), PROT_READ | PROT_WRITE, MAP_SHARED, fds[0], 0);
	assert_true(c->r != MAP_FAILED);
	close(fds[0]);
	c->efd_up = fds[1];
	c->efd_down = fds[2];
	c->id = m.w.client_id;
	return 'W';
}

static inline int hello(tconn_t *c, uid_t uid, const char *name, int prio)
{
	return hello_flags(c, uid, name, prio, 0);
}

static inline int task_of(const tconn_t *c)
{
	for (int t = 0; t < GMX_MAX_TASKS; t++)
		if (SRV.cl[t].used && SRV.cl[t].id == c->id)
			return t;
	return -1;
}

static inline void bye(tconn_t *c)
{
	if (c->fd < 0)
		return;
	int t = task_of(c);
	munmap(c->r, sizeof(gmx_shm_region_t));
	close(c->efd_up);
	close(c->efd_down);
	close(c->fd);
	c->fd = -1;
	if (t >= 0)
		gmxd__sock_event((uint32_t)t);
}

static inline void up_entry(tconn_t *c, uint32_t type, uint32_t a, uint64_t seq, uint64_t x, uint64_t y)
{
	gmx_ring_entry_t e = {.type = type, .a = a, .seq = seq, .x = x, .y = y};
	int wake;
	assert_int_equal(gmx_ring_push(&c->r->up, &e, &wake), 0);
}

static inline void up(tconn_t *c, uint32_t type, uint64_t seq)
{
	up_entry(c, type, 0, seq, 5, 0);
}

/* Pops c's down ring: the number of grants of seq, and of eviction orders (acknowledged
 * when ack is set). */
static inline void down(tconn_t *c, uint64_t seq, int *grants, int *evictions, int ack)
{
	gmx_ring_entry_t e;
	*grants = *evictions = 0;
	while (gmx_ring_pop(&c->r->down, &e) == 1) {
		*grants += e.type == GMX_DOWN_GRANT && e.seq == seq;
		if (e.type == GMX_DOWN_MIGRATE && e.a != GMX_MIGRATE_LOAD) {
			++*evictions;
			if (ack)
				up_entry(c, GMX_UP_MIG_DONE, 0, e.seq, e.x, 0);
		}
	}
}

/* Pops c's down ring for its last LEASE: 1 and *id, *bound filled, or 0 when none came. */
static inline int last_lease(tconn_t *c, uint64_t *id, uint32_t *bound, int64_t *until)
{
	gmx_ring_entry_t e;
	int got = 0;
	while (gmx_ring_pop(&c->r->down, &e) == 1)
		if (e.type == GMX_DOWN_LEASE) {
			*id = e.seq;
			*bound = e.a;
			*until = (int64_t)e.x;
			got = 1;
		}
	return got;
}

#endif
