/*
 * bench_shim: time added per cuLaunchKernel by the interposer.
 *
 * Twelve runs, each in its own process (the shim reads its policy once, at load), in three
 * sets of four:
 *   direct       the stand-in driver called directly
 *   passthrough  through the shim, default policy (no queue)
 *   queue        through the shim, every launch queued and granted, in flight <= 4 (default):
 *                once 4 are in flight the call only enqueues; the dispatcher releases
 *   queue_inline through the shim, queued with in flight <= 1024: each call enqueues, releases
 *                to the driver and tracks its completion itself (the whole path; an event
 *                only while its stream was last seen busy, docs/shim.md)
 * Set 1 loads the kernel from the stand-in's text format and the shim asks the driver for its
 * name and layout (cuFuncGetName/cuFuncGetParamInfo). Set 2 (suffix _image) loads it from a
 * PTX image and the queueing runs set GPUMUX_SHIM_KERNEL_INFO=image: name and layout come from
 * the fatbin parser. Set 3 (suffix _122) loads the PTX image on a 12.2-like stand-in
 * (GPUMUX_STANDIN_DRIVER_VERSION=12020, no cuFuncGetName/cuFuncGetParamInfo), so the shim must
 * learn from the image. Before timing, each queueing run of sets 2 and 3 is checked once with
 * GPUMUX_SHIM_LOG: every launch must have been queued as bench_k with the parsed layout and
 * its own parameter values, none unidentified; otherwise the bench fails.
 *
 * Each run times N launches of a zero-duration kernel one by one (CLOCK_MONOTONIC around
 * the call), synchronising every 256 launches outside the timed region. The whole sequence is
 * repeated REPS times (interleaved); the figures are the medians over the repetitions of each
 * run's median and p99. Prints a table and one JSON line; "added" is the run's figure minus
 * the direct run's of its set, "over_pass" minus the passthrough run's of its set.
 *
 * Usage: bench_shim [N [REPS]]     (default N = 20000, REPS = 3)
 *        bench_shim --run MODE N   (one run; used internally)
 */
#define _GNU_SOURCE
#include <cuda.h>

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

typedef CUresult (*launch_fn)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
			      unsigned, CUstream, void **, void **);

/* The same kernel in the stand-in's text format and as a PTX image: (pointer, int). */
static const char TEXT_MODULE[] = "kernel bench_k 0 p,i32\n";
static const char PTX_MODULE[] = ".version 8.0\n.target sm_80\n.address_size 64\n\n"
				 ".visible .entry bench_k(\n"
				 "\t.param .u64 bench_k_param_0,\n"
				 "\t.param .u32 bench_k_param_1\n"
				 ")\n{\n\tret;\n}\n";
#define WARMUP 1000

typedef struct {
	const char *name;
	int shim, queue, inflight_1024, image, kinfo_image, v122;
} bmode_t;

static const bmode_t MODES[] = {
    {"direct", 0, 0, 0, 0, 0, 0},	       {"passthrough", 1, 0, 0, 0, 0, 0},
    {"queue", 1, 1, 0, 0, 0, 0},	       {"queue_inline", 1, 1, 1, 0, 0, 0},
    {"direct_image", 0, 0, 0, 1, 0, 0},	       {"passthrough_image", 1, 0, 0, 1, 0, 0},
    {"queue_image", 1, 1, 0, 1, 1, 0},	       {"queue_inline_image", 1, 1, 1, 1, 1, 0},
    {"direct_122", 0, 0, 0, 1, 0, 1},	       {"passthrough_122", 1, 0, 0, 1, 0, 1},
    {"queue_122", 1, 1, 0, 1, 0, 1},	       {"queue_inline_122", 1, 1, 1, 1, 0, 1},
};
enum { NMODES = sizeof MODES / sizeof MODES[0], SET = 4, REPS_MAX = 99 };

static const bmode_t *find_mode(const char *name)
{
	for (int i = 0; i < NMODES; i++)
		if (strcmp(MODES[i].name, name) == 0)
			return &MODES[i];
	return NULL;
}

static int64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static int cmp64(const void *a, const void *b)
{
	int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
	return (x > y) - (x < y);
}

