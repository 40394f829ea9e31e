/*
 * Tests of the interposer on the stand-in driver. One program, one scenario per argument:
 *   basic      direct linking: contexts, module, launches, copies, several threads/streams
 *   events     ordering across streams through events; every synchronous call drains
 *   procaddr   cuGetProcAddress(_v2) as the runtime uses it (empty-name probe, versions, ptds)
 *   hold       held work is not run (queries say NOT_READY), then resumes when released
 *   kill       a process killed while holding the engine lock or queued work wedges nobody
 *   fork       a forked child initialises and runs work of its own
 *   errors     bad handles and bad modules give the driver's error codes
 *   legacy     the legacy default stream waits for blocking streams and they for it
 *   stall_*    a daemon socket that stalls the connection attempt delays no other thread
 *   slots      SI_SLOTS processes use the stand-in at once; one more is refused; then served
 *   straight   a launch that skips the queue (policy queue, nothing queued) never overtakes queued work
 * The environment (set by CTest) picks the policy and points the shim at the stand-in.
 * Assertions are on order, logs and return codes, never on durations.
 */
#define _GNU_SOURCE
#include <cuda.h>

#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cu_test.h"
#include "engine.h" /* SI_SLOTS: the stand-in's process slots */

/* The per-thread entry points, as code built with --default-stream per-thread calls them. */
CUresult CUDAAPI cuLaunchKernel_ptsz(CUfunction f, unsigned int gridDimX, unsigned int gridDimY,
				     unsigned int gridDimZ, unsigned int blockDimX, unsigned int blockDimY,
				     unsigned int blockDimZ, unsigned int sharedMemBytes, CUstream hStream,
				     void **kernelParams, void **extra);
CUresult CUDAAPI cuStreamSynchronize_ptsz(CUstream hStream);
CUresult CUDAAPI cuStreamQuery_ptsz(CUstream hStream);

static int g_fail;

static const char *MODULE_TEXT = "# stand-in module for the shim tests\n"
				 "kernel fast 50 p,i32\n"
				 "kernel slow 3000 p,p,i32\n"
				 "kernel marker 10 i32\n";

static CUcontext g_ctx;
static CUmodule g_mod;
static CUfunction g_fast, g_slow, g_marker;

static void setup(void)
{
	cu_test_open(MODULE_TEXT, &g_ctx, &g_mod);
	CU(cuModuleGetFunction(&g_fast, g_mod, "fast"));
	CU(cuModuleGetFunction(&g_slow, g_mod, "slow"));
	CU(cuModuleGetFunction(&g_marker, g_mod, "marker"));
}

static CUresult launch_marker(CUstream s, int id)
{
	void *args[] = {&id};
	return cuLaunchKernel(g_marker, 1, 1, 1, 32, 1, 1, 0, s, args, NULL);
}

static CUresult launch_slow(CUstream s, CUdeviceptr a, CUdeviceptr b, int n)
{
	void *args[] = {&a, &b, &n};
	return cuLaunchKernel(g_slow, 2, 1, 1, 64, 1, 1, 128, s, args, NULL);
}

/* Reads a whole log file (the stand-in's or the shim's). */
static char *slurp(const char *path)
{
	FILE *f = fopen(path, "r");
	if (!f)
		return strdup("");
	char *buf = calloc(1, 1 << 20);
	size_t n = fread(buf, 1, (1 << 20) - 1, f);
	buf[n] = '\0';
	fclose(f);
	return buf;
}

static int count_of(const char *hay, const char *needle)
{
	int n = 0;
	for (const char *p = hay; (p = strstr(p, needle)); p++)
		n++;
	return n;
}

/* ---- basic: several threads, each with two streams, launches and copies ---- */

typedef struct {
	int id;
	int ok;
} worker_t;

static void *worker(void *arg)
{
	worker_t *w = arg;
	CU(cuCtxSetCurrent(g_ctx));
	CUstream s[2];
	CU(cuStreamCreate(&s[0], CU_STREAM_DEFAULT));
	CU(cuStreamCreate(&s[1], CU_STREAM_NON_BLOCKING));
	CUdeviceptr d;
	CU(cuMemAlloc(&d, 4096));
	for (int i = 0; i < 20; i++) {
		int n = i;
		void *args[] = {&d, &n};
		CU(cuLaunchKernel(g_fast, 1, 1, 1, 32, 1, 1, 0, s[i % 2], args, NULL));
	}
	CU(cuMemsetD32Async(d, 0x1234u + (unsigned)w->id, 1024, s[0]));
	CU(cuStreamSynchronize(s[0]));
	CU(cuStreamSynchronize(s[1]));
	unsigned host[1024];
	CU(cuMemcpyDtoH(host, d, sizeof host));
	w->ok = host[0] == 0x1234u + (unsigned)w->id && host[1023] == host[0];
	/* the per-thread default stream, as code built with --default-stream per-thread uses it */
	int n = 7;
	void *args[] = {&d, &n};
	CU(cuLaunchKernel_ptsz(g_fast, 1, 1, 1, 32, 1, 1, 0, CU_STREAM_PER_THREAD, args, NULL));
	CU(cuStreamSynchronize_ptsz(NULL));
	CU(cuStreamQuery_ptsz(CU_STREAM_PER_THREAD));
	CU(cuStreamDestroy(s[0]));
	CU(cuStreamDestroy(s[1]));
	CU(cuMemFree(d));
	return NULL;
}

