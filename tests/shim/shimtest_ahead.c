/*
 * The interposer's announcements ahead (protocol 7, AHEAD) against a fake gpumuxd in a thread of
 * this program, on the stand-in driver: an oversubscribed client whose stream's head waits for
 * its grant announces the commands queued behind it, at most GPUMUX_SHIM_AHEAD of them (CTest
 * sets 3), with rising seqs (announced by the launching thread or by the interposer's
 * dispatcher thread, whichever looks at the queue first); once the head is granted, the next
 * head's NOTICE matches its announcement and one more command is announced. Every command behind
 * the first is announced exactly once before its notice. Assertions are on the ring's order,
 * never on durations.
 */
#define _GNU_SOURCE
#include <cuda.h>

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "cu_test.h"
#include "gmx_proto.h"

static int g_fail;

#define K 7 /* commands launched while the head is held */

static const char *MODULE_TEXT = "# stand-in module for the ahead test\n"
				 "kernel marker 10 i32\n";

/* The fake daemon's state, shared with the main thread through atomics. */
static struct {
	int listen_fd, fd, efd_up, efd_down;
	gmx_shm_region_t *r;
	int hold;     /* 1: notices are not granted */
	int launched; /* 1: the K launches returned (every entry for them is in the ring) */
	int stop;
	int notices;	/* NOTICEs read */
	uint64_t first; /* the held head's seq */
	int first_look_ok;
	uint64_t ahead_seq[64];
	int naheads;	     /* AHEADs read while holding and after */
	int notice_of_ahead; /* NOTICEs of a seq announced ahead before */
	int ranges;	     /* RANGE entries read */
	uint64_t held[64];
	int nheld;
} F;

static void grant(uint64_t seq)
{
	gmx_ring_entry_t e = {.type = GMX_DOWN_GRANT, .seq = seq};
	int wake = 0;
	while (gmx_ring_push(&F.r->down, &e, &wake) != 0)
		usleep(100);
	if (wake) {
		uint64_t one = 1;
		if (write(F.efd_down, &one, sizeof one) < 0)
			perror("fake daemon: eventfd");
	}
}

static int announced(uint64_t seq)
{
	for (int i = 0; i < F.naheads; i++)
		if (F.ahead_seq[i] == seq)
			return 1;
	return 0;
}

/* Reads one up entry; 1, or 0 when the ring is empty. */
static int read_one(void)
{
	gmx_ring_entry_t e;
	if (gmx_ring_pop(&F.r->up, &e) != 1)
		return 0;
	int hold = __atomic_load_n(&F.hold, __ATOMIC_ACQUIRE);
	if (e.type == GMX_UP_RANGE) {
		F.ranges++;
	} else if (e.type == GMX_UP_AHEAD) {
		CHECK(F.naheads < 64);
		CHECK(F.naheads == 0 || e.seq > F.ahead_seq[F.naheads - 1]); /* seqs rise */
		if (F.naheads < 64)
			F.ahead_seq[F.naheads++] = e.seq;
	} else if (e.type == GMX_UP_NOTICE) {
		__atomic_add_fetch(&F.notices, 1, __ATOMIC_RELEASE);
		F.notice_of_ahead += announced(e.seq);
		if (!hold)
			grant(e.seq);
		else if (F.nheld < 64)
			F.held[F.nheld++] = e.seq;
	}
	return 1;
}

