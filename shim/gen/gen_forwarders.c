/*
 * gen_forwarders: build-time generator of the interposer's export table.
 *
 * Usage: gen_forwarders PREPROCESSED_HEADER SYMBOL_LIST DRIVER_LIST OUT_C OUT_H
 *
 * PREPROCESSED_HEADER is cuda.h (+ cudaProfiler.h) run through the C preprocessor with
 * __CUDA_API_VERSION_INTERNAL defined, so that every legacy, _v2, _ptsz and _ptds entry point
 * is declared under its exported name. SYMBOL_LIST is `nm -D --defined-only` of the toolkit's
 * stub libcuda.so (third column used). For every cu* symbol of the list, the generator finds
 * its prototype in the header and writes a weak forwarder that passes the arguments untouched
 * to the real driver; a strong hook elsewhere in the shim replaces the forwarder where gpumux
 * schedules. Stream-ordered calls (a by-value CUstream parameter) first pass the stream through
 * gmx_shim_stream_barrier so that work still in a software queue reaches the driver before
 * them, in program order.
 *
 * DRIVER_LIST names every cu* function NVIDIA's driver exports (one per line, # comments):
 * the export list is the union of both lists. A name cuda.h gives no prototype (GL, EGL and
 * VDPAU interop, functions the driver keeps for old binaries) gets a tail-call trampoline
 * instead of a forwarder: it jumps to the real function with every argument register
 * untouched, so no prototype is needed (x86-64; on other architectures such names are left
 * out and the generator says so).
 *
 * The export list is therefore never written by hand: a new toolkit gives a new list.
 */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
	char *name;
	char *params; /* parameter list text, as declared */
	char *args;   /* comma-separated parameter names */
	char *stream; /* name of a by-value CUstream parameter, or NULL */
} decl_t;

static decl_t *g_decls;
static size_t g_ndecls, g_capdecls;

typedef struct {
	char text[128];
	int ident;
} tok_t;

static tok_t *g_toks;
static size_t g_ntoks, g_captoks;

static void die(const char *msg, const char *arg)
{
	fprintf(stderr, "gen_forwarders: %s%s%s\n", msg, arg ? ": " : "", arg ? arg : "");
	exit(1);
}

static void push_tok(const char *s, size_t n, int ident)
{
	if (g_ntoks == g_captoks) {
		g_captoks = g_captoks ? g_captoks * 2 : 65536;
		g_toks = realloc(g_toks, g_captoks * sizeof *g_toks);
		if (!g_toks)
			die("out of memory", NULL);
	}
	if (n >= sizeof g_toks[0].text)
		n = sizeof g_toks[0].text - 1;
	memcpy(g_toks[g_ntoks].text, s, n);
	g_toks[g_ntoks].text[n] = '\0';
	g_toks[g_ntoks].ident = ident;
	g_ntoks++;
}

/* Splits preprocessed C into identifiers/numbers and single punctuation characters;
 * string and character literals are skipped (no prototype contains one). */
static void tokenize(const char *p)
{
	while (*p) {
		if (isspace((unsigned char)*p)) {
			p++;
		} else if (*p == '#') { /* line markers, if any survived */
			while (*p && *p != '\n')
				p++;
		} else if (*p == '"' || *p == '\'') {
			char q = *p++;
			while (*p && *p != q) {
				if (*p == '\\' && p[1])
					p++;
				p++;
			}
			if (*p)
				p++;
		} else if (isalnum((unsigned char)*p) || *p == '_') {
			const char *s = p;
			while (isalnum((unsigned char)*p) || *p == '_')
				p++;
			push_tok(s, (size_t)(p - s), !isdigit((unsigned char)*s));
		} else {
			push_tok(p, 1, 0);
			p++;
		}
	}
}

static char *xstrdup(const char *s)
{
	char *d = strdup(s);
	if (!d)
		die("out of memory", NULL);
	return d;
}

static void append(char *buf, size_t cap, const char *s)
{
	size_t n = strlen(buf);
	if (n + strlen(s) + 1 >= cap)
		die("declaration too long", s);
	strcat(buf, s);
}