static int t_basic(void)
{
	setup();
	pthread_t t[3];
	worker_t w[3];
	for (int i = 0; i < 3; i++) {
		w[i] = (worker_t){i, 0};
		pthread_create(&t[i], NULL, worker, &w[i]);
	}
	for (int i = 0; i < 3; i++) {
		pthread_join(t[i], NULL);
		CHECK(w[i].ok);
	}
	/* legacy default stream, pinned async copies */
	void *pinned;
	CU(cuMemAllocHost(&pinned, 4096));
	CUdeviceptr d;
	CU(cuMemAlloc(&d, 4096));
	memset(pinned, 0xab, 4096);
	CU(cuMemcpyHtoDAsync(d, pinned, 4096, NULL));
	CU(launch_marker(NULL, 1));
	memset(pinned, 0, 4096);
	CU(cuMemcpyDtoHAsync(pinned, d, 4096, NULL));
	CU(cuCtxSynchronize());
	CHECK(((unsigned char *)pinned)[4095] == 0xab);
	size_t fr, tot;
	CU(cuMemGetInfo(&fr, &tot));
	CHECK(fr < tot);
	CU(cuMemFree(d));
	CU(cuMemFreeHost(pinned));
	const char *log = getenv("GPUMUX_STANDIN_LOG");
	if (log) {
		char *s = slurp(log);
		CHECK(count_of(s, "name=fast") == 3 * 21);
		CHECK(count_of(s, "name=marker") == 1);
		free(s);
	}
	return g_fail;
}

/* ---- events: cross-stream order and draining sync calls ---- */

static int t_events(void)
{
	setup();
	CUstream a, b;
	CU(cuStreamCreate(&a, CU_STREAM_NON_BLOCKING));
	CU(cuStreamCreate(&b, CU_STREAM_NON_BLOCKING));
	CUevent e, t0, t1;
	CU(cuEventCreate(&e, CU_EVENT_DISABLE_TIMING));
	CU(cuEventCreate(&t0, CU_EVENT_DEFAULT));
	CU(cuEventCreate(&t1, CU_EVENT_DEFAULT));
	CUdeviceptr d;
	CU(cuMemAlloc(&d, 256));
	/* b's marker 2 must run after a's slow kernel and marker 1, through the event */
	CU(cuEventRecord(t0, a));
	CU(launch_slow(a, d, d, 1));
	CU(launch_marker(a, 1));
	CU(cuEventRecord(e, a));
	CU(cuStreamWaitEvent(b, e, 0));
	CU(launch_marker(b, 2));
	CU(cuEventRecord(t1, b));
	CU(cuEventSynchronize(t1));
	CHECK(cuEventQuery(e) == CUDA_SUCCESS);
	CHECK(cuStreamQuery(a) == CUDA_SUCCESS);
	float ms = -1;
	CU(cuEventElapsedTime(&ms, t0, t1));
	CHECK(ms > 0);
	/* each synchronous call drains: after it returns, the work before it has completed */
	CU(launch_slow(a, d, d, 2));
	CU(cuStreamSynchronize(a));
	CHECK(cuStreamQuery(a) == CUDA_SUCCESS);
	CU(launch_slow(b, d, d, 3));
	CU(cuCtxSynchronize());
	CHECK(cuStreamQuery(b) == CUDA_SUCCESS);
	CU(launch_slow(NULL, d, d, 4));
	unsigned char h[16];
	CU(cuMemcpyDtoH(h, d, sizeof h)); /* synchronous copy on the legacy stream */
	CHECK(cuStreamQuery(NULL) == CUDA_SUCCESS);
	CU(launch_slow(a, d, d, 5));
	CU(cuEventRecord(e, a));
	CU(cuEventSynchronize(e));
	CHECK(cuStreamQuery(a) == CUDA_SUCCESS);
	CU(launch_slow(b, d, d, 6));
	CU(cuMemFree(d)); /* frees synchronise */
	CHECK(cuStreamQuery(b) == CUDA_SUCCESS);
	const char *log = getenv("GPUMUX_STANDIN_LOG");
	if (log) {
		char *s = slurp(log);
		char *m1 = strstr(s, "name=marker"), *slow = strstr(s, "name=slow");
		CHECK(slow && m1 && slow < m1);
		CHECK(m1 && strstr(m1 + 1, "name=marker")); /* marker 2 after marker 1 */
		free(s);
	}
	CU(cuEventDestroy(e));
	CU(cuEventDestroy(t0));
	CU(cuEventDestroy(t1));
	CU(cuStreamDestroy(a));
	CU(cuStreamDestroy(b));
	return g_fail;
}

