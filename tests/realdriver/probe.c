/*
 * What a CUDA driver (whichever libcuda.so.1 the loader finds) and the CUDA runtimes answer on
 * a machine without a GPU, one line per probe, so that a run on NVIDIA's driver alone and one
 * with gpumux's interposer in front of it can be compared byte for byte (tests/realdriver).
 *
 * Usage: probe NAMES_FILE [FATBIN [CUDART...]]
 *   NAMES_FILE  driver function names; each is also asked for by its base name (without
 *               _v2/_v3/_ptsz/_ptds), as the runtime asks
 *   FATBIN      a module image for the load calls (they fail without a device; the answer
 *               must still be the driver's)
 *   CUDART      runtime libraries to start (e.g. libcudart.so.11.0, a path to libcudart.so.13)
 */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef int (*i_pi)(int *);
typedef int (*i_u)(unsigned);
typedef int (*i_ipcc)(int, const char **);
typedef int (*gpa1_t)(const char *, void **, int, unsigned long long);
typedef int (*gpa2_t)(const char *, void **, int, unsigned long long, int *);
typedef const char *(*s_i)(int);

static void *sym(void *h, const char *name)
{
	void *p = dlsym(h, name);
	if (!p) {
		printf("dlsym %s: missing\n", name);
		fflush(stdout);
		exit(1);
	}
	return p;
}

static char **g_names;
static size_t g_n;

static void add_name(const char *s)
{
	for (size_t i = 0; i < g_n; i++)
		if (strcmp(g_names[i], s) == 0)
			return;
	g_names = realloc(g_names, (g_n + 1) * sizeof *g_names);
	if (!g_names || !(g_names[g_n] = strdup(s))) {
		printf("out of memory\n");
		exit(1);
	}
	g_n++;
}

static void read_names(const char *path)
{
	FILE *f = fopen(path, "r");
	if (!f) {
		printf("cannot open %s\n", path);
		exit(1);
	}
	char name[256];
	while (fscanf(f, "%255s", name) == 1) {
		if (name[0] == '#') {
			int c;
			while ((c = fgetc(f)) != EOF && c != '\n')
				;
			continue;
		}
		add_name(name);
		static const char *const suffixes[] = {"_ptsz", "_ptds", "_v2", "_v3", "_v4"};
		for (int again = 1; again;) {
			again = 0;
			for (size_t k = 0; k < sizeof suffixes / sizeof suffixes[0]; k++) {
				size_t n = strlen(name), m = strlen(suffixes[k]);
				if (n > m && strcmp(name + n - m, suffixes[k]) == 0) {
					name[n - m] = '\0';
					add_name(name);
					again = 1;
				}
			}
		}
	}
	fclose(f);
}

/* cuGetProcAddress and _v2 for every name at several versions and flags. */
static void proc_addresses(void *cu, const char *when)
{
	gpa1_t g1 = (gpa1_t)sym(cu, "cuGetProcAddress");
	gpa2_t g2 = (gpa2_t)sym(cu, "cuGetProcAddress_v2");
	static const int vers[] = {11030, 11080, 12000, 12020, 12040, 13000};
	for (size_t i = 0; i < g_n; i++)
		for (size_t v = 0; v < sizeof vers / sizeof vers[0]; v++)
			for (unsigned long long fl = 0; fl < 3; fl++) {
				void *p1 = NULL, *p2 = NULL;
				int st = -7;
				int r1 = g1(g_names[i], &p1, vers[v], fl);
				int r2 = g2(g_names[i], &p2, vers[v], fl, &st);
				printf("gpa %s %s %d %llu: v1 %d %s v2 %d st %d %s\n", when, g_names[i],
				       vers[v], fl, r1, p1 ? "ptr" : "null", r2, st, p2 ? "ptr" : "null");
			}
	int st = -7;
	void *p = NULL;
	printf("gpa %s (empty name): v2 %d st %d %s\n", when, g2("", &p, 13000, 0, &st), st,
	       p ? "ptr" : "null");
}