/* Accepts the interposer, welcomes it with a region and eventfds, then reads its ring. */
static void *fake_daemon(void *arg)
{
	(void)arg;
	F.fd = accept(F.listen_fd, NULL, NULL);
	if (F.fd < 0) {
		perror("fake daemon: accept");
		exit(1);
	}
	gmx_msg_hello_t h;
	CHECK(recv(F.fd, &h, sizeof h, 0) == (ssize_t)sizeof h);
	CHECK(h.h.version == GMX_PROTO_VERSION && (h.flags & GMX_HELLO_OVERSUBSCRIBE));
	int mfd = memfd_create("gmx-fake", MFD_CLOEXEC);
	CHECK(mfd >= 0 && ftruncate(mfd, sizeof(gmx_shm_region_t)) == 0);
	F.r = mmap(NULL, sizeof(gmx_shm_region_t), PROT_READ | PROT_WRITE, MAP_SHARED, mfd, 0);
	if (F.r == MAP_FAILED) {
		perror("fake daemon: mmap");
		exit(1);
	}
	F.r->magic = GMX_PROTO_MAGIC;
	F.r->version = GMX_PROTO_VERSION;
	F.r->client_id = 1;
	F.efd_up = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	F.efd_down = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	gmx_msg_welcome_t w;
	memset(&w, 0, sizeof w);
	gmx_msg_init(&w.h, GMX_MSG_WELCOME, sizeof w);
	w.client_id = 1;
	w.ring_entries = GMX_RING_ENTRIES;
	w.region_bytes = sizeof(gmx_shm_region_t);
	snprintf(w.policy, sizeof w.policy, "fake");
	int fds[3] = {mfd, F.efd_up, F.efd_down};
	char cbuf[CMSG_SPACE(sizeof fds)];
	memset(cbuf, 0, sizeof cbuf);
	struct iovec iov = {.iov_base = &w, .iov_len = sizeof w};
	struct msghdr mh = {
	    .msg_iov = &iov, .msg_iovlen = 1, .msg_control = cbuf, .msg_controllen = sizeof cbuf};
	struct cmsghdr *c = CMSG_FIRSTHDR(&mh);
	c->cmsg_level = SOL_SOCKET;
	c->cmsg_type = SCM_RIGHTS;
	c->cmsg_len = CMSG_LEN(sizeof fds);
	memcpy(CMSG_DATA(c), fds, sizeof fds);
	CHECK(sendmsg(F.fd, &mh, 0) == (ssize_t)sizeof w);
	close(mfd);
	int looked = 0;
	while (!__atomic_load_n(&F.stop, __ATOMIC_ACQUIRE)) {
		if (read_one())
			continue;
		if (!looked && __atomic_load_n(&F.launched, __ATOMIC_ACQUIRE)) {
			/* The K launches are queued, but the queue may be looked at (and the commands behind
			 * the held head announced) by the interposer's dispatcher thread after they
			 * returned. Read until the bound's 3 announcements came (or 20 s passed), then
			 * keep reading for 50 ms more: a 4th while the head is held would break the bound
			 * (a correct interposer never sends one, so this wait cannot fail it). */
			for (int waited = 0; F.naheads < 3 && waited < 100000; waited++)
				if (!read_one())
					usleep(200);
			for (int waited = 0; waited < 250; waited++)
				if (!read_one())
					usleep(200);
			looked = 1;
			F.first_look_ok = F.nheld == 1 && F.naheads == 3 && F.ahead_seq[0] == F.held[0] + 1 &&
					  F.ahead_seq[2] == F.held[0] + 3;
			if (!F.first_look_ok)
				fprintf(
				    stderr,
				    "ahead: held %d notices (first seq %llu), %d announced ahead (bound 3)\n",
				    F.nheld, F.nheld ? (unsigned long long)F.held[0] : 0ull, F.naheads);
			F.first = F.nheld ? F.held[0] : 0;
			__atomic_store_n(&F.hold, 0, __ATOMIC_RELEASE);
			for (int i = 0; i < F.nheld; i++)
				grant(F.held[i]);
			continue;
		}
		usleep(200);
	}
	return NULL;
}

static CUresult launch_marker(CUfunction f, CUstream s, int v)
{
	void *args[] = {&v};
	return cuLaunchKernel(f, 1, 1, 1, 32, 1, 1, 0, s, args, NULL);
}

int main(void)
{
	const char *dir = getenv("GPUMUX_RUNTIME_DIR");
	if (!dir)
		return 1;
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	snprintf(sa.sun_path, sizeof sa.sun_path, "%s/gpumuxd.sock", dir);
	unlink(sa.sun_path);
	F.listen_fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
	if (F.listen_fd < 0 || bind(F.listen_fd, (struct sockaddr *)&sa, sizeof sa) != 0 ||
	    listen(F.listen_fd, 4) != 0) {
		perror("ahead: listening socket");
		return 1;
	}
	alarm(50);
	pthread_t t;
	pthread_create(&t, NULL, fake_daemon, NULL);
	CUcontext ctx;
	CUmodule mod;
	CUfunction f;
	CUstream s;
	cu_test_open_stream(MODULE_TEXT, "marker", &ctx, &mod, &f, &s);
	/* Until the link is up, commands pass through: launch until one is noticed (and granted). */
	for (int i = 0; __atomic_load_n(&F.notices, __ATOMIC_ACQUIRE) == 0; i++) {
		CU(launch_marker(f, s, i));
		CU(cuStreamSynchronize(s));
		usleep(1000);
	}
	__atomic_store_n(&F.hold, 1, __ATOMIC_RELEASE);
	for (int i = 0; i < K; i++)
		CU(launch_marker(f, s, 1000 + i));
	__atomic_store_n(&F.launched, 1, __ATOMIC_RELEASE);
	CU(cuStreamSynchronize(s)); /* the fake daemon grants once it looked */
	__atomic_store_n(&F.stop, 1, __ATOMIC_RELEASE);
	pthread_join(t, NULL);
	CHECK(F.first_look_ok);
	/* Each of the K - 1 behind the first announced once, in order, and noticed after it. */
	CHECK(F.naheads == K - 1);
	for (int i = 0; i < F.naheads && i < 64; i++)
		CHECK(F.ahead_seq[i] == F.first + 1 + (uint64_t)i);
	CHECK(F.notice_of_ahead == K - 1);
	CHECK(F.ranges == 0); /* no templates: nothing predicted */
	close(F.fd);
	CU(cuCtxSynchronize());
	unlink(sa.sun_path);
	if (!g_fail)
		printf("ahead: ok\n");
	return g_fail;
}