static int cmpll(const void *a, const void *b)
{
	long long x = *(const long long *)a, y = *(const long long *)b;
	return (x > y) - (x < y);
}

#define SYM(var, name)                                                                                       \
	do {                                                                                                 \
		*(void **)&var = dlsym(h, name);                                                             \
		if (!var) {                                                                                  \
			fprintf(stderr, "bench_shim: %s lacks %s\n", lib, name);                             \
			return 1;                                                                            \
		}                                                                                            \
	} while (0)

/* One run: prints "median p99" in ns on stdout. */
static int run(const bmode_t *m, int n)
{
	const char *lib = m->shim ? GMX_SHIM_PATH : GMX_STANDIN_PATH;
	void *h = dlopen(lib, RTLD_NOW | RTLD_LOCAL);
	if (!h) {
		fprintf(stderr, "bench_shim: cannot load %s: %s\n", lib, dlerror());
		return 1;
	}
	CUresult (*init)(unsigned);
	CUresult (*retain)(CUcontext *, CUdevice);
	CUresult (*setcur)(CUcontext);
	CUresult (*load)(CUmodule *, const void *);
	CUresult (*getfn)(CUfunction *, CUmodule, const char *);
	CUresult (*mkstream)(CUstream *, unsigned);
	CUresult (*sync)(CUstream);
	CUresult (*alloc)(CUdeviceptr *, size_t);
	launch_fn lk;
	SYM(init, "cuInit");
	SYM(retain, "cuDevicePrimaryCtxRetain");
	SYM(setcur, "cuCtxSetCurrent");
	SYM(load, "cuModuleLoadData");
	SYM(getfn, "cuModuleGetFunction");
	SYM(mkstream, "cuStreamCreate");
	SYM(sync, "cuStreamSynchronize");
	SYM(alloc, "cuMemAlloc_v2");
	SYM(lk, "cuLaunchKernel");
	CUcontext ctx;
	CUmodule mod;
	CUfunction f;
	CUstream s;
	CUdeviceptr d;
	if (init(0) || retain(&ctx, 0) || setcur(ctx) || load(&mod, m->image ? PTX_MODULE : TEXT_MODULE) ||
	    getfn(&f, mod, "bench_k") || mkstream(&s, CU_STREAM_NON_BLOCKING) || alloc(&d, 4096)) {
		fprintf(stderr, "bench_shim: driver setup failed for %s (%s)\n", lib, m->name);
		return 1;
	}
	int64_t *t = malloc((size_t)n * sizeof *t);
	if (!t)
		return 1;
	for (int i = 0; i < n + WARMUP; i++) { /* the first WARMUP are not kept */
		int v = i;
		void *args[] = {&d, &v};
		int64_t t0 = now_ns();
		CUresult r = lk(f, 1, 1, 1, 32, 1, 1, 0, s, args, NULL);
		int64_t t1 = now_ns();
		if (r != CUDA_SUCCESS) {
			fprintf(stderr, "bench_shim: launch failed (%d)\n", (int)r);
			return 1;
		}
		if (i >= WARMUP)
			t[i - WARMUP] = t1 - t0;
		if (i % 256 == 255)
			sync(s);
	}
	if (sync(s) != CUDA_SUCCESS) {
		fprintf(stderr, "bench_shim: the stream reported an error (%s)\n", m->name);
		return 1;
	}
	qsort(t, (size_t)n, sizeof *t, cmp64);
	printf("%lld %lld\n", (long long)t[n / 2], (long long)t[(size_t)n * 99 / 100]);
	return 0;
}

/* Runs one mode in a child process with its environment (and GPUMUX_SHIM_LOG=log when log is
 * not NULL); reads back median and p99. */
