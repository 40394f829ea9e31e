/*
 * bench_shim: time added per cuLaunchKernel by the interposer.
 *
 * Three runs, each in its own process (the shim reads its policy once, at load):
 *   direct       the stand-in driver called directly
 *   passthrough  through the shim, default policy (no queue)
 *   queue        through the shim, every launch queued and granted, in flight <= 4 (default):
 *                once 4 are in flight the call only enqueues; the dispatcher releases
 *   queue_inline through the shim, queued with in flight <= 1024: each call enqueues, releases
 *                to the driver and records the completion event itself (the whole path)
 * Each run times N launches of a zero-duration kernel one by one (CLOCK_MONOTONIC around
 * the call), synchronising every 256 launches outside the timed region. Prints a table and
 * one JSON line; "added" is the run's figure minus the direct run's.
 *
 * Usage: bench_shim [N]            (default N = 20000)
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

#define SYM(var, name)                                                                                       \
	do {                                                                                                 \
		*(void **)&var = dlsym(h, name);                                                             \
		if (!var) {                                                                                  \
			fprintf(stderr, "bench_shim: %s lacks %s\n", lib, name);                             \
			return 1;                                                                            \
		}                                                                                            \
	} while (0)

/* One run: prints "median p99" in ns on stdout. */
static int run(const char *lib, int n)
{
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
	if (init(0) || retain(&ctx, 0) || setcur(ctx) || load(&mod, "kernel k 0 p,i32\n") ||
	    getfn(&f, mod, "k") || mkstream(&s, CU_STREAM_NON_BLOCKING) || alloc(&d, 4096)) {
		fprintf(stderr, "bench_shim: driver setup failed for %s\n", lib);
		return 1;
	}
	int64_t *t = malloc((size_t)n * sizeof *t);
	if (!t)
		return 1;
	for (int i = 0; i < n + 1000; i++) { /* the first 1000 warm up and are not kept */
		int v = i;
		void *args[] = {&d, &v};
		int64_t t0 = now_ns();
		CUresult r = lk(f, 1, 1, 1, 32, 1, 1, 0, s, args, NULL);
		int64_t t1 = now_ns();
		if (r != CUDA_SUCCESS) {
			fprintf(stderr, "bench_shim: launch failed (%d)\n", (int)r);
			return 1;
		}
		if (i >= 1000)
			t[i - 1000] = t1 - t0;
		if (i % 256 == 255)
			sync(s);
	}
	sync(s);
	qsort(t, (size_t)n, sizeof *t, cmp64);
	printf("%lld %lld\n", (long long)t[n / 2], (long long)t[(size_t)n * 99 / 100]);
	return 0;
}

/* Runs one mode in a child process with its environment; reads back median and p99. */
static int spawn(const char *self, const char *mode, int n, const char *dir, long long out[2])
{
	int fd[2];
	if (pipe(fd) != 0)
		return -1;
	pid_t p = fork();
	if (p == 0) {
		dup2(fd[1], 1);
		close(fd[0]);
		setenv("GPUMUX_STANDIN_DIR", dir, 1);
		setenv("GPUMUX_REAL_LIBCUDA", GMX_STANDIN_PATH, 1);
		unsetenv("GPUMUX_STANDIN_LOG");
		unsetenv("GPUMUX_SHIM_LOG");
		setenv("GPUMUX_SHIM_POLICY", strncmp(mode, "queue", 5) == 0 ? "queue" : "passthrough", 1);
		if (strcmp(mode, "queue_inline") == 0)
			setenv("GPUMUX_SHIM_INFLIGHT", "1024", 1);
		else
			unsetenv("GPUMUX_SHIM_INFLIGHT");
		char nb[32];
		snprintf(nb, sizeof nb, "%d", n);
		execl(self, self, "--run", mode, nb, (char *)NULL);
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

int main(int argc, char **argv)
{
	if (argc == 4 && strcmp(argv[1], "--run") == 0) {
		const char *lib = strcmp(argv[2], "direct") == 0 ? GMX_STANDIN_PATH : GMX_SHIM_PATH;
		return run(lib, atoi(argv[3]));
	}
	int n = argc > 1 ? atoi(argv[1]) : 20000;
	if (n < 100) {
		fprintf(stderr, "usage: bench_shim [N >= 100]\n");
		return 2;
	}
	char dir[] = "/tmp/gpumux-bench-XXXXXX";
	if (!mkdtemp(dir)) {
		perror("bench_shim: mkdtemp");
		return 1;
	}
	enum { NMODES = 4 };
	const char *modes[NMODES] = {"direct", "passthrough", "queue", "queue_inline"};
	long long r[NMODES][2];
	for (int i = 0; i < NMODES; i++)
		if (spawn("/proc/self/exe", modes[i], n, dir, r[i]) != 0) {
			fprintf(stderr, "bench_shim: the %s run failed\n", modes[i]);
			return 1;
		}
	char shm[4200];
	snprintf(shm, sizeof shm, "%s/gpumux-standin-%u", dir, (unsigned)getuid());
	unlink(shm);
	rmdir(dir);
	printf("cuLaunchKernel, %d launches per run (ns per call)\n", n);
	printf("%-12s %10s %10s %14s %12s\n", "run", "median", "p99", "added_median", "added_p99");
	for (int i = 0; i < NMODES; i++)
		printf("%-12s %10lld %10lld %14lld %12lld\n", modes[i], r[i][0], r[i][1], r[i][0] - r[0][0],
		       r[i][1] - r[0][1]);
	printf("{\"bench\":\"shim_launch\",\"n\":%d", n);
	for (int i = 0; i < NMODES; i++)
		printf(",\"%s\":{\"median_ns\":%lld,\"p99_ns\":%lld,\"added_median_ns\":%lld,\"added_p99_"
		       "ns\":%lld}",
		       modes[i], r[i][0], r[i][1], r[i][0] - r[0][0], r[i][1] - r[0][1]);
	printf("}\n");
	return 0;
}