/* ---- cuGetProcAddress as the runtime uses it ---- */

static int t_procaddr(void)
{
	void *self = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
	CHECK(self != NULL);
	CUdriverProcAddressQueryResult st;
	void *p = (void *)1;
	/* the runtime's first call: an empty name, as a probe */
	CHECK(cuGetProcAddress_v2("", &p, 13000, 0, &st) != CUDA_SUCCESS);
	CHECK(st == CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND);
	CU(cuGetProcAddress_v2("cuLaunchKernel", &p, 13000, CU_GET_PROC_ADDRESS_DEFAULT, &st));
	CHECK(p == dlsym(self, "cuLaunchKernel"));
	CU(cuGetProcAddress_v2("cuLaunchKernel", &p, 13000, CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM,
			       &st));
	CHECK(p == dlsym(self, "cuLaunchKernel_ptsz"));
	CU(cuGetProcAddress_v2("cuStreamSynchronize", &p, 13000,
			       CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM, &st));
	CHECK(p == dlsym(self, "cuStreamSynchronize_ptsz"));
	CU(cuGetProcAddress_v2("cuMemAlloc", &p, 13000, 0, &st));
	CHECK(p != NULL && p == dlsym(self, "cuMemAlloc_v2"));
	/* an older requested version selects the older ABI */
	CU(cuGetProcAddress_v2("cuCtxCreate", &p, 11000, 0, &st));
	CHECK(p == dlsym(self, "cuCtxCreate_v2"));
	CU(cuGetProcAddress_v2("cuCtxCreate", &p, 13000, 0, &st));
	CHECK(p == dlsym(self, "cuCtxCreate_v4"));
	/* a stream-ordered call the shim does not queue still comes back through the shim */
	CU(cuGetProcAddress_v2("cuMemPrefetchAsync", &p, 13000, 0, &st));
	CHECK(p == dlsym(self, "cuMemPrefetchAsync_v2"));
	/* cuGetProcAddress itself resolves to the shim (later lookups stay intercepted) */
	CU(cuGetProcAddress_v2("cuGetProcAddress", &p, 13000, 0, NULL));
	CHECK(p == dlsym(self, "cuGetProcAddress_v2"));
	CHECK(cuGetProcAddress_v2("cuNoSuchCall", &p, 13000, 0, &st) == CUDA_ERROR_NOT_FOUND);
	/* now drive a launch only through resolved pointers, as the runtime does */
	CUresult (*init)(unsigned);
	CUresult (*retain)(CUcontext *, CUdevice);
	CUresult (*setcur)(CUcontext);
	CUresult (*load)(CUmodule *, const void *);
	CUresult (*getfn)(CUfunction *, CUmodule, const char *);
	CUresult (*lk)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
		       CUstream, void **, void **);
	CUresult (*sync)(CUstream);
	CU(cuGetProcAddress_v2("cuInit", (void **)&init, 13000, 0, &st));
	CU(cuGetProcAddress_v2("cuDevicePrimaryCtxRetain", (void **)&retain, 13000, 0, &st));
	CU(cuGetProcAddress_v2("cuCtxSetCurrent", (void **)&setcur, 13000, 0, &st));
	CU(cuGetProcAddress_v2("cuModuleLoadData", (void **)&load, 13000, 0, &st));
	CU(cuGetProcAddress_v2("cuModuleGetFunction", (void **)&getfn, 13000, 0, &st));
	CU(cuGetProcAddress_v2("cuLaunchKernel", (void **)&lk, 13000,
			       CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM, &st));
	CU(cuGetProcAddress_v2("cuStreamSynchronize", (void **)&sync, 13000,
			       CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM, &st));
	CUcontext ctx;
	CUmodule mod;
	CUfunction f;
	CU(init(0));
	CU(retain(&ctx, 0));
	CU(setcur(ctx));
	CU(load(&mod, MODULE_TEXT));
	CU(getfn(&f, mod, "marker"));
	int id = 9;
	void *args[] = {&id};
	CU(lk(f, 1, 1, 1, 1, 1, 1, 0, NULL, args, NULL));
	CU(sync(NULL));
	return g_fail;
}

/* ---- hold: nothing runs while held; everything resumes when released ---- */

/* Ends the hold a little later, from another thread (the caller is blocked meanwhile). */
static void *unhold_later(void *hold)
{
	usleep(100000);
	unlink(hold);
	return NULL;
}

