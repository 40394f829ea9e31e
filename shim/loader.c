/*
 * Finding and loading the real NVIDIA driver.
 *
 * The shim is itself named libcuda.so.1, so any lookup by that bare name can find the shim
 * again. The real driver is therefore opened only by full path: GPUMUX_REAL_LIBCUDA, or a
 * fixed list of system directories, and each candidate is rejected if it is the same file as
 * the shim (st_dev + st_ino) or, once opened, if its cuInit resolves into the shim. Symbols
 * are looked up with dlsym on that handle only, never through RTLD_NEXT/RTLD_DEFAULT, so a
 * lookup can never come back into the shim.
 */
#define _GNU_SOURCE
#include "shim_internal.h"

#include <dlfcn.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

void *gmx_shim_tbl[GMX_SYM_COUNT];
int gmx_shim_loaded;
int gmx_shim_log_fd = -1;
const gmx_grant_ops_t *gmx_shim_policy;

static pthread_once_t g_once = PTHREAD_ONCE_INIT;
static void *g_real;
static char g_real_path[4096];

static const char *const g_dirs[] = {
    "/usr/lib/x86_64-linux-gnu", "/usr/lib/aarch64-linux-gnu", "/usr/lib64",	   "/usr/lib",
    "/usr/local/nvidia/lib64",	 "/usr/local/nvidia/lib",      "/usr/lib/wsl/lib", "/run/opengl-driver/lib",
};

static int same_file(const char *a, const struct stat *b)
{
	struct stat st;
	return stat(a, &st) == 0 && st.st_dev == b->st_dev && st.st_ino == b->st_ino;
}

/* Opens path unless it is the shim itself; returns the handle or NULL. */
static void *open_candidate(const char *path, const struct stat *self)
{
	struct stat st;
	if (stat(path, &st) != 0 || (self && st.st_dev == self->st_dev && st.st_ino == self->st_ino))
		return NULL;
	void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
	if (!h)
		return NULL;
	/* glibc may hand back an already-loaded object; make sure it is not us. */
	Dl_info info;
	void *init = dlsym(h, "cuInit");
	if (!init || !dladdr(init, &info) || !info.dli_fname || (self && same_file(info.dli_fname, self)) ||
	    init == (void *)&cuInit) {
		dlclose(h);
		return NULL;
	}
	snprintf(g_real_path, sizeof g_real_path, "%s", path);
	return h;
}

/* Reads the kernel driver's version (e.g. "570.86.15") so libcuda.so.<ver> can be tried. */
static int driver_version(char *out, size_t n)
{
	FILE *f = fopen("/proc/driver/nvidia/version", "r");
	if (!f)
		return -1;
	char line[512];
	int rc = -1;
	if (fgets(line, sizeof line, f)) {
		for (char *p = line; *p; p++) {
			if (p[0] >= '0' && p[0] <= '9' && strchr(p, '.') && (p == line || p[-1] == ' ')) {
				size_t k = strspn(p, "0123456789.");
				if (k > 2 && k < n && memchr(p, '.', k)) {
					memcpy(out, p, k);
					out[k] = '\0';
					rc = 0;
					break;
				}
			}
		}
	}
	fclose(f);
	return rc;
}

/* fork: every lock of the shim is taken in the one order its code nests them (daemon
 * allocations, queue (and daemon session), kernel info, the daemon connection thread's start,
 * the integrity table), so the child never inherits one held mid-update; the forking thread
 * releases them again in both processes. */
static void atfork_prepare(void)
{
	gmx_dl_atfork_prepare_alloc();
	gmx_shim_queue_atfork_prepare();
	gmx_shim_modinfo_atfork_prepare();
	gmx_dl_atfork_prepare();
	gmx_shim_integrity_atfork_prepare();
}

static void atfork_parent(void)
{
	gmx_shim_integrity_atfork_release();
	gmx_dl_atfork_parent();
	gmx_shim_modinfo_atfork_parent();
	gmx_shim_queue_atfork_parent();
	gmx_dl_atfork_parent_alloc();
}

static void atfork_child(void)
{
	gmx_shim_integrity_atfork_release();
	gmx_dl_atfork_child();
	gmx_shim_modinfo_atfork_child();
	gmx_shim_queue_atfork_child();
	gmx_dl_atfork_parent_alloc(); /* the child's copy: released as in the parent */
}