static int spawn(const char *self, const bmode_t *m, int n, const char *dir, const char *log,
		 long long out[2])
{
	int fd[2];
	if (pipe(fd) != 0)
		return -1;
	pid_t p = fork();
	if (p == 0) {
		dup2(fd[1], 1);
		close(fd[0]);
		char times[4200];
		snprintf(times, sizeof times, "%s/kernel-times", dir);
		setenv("GPUMUX_STANDIN_DIR", dir, 1);
		setenv("GPUMUX_STANDIN_KERNEL_TIMES", times, 1);
		setenv("GPUMUX_REAL_LIBCUDA", GMX_STANDIN_PATH, 1);
		unsetenv("GPUMUX_STANDIN_LOG");
		unsetenv("GPUMUX_STANDIN_RECORD");
		if (log)
			setenv("GPUMUX_SHIM_LOG", log, 1);
		else
			unsetenv("GPUMUX_SHIM_LOG");
		setenv("GPUMUX_SHIM_POLICY", m->queue ? "queue" : "passthrough", 1);
		if (m->inflight_1024)
			setenv("GPUMUX_SHIM_INFLIGHT", "1024", 1);
		else
			unsetenv("GPUMUX_SHIM_INFLIGHT");
		if (m->kinfo_image)
			setenv("GPUMUX_SHIM_KERNEL_INFO", "image", 1);
		else
			unsetenv("GPUMUX_SHIM_KERNEL_INFO");
		if (m->v122)
			setenv("GPUMUX_STANDIN_DRIVER_VERSION", "12020", 1);
		else
			unsetenv("GPUMUX_STANDIN_DRIVER_VERSION");
		char nb[32];
		snprintf(nb, sizeof nb, "%d", n);
		execl(self, self, "--run", m->name, nb, (char *)NULL);
		_exit(127);
	}
	close(fd[1]);
	FILE *f = fdopen(fd[0], "r");
	int ok = f && fscanf(f, "%lld %lld", &out[0], &out[1]) == 2;
	if (f)
		fclose(f);
	int st;
	waitpid(p, &st, 0);
	return ok && WIFEXITED(st) && WEXITSTATUS(st) == 0 ? 0 : -1;
}

/*
 * The check of a queueing run that learns from the image: runs it with n launches (plus the
 * warm-up) and GPUMUX_SHIM_LOG, then requires the image source, no unidentified launch, and
 * every launch released in order as bench_k with parameters at 0 (8 bytes, the allocation)
 * and 8 (4 bytes, the launch's index) copied from the caller. 0, or -1 with the reason said.
 */
static int check(const char *self, const bmode_t *m, int n, const char *dir)
{
	char log[4200];
	snprintf(log, sizeof log, "%s/check-%s.log", dir, m->name);
	unlink(log);
	long long dummy[2];
	if (spawn(self, m, n, dir, log, dummy) != 0) {
		fprintf(stderr, "bench_shim: the %s check run failed\n", m->name);
		return -1;
	}
	FILE *f = fopen(log, "r");
	if (!f) {
		fprintf(stderr, "bench_shim: %s: the shim wrote no log %s\n", m->name, log);
		return -1;
	}
	char line[4096];
	long launches = 0;
	int source = 0, bad = 0;
	while (fgets(line, sizeof line, f)) {
		if (strstr(line, "kernel-info source=images"))
			source = 1;
		if (strstr(line, "unidentified")) {
			fprintf(stderr, "bench_shim: %s: %s", m->name, line);
			bad = 1;
		}
		if (!strstr(line, " release ") || !strstr(line, "kind=launch "))
			continue;
		unsigned v = (unsigned)launches;
		char want[128];
		snprintf(want, sizeof want, " name=bench_k grid=1,1,1 block=32,1,1 shmem=0 params=[0:8:");
		char idx[64];
		snprintf(idx, sizeof idx, ",8:4:%02x%02x%02x%02x] ", v & 255, (v >> 8) & 255, (v >> 16) & 255,
			 v >> 24);
		if (!bad && (!strstr(line, want) || !strstr(line, idx) || !strstr(line, " rc=0"))) {
			fprintf(stderr, "bench_shim: %s: launch %ld not queued as bench_k (0:8, 8:4 = %u): %s",
				m->name, launches, v, line);
			bad = 1;
		}
		launches++;
	}
	fclose(f);
	unlink(log);
	if (!source) {
		fprintf(stderr, "bench_shim: %s: the shim did not say kernel-info source=images\n", m->name);
		bad = 1;
	}
	if (launches != n + WARMUP) {
		fprintf(stderr, "bench_shim: %s: %ld launches released through the queue, %d made\n", m->name,
			launches, n + WARMUP);
		bad = 1;
	}
	return bad ? -1 : 0;
}