/* Parses one parameter [a, b) into its name (appended to args) and notes a CUstream. */
static void param_name(size_t a, size_t b, char *args, size_t cap, char **stream)
{
	size_t name = 0;
	int found = 0;
	for (size_t i = a; i < b; i++) {
		if (g_toks[i].text[0] == '(') { /* function pointer: ( * name ) */
			for (size_t j = i + 1; j < b; j++)
				if (g_toks[j].ident) {
					name = j;
					found = 1;
					break;
				}
			break;
		}
		if (g_toks[i].text[0] == '[')
			break;
		if (g_toks[i].ident) {
			name = i;
			found = 1;
		}
	}
	if (!found)
		die("unnamed parameter in a prototype", g_toks[a].text);
	if (args[0])
		append(args, cap, ", ");
	append(args, cap, g_toks[name].text);
	if (b - a == 2 && strcmp(g_toks[a].text, "CUstream") == 0 && !*stream)
		*stream = xstrdup(g_toks[name].text);
}

/* Finds every `CUresult name ( ... ) ;` at file scope and records it. */
static void collect_decls(void)
{
	for (size_t i = 0; i + 3 < g_ntoks; i++) {
		if (strcmp(g_toks[i].text, "CUresult") != 0 || !g_toks[i + 1].ident ||
		    g_toks[i + 2].text[0] != '(')
			continue;
		if (i > 0 && strcmp(g_toks[i - 1].text, "typedef") == 0)
			continue;
		size_t open = i + 2, close = open;
		int depth = 0;
		for (size_t j = open; j < g_ntoks; j++) {
			if (g_toks[j].text[0] == '(')
				depth++;
			else if (g_toks[j].text[0] == ')' && --depth == 0) {
				close = j;
				break;
			}
		}
		if (close == open || close + 1 >= g_ntoks || g_toks[close + 1].text[0] != ';')
			continue;
		char params[4096] = "", args[2048] = "";
		char *stream = NULL;
		for (size_t j = open + 1; j < close; j++) {
			if (params[0])
				append(params, sizeof params, " ");
			append(params, sizeof params, g_toks[j].text);
		}
		int is_void = close == open + 2 && strcmp(g_toks[open + 1].text, "void") == 0;
		if (!is_void && close > open + 1) {
			size_t a = open + 1;
			int d = 0;
			for (size_t j = open + 1; j <= close; j++) {
				char c = g_toks[j].text[0];
				if (c == '(' || c == '[')
					d++;
				else if ((c == ')' || c == ']') && j != close)
					d--;
				if ((c == ',' && d == 0) || j == close) {
					param_name(a, j, args, sizeof args, &stream);
					a = j + 1;
				}
			}
		}
		if (g_ndecls == g_capdecls) {
			g_capdecls = g_capdecls ? g_capdecls * 2 : 1024;
			g_decls = realloc(g_decls, g_capdecls * sizeof *g_decls);
			if (!g_decls)
				die("out of memory", NULL);
		}
		decl_t *d = &g_decls[g_ndecls++];
		d->name = xstrdup(g_toks[i + 1].text);
		d->params = xstrdup(close == open + 1 ? "void" : params);
		d->args = xstrdup(args);
		d->stream = stream;
		i = close;
	}
}

static const decl_t *find_decl(const char *name)
{
	const decl_t *last = NULL; /* a name declared twice keeps its last (post-#undef) form */
	for (size_t i = 0; i < g_ndecls; i++)
		if (strcmp(g_decls[i].name, name) == 0)
			last = &g_decls[i];
	return last;
}

static char *slurp(const char *path)
{
	FILE *f = fopen(path, "rb");
	if (!f)
		die("cannot open input", path);
	fseek(f, 0, SEEK_END);
	long n = ftell(f);
	fseek(f, 0, SEEK_SET);
	char *buf = malloc((size_t)n + 1);
	if (!buf || fread(buf, 1, (size_t)n, f) != (size_t)n)
		die("cannot read input", path);
	buf[n] = '\0';
	fclose(f);
	return buf;
}

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