static unsigned char *slurp(const char *path)
{
	FILE *f = fopen(path, "rb");
	if (!f)
		return NULL;
	fseek(f, 0, SEEK_END);
	long n = ftell(f);
	fseek(f, 0, SEEK_SET);
	unsigned char *b = malloc((size_t)n + 1);
	if (b && fread(b, 1, (size_t)n, f) != (size_t)n) {
		free(b);
		b = NULL;
	}
	fclose(f);
	return b;
}

/* Module loads without a device: each must give the driver's own error. */
static void module_loads(void *cu, const char *fatbin_path)
{
	unsigned char *fat = slurp(fatbin_path);
	if (!fat) {
		printf("cannot read %s\n", fatbin_path);
		return;
	}
	struct {
		unsigned magic, version;
		const void *data, *unused;
	} wrapper = {0x466243B1u, 1, fat, NULL};
	void *h = NULL;
	int r;
	r = ((int (*)(void **, const void *))sym(cu, "cuModuleLoadData"))(&h, fat);
	printf("cuModuleLoadData rc=%d %s\n", r, h ? "handle" : "null");
	r = ((int (*)(void **, const void *, unsigned, void *, void *))sym(cu, "cuModuleLoadDataEx"))(
	    &h, fat, 0, NULL, NULL);
	printf("cuModuleLoadDataEx rc=%d\n", r);
	r = ((int (*)(void **, const void *))sym(cu, "cuModuleLoadFatBinary"))(&h, fat);
	printf("cuModuleLoadFatBinary rc=%d\n", r);
	r = ((int (*)(void **, const char *))sym(cu, "cuModuleLoad"))(&h, fatbin_path);
	printf("cuModuleLoad rc=%d\n", r);
	r = ((int (*)(void **, const void *, void *, void *, unsigned, void *, void *, unsigned))sym(
	    cu, "cuLibraryLoadData"))(&h, &wrapper, NULL, NULL, 0, NULL, NULL, 0);
	printf("cuLibraryLoadData(wrapper) rc=%d\n", r);
	r = ((int (*)(void **, const char *, void *, void *, unsigned, void *, void *, unsigned))sym(
	    cu, "cuLibraryLoadFromFile"))(&h, fatbin_path, NULL, NULL, 0, NULL, NULL, 0);
	printf("cuLibraryLoadFromFile rc=%d\n", r);
	r = ((int (*)(void **, const char *))sym(cu, "cuModuleLoad"))(&h, "/nonexistent/module.cubin");
	printf("cuModuleLoad(missing file) rc=%d\n", r);
	free(fat);
}

/* Functions cuda.h gives no prototype (GL/VDPAU interop): reached through the interposer's
 * trampolines, with the arguments and results untouched. */
static void interop(void *cu)
{
	int dev = -5;
	unsigned count = 7;
	printf("cuGLInit rc=%d\n", ((int (*)(void))sym(cu, "cuGLInit"))());
	printf("cuVDPAUGetDevice rc=%d dev=%d\n",
	       ((int (*)(int *, unsigned, void *))sym(cu, "cuVDPAUGetDevice"))(&dev, 0, NULL), dev);
	printf("cuGLGetDevices_v2 rc=%d count=%u\n",
	       ((int (*)(unsigned *, int *, unsigned, int))sym(cu, "cuGLGetDevices_v2"))(&count, &dev, 1, 1),
	       count);
}

