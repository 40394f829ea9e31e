/* Vidur operator-time CSV importer: builds one Llama-2-7B forward step (tensor
 * parallel degree 1) for a token count from the per-operator median times of
 * one transformer layer, times the model's layers. Vidur does not time
 * attention; it is modelled as reading the layer's KV cache at HBM bandwidth. */
#define _GNU_SOURCE /* strcasestr */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "trace_internal.h"

#define VIDUR_MAX_BYTES (64u << 20)
#define VIDUR_LAYERS 32          /* Llama-2-7B */
#define VIDUR_HEAD_DIM 128       /* n_embd / n_head for Llama-2-7B */
/* HBM bandwidth from NVIDIA's data sheets: A100 40 GB 1,555 GB/s (NVIDIA A100
 * Tensor Core GPU data sheet); H100 SXM 3.35 TB/s (NVIDIA H100 data sheet). */
#define VIDUR_A100_BW 1.555e12
#define VIDUR_H100_BW 3.35e12

/* Per-layer operators in execution order; "attention" is the analytic one. */
static const char *const layer_ops[] = {"input_layernorm", "attn_pre_proj", "attn_rope",     "attention",
					"attn_post_proj",  "post_attention_layernorm", "mlp_up_proj", "mlp_act",
					"mlp_down_proj",   "add"};
#define N_LAYER_OPS (sizeof(layer_ops) / sizeof(layer_ops[0]))
enum { C_EMB, C_LN1, C_PRE, C_ROPE, C_POST, C_LN2, C_UP, C_ACT, C_DOWN, C_ADD, C_TOKENS, C_TP, C_EMBD, C_EXP,
       C_HEAD, C_KVHEAD, C_VOCAB, C_GATED, C_COUNT };
static const char *const col_names[C_COUNT] = {
	"time_stats.emb.median",           "time_stats.input_layernorm.median", "time_stats.attn_pre_proj.median",
	"time_stats.attn_rope.median",     "time_stats.attn_post_proj.median",
	"time_stats.post_attention_layernorm.median", "time_stats.mlp_up_proj.median",
	"time_stats.mlp_act.median",       "time_stats.mlp_down_proj.median",   "time_stats.add.median",
	"num_tokens",                      "num_tensor_parallel_workers",       "n_embd",
	"n_expanded_embd",                 "n_head",                            "n_kv_head",
	"vocab_size",                      "use_gated_mlp"};

typedef struct vrow {
	double v[C_COUNT];
} vrow_t;

/* Does the first line look like a Vidur operator-time header? */
int gmx_trace_vidur_header(const char *p, size_t n)
{
	const char *nl = memchr(p, '\n', n);
	size_t l = nl ? (size_t)(nl - p) : n;
	return l > 11 && !memcmp(p, "time_stats.", 11) && memmem(p, l, "num_tokens", 10) &&
	       memmem(p, l, "num_tensor_parallel_workers", 27);
}

static int cmp_tokens(const void *a, const void *b)
{
	const vrow_t *x = a, *y = b;
	return (x->v[C_TOKENS] > y->v[C_TOKENS]) - (x->v[C_TOKENS] < y->v[C_TOKENS]);
}

static int add_kernel(gmx_workload_t *w, const char *name, double ms, int compute, int first)
{
	uint32_t idx;
	int rc = gmx_workload_intern_name(w, name, &idx);
	if (rc)
		return rc;
	gmx_op_t op;
	memset(&op, 0, sizeof(op));
	op.kind = GMX_OP_KERNEL;
	op.klass = compute ? GMX_CLASS_COMPUTE : GMX_CLASS_MEMORY;
	op.name = idx;
	op.think_ns = first ? 0 : GMX_TRACE_LAUNCH_OVERHEAD_NS;
	op.duration_ns = (uint64_t)llround(ms * 1e6);
	op.buffer = UINT32_MAX;
	op.grid[0] = op.grid[1] = op.grid[2] = 1;
	op.block[0] = op.block[1] = op.block[2] = 1;
	return gmx_workload_add_op(w, &op, NULL);
}

static int touch(gmx_workload_t *w, uint32_t buf, uint64_t len)
{
	uint64_t size = w->buffers[buf].size;
	return gmx_workload_add_region(w, buf, 0, len && len < size ? len : size);
}