static int ends_with(const char *s, const char *suffix)
{
	size_t n = strlen(s), m = strlen(suffix);
	return n >= m && strcmp(s + n - m, suffix) == 0;
}

/* Calls that the driver runs synchronously with respect to the legacy default stream (the
 * synchronous copies and memsets) or that retire resources queued work may still use: all
 * queued work of the process must reach the driver and finish first. */
static int drains_all(const char *name)
{
	static const char *const exact[] = {
	    "cuCtxSynchronize",
	    "cuCtxSynchronize_v2",
	    "cuCtxDestroy",
	    "cuCtxDestroy_v2",
	    "cuMemFree",
	    "cuMemFree_v2",
	    "cuMemFreeHost",
	    "cuMemHostUnregister",
	    "cuDevicePrimaryCtxRelease",
	    "cuDevicePrimaryCtxRelease_v2",
	    "cuDevicePrimaryCtxReset",
	    "cuDevicePrimaryCtxReset_v2",
	    "cuGraphExecDestroy",
	    "cuMemRelease",
	    "cuMemUnmap",
	    "cuArrayDestroy",
	    "cuMipmappedArrayDestroy",
	};
	for (size_t i = 0; i < sizeof exact / sizeof exact[0]; i++)
		if (strcmp(name, exact[i]) == 0)
			return 1;
	return (strncmp(name, "cuMemcpy", 8) == 0 || strncmp(name, "cuMemset", 8) == 0) &&
	       strstr(name, "Async") == NULL;
}

static void push_sym(char ***syms, size_t *n, size_t *cap, const char *name)
{
	if (*n == *cap) {
		*cap = *cap ? *cap * 2 : 1024;
		*syms = realloc(*syms, *cap * sizeof **syms);
		if (!*syms)
			die("out of memory", NULL);
	}
	(*syms)[(*n)++] = xstrdup(name);
}