int main(int argc, char **argv)
{
	if (argc == 4 && strcmp(argv[1], "--run") == 0) {
		const bmode_t *m = find_mode(argv[2]);
		if (!m) {
			fprintf(stderr, "bench_shim: unknown mode %s\n", argv[2]);
			return 2;
		}
		return run(m, atoi(argv[3]));
	}
	int n = argc > 1 ? atoi(argv[1]) : 20000;
	int reps = argc > 2 ? atoi(argv[2]) : 3;
	if (n < 100 || reps < 1 || reps > REPS_MAX) {
		fprintf(stderr, "usage: bench_shim [N >= 100 [REPS 1..%d]]\n", REPS_MAX);
		return 2;
	}
	char dir[] = "/tmp/gpumux-bench-XXXXXX";
	if (!mkdtemp(dir)) {
		perror("bench_shim: mkdtemp");
		return 1;
	}
	char times[4200];
	snprintf(times, sizeof times, "%s/kernel-times", dir);
	FILE *tf = fopen(times, "w");
	if (!tf || fputs("bench_k 0\n", tf) < 0 || fclose(tf) != 0) {
		fprintf(stderr, "bench_shim: cannot write %s\n", times);
		return 1;
	}
	const char *self = "/proc/self/exe";
	int rc = 0;
	for (int i = 0; i < NMODES && rc == 0; i++)
		if (MODES[i].queue && MODES[i].image && check(self, &MODES[i], 200, dir) != 0)
			rc = 1;
	static long long r[NMODES][2][REPS_MAX];
	for (int k = 0; k < reps && rc == 0; k++)
		for (int i = 0; i < NMODES && rc == 0; i++) {
			long long o[2];
			if (spawn(self, &MODES[i], n, dir, NULL, o) != 0) {
				fprintf(stderr, "bench_shim: the %s run failed\n", MODES[i].name);
				rc = 1;
			}
			r[i][0][k] = o[0];
			r[i][1][k] = o[1];
		}
	char shm[4200];
	snprintf(shm, sizeof shm, "%s/gpumux-standin-%u", dir, (unsigned)getuid());
	unlink(shm);
	unlink(times);
	rmdir(dir);
	if (rc)
		return rc;
	long long med[NMODES][2];
	for (int i = 0; i < NMODES; i++)
		for (int j = 0; j < 2; j++) {
			qsort(r[i][j], (size_t)reps, sizeof r[i][j][0], cmpll);
			med[i][j] = r[i][j][reps / 2];
		}
	printf("cuLaunchKernel, %d launches per run, median of %d runs (ns per call); launches of the "
	       "_image/_122 queue runs checked: all queued as bench_k with the parsed layout\n",
	       n, reps);
	printf("%-19s %8s %8s %13s %10s %15s\n", "run", "median", "p99", "added_median", "added_p99",
	       "over_pass_med");
	for (int i = 0; i < NMODES; i++) {
		int b = i / SET * SET;
		printf("%-19s %8lld %8lld %13lld %10lld %15lld\n", MODES[i].name, med[i][0], med[i][1],
		       med[i][0] - med[b][0], med[i][1] - med[b][1], med[i][0] - med[b + 1][0]);
	}
	printf("{\"bench\":\"shim_launch\",\"n\":%d,\"reps\":%d", n, reps);
	for (int i = 0; i < NMODES; i++) {
		int b = i / SET * SET;
		printf(",\"%s\":{\"median_ns\":%lld,\"p99_ns\":%lld,\"added_median_ns\":%lld,\"added_p99_"
		       "ns\":%lld,\"over_passthrough_median_ns\":%lld}",
		       MODES[i].name, med[i][0], med[i][1], med[i][0] - med[b][0], med[i][1] - med[b][1],
		       med[i][0] - med[b + 1][0]);
	}
	printf("}\n");
	return 0;
}