/* Nonzero if v is a number in [1, max]: a dimension that converts to an integer exactly. */
static int dim_in(double v, double max)
{
	return isfinite(v) && v >= 1 && v <= max;
}

int gmx_trace_vidur_read(gmx_src_t *s, const char *path, const gmx_trace_opts_t *o, gmx_workload_t *w,
			 gmx_trace_info_t *info)
{
	char *text;
	size_t len;
	vrow_t *rows = NULL;
	size_t nrows = 0, caprows = 0;
	int rc = gmx_src_slurp(s, &text, &len, VIDUR_MAX_BYTES);
	if (rc)
		return rc;
	if (!gmx_trace_vidur_header(text, len)) {
		rc = gmx_src_fail(s, "1:1: expected a Vidur header (time_stats.*, num_tokens, "
				     "num_tensor_parallel_workers)");
		goto out;
	}
	/* Which column holds what. */
	int col[C_COUNT];
	for (int i = 0; i < C_COUNT; i++)
		col[i] = -1;
	char *line = text, *eol = strchr(text, '\n');
	if (eol)
		*eol = 0;
	int ncols = 0;
	for (char *save = NULL, *f = strtok_r(line, ",\r", &save); f; f = strtok_r(NULL, ",\r", &save), ncols++)
		for (int i = 0; i < C_COUNT; i++)
			if (!strcmp(f, col_names[i]))
				col[i] = ncols;
	for (int i = 0; i < C_COUNT; i++)
		if (col[i] < 0) {
			rc = gmx_src_fail(s, "1:1: header lacks column '%s'", col_names[i]);
			goto out;
		}
	unsigned long lineno = 1;
	while (eol && eol + 1 < text + len) {
		line = eol + 1;
		lineno++;
		eol = strchr(line, '\n');
		if (eol)
			*eol = 0;
		if (!*line || !strcmp(line, "\r"))
			continue;
		vrow_t r;
		int got = 0, fi = 0;
		char *p = line;
		while (p) {
			char *comma = strchr(p, ',');
			if (comma)
				*comma = 0;
			for (int i = 0; i < C_COUNT; i++)
				if (col[i] == fi) {
					char *e;
					if (i == C_GATED)
						r.v[i] = !strncmp(p, "True", 4) || !strncmp(p, "true", 4) || !strcmp(p, "1");
					else {
						r.v[i] = strtod(p, &e);
						if (e == p || !(fabs(r.v[i]) < 1e12)) {
							rc = gmx_src_fail(s, "%lu:%ld: '%s' is not a number (column %s)",
									  lineno, (long)(p - line) + 1, p, col_names[i]);
							goto out;
						}
						if (i < C_TOKENS && r.v[i] < 0) {
							rc = gmx_src_fail(s, "%lu:%ld: '%s' is a negative time (column %s)",
									  lineno, (long)(p - line) + 1, p, col_names[i]);
							goto out;
						}
					}
					got++;
				}
			fi++;
			p = comma ? comma + 1 : NULL;
		}
		if (fi != ncols || got != C_COUNT) {
			rc = gmx_src_fail(s, "%lu:1: %d fields, expected %d as in the header", lineno, fi, ncols);
			goto out;
		}
		if (r.v[C_TP] != 1)
			continue;
		if (gmx_grow((void **)&rows, &caprows, nrows, sizeof(*rows))) {
			rc = -ENOMEM;
			goto out;
		}
		rows[nrows++] = r;
	}
	if (!nrows) {
		rc = gmx_src_fail(s, "%lu:1: no rows with num_tensor_parallel_workers = 1", lineno);
		goto out;
	}
	gmx_sort(rows, nrows, sizeof(*rows), cmp_tokens);
	uint32_t tokens = o && o->tokens ? o->tokens : 512;
	double lo_t = rows[0].v[C_TOKENS], hi_t = rows[nrows - 1].v[C_TOKENS];
	if (tokens < lo_t || tokens > hi_t) {
		rc = gmx_src_fail(s, "--tokens %u outside the measured range %.0f..%.0f", tokens, lo_t, hi_t);
		goto out;
	}
	/* Average the rows measured at exactly this count (some are repeated), else
	 * interpolate linearly between the two neighbouring counts. */
	vrow_t use;
	memset(&use, 0, sizeof(use));
	size_t same = 0, below = 0, above = nrows;
	for (size_t i = 0; i < nrows; i++) {
		if (rows[i].v[C_TOKENS] == tokens) {
			for (int c = 0; c < C_COUNT; c++)
				use.v[c] += rows[i].v[c];
			same++;
		} else if (rows[i].v[C_TOKENS] < tokens)
			below = i;
		else if (above == nrows)
			above = i;
	}
	if (same) {
		for (int c = 0; c < C_COUNT; c++)
			use.v[c] /= (double)same;
	} else {
		const vrow_t *a = &rows[below], *b = &rows[above];
		double f = (tokens - a->v[C_TOKENS]) / (b->v[C_TOKENS] - a->v[C_TOKENS]);
		for (int c = 0; c < C_COUNT; c++)
			use.v[c] = a->v[c] + f * (b->v[c] - a->v[c]);
	}
	/* The device: the option, else the path (the CSV does not record it). */
	const char *dev = o ? o->device : NULL;
	if (!dev && path && strcasestr(path, "h100"))
		dev = "h100";
	else if (!dev && path && strcasestr(path, "a100"))
		dev = "a100";
	double bw;
	if (dev && !strcmp(dev, "a100"))
		bw = VIDUR_A100_BW;
	else if (dev && !strcmp(dev, "h100"))
		bw = VIDUR_H100_BW;
	else {
		rc = gmx_src_fail(s, "cannot tell the GPU (a100 or h100) of this Vidur profile from its path; "
				     "pass --device a100|h100");
		goto out;
	}
	char wname[64];
	snprintf(wname, sizeof(wname), "llama-2-7b-%s-%ut", dev, tokens);
	if ((rc = gmx_workload_set_str(&w->name, wname)) || (rc = gmx_workload_set_str(&w->device, dev)) ||
	    (rc = gmx_workload_set_str(&w->unit, "step")))
		goto out;

	/* Model dimensions from the file (Llama-2-7B: 4096, 11008, 32 heads). Checked as read:
	 * converting a negative or huge double to an integer is undefined. */
	if (!dim_in(use.v[C_EMBD], 1u << 20) || !dim_in(use.v[C_EXP], 1u << 20) || !dim_in(use.v[C_VOCAB], 1u << 24) ||
	    !dim_in(use.v[C_HEAD], 1u << 20) || !dim_in(use.v[C_KVHEAD], 1u << 20)) {
		rc = gmx_src_fail(s, "implausible model dimensions in the file");
		goto out;
	}
	uint64_t embd = (uint64_t)use.v[C_EMBD], exp = (uint64_t)use.v[C_EXP], vocab = (uint64_t)use.v[C_VOCAB];
	uint64_t heads = (uint64_t)use.v[C_HEAD], kvh = (uint64_t)use.v[C_KVHEAD];
	if (!embd || !exp || !vocab || !heads || !kvh || kvh > heads) {
		rc = gmx_src_fail(s, "implausible model dimensions in the file");
		goto out;
	}
	uint64_t kv_dim = embd * kvh / heads, fp16 = 2, T = tokens;
	uint64_t kv_per_token_layer = 2 * kv_dim * fp16; /* K and V: 16 KiB for Llama-2-7B */
	uint32_t b_emb, b_x, b_qkv, b_mlp, b_lm;
	uint32_t b_wqkv[VIDUR_LAYERS], b_wo[VIDUR_LAYERS], b_wup[VIDUR_LAYERS], b_wdown[VIDUR_LAYERS],
		b_kv[VIDUR_LAYERS];
	int gated = use.v[C_GATED] > 0.5;
	if ((rc = gmx_workload_add_buffer(w, 0, vocab * embd * fp16, "embedding", &b_emb)))
		goto out;
	for (int l = 0; l < VIDUR_LAYERS; l++) {
		char n[48];
		snprintf(n, sizeof(n), "layer%d.wqkv", l);
		if ((rc = gmx_workload_add_buffer(w, 0, embd * (embd + 2 * kv_dim) * fp16, n, &b_wqkv[l])))
			goto out;
		snprintf(n, sizeof(n), "layer%d.wo", l);
		if ((rc = gmx_workload_add_buffer(w, 0, embd * embd * fp16, n, &b_wo[l])))
			goto out;
		snprintf(n, sizeof(n), "layer%d.wup", l);
		if ((rc = gmx_workload_add_buffer(w, 0, (gated ? 2 : 1) * embd * exp * fp16, n, &b_wup[l])))
			goto out;
		snprintf(n, sizeof(n), "layer%d.wdown", l);
		if ((rc = gmx_workload_add_buffer(w, 0, exp * embd * fp16, n, &b_wdown[l])))
			goto out;
		snprintf(n, sizeof(n), "layer%d.kv", l);
		if ((rc = gmx_workload_add_buffer(w, 0, T * kv_per_token_layer, n, &b_kv[l])))
			goto out;
	}
	if ((rc = gmx_workload_add_buffer(w, 0, vocab * embd * fp16, "lm_head", &b_lm)) ||
	    (rc = gmx_workload_add_buffer(w, 0, T * embd * fp16, "hidden", &b_x)) ||
	    (rc = gmx_workload_add_buffer(w, 0, T * (embd + 2 * kv_dim) * fp16, "qkv", &b_qkv)) ||
	    (rc = gmx_workload_add_buffer(w, 0, T * (gated ? 2 : 1) * exp * fp16, "mlp", &b_mlp)))
		goto out;
	(void)b_lm; /* Vidur times no LM head: the buffer is part of the footprint only */

	if ((rc = add_kernel(w, "emb", use.v[C_EMB], 0, 1)) || (rc = touch(w, b_emb, T * embd * fp16)) ||
	    (rc = touch(w, b_x, 0)))
		goto out;
	double attn_ms = (double)(T * kv_per_token_layer) / bw * 1e3;
	for (int l = 0; l < VIDUR_LAYERS; l++) {
		for (size_t i = 0; i < N_LAYER_OPS && !rc; i++) {
			const char *op = layer_ops[i];
			switch (i) {
			case 0: /* input_layernorm */
				rc = add_kernel(w, op, use.v[C_LN1], 0, 0);
				rc = rc ? rc : touch(w, b_x, 0);
				break;
			case 1:
				rc = add_kernel(w, op, use.v[C_PRE], 1, 0);
				rc = rc ? rc : touch(w, b_x, 0);
				rc = rc ? rc : touch(w, b_wqkv[l], 0);
				rc = rc ? rc : touch(w, b_qkv, 0);
				break;
			case 2:
				rc = add_kernel(w, op, use.v[C_ROPE], 0, 0);
				rc = rc ? rc : touch(w, b_qkv, 0);
				break;
			case 3:
				rc = add_kernel(w, op, attn_ms, 0, 0);
				rc = rc ? rc : touch(w, b_qkv, 0);
				rc = rc ? rc : touch(w, b_kv[l], 0);
				rc = rc ? rc : touch(w, b_x, 0);
				break;
			case 4:
				rc = add_kernel(w, op, use.v[C_POST], 1, 0);
				rc = rc ? rc : touch(w, b_x, 0);
				rc = rc ? rc : touch(w, b_wo[l], 0);
				break;
			case 5:
				rc = add_kernel(w, op, use.v[C_LN2], 0, 0);
				rc = rc ? rc : touch(w, b_x, 0);
				break;
			case 6:
				rc = add_kernel(w, op, use.v[C_UP], 1, 0);
				rc = rc ? rc : touch(w, b_x, 0);
				rc = rc ? rc : touch(w, b_wup[l], 0);
				rc = rc ? rc : touch(w, b_mlp, 0);
				break;
			case 7:
				rc = add_kernel(w, op, use.v[C_ACT], 0, 0);
				rc = rc ? rc : touch(w, b_mlp, 0);
				break;
			case 8:
				rc = add_kernel(w, op, use.v[C_DOWN], 1, 0);
				rc = rc ? rc : touch(w, b_mlp, 0);
				rc = rc ? rc : touch(w, b_wdown[l], 0);
				rc = rc ? rc : touch(w, b_x, 0);
				break;
			default:
				rc = add_kernel(w, op, use.v[C_ADD], 0, 0);
				rc = rc ? rc : touch(w, b_x, 0);
				break;
			}
		}
		if (rc)
			goto out;
	}
	gmx_op_t sync;
	memset(&sync, 0, sizeof(sync));
	sync.kind = GMX_OP_SYNC;
	sync.buffer = UINT32_MAX;
	rc = gmx_workload_add_op(w, &sync, NULL);
	if (info)
		info->format = GMX_TRACE_VIDUR;
out:
	if (rc == -ENOMEM)
		gmx_src_fail(s, "out of memory");
	free(rows);
	free(text);
	return rc;
}