static void runtime(const char *lib)
{
	void *rt = dlopen(lib, RTLD_NOW | RTLD_LOCAL);
	if (!rt) {
		printf("runtime %s: cannot be opened\n", strrchr(lib, '/') ? strrchr(lib, '/') + 1 : lib);
		return;
	}
	const char *name = strrchr(lib, '/') ? strrchr(lib, '/') + 1 : lib;
	int v = -1, n = -1, rc;
	s_i errstr = (s_i)sym(rt, "cudaGetErrorString"), errname = (s_i)sym(rt, "cudaGetErrorName");
	rc = ((i_pi)sym(rt, "cudaDriverGetVersion"))(&v);
	printf("%s cudaDriverGetVersion rc=%d v=%d\n", name, rc, v);
	v = -1;
	rc = ((i_pi)sym(rt, "cudaRuntimeGetVersion"))(&v);
	printf("%s cudaRuntimeGetVersion rc=%d v=%d\n", name, rc, v);
	rc = ((i_pi)sym(rt, "cudaGetDeviceCount"))(&n);
	printf("%s cudaGetDeviceCount rc=%d n=%d %s: %s\n", name, rc, n, errname(rc), errstr(rc));
	void *p = NULL;
	rc = ((int (*)(void **, size_t))sym(rt, "cudaMalloc"))(&p, 1024);
	printf("%s cudaMalloc rc=%d %s %s\n", name, rc, p ? "ptr" : "null", errname(rc));
	printf("%s cudaGetLastError rc=%d\n", name, ((int (*)(void))sym(rt, "cudaGetLastError"))());
	printf("%s cudaDeviceSynchronize rc=%d\n", name, ((int (*)(void))sym(rt, "cudaDeviceSynchronize"))());
}

int main(int argc, char **argv)
{
	if (argc < 2) {
		fprintf(stderr, "usage: probe NAMES_FILE [FATBIN [CUDART...]]\n");
		return 2;
	}
	setvbuf(stdout, NULL, _IOFBF, 1 << 20);
	read_names(argv[1]);
	void *cu = dlopen("libcuda.so.1", RTLD_NOW);
	if (!cu) {
		printf("dlopen libcuda.so.1: %s\n", dlerror());
		return 1;
	}
	int v = -1, rc = ((i_pi)sym(cu, "cuDriverGetVersion"))(&v);
	printf("cuDriverGetVersion rc=%d v=%d\n", rc, v);
	proc_addresses(cu, "before-init");
	i_u init = (i_u)sym(cu, "cuInit");
	printf("cuInit(1) rc=%d\n", init(1));
	printf("cuInit(0) rc=%d\n", init(0));
	printf("cuInit(0) again rc=%d\n", init(0));
	i_ipcc ename = (i_ipcc)sym(cu, "cuGetErrorName"), estr = (i_ipcc)sym(cu, "cuGetErrorString");
	for (int e = -2; e <= 1000; e++) {
		const char *n = NULL, *s = NULL;
		int r1 = ename(e, &n), r2 = estr(e, &s);
		printf("err %d: %d %s | %d %s\n", e, r1, n ? n : "-", r2, s ? s : "-");
	}
	proc_addresses(cu, "after-init");
	int count = -1, dev = -1;
	printf("cuDeviceGetCount rc=%d n=%d\n", ((i_pi)sym(cu, "cuDeviceGetCount"))(&count), count);
	printf("cuDeviceGet rc=%d\n", ((int (*)(int *, int))sym(cu, "cuDeviceGet"))(&dev, 0));
	void *ctx = NULL;
	printf("cuCtxGetCurrent rc=%d\n", ((int (*)(void **))sym(cu, "cuCtxGetCurrent"))(&ctx));
	void *dptr = NULL;
	printf("cuMemAlloc_v2 rc=%d\n", ((int (*)(void **, size_t))sym(cu, "cuMemAlloc_v2"))(&dptr, 1024));
	printf("cuLaunchKernel rc=%d\n",
	       ((int (*)(void *, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, void *,
			 void **, void **))sym(cu, "cuLaunchKernel"))(NULL, 1, 1, 1, 1, 1, 1, 0, NULL, NULL,
								      NULL));
	if (argc > 2)
		module_loads(cu, argv[2]);
	interop(cu);
	for (int i = 3; i < argc; i++)
		runtime(argv[i]);
	return 0;
}