int main(int argc, char **argv)
{
	if (argc != 6)
		die("usage: gen_forwarders PREPROCESSED_HEADER SYMBOL_LIST DRIVER_LIST OUT_C OUT_H", NULL);
	tokenize(slurp(argv[1]));
	collect_decls();

	/* Symbol list: `nm -D --defined-only` lines "ADDR TYPE NAME"; keep cu* names. */
	char *list = slurp(argv[2]);
	char **syms = NULL;
	size_t nsyms = 0, cap = 0;
	for (char *line = strtok(list, "\n"); line; line = strtok(NULL, "\n")) {
		char a[64], t[8], name[256];
		if (sscanf(line, "%63s %7s %255s", a, t, name) != 3 || strncmp(name, "cu", 2) != 0)
			continue;
		push_sym(&syms, &nsyms, &cap, name);
	}
	if (nsyms == 0)
		die("no cu* symbols in the symbol list (is it `nm -D` of the stub libcuda.so?)", argv[2]);
	char *extra = slurp(argv[3]);
	for (char *line = strtok(extra, "\n"); line; line = strtok(NULL, "\n")) {
		char name[256];
		if (line[0] == '#' || sscanf(line, "%255s", name) != 1 || strncmp(name, "cu", 2) != 0 ||
		    !isupper((unsigned char)name[2]))
			continue; /* comments, and the debugger's cudbg* symbols (docs/shim.md) */
		push_sym(&syms, &nsyms, &cap, name);
	}
	qsort(syms, nsyms, sizeof *syms, cmp_str);
	size_t uniq = 0;
	for (size_t i = 0; i < nsyms; i++)
		if (uniq == 0 || strcmp(syms[i], syms[uniq - 1]) != 0)
			syms[uniq++] = syms[i];
	nsyms = uniq;

	FILE *c = fopen(argv[4], "w"), *h = fopen(argv[5], "w");
	if (!c || !h)
		die("cannot write outputs", argv[4]);
	fprintf(h, "/* Generated by gen_forwarders from the stub libcuda.so and cuda.h: do not edit. */\n"
		   "#ifndef GMX_SHIM_SYMS_H\n#define GMX_SHIM_SYMS_H\n\nenum gmx_shim_sym {\n");
	fprintf(c, "/* Generated by gen_forwarders from the stub libcuda.so and cuda.h: do not edit. */\n"
		   "#include \"shim_internal.h\"\n\n"
		   "const char *const gmx_shim_sym_names[GMX_SYM_COUNT] = {\n");
	size_t trampolines = 0;
	for (size_t i = 0; i < nsyms; i++) {
		fprintf(h, "    GMX_SYM_%s,\n", syms[i]);
		fprintf(c, "    \"%s\",\n", syms[i]);
	}
	fprintf(h, "    GMX_SYM_COUNT\n};\n\n#define GMX_SHIM_NSYMS %zu\n\n#endif\n", nsyms);
	fprintf(c, "};\n\n");
	for (size_t i = 0; i < nsyms; i++) {
		const decl_t *d = find_decl(syms[i]);
		if (!d) {
			/* No prototype: a trampoline that jumps to the real function (see the header). */
			fprintf(c,
				"#if defined(__x86_64__)\n"
				"extern void %s(void) __attribute__((visibility(\"default\")));\n"
				"__asm__(\".text\\n.globl %s\\n.type %s, @function\\n.p2align 4\\n%s:\\n\"\n"
				"        \"    endbr64\\n\"\n"
				"        \"    movq gmx_shim_tbl+%zu(%%rip), %%r11\\n\"\n"
				"        \"    testq %%r11, %%r11\\n\"\n"
				"        \"    jz 1f\\n\"\n"
				"        \"    jmpq *%%r11\\n\"\n"
				"        \"1:  movl $%zu, %%r11d\\n\"\n"
				"        \"    jmp gmx_shim_trampoline_slow\\n\"\n"
				"        \".size %s, .-%s\\n\");\n"
				"#endif\n\n",
				syms[i], syms[i], syms[i], syms[i], i * sizeof(void *), i, syms[i], syms[i]);
			trampolines++;
			continue;
		}
		int ptsz = ends_with(d->name, "_ptsz") || ends_with(d->name, "_ptds");
		fprintf(c, "GMX_FORWARDER CUresult CUDAAPI %s(%s)\n{\n", d->name, d->params);
		fprintf(c, "    void *gmx_real_fn_ = gmx_shim_real(GMX_SYM_%s);\n", d->name);
		fprintf(c,
			"    if (GMX_UNLIKELY(gmx_real_fn_ == NULL))\n        return "
			"gmx_shim_missing(GMX_SYM_%s);\n",
			d->name);
		if (d->stream)
			fprintf(c, "    %s = gmx_shim_stream_barrier(%s, %d);\n", d->stream, d->stream, ptsz);
		else if (drains_all(d->name))
			fprintf(c, "    gmx_shim_drain_all();\n");
		fprintf(c, "    return ((__typeof__(&%s))gmx_real_fn_)(%s);\n}\n\n", d->name, d->args);
	}
	/* The shim's own address for each export: a hook where one exists, else the forwarder. */
	fprintf(c, "static void *const own_tbl[GMX_SYM_COUNT] = {\n");
	for (size_t i = 0; i < nsyms; i++)
		if (find_decl(syms[i]))
			fprintf(c, "    (void *)&%s,\n", syms[i]);
		else
			fprintf(c, "#if defined(__x86_64__)\n    (void *)&%s,\n#else\n    NULL,\n#endif\n",
				syms[i]);
	fprintf(c, "};\n\nvoid *gmx_shim_own(int sym)\n{\n    return own_tbl[sym];\n}\n");
	if (fclose(c) != 0 || fclose(h) != 0)
		die("cannot write outputs", argv[3]);
	fprintf(stderr,
		"gen_forwarders: %zu symbols, %zu forwarders, %zu trampolines (no prototype in cuda.h; "
		"x86-64 only)\n",
		nsyms, nsyms - trampolines, trampolines);
	return 0;
}