/* The kernel-identity functions a driver exports but does not offer at its own version
 * (cuGetProcAddress_v2 says SYMBOL_NOT_FOUND) are treated as absent: a driver library may carry
 * entry points its version does not provide (the stand-in playing a 12.2 driver does). */
static void drop_unoffered(void)
{
	static const int syms[] = {GMX_SYM_cuFuncGetName, GMX_SYM_cuFuncGetParamInfo, GMX_SYM_cuKernelGetName,
				   GMX_SYM_cuKernelGetParamInfo};
	__typeof__(&cuGetProcAddress_v2) gpa = (__typeof__(&cuGetProcAddress_v2))gmx_shim_tbl[GMX_SYM_cuGetProcAddress_v2];
	__typeof__(&cuDriverGetVersion) ver = (__typeof__(&cuDriverGetVersion))gmx_shim_tbl[GMX_SYM_cuDriverGetVersion];
	int v = 0;
	if (!gpa || !ver || ver(&v) != CUDA_SUCCESS)
		return;
	for (size_t i = 0; i < sizeof syms / sizeof syms[0]; i++) {
		void *fn = NULL;
		CUdriverProcAddressQueryResult st = CU_GET_PROC_ADDRESS_SUCCESS;
		if (gmx_shim_tbl[syms[i]] && gpa(gmx_shim_sym_names[syms[i]], &fn, v, 0, &st) == CUDA_ERROR_NOT_FOUND &&
		    st == CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND)
			gmx_shim_tbl[syms[i]] = NULL;
	}
}

static void load_once(void)
{
	struct stat self_st, *self = NULL;
	Dl_info info;
	if (dladdr((void *)&gmx_shim_load, &info) && info.dli_fname && stat(info.dli_fname, &self_st) == 0)
		self = &self_st;

	const char *log = getenv("GPUMUX_SHIM_LOG");
	if (log && *log)
		gmx_shim_log_fd = open(log, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);

	const char *env = getenv("GPUMUX_REAL_LIBCUDA");
	if (env && *env) {
		g_real = open_candidate(env, self);
		if (!g_real)
			fprintf(stderr,
				"gpumux shim: GPUMUX_REAL_LIBCUDA=%s cannot be used (%s); it must be "
				"the full path of the real libcuda.so.1, not the gpumux shim\n",
				env, dlerror() ? dlerror() : "missing, or the shim itself");
	} else {
		char ver[64] = "";
		int have_ver = driver_version(ver, sizeof ver) == 0;
		char path[4096];
		for (size_t i = 0; !g_real && i < sizeof g_dirs / sizeof g_dirs[0]; i++) {
			snprintf(path, sizeof path, "%s/libcuda.so.1", g_dirs[i]);
			g_real = open_candidate(path, self);
			if (!g_real && have_ver) {
				snprintf(path, sizeof path, "%s/libcuda.so.%s", g_dirs[i], ver);
				g_real = open_candidate(path, self);
			}
		}
		if (!g_real)
			fprintf(stderr, "gpumux shim: no real libcuda.so.1 found in the system directories; "
					"set GPUMUX_REAL_LIBCUDA to its full path\n");
	}
	if (g_real)
		for (int i = 0; i < GMX_SYM_COUNT; i++)
			gmx_shim_tbl[i] = dlsym(g_real, gmx_shim_sym_names[i]);
	if (g_real)
		drop_unoffered();
	gmx_shim_policy = gmx_grant_from_env();
	gmx_shim_log("load real=%s policy=%s", g_real ? g_real_path : "(none)", gmx_shim_policy->name);
	pthread_atfork(atfork_prepare, atfork_parent, atfork_child);
	__atomic_store_n(&gmx_shim_loaded, 1, __ATOMIC_RELEASE);
}

void gmx_shim_load(void)
{
	pthread_once(&g_once, load_once);
}

CUresult gmx_shim_missing(int sym)
{
	static int warned;
	if (!g_real)
		return CUDA_ERROR_NO_DEVICE;
	if (!__atomic_exchange_n(&warned, 1, __ATOMIC_RELAXED))
		fprintf(stderr,
			"gpumux shim: the driver at %s lacks %s (older than the toolkit, or built "
			"without it); such calls return CUDA_ERROR_NOT_SUPPORTED\n",
			g_real_path, gmx_shim_sym_names[sym]);
	return CUDA_ERROR_NOT_SUPPORTED;
}