static int t_hold(void)
{
	const char *hold = getenv("GPUMUX_SHIM_HOLD_FILE");
	const char *log = getenv("GPUMUX_STANDIN_LOG");
	CHECK(hold && log);
	if (!hold || !log)
		return 1;
	FILE *f = fopen(hold, "w");
	fclose(f);
	setup();
	CUstream s;
	CU(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
	CUevent e;
	CU(cuEventCreate(&e, CU_EVENT_DISABLE_TIMING));
	CUdeviceptr d;
	CU(cuMemAlloc(&d, 256));
	for (int i = 0; i < 5; i++)
		CU(launch_slow(s, d, d, 100 + i));
	CU(cuEventRecord(e, s));
	usleep(20000);
	/* held: the record is still queued, so neither the event nor the stream is ready */
	CHECK(cuEventQuery(e) == CUDA_ERROR_NOT_READY);
	CHECK(cuStreamQuery(s) == CUDA_ERROR_NOT_READY);
	char *before = slurp(log);
	CHECK(count_of(before, "name=slow") == 0);
	free(before);
	unlink(hold);
	CU(cuStreamSynchronize(s));
	CHECK(cuEventQuery(e) == CUDA_SUCCESS);
	char *after = slurp(log);
	CHECK(count_of(after, "name=slow") == 5);
	free(after);
	/* what the policies see: name, grid, block, shared memory and parameter values */
	const char *slog = getenv("GPUMUX_SHIM_LOG");
	if (slog) {
		char *s2 = slurp(slog);
		CHECK(strstr(s2, "kind=launch") && strstr(s2, "name=slow grid=2,1,1 block=64,1,1 shmem=128"));
		CHECK(strstr(s2, "16:4:64000000")); /* third parameter: offset 16, 4 bytes, 100 */
		CHECK(strstr(s2, "kind=event_record"));
		free(s2);
	}
	/* a free first hands queued work to the driver (whose free then waits for it): work
	 * still held when cuMemFree is called has run when it returns */
	f = fopen(hold, "w");
	fclose(f);
	CU(launch_slow(s, d, d, 200));
	pthread_t t;
	pthread_create(&t, NULL, unhold_later, (void *)hold);
	CU(cuMemFree(d));
	CHECK(cuStreamQuery(s) == CUDA_SUCCESS);
	pthread_join(t, NULL);
	return g_fail;
}

/* ---- kill: a dead process never wedges the others ---- */

static int t_kill(void)
{
	const char *real = getenv("GPUMUX_REAL_LIBCUDA");
	CHECK(real != NULL);
	/* child 1: holds the engine's lock when killed */
	pid_t c1 = fork();
	if (c1 == 0) {
		CU(cuInit(0));
		void *h = dlopen(real, RTLD_NOW | RTLD_NOLOAD);
		void (*hang)(void) = h ? (void (*)(void))dlsym(h, "gmx_standin_test_hang_locked") : NULL;
		if (!hang)
			_exit(3);
		hang();
		_exit(4);
	}
	/* child 2: has long kernels queued and running when killed */
	pid_t c2 = fork();
	if (c2 == 0) {
		setup();
		CUdeviceptr d;
		CU(cuMemAlloc(&d, 256));
		for (int i = 0; i < 200; i++)
			CU(launch_slow(NULL, d, d, i));
		pause();
		_exit(0);
	}
	usleep(300000);
	kill(c1, SIGKILL);
	kill(c2, SIGKILL);
	int st;
	waitpid(c1, &st, 0);
	CHECK(WIFSIGNALED(st));
	waitpid(c2, &st, 0);
	/* this process must now get through (a watchdog fails the test if it wedges) */
	alarm(30);
	setup();
	for (int i = 0; i < 3; i++)
		CU(launch_marker(NULL, i));
	CU(cuCtxSynchronize());
	alarm(0);
	return g_fail;
}

/* ---- fork: the child starts over and works ---- */

/* Launches and synchronises on a stream of its own until *stop. */
static void *busy_launcher(void *stop)
{
	CU(cuCtxSetCurrent(g_ctx));
	CUstream s;
	CU(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
	for (int i = 0; !*(volatile int *)stop; i++) {
		CU(launch_marker(s, 1000 + i));
		CU(cuStreamSynchronize(s));
	}
	CU(cuStreamDestroy(s));
	return NULL;
}

static int t_fork(void)
{
	setup();
	CU(launch_marker(NULL, 1));
	CU(cuCtxSynchronize());
	pid_t c = fork();
	if (c == 0) {
		g_fail = 0;
		alarm(30);
		setup();
		CUstream s;
		CU(cuStreamCreate(&s, 0));
		CU(launch_marker(s, 2));
		CU(launch_marker(NULL, 3));
		CU(cuStreamSynchronize(s));
		CU(cuCtxSynchronize());
		_exit(g_fail);
	}
	CU(launch_marker(NULL, 4));
	CU(cuCtxSynchronize());
	int st;
	waitpid(c, &st, 0);
	CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	/* forks while another thread keeps the queue (and under the daemon policy the link to the
	 * daemon) busy: the shim takes its locks before fork, so each child finds them consistent
	 * and released, and works */
	volatile int stop = 0;
	pthread_t t;
	pthread_create(&t, NULL, busy_launcher, (void *)&stop);
	for (int i = 0; i < 20; i++) {
		pid_t k = fork();
		if (k == 0) {
			g_fail = 0;
			alarm(30);
			setup();
			CU(launch_marker(NULL, 10 + i));
			CU(cuCtxSynchronize());
			_exit(g_fail);
		}
		int ks;
		waitpid(k, &ks, 0);
		CHECK(WIFEXITED(ks) && WEXITSTATUS(ks) == 0);
	}
	stop = 1;
	pthread_join(t, NULL);
	return g_fail;
}

/* ---- legacy: the legacy default stream's ordering rules, both directions ---- */

static int cmp_ll(const void *a, const void *b)
{
	long long x = *(const long long *)a, y = *(const long long *)b;
	return (x > y) - (x < y);
}

/* The kernels of the stand-in's log in the order they started, joined by spaces. */
static void kernel_order(const char *log, char *out, size_t len)
{
	char *s = slurp(log);
	size_t n = 0, cap = 64;
	long long(*k)[2] = malloc(cap * sizeof *k);
	char names[64][32];
	for (char *line = strtok(s, "\n"); line && n < 64; line = strtok(NULL, "\n")) {
		long long start;
		char name[32];
		const char *kn = strstr(line, "kind=kernel name=");
		if (!kn || sscanf(line, "start_ns=%lld", &start) != 1 ||
		    sscanf(kn, "kind=kernel name=%31s", name) != 1)
			continue;
		k[n][0] = start;
		k[n][1] = (long long)n;
		snprintf(names[n], sizeof names[n], "%s", name);
		n++;
	}
	qsort(k, n, sizeof *k, cmp_ll);
	out[0] = 0;
	for (size_t i = 0; i < n; i++) {
		size_t l = strlen(out);
		snprintf(out + l, len - l, "%s%s", i ? " " : "", names[k[i][1]]);
	}
	free(k);
	free(s);
}

/* Under the hold policy, work queued while held is released in one pass when the hold ends,
 * visiting the newest queue first: only the shim's rules keep the driver's legacy semantics.
 * 1. a legacy-stream command queued after a blocking stream's waits for it;
 * 2. a blocking stream's command queued after a legacy-stream one waits for it. */
static int t_legacy(void)
{
	const char *hold = getenv("GPUMUX_SHIM_HOLD_FILE");
	const char *log = getenv("GPUMUX_STANDIN_LOG");
	CHECK(hold && log);
	if (!hold || !log)
		return 1;
	setup();
	CUstream b, c;
	CU(cuStreamCreate(&b, CU_STREAM_DEFAULT));
	CU(cuStreamCreate(&c, CU_STREAM_DEFAULT));
	CUdeviceptr d;
	CU(cuMemAlloc(&d, 256));
	int n = 1;
	void *fargs[] = {&d, &n};
	/* 1: b's queue exists first, the legacy queue is newer (visited first on release). */
	fclose(fopen(hold, "w"));
	CU(launch_marker(b, 1));
	CU(cuLaunchKernel(g_fast, 1, 1, 1, 32, 1, 1, 0, NULL, fargs, NULL));
	unlink(hold);
	CU(cuCtxSynchronize());
	/* 2: c's queue is newer than the legacy queue (visited first on release). */
	fclose(fopen(hold, "w"));
	CU(launch_slow(NULL, d, d, 2));
	CU(launch_marker(c, 3));
	unlink(hold);
	CU(cuCtxSynchronize());
	char order[512];
	kernel_order(log, order, sizeof order);
	if (strcmp(order, "marker fast slow marker") != 0) {
		fprintf(stderr, "kernels started in the order '%s', expected 'marker fast slow marker'\n",
			order);
		g_fail = 1;
	}
	CU(cuMemFree(d));
	CU(cuStreamDestroy(b));
	CU(cuStreamDestroy(c));
	return g_fail;
}
/* ---- stall: a daemon whose socket stalls the connection attempt delays no other thread ---- */

typedef struct {
	volatile int in_first_call, first_call_done, other_done, other_done_before_first;
	CUstream s;
} stall_t;

/* Waits (up to 20 s) until the shim's log has a line containing what. */
static int wait_log(const char *what)
{
	const char *slog = getenv("GPUMUX_SHIM_LOG");
	for (int i = 0; slog && i < 4000; i++) {
		char *s = slurp(slog);
		int found = strstr(s, what) != NULL;
		free(s);
		if (found)
			return 1;
		usleep(5000);
	}
	return 0;
}

/* Another thread's launches and synchronisations, once the first caller is stalled. */
static void *stall_other(void *arg)
{
	stall_t *st = arg;
	CU(cuCtxSetCurrent(g_ctx));
	while (!st->in_first_call)
		usleep(1000);
	CHECK(wait_log("daemon: connecting to"));
	for (int i = 0; i < 5; i++) {
		CU(launch_marker(st->s, 100 + i));
		CU(cuStreamSynchronize(st->s));
	}
	st->other_done_before_first = !st->first_call_done;
	st->other_done = 1;
	return NULL;
}

/* $GPUMUX_RUNTIME_DIR/gpumuxd.sock accepts connections but never answers (silent), or has a
 * full listen backlog so that connect itself blocks (backlog). The first queued command starts
 * the connection attempt; while it is stalled, another thread's launches and synchronisations
 * must complete (they used to wait behind the queue lock the attempt was made under). */
static int t_stall(int backlog)
{
	const char *dir = getenv("GPUMUX_RUNTIME_DIR");
	CHECK(dir != NULL);
	if (!dir)
		return 1;
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	snprintf(sa.sun_path, sizeof sa.sun_path, "%s/gpumuxd.sock", dir);
	unlink(sa.sun_path);
	int l = socket(AF_UNIX, SOCK_SEQPACKET, 0);
	if (l < 0 || bind(l, (struct sockaddr *)&sa, sizeof sa) != 0 || listen(l, backlog ? 0 : 16) != 0) {
		perror("stall: listening socket");
		return 1;
	}
	int filled = 0;
	while (backlog && filled < 64) { /* fill the backlog: the next blocking connect waits */
		int c = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_NONBLOCK, 0);
		if (connect(c, (struct sockaddr *)&sa, sizeof sa) != 0) {
			close(c);
			break;
		}
		filled++;
	}
	CHECK(!backlog || (filled > 0 && filled < 64));
	alarm(30); /* a stalled thread fails the test instead of hanging it */
	setup();
	stall_t st = {0};
	CU(cuStreamCreate(&st.s, CU_STREAM_NON_BLOCKING));
	pthread_t t;
	pthread_create(&t, NULL, stall_other, &st);
	st.in_first_call = 1;
	CU(launch_marker(NULL, 1)); /* the first queued command: the connection attempt starts */
	st.first_call_done = 1;
	pthread_join(t, NULL);
	CHECK(st.other_done);
	if (!st.other_done_before_first) {
		fprintf(stderr,
			"stall: the other thread's CUDA calls waited for the stalled connection attempt\n");
		g_fail = 1;
	}
	CU(cuCtxSynchronize());
	alarm(0);
	unlink(sa.sun_path);
	return g_fail;
}

/* ---- errors: bad handles and modules ---- */

/* ---- straight: a launch that may skip the queue never overtakes queued work ---- */

/* Under the queue policy a launch goes straight to the driver only while nothing is queued.
 * An event record issued from another context than its stream's is queued (a release would
 * change the caller's context), and the dispatcher releases it later: a launch right after it
 * on the same stream must follow it. The stand-in logs a record when it reaches its stream's
 * head, so the log's order is the submission order. */
static int t_straight(void)
{
	setup(); /* the primary context, current */
	CUdevice dev;
	CUcontext other;
	CU(cuDeviceGet(&dev, 0));
	CU(cuCtxCreate(&other, NULL, 0, dev)); /* now current */
	CUmodule mod;
	CUfunction slow, marker;
	CU(cuModuleLoadData(&mod, MODULE_TEXT));
	CU(cuModuleGetFunction(&slow, mod, "slow"));
	CU(cuModuleGetFunction(&marker, mod, "marker"));
	CUstream s;
	CU(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
	CUevent ev;
	CU(cuEventCreate(&ev, CU_EVENT_DISABLE_TIMING));
	CUdeviceptr d;
	CU(cuMemAlloc(&d, 256));
	for (int round = 0; round < 20; round++) {
		int n = round;
		void *sargs[] = {&d, &d, &n};
		void *margs[] = {&n};
		CU(cuLaunchKernel(slow, 1, 1, 1, 32, 1, 1, 0, s, sargs, NULL));
		CU(cuCtxSetCurrent(g_ctx));
		CU(cuEventRecord(ev, s)); /* queued: the caller's context is not the stream's */
		CU(cuCtxSetCurrent(other));
		CU(cuLaunchKernel(marker, 1, 1, 1, 32, 1, 1, 0, s, margs, NULL));
		CU(cuStreamSynchronize(s));
	}
	char *log = slurp(getenv("GPUMUX_STANDIN_LOG"));
	/* Per round: slow, the record, marker; never the marker before the record. */
	int rounds = 0, bad = 0, last = 0; /* 1 slow, 2 record, 3 marker */
	for (char *line = strtok(log, "\n"); line; line = strtok(NULL, "\n")) {
		int k = strstr(line, "name=slow")     ? 1
			: strstr(line, "kind=record") ? 2
			: strstr(line, "name=marker") ? 3
						      : 0;
		if (!k)
			continue;
		if (k != last % 3 + 1)
			bad++;
		rounds += k == 3;
		last = k;
	}
	fprintf(stderr, "straight: %d rounds, %d out of order\n", rounds, bad);
	CHECK(rounds == 20 && bad == 0);
	free(log);
	CU(cuMemFree(d));
	CU(cuEventDestroy(ev));
	CU(cuStreamDestroy(s));
	CU(cuCtxDestroy(other));
	return g_fail;
}

/* ---- slots: as many processes as the stand-in has slots at once; one more is refused ---- */

/* The bench drives 64 client processes at once (bench/daemon) beside its own. */
_Static_assert(SI_SLOTS >= 65, "the stand-in must serve 64 client processes and one more");

/* A child: initialises, runs a kernel, reports 'k' (or 'f') on ready, then waits on go
 * (until its write end closes) and runs one more kernel. */
static void slots_child(int id, int ready, int go)
{
	CUdevice dev;
	CUcontext ctx;
	CUmodule mod;
	CUfunction fn;
	int n = id;
	void *args[] = {&n};
	int ok = cuInit(0) == CUDA_SUCCESS && cuDeviceGet(&dev, 0) == CUDA_SUCCESS &&
		 cuDevicePrimaryCtxRetain(&ctx, dev) == CUDA_SUCCESS &&
		 cuCtxSetCurrent(ctx) == CUDA_SUCCESS &&
		 cuModuleLoadData(&mod, MODULE_TEXT) == CUDA_SUCCESS &&
		 cuModuleGetFunction(&fn, mod, "marker") == CUDA_SUCCESS &&
		 cuLaunchKernel(fn, 1, 1, 1, 32, 1, 1, 0, NULL, args, NULL) == CUDA_SUCCESS &&
		 cuCtxSynchronize() == CUDA_SUCCESS;
	char c = ok ? 'k' : 'f';
	if (write(ready, &c, 1) != 1 || !ok)
		_exit(1);
	if (read(go, &c, 1) < 0)
		_exit(1);
	n = -id;
	ok = cuLaunchKernel(fn, 1, 1, 1, 32, 1, 1, 0, NULL, args, NULL) == CUDA_SUCCESS &&
	     cuCtxSynchronize() == CUDA_SUCCESS;
	_exit(ok ? 0 : 1);
}

static int t_slots(void)
{
	int ready[2], go[2];
	CHECK(pipe(ready) == 0 && pipe(go) == 0);
	static pid_t pid[SI_SLOTS];
	alarm(55); /* a child that hangs fails the test instead of wedging it */
	for (int i = 0; i < SI_SLOTS; i++) {
		pid[i] = fork();
		if (pid[i] == 0) {
			close(ready[0]);
			close(go[1]);
			slots_child(i + 1, ready[1], go[0]);
		}
		CHECK(pid[i] > 0);
	}
	close(ready[1]);
	close(go[0]);
	int ok = 0, failed = 0;
	char c;
	while (ok + failed < SI_SLOTS && read(ready[0], &c, 1) == 1)
		c == 'k' ? ok++ : failed++;
	fprintf(stderr, "slots: %d of %d processes ran at once, %d failed\n", ok, SI_SLOTS, failed);
	CHECK(ok == SI_SLOTS);
	/* Past the limit: the next process is refused (no device), with the reason on stderr. */
	pid_t extra = fork();
	if (extra == 0)
		_exit(cuInit(0) == CUDA_ERROR_NO_DEVICE ? 0 : 1);
	int st = 0;
	waitpid(extra, &st, 0);
	CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	close(go[1]); /* every child runs its second kernel and exits */
	for (int i = 0; i < SI_SLOTS; i++) {
		if (pid[i] <= 0)
			continue;
		waitpid(pid[i], &st, 0);
		CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	}
	/* Their slots are free again (exited processes are reaped when the slots run out). */
	extra = fork();
	if (extra == 0) {
		setup();
		CU(launch_marker(NULL, 0));
		CU(cuCtxSynchronize());
		_exit(0);
	}
	waitpid(extra, &st, 0);
	CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	alarm(0);
	char *log = slurp(getenv("GPUMUX_STANDIN_LOG"));
	CHECK(count_of(log, "kind=kernel name=marker") == 2 * SI_SLOTS + 1);
	free(log);
	return g_fail;
}

static int t_errors(void)
{
	CHECK(cuCtxSynchronize() == CUDA_ERROR_NOT_INITIALIZED ||
	      cuCtxSynchronize() == CUDA_ERROR_INVALID_CONTEXT);
	setup();
	CUmodule m;
	CHECK(cuModuleLoadData(&m, "kernel broken\n") == CUDA_ERROR_INVALID_IMAGE);
	CHECK(cuModuleLoadData(&m, "kernel k 10 p,zz\n") == CUDA_ERROR_INVALID_IMAGE);
	CHECK(cuModuleLoad(&m, "/nonexistent/module.txt") == CUDA_ERROR_FILE_NOT_FOUND);
	CUfunction f;
	CHECK(cuModuleGetFunction(&f, g_mod, "nope") == CUDA_ERROR_NOT_FOUND);
	CHECK(cuModuleGetFunction(&f, (CUmodule)&m, "fast") == CUDA_ERROR_INVALID_HANDLE);
	int x = 0;
	void *args[] = {&x};
	CHECK(cuLaunchKernel((CUfunction)&x, 1, 1, 1, 1, 1, 1, 0, NULL, args, NULL) ==
	      CUDA_ERROR_INVALID_HANDLE);
	CHECK(cuLaunchKernel(g_marker, 1, 1, 1, 1, 1, 1, 0, (CUstream)&x, args, NULL) ==
	      CUDA_ERROR_INVALID_HANDLE);
	CHECK(cuEventQuery((CUevent)&x) == CUDA_ERROR_INVALID_HANDLE);
	CHECK(cuStreamSynchronize((CUstream)&x) == CUDA_ERROR_INVALID_HANDLE);
	CHECK(cuCtxSetCurrent((CUcontext)&x) == CUDA_ERROR_INVALID_CONTEXT);
	CHECK(cuMemFree((CUdeviceptr)(uintptr_t)&x) == CUDA_ERROR_INVALID_VALUE);
	size_t off, size;
	CHECK(cuFuncGetParamInfo(g_slow, 2, &off, &size) == CUDA_SUCCESS && off == 16 && size == 4);
	CHECK(cuFuncGetParamInfo(g_slow, 3, &off, &size) == CUDA_ERROR_INVALID_VALUE);
	/* managed memory: prefetch makes it resident and counts against the device */
	size_t fr0, fr1, tot;
	CU(cuMemGetInfo(&fr0, &tot));
	CUdeviceptr mp;
	CU(cuMemAllocManaged(&mp, 4u << 20, CU_MEM_ATTACH_GLOBAL));
	CUmemLocation dev = {.type = CU_MEM_LOCATION_TYPE_DEVICE, .id = 0};
	CU(cuMemPrefetchAsync(mp, 4u << 20, dev, 0, NULL));
	CU(cuMemGetInfo(&fr1, &tot));
	CHECK(fr0 - fr1 == (4u << 20));
	CUmemLocation host = {.type = CU_MEM_LOCATION_TYPE_HOST, .id = 0};
	CU(cuMemPrefetchAsync(mp, 4u << 20, host, 0, NULL));
	CU(cuMemGetInfo(&fr1, &tot));
	CHECK(fr1 == fr0);
	CU(cuCtxSynchronize());
	CU(cuMemFree(mp));
	return g_fail;
}

int main(int argc, char **argv)
{
	if (argc != 2) {
		fprintf(stderr,
			"usage: %s "
			"basic|events|procaddr|hold|kill|fork|errors|legacy|stall_backlog|stall_silent|slots|"
			"straight\n",
			argv[0]);
		return 2;
	}
	const char *t = argv[1];
	/* Logs start empty for each run: the checks count lines. */
	const char *logs[] = {getenv("GPUMUX_STANDIN_LOG"), getenv("GPUMUX_SHIM_LOG")};
	for (int i = 0; i < 2; i++)
		if (logs[i] && *logs[i])
			fclose(fopen(logs[i], "w"));
	int rc = !strcmp(t, "basic")	       ? t_basic()
		 : !strcmp(t, "events")	       ? t_events()
		 : !strcmp(t, "procaddr")      ? t_procaddr()
		 : !strcmp(t, "hold")	       ? t_hold()
		 : !strcmp(t, "kill")	       ? t_kill()
		 : !strcmp(t, "fork")	       ? t_fork()
		 : !strcmp(t, "errors")	       ? t_errors()
		 : !strcmp(t, "legacy")	       ? t_legacy()
		 : !strcmp(t, "stall_backlog") ? t_stall(1)
		 : !strcmp(t, "stall_silent")  ? t_stall(0)
		 : !strcmp(t, "slots")	       ? t_slots()
		 : !strcmp(t, "straight")      ? t_straight()
					       : 2;
	if (rc == 0)
		printf("%s: ok\n", t);
	return rc;
}