static CUresult ret_not_supported(void)
{
	return CUDA_ERROR_NOT_SUPPORTED;
}

static CUresult ret_no_device(void)
{
	return CUDA_ERROR_NO_DEVICE;
}

/* Where a trampoline (an export cuda.h gives no prototype) jumps once the driver is loaded:
 * the real function, or one returning gmx_shim_missing's error (it takes no arguments; the
 * caller's are ignored, which the x86-64 calling convention allows). */
GMX_HIDDEN void *gmx_shim_trampoline_target(int sym)
{
	void *real = gmx_shim_real(sym);
	if (real)
		return real;
	return gmx_shim_missing(sym) == CUDA_ERROR_NO_DEVICE ? (void *)&ret_no_device
							     : (void *)&ret_not_supported;
}

#if defined(__x86_64__)
/* A trampoline's first call: %r11 holds the symbol index. Saves every argument register (and
 * %rax, the vector-register count of a variadic call), asks for the target, restores them and
 * jumps: the real function sees exactly the caller's arguments and returns to the caller. */
__asm__(".text\n"
	".globl gmx_shim_trampoline_slow\n"
	".hidden gmx_shim_trampoline_slow\n"
	".type gmx_shim_trampoline_slow, @function\n"
	".p2align 4\n"
	"gmx_shim_trampoline_slow:\n"
	"    pushq %rdi\n    pushq %rsi\n    pushq %rdx\n    pushq %rcx\n"
	"    pushq %r8\n    pushq %r9\n    pushq %rax\n" /* 7 pushes: %rsp is 16-byte aligned */
	"    subq $128, %rsp\n"
	"    movdqu %xmm0, 0(%rsp)\n    movdqu %xmm1, 16(%rsp)\n"
	"    movdqu %xmm2, 32(%rsp)\n    movdqu %xmm3, 48(%rsp)\n"
	"    movdqu %xmm4, 64(%rsp)\n    movdqu %xmm5, 80(%rsp)\n"
	"    movdqu %xmm6, 96(%rsp)\n    movdqu %xmm7, 112(%rsp)\n"
	"    movl %r11d, %edi\n"
	"    call gmx_shim_trampoline_target\n"
	"    movq %rax, %r11\n"
	"    movdqu 0(%rsp), %xmm0\n    movdqu 16(%rsp), %xmm1\n"
	"    movdqu 32(%rsp), %xmm2\n    movdqu 48(%rsp), %xmm3\n"
	"    movdqu 64(%rsp), %xmm4\n    movdqu 80(%rsp), %xmm5\n"
	"    movdqu 96(%rsp), %xmm6\n    movdqu 112(%rsp), %xmm7\n"
	"    addq $128, %rsp\n"
	"    popq %rax\n    popq %r9\n    popq %r8\n    popq %rcx\n"
	"    popq %rdx\n    popq %rsi\n    popq %rdi\n"
	"    jmpq *%r11\n"
	".size gmx_shim_trampoline_slow, .-gmx_shim_trampoline_slow\n");
#endif

int gmx_shim_sym_index(const char *name)
{
	int lo = 0, hi = GMX_SYM_COUNT - 1; /* the generator sorts the names */
	while (lo <= hi) {
		int mid = (lo + hi) / 2, c = strcmp(name, gmx_shim_sym_names[mid]);
		if (c == 0)
			return mid;
		if (c < 0)
			hi = mid - 1;
		else
			lo = mid + 1;
	}
	return -1;
}

void gmx_shim_log(const char *fmt, ...)
{
	if (gmx_shim_log_fd < 0)
		return;
	char buf[2048];
	int n = snprintf(buf, sizeof buf, "%d ", (int)getpid());
	va_list ap;
	va_start(ap, fmt);
	n += vsnprintf(buf + n, sizeof buf - (size_t)n - 1, fmt, ap);
	va_end(ap);
	if (n > (int)sizeof buf - 2)
		n = (int)sizeof buf - 2;
	buf[n++] = '\n';
	/* One write per line on an O_APPEND descriptor: lines from threads and processes never mix. */
	ssize_t w = write(gmx_shim_log_fd, buf, (size_t)n);
	(void)w;
}
