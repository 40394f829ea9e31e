/* cnn: one inference request (a batch of images) of a torchvision CNN run by
 * PyTorch in eval mode on a CUDA device: the MSched paper's mix B models
 * (ResNet152, VGG19, InceptionV3, DenseNet201) at their input sizes (224 x 224,
 * InceptionV3 299 x 299), fp32; with train=1 one training iteration instead
 * (forward in train mode, loss, backward, optimizer step: gen_cnn_train.c).
 *
 * Kernels are PyTorch's eager ones, one per module call: convolution (cuDNN),
 * batch norm (a separate kernel in eval mode: nothing is fused), ReLU (in
 * place where torchvision says inplace=True), pooling, the residual add (in
 * place), torch.cat (a copy of every input into the new tensor), the
 * classifier's GEMMs. Each kernel touches exactly its tensors: its inputs,
 * its parameters and its output.
 *
 * Memory is laid out as PyTorch's caching allocator lays it out
 * (include/gpumux/devalloc.h): parameters are allocated at load time and
 * packed into shared segments (every BN vector of a model shares 2 MiB
 * segments); activations are allocated and freed as the forward pass goes and
 * reuse freed blocks. The request's placements are those of the steady state:
 * the forward pass is planned until it creates no new segment, and the last
 * plan is emitted. Each segment (one cudaMalloc) is one buffer.
 *
 * Durations: 2 us + max(flops / (fp32 peak x GMX_CNN_CONV_EFFICIENCY),
 * bytes read and written / the calibrated bandwidth) per kernel. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gen_cnn.h"

/* Fraction of the fp32 peak a cuDNN convolution or a cuBLAS GEMM sustains in
 * inference at these batch sizes: an estimate, the same as reef's (PyTorch
 * runs convolutions in TF32 by default, whose dense peak on the RTX 5080 is
 * the fp32 one). */
#define GMX_CNN_CONV_EFFICIENCY 0.5

static const struct gen_pspec cnn_params[] = {
	{"model", GEN_ENUM, "resnet152", 0, 0, "resnet152,vgg19,inception3,densenet201", "torchvision model"},
	{"batch", GEN_UINT, "1", 1, 65536, NULL, "images per request"},
	{"footprint", GEN_SIZE, NULL, 1, 1ull << 42, NULL,
	 "total bytes wanted (parameters and the allocator's segments): the largest batch that fits (instead of batch=)"},
	{"think", GEN_UINT, "5000", 0, 1000000000ull, NULL, "host ns before each launch"},
	{"autograd", GEN_UINT, "0", 0, 1, NULL,
	 "1: the pass runs with autograd on (no torch.no_grad()): the activations saved for backward live until the "
	 "request ends, max pooling also writes its int64 indices"},
	{"train", GEN_UINT, "0", 0, 1, NULL,
	 "1: one training iteration (train mode, cross-entropy loss, backward, optimizer step) instead of a request"},
	{"optimizer", GEN_ENUM, "sgd", 0, 0, "sgd,adam",
	 "train=1: SGD with momentum (torchvision's recipe, 1 state per parameter) or Adam (2 states)"},
	{NULL, 0, NULL, 0, 0, NULL, NULL},
};

/* ---- tensors ---------------------------------------------------------------- */

tens_t cnn_alloc(net_t *n, uint64_t bytes, uint32_t c, uint32_t h, uint32_t w)
{
	tens_t t = {.c = c, .h = h, .w = w, .bytes = bytes};
	if (!n->rc)
		n->rc = gmx_devalloc_alloc(&n->act, t.bytes, &t.seg, &t.off);
	if (!n->rc && t.seg >= n->cap_used) {
		uint32_t nc = 2 * t.seg + 16;
		uint8_t *p = realloc(n->used, nc);
		if (!p) {
			n->rc = -ENOMEM;
			return t;
		}
		memset(p + n->cap_used, 0, nc - n->cap_used);
		n->used = p;
		n->cap_used = nc;
	}
	if (!n->rc)
		n->used[t.seg] = 1;
	return t;
}

void cnn_release(net_t *n, const tens_t *t)
{
	if (!n->rc)
		n->rc = gmx_devalloc_release(&n->act, t->seg, t->off);
}

tens_t cnn_act_sized(net_t *n, uint64_t bytes, uint32_t c, uint32_t h, uint32_t w)
{
	tens_t t = cnn_alloc(n, bytes, c, h, w);
	if (!n->train || n->rc)
		return t;
	t.id = ++n->next_id;
	uint32_t cap = n->cap_live;
	if (cnn_grow((void **)&n->live, &cap, t.id + 1, sizeof(*n->live)) ||
	    cnn_grow((void **)&n->made, &n->cap_live, t.id + 1, sizeof(*n->made))) {
		n->rc = -ENOMEM;
		return t;
	}
	n->live[t.id] = t;
	return t;
}

tens_t cnn_act_new(net_t *n, uint32_t c, uint32_t h, uint32_t w)
{
	return cnn_act_sized(n, n->batch * c * h * w * 4ull, c, h, w);
}

/* Releases an activation. With autograd on, the autograd graph holds every
 * activation an operation saved for backward (a convolution's, batch norm's,
 * pooling's and a GEMM's input, ReLU's result) until the request's output is
 * dropped: nearly every activation of these models, so all are held. In
 * training, backward frees each (gen_cnn_train.c). */
static void act_free(net_t *n, const tens_t *t)
{
	if (n->rc || n->train)
		return;
	if (!n->keep) {
		cnn_release(n, t);
		return;
	}
	if (n->n_held == n->cap_held) {
		uint32_t nc = n->cap_held ? 2 * n->cap_held : 256;
		tens_t *p = realloc(n->held, nc * sizeof(*p));
		if (!p) {
			n->rc = -ENOMEM;
			return;
		}
		n->held = p;
		n->cap_held = nc;
	}
	n->held[n->n_held++] = *t;
}

/* The end of a request under autograd: the graph is dropped, its tensors freed. */
static void release_held(net_t *n)
{
	for (uint32_t i = 0; i < n->n_held && !n->rc; i++)
		cnn_release(n, &n->held[i]);
	n->n_held = 0;
}

/* The next parameter tensor of `elems` floats (CNN_PARAM trained, CNN_FIXED
 * not): placed on the first pass. */
static tens_t param_of(net_t *n, uint64_t elems, uint8_t kind)
{
	if (n->next_param < n->n_params)
		return n->params[n->next_param++];
	tens_t t = {.c = (uint32_t)elems, .h = 1, .w = 1, .bytes = elems * 4, .param = kind};
	if (n->n_params == n->cap_params) {
		uint32_t nc = n->cap_params ? 2 * n->cap_params : 256;
		tens_t *p = realloc(n->params, nc * sizeof(*p));
		if (!p) {
			n->rc = -ENOMEM;
			return t;
		}
		n->params = p;
		n->cap_params = nc;
	}
	if (!n->rc)
		n->rc = gmx_devalloc_alloc(&n->par, t.bytes, &t.seg, &t.off);
	t.id = n->n_params + 1;
	n->params[n->n_params++] = t;
	n->next_param++;
	return t;
}

static tens_t param(net_t *n, uint64_t elems)
{
	return param_of(n, elems, CNN_PARAM);
}

/* ---- kernels ---------------------------------------------------------------- */

void cnn_kern(net_t *n, const char *name, double flops, const use_t *u, uint32_t nu)
{
	if (!n->emit || n->rc || n->g->rc)
		return;
	struct gen_ctx *g = n->g;
	double bytes = 0;
	uint64_t out_elems = u[nu - 1].t->bytes / 4;
	uint64_t blocks = gen_div_up(out_elems, 256);
	gen_kernel(g, name, n->think, flops > 0 ? GMX_CLASS_COMPUTE : GMX_CLASS_MEMORY,
		   (uint32_t)(blocks > 0x7fffffffull ? 0x7fffffffull : blocks), 1, 1, 256, 1, 1, 0);
	for (uint32_t i = 0; i < nu; i++) {
		const tens_t *t = u[i].t;
		uint32_t buf = t->param ? n->par_buf[t->seg] : n->act_buf[t->seg];
		gen_arg_ptr(g, buf, t->off);
		gen_arg_i8(g, t->bytes / 4);
		gen_touch(g, buf, t->off, t->bytes);
		bytes += (double)t->bytes * u[i].rw;
	}
	double mem_ns = bytes / n->bw * 1e9;
	double flop_ns = flops / (GMX_RTX5080_FP32_PEAK * GMX_CNN_CONV_EFFICIENCY) * 1e9;
	gen_dur(g, GMX_KERNEL_MIN_NS + (uint64_t)(mem_ns > flop_ns ? mem_ns : flop_ns));
}


/* ---- layers (each returns a new tensor; the input stays the caller's) ------- */

static tens_t conv(net_t *n, const tens_t *x, uint32_t cout, uint32_t kh, uint32_t kw, uint32_t stride, uint32_t ph,
		   uint32_t pw, int bias)
{
	uint32_t ho = (x->h + 2 * ph - kh) / stride + 1, wo = (x->w + 2 * pw - kw) / stride + 1;
	tens_t w = param(n, (uint64_t)cout * x->c * kh * kw), b = {0};
	if (bias)
		b = param(n, cout);
	tens_t y = cnn_act_new(n, cout, ho, wo);
	double flops = 2.0 * (double)n->batch * cout * ho * wo * x->c * kh * kw;
	use_t u[4] = {{x, 1}, {&w, 1}, {&b, 1}, {&y, 1}};
	if (bias) {
		cnn_kern(n, "cudnn_conv2d_fwd_bias", flops, u, 4);
	} else {
		u[2] = u[3];
		cnn_kern(n, "cudnn_conv2d_fwd", flops, u, 3);
	}
	cnn_tape(n, OP_CONV, x, &y, &w, &b, NULL, flops, 0);
	return y;
}

static tens_t bn(net_t *n, const tens_t *x)
{
	tens_t p[4];
	for (int i = 0; i < 4; i++) /* weight, bias (trained); running mean, running var (buffers) */
		p[i] = param_of(n, x->c, i < 2 ? CNN_PARAM : CNN_FIXED);
	tens_t y = cnn_act_new(n, x->c, x->h, x->w);
	if (n->train) {
		/* train mode: batch statistics (x read twice: statistics, then normalize),
		 * running stats updated, save_mean and save_invstd kept for backward */
		tens_t save = cnn_alloc(n, 2ull * x->c * 4, 2 * x->c, 1, 1);
		use_t u[7] = {{x, 2}, {&p[0], 1}, {&p[1], 1}, {&p[2], 2}, {&p[3], 2}, {&save, 1}, {&y, 1}};
		cnn_kern(n, "cudnn_batch_norm_fwd_train", 0, u, 7);
		cnn_tape(n, OP_BN, x, &y, &p[0], &p[1], &save, 0, 0);
		return y;
	}
	use_t u[6] = {{x, 1}, {&p[0], 1}, {&p[1], 1}, {&p[2], 1}, {&p[3], 1}, {&y, 1}};
	cnn_kern(n, "cudnn_batch_norm_infer", 0, u, 6);
	return y;
}

static void relu_(net_t *n, const tens_t *x)
{
	use_t u[1] = {{x, 2}};
	cnn_kern(n, "relu_inplace", 0, u, 1);
	cnn_tape(n, OP_RELU, x, x, NULL, NULL, NULL, 0, 0);
}

/* conv (no bias) + bn + relu; frees the conv's output. */
static tens_t cbr(net_t *n, const tens_t *x, uint32_t cout, uint32_t kh, uint32_t kw, uint32_t stride, uint32_t ph,
		  uint32_t pw)
{
	tens_t c = conv(n, x, cout, kh, kw, stride, ph, pw, 0);
	tens_t y = bn(n, &c);
	act_free(n, &c);
	relu_(n, &y);
	return y;
}

static tens_t pool(net_t *n, const tens_t *x, uint32_t k, uint32_t stride, uint32_t pad, int avg)
{
	uint32_t ho = (x->h + 2 * pad - k) / stride + 1, wo = (x->w + 2 * pad - k) / stride + 1;
	tens_t y = cnn_act_new(n, x->c, ho, wo);
	if (!avg && (n->keep || n->train)) {
		/* max_pool2d_with_indices: the int64 argmax of every output, saved for
		 * backward (8 bytes an element: twice the channels of a float tensor) */
		tens_t idx = cnn_act_new(n, 2 * x->c, ho, wo);
		use_t u[3] = {{x, 1}, {&idx, 1}, {&y, 1}};
		cnn_kern(n, "max_pool2d_with_indices", 0, u, 3);
		cnn_tape(n, OP_MAXPOOL, x, &y, NULL, NULL, &idx, 0, 0);
		act_free(n, &idx);
		return y;
	}
	use_t u[2] = {{x, 1}, {&y, 1}};
	cnn_kern(n, avg ? "avg_pool2d" : "max_pool2d", 0, u, 2);
	cnn_tape(n, OP_AVGPOOL, x, &y, NULL, NULL, NULL, 0, 0);
	return y;
}

/* torch.cat along channels: one copy kernel per input. */
static tens_t cat(net_t *n, const tens_t *const *xs, uint32_t k)
{
	uint32_t c = 0;
	for (uint32_t i = 0; i < k; i++)
		c += xs[i]->c;
	tens_t y = cnn_act_new(n, c, xs[0]->h, xs[0]->w);
	for (uint32_t i = 0, coff = 0; i < k; coff += xs[i]->c, i++) {
		use_t u[2] = {{xs[i], 1}, {&y, 1}};
		cnn_kern(n, "cat_copy", 0, u, 2);
		cnn_tape(n, OP_CAT, xs[i], &y, NULL, NULL, NULL, 0, coff);
	}
	return y;
}

static tens_t linear(net_t *n, const tens_t *x, uint32_t out)
{
	uint64_t in = (uint64_t)x->c * x->h * x->w;
	tens_t w = param(n, in * out), b = param(n, out);
	tens_t y = cnn_act_new(n, out, 1, 1);
	use_t u[4] = {{x, 1}, {&w, 1}, {&b, 1}, {&y, 1}};
	double flops = 2.0 * (double)n->batch * (double)in * out;
	cnn_kern(n, "cublas_sgemm_bias", flops, u, 4);
	cnn_tape(n, OP_LINEAR, x, &y, &w, &b, NULL, flops, 0);
	return y;
}

/* nn.Dropout in train mode (identity in eval): a fused kernel writes the output
 * and its keep mask (1 byte an element), which backward reads. */
static tens_t dropout(net_t *n, tens_t *x)
{
	if (!n->train)
		return *x;
	tens_t y = cnn_act_new(n, x->c, x->h, x->w);
	tens_t mask = cnn_act_sized(n, n->batch * x->c * x->h * x->w, x->c, x->h, x->w); /* bool */
	use_t u[3] = {{x, 1}, {&mask, 1}, {&y, 1}};
	cnn_kern(n, "fused_dropout", 0, u, 3);
	cnn_tape(n, OP_DROPOUT, x, &y, NULL, NULL, &mask, 0, 0);
	return y;
}

/* Global average pool + flatten + fc: the classifier every model ends with. */
static tens_t head(net_t *n, tens_t *x, uint32_t classes)
{
	tens_t p = pool(n, x, x->h, 1, 0, 1);
	act_free(n, x);
	tens_t y = linear(n, &p, classes);
	act_free(n, &p);
	return y;
}

/* ---- models ----------------------------------------------------------------- */

static tens_t resnet152(net_t *n, tens_t *x)
{
	static const uint32_t blocks[4] = {3, 8, 36, 3};
	tens_t h = cbr(n, x, 64, 7, 7, 2, 3, 3);
	tens_t cur = pool(n, &h, 3, 2, 1, 0);
	act_free(n, &h);
	for (uint32_t s = 0; s < 4; s++) {
		uint32_t planes = 64u << s;
		for (uint32_t b = 0; b < blocks[s]; b++) {
			uint32_t stride = (s > 0 && b == 0) ? 2 : 1;
			tens_t a = cbr(n, &cur, planes, 1, 1, 1, 0, 0);
			tens_t m = cbr(n, &a, planes, 3, 3, stride, 1, 1); /* torchvision v1.5: stride on the 3x3 */
			act_free(n, &a);
			tens_t c = conv(n, &m, planes * 4, 1, 1, 1, 0, 0, 0);
			act_free(n, &m);
			tens_t out = bn(n, &c);
			act_free(n, &c);
			tens_t idn = cur;
			int own = 0;
			if (b == 0) {
				tens_t d = conv(n, &cur, planes * 4, 1, 1, stride, 0, 0, 0);
				idn = bn(n, &d);
				act_free(n, &d);
				own = 1;
			}
			use_t u[2] = {{&idn, 1}, {&out, 2}};
			cnn_kern(n, "add_inplace", 0, u, 2); /* out += identity */
			cnn_tape(n, OP_ADD, &idn, &out, NULL, NULL, NULL, 0, 0);
			relu_(n, &out);
			if (own)
				act_free(n, &idn);
			act_free(n, &cur);
			cur = out;
		}
	}
	return head(n, &cur, 1000);
}

static tens_t vgg19(net_t *n, tens_t *x)
{
	static const int cfg[] = {64, 64, 0, 128, 128, 0, 256, 256, 256, 256, 0, 512, 512, 512, 512, 0,
				  512, 512, 512, 512, 0};
	tens_t cur = *x;
	int own = 0;
	for (size_t i = 0; i < sizeof(cfg) / sizeof(cfg[0]); i++) {
		tens_t y = cfg[i] ? conv(n, &cur, (uint32_t)cfg[i], 3, 3, 1, 1, 1, 1) : pool(n, &cur, 2, 2, 0, 0);
		if (cfg[i])
			relu_(n, &y);
		if (own)
			act_free(n, &cur);
		cur = y;
		own = 1;
	}
	/* AdaptiveAvgPool2d((7, 7)) on a 7 x 7 map is the identity, but still a kernel */
	tens_t p = pool(n, &cur, 1, 1, 0, 1);
	act_free(n, &cur);
	tens_t f1 = linear(n, &p, 4096);
	act_free(n, &p);
	relu_(n, &f1);
	tens_t d1 = dropout(n, &f1); /* the input in eval mode */
	tens_t f2 = linear(n, &d1, 4096);
	act_free(n, &d1);
	relu_(n, &f2);
	tens_t d2 = dropout(n, &f2);
	tens_t y = linear(n, &d2, 1000);
	act_free(n, &d2);
	return y;
}

static tens_t densenet201(net_t *n, tens_t *x)
{
	static const uint32_t blocks[4] = {6, 12, 48, 32};
	tens_t c0 = conv(n, x, 64, 7, 7, 2, 3, 3, 0);
	tens_t b0 = bn(n, &c0);
	act_free(n, &c0);
	relu_(n, &b0);
	tens_t cur = pool(n, &b0, 3, 2, 1, 0);
	act_free(n, &b0);
	tens_t feats[64];
	const tens_t *fp[64];
	for (uint32_t s = 0; s < 4; s++) {
		uint32_t nf = 0;
		feats[nf++] = cur;
		for (uint32_t l = 0; l < blocks[s]; l++) {
			for (uint32_t i = 0; i < nf; i++)
				fp[i] = &feats[i];
			tens_t cc = nf > 1 ? cat(n, fp, nf) : feats[0]; /* torch.cat(prev_features, 1) */
			tens_t n1 = bn(n, &cc);
			if (nf > 1)
				act_free(n, &cc);
			relu_(n, &n1);
			tens_t c1 = conv(n, &n1, 128, 1, 1, 1, 0, 0, 0);
			act_free(n, &n1);
			tens_t n2 = bn(n, &c1);
			act_free(n, &c1);
			relu_(n, &n2);
			feats[nf++] = conv(n, &n2, 32, 3, 3, 1, 1, 1, 0);
			act_free(n, &n2);
		}
		for (uint32_t i = 0; i < nf; i++)
			fp[i] = &feats[i];
		tens_t out = cat(n, fp, nf);
		for (uint32_t i = 0; i < nf; i++)
			act_free(n, &feats[i]);
		tens_t nb = bn(n, &out);
		act_free(n, &out);
		relu_(n, &nb);
		if (s == 3) {
			cur = nb;
			break;
		}
		tens_t t = conv(n, &nb, nb.c / 2, 1, 1, 1, 0, 0, 0);
		act_free(n, &nb);
		cur = pool(n, &t, 2, 2, 0, 1);
		act_free(n, &t);
	}
	return head(n, &cur, 1000);
}

/* Concatenates k branch outputs and frees them. */
static tens_t join(net_t *n, tens_t *br, uint32_t k)
{
	const tens_t *p[8] = {0};
	for (uint32_t i = 0; i < k; i++)
		p[i] = &br[i];
	tens_t y = cat(n, p, k);
	for (uint32_t i = 0; i < k; i++)
		act_free(n, &br[i]);
	return y;
}

/* Runs x through a chain of BasicConv2d (conv + bn + relu) given as
 * {cout, kh, kw, stride, ph, pw} rows; returns the last output. */
static tens_t chain(net_t *n, const tens_t *x, const uint32_t (*rows)[6], uint32_t k)
{
	tens_t cur = *x;
	for (uint32_t i = 0; i < k; i++) {
		tens_t y = cbr(n, &cur, rows[i][0], rows[i][1], rows[i][2], rows[i][3], rows[i][4], rows[i][5]);
		if (i)
			act_free(n, &cur);
		cur = y;
	}
	return cur;
}

static tens_t inception3(net_t *n, tens_t *x)
{
	static const uint32_t stem[5][6] = {
	    {32, 3, 3, 2, 0, 0}, {32, 3, 3, 1, 0, 0}, {64, 3, 3, 1, 1, 1}, {80, 1, 1, 1, 0, 0}, {192, 3, 3, 1, 0, 0}};
	tens_t a = chain(n, x, stem, 3);
	tens_t p = pool(n, &a, 3, 2, 0, 0);
	act_free(n, &a);
	tens_t b = chain(n, &p, stem + 3, 2);
	act_free(n, &p);
	tens_t cur = pool(n, &b, 3, 2, 0, 0);
	act_free(n, &b);
	static const uint32_t pool_features[3] = {32, 64, 64};
	for (int i = 0; i < 3; i++) { /* Mixed_5b..5d: InceptionA */
		const uint32_t b5[2][6] = {{48, 1, 1, 1, 0, 0}, {64, 5, 5, 1, 2, 2}};
		const uint32_t b3[3][6] = {{64, 1, 1, 1, 0, 0}, {96, 3, 3, 1, 1, 1}, {96, 3, 3, 1, 1, 1}};
		tens_t br[4];
		br[0] = cbr(n, &cur, 64, 1, 1, 1, 0, 0);
		br[1] = chain(n, &cur, b5, 2);
		br[2] = chain(n, &cur, b3, 3);
		tens_t ap = pool(n, &cur, 3, 1, 1, 1);
		br[3] = cbr(n, &ap, pool_features[i], 1, 1, 1, 0, 0);
		act_free(n, &ap);
		act_free(n, &cur);
		cur = join(n, br, 4);
	}
	{ /* Mixed_6a: InceptionB */
		const uint32_t b3[3][6] = {{64, 1, 1, 1, 0, 0}, {96, 3, 3, 1, 1, 1}, {96, 3, 3, 2, 0, 0}};
		tens_t br[3];
		br[0] = cbr(n, &cur, 384, 3, 3, 2, 0, 0);
		br[1] = chain(n, &cur, b3, 3);
		br[2] = pool(n, &cur, 3, 2, 0, 0);
		act_free(n, &cur);
		cur = join(n, br, 3);
	}
	static const uint32_t c7s[4] = {128, 160, 160, 192};
	for (int i = 0; i < 4; i++) { /* Mixed_6b..6e: InceptionC */
		uint32_t c7 = c7s[i];
		const uint32_t b7[3][6] = {{c7, 1, 1, 1, 0, 0}, {c7, 1, 7, 1, 0, 3}, {192, 7, 1, 1, 3, 0}};
		const uint32_t bd[5][6] = {{c7, 1, 1, 1, 0, 0},
					   {c7, 7, 1, 1, 3, 0},
					   {c7, 1, 7, 1, 0, 3},
					   {c7, 7, 1, 1, 3, 0},
					   {192, 1, 7, 1, 0, 3}};
		tens_t br[4];
		br[0] = cbr(n, &cur, 192, 1, 1, 1, 0, 0);
		br[1] = chain(n, &cur, b7, 3);
		br[2] = chain(n, &cur, bd, 5);
		tens_t ap = pool(n, &cur, 3, 1, 1, 1);
		br[3] = cbr(n, &ap, 192, 1, 1, 1, 0, 0);
		act_free(n, &ap);
		act_free(n, &cur);
		cur = join(n, br, 4);
	}
	{ /* Mixed_7a: InceptionD */
		const uint32_t b3[2][6] = {{192, 1, 1, 1, 0, 0}, {320, 3, 3, 2, 0, 0}};
		const uint32_t b7[4][6] = {
		    {192, 1, 1, 1, 0, 0}, {192, 1, 7, 1, 0, 3}, {192, 7, 1, 1, 3, 0}, {192, 3, 3, 2, 0, 0}};
		tens_t br[3];
		br[0] = chain(n, &cur, b3, 2);
		br[1] = chain(n, &cur, b7, 4);
		br[2] = pool(n, &cur, 3, 2, 0, 0);
		act_free(n, &cur);
		cur = join(n, br, 3);
	}
	for (int i = 0; i < 2; i++) { /* Mixed_7b, 7c: InceptionE */
		tens_t br[6];
		br[0] = cbr(n, &cur, 320, 1, 1, 1, 0, 0);
		tens_t t3 = cbr(n, &cur, 384, 1, 1, 1, 0, 0);
		br[1] = cbr(n, &t3, 384, 1, 3, 1, 0, 1);
		br[2] = cbr(n, &t3, 384, 3, 1, 1, 1, 0);
		act_free(n, &t3);
		const uint32_t bd[2][6] = {{448, 1, 1, 1, 0, 0}, {384, 3, 3, 1, 1, 1}};
		tens_t td = chain(n, &cur, bd, 2);
		br[3] = cbr(n, &td, 384, 1, 3, 1, 0, 1);
		br[4] = cbr(n, &td, 384, 3, 1, 1, 1, 0);
		act_free(n, &td);
		tens_t ap = pool(n, &cur, 3, 1, 1, 1);
		br[5] = cbr(n, &ap, 192, 1, 1, 1, 0, 0);
		act_free(n, &ap);
		act_free(n, &cur);
		/* torchvision cats the 3x3 pairs first, then the four branches: the same
		 * bytes as one concatenation of six, plus the pairs' copies */
		tens_t p1 = join(n, br + 1, 2), p2 = join(n, br + 3, 2);
		tens_t four[4] = {br[0], p1, p2, br[5]};
		cur = join(n, four, 4);
	}
	return head(n, &cur, 1000);
}

/* ---- the request -------------------------------------------------------------- */

/* One forward pass: input upload, the model, output download. With train=1
 * one training iteration: images and labels uploaded, the forward pass in
 * train mode, then loss, backward and the optimizer step (gen_cnn_train.c). */
static void request(net_t *n, const char *model)
{
	uint32_t side = !strcmp(model, "inception3") ? 299 : 224;
	cnn_train_begin(n);
	tens_t x = cnn_act_new(n, 3, side, side);
	n->image_id = x.id;
	if (n->emit && !n->rc)
		gen_copy(n->g, GMX_OP_COPY_H2D, n->act_buf[x.seg], x.bytes, n->think);
	tens_t labels = {0};
	if (n->train) { /* int64 class indices */
		labels = cnn_act_sized(n, n->batch * 8, 2, 1, 1);
		if (n->emit && !n->rc)
			gen_copy(n->g, GMX_OP_COPY_H2D, n->act_buf[labels.seg], labels.bytes, n->think);
	}
	n->next_param = 0;
	tens_t y;
	if (!strcmp(model, "vgg19"))
		y = vgg19(n, &x);
	else if (!strcmp(model, "densenet201"))
		y = densenet201(n, &x);
	else if (!strcmp(model, "inception3"))
		y = inception3(n, &x);
	else
		y = resnet152(n, &x);
	if (n->train) {
		cnn_train_finish(n, &y, &labels);
		return;
	}
	act_free(n, &x);
	if (n->emit && !n->rc)
		gen_copy(n->g, GMX_OP_COPY_D2H, n->act_buf[y.seg], y.bytes, 0);
	act_free(n, &y);
	release_held(n);
}

/* Plans passes until one creates no segment (training: three in a row; the
 * parameter gradients one iteration leaves to the next shift the placements
 * from pass to pass, so the last pass starts from a snapshot the emitted pass
 * restores: cnn_train_save) (the steady state). Returns the
 * footprint in bytes: the parameters' segments and the activation segments
 * the steady-state pass touches (one the first pass needed and the steady
 * state never touches again is cached by PyTorch but never populated on the
 * device, and is left out). 0 with n->rc set on failure. */
static uint64_t plan(net_t *n, const char *model)
{
	int need = n->train ? 3 : 1, streak = 0;
	for (int pass = 0; pass < 32 && !n->rc; pass++) {
		uint32_t before = n->act.n_seg;
		if (n->used)
			memset(n->used, 0, n->cap_used);
		if (cnn_train_save(n))
			break;
		request(n, model);
		streak = pass > 0 && n->act.n_seg == before ? streak + 1 : 0;
		if (streak >= need && !n->rc) {
			uint64_t fp = gmx_devalloc_reserved(&n->par);
			for (uint32_t s = 0; s < n->act.n_seg; s++)
				fp += n->used[s] ? n->act.seg_size[s] : 0;
			return fp;
		}
	}
	if (!n->rc)
		n->rc = -EINVAL;
	return 0;
}

static void net_free(net_t *n)
{
	gmx_devalloc_free(&n->act);
	gmx_devalloc_free(&n->par);
	free(n->params);
	free(n->held);
	free(n->act_buf);
	free(n->par_buf);
	free(n->used);
	cnn_train_free(n);
}

/* A net for `batch` images with the generator's mode parameters. */
static net_t net_at(struct gen_ctx *g, uint64_t batch)
{
	int train = gen_u(g, "train") != 0;
	return (net_t){.g = g, .batch = batch, .keep = train || gen_u(g, "autograd") != 0, .train = train,
		       .adam = !strcmp(gen_s(g, "optimizer"), "adam")};
}

static uint64_t footprint_at(struct gen_ctx *g, const char *model, uint64_t batch, int *rc)
{
	net_t n = net_at(g, batch);
	uint64_t fp = plan(&n, model);
	*rc = n.rc;
	net_free(&n);
	return fp;
}

static int cnn_build(struct gen_ctx *g)
{
	const char *model = gen_s(g, "model");
	uint64_t batch = gen_u(g, "batch");
	int rc = 0;
	if (gen_u(g, "train")) {
		if (!strcmp(model, "inception3"))
			return gen_fail(g, "train=1: inception3 trains with its auxiliary classifier, which is not modelled "
					   "(model=resnet152, vgg19 or densenet201)");
		if (gen_given(g, "autograd") && !gen_u(g, "autograd"))
			return gen_fail(g, "train=1 needs autograd: leave autograd= out or set it to 1");
	} else if (gen_given(g, "optimizer")) {
		return gen_fail(g, "optimizer= applies to train=1 only");
	}
	if (gen_given(g, "footprint")) {
		if (gen_given(g, "batch"))
			return gen_fail(g, "give batch= or footprint=, not both");
		uint64_t want = gen_u(g, "footprint"), lo = 1, hi = 65536;
		if (footprint_at(g, model, 1, &rc) > want || rc)
			return rc ? rc : gen_fail(g, "footprint=%llu is below %s's batch-1 footprint", (unsigned long long)want, model);
		while (lo < hi) { /* the largest batch that fits */
			uint64_t mid = (lo + hi + 1) / 2;
			uint64_t fp = footprint_at(g, model, mid, &rc);
			if (rc)
				return rc;
			if (fp <= want)
				lo = mid;
			else
				hi = mid - 1;
		}
		batch = lo;
	}
	net_t n = net_at(g, batch);
	n.think = gen_u(g, "think");
	n.bw = gen_rtx5080_bw(g);
	plan(&n, model);
	if (!n.rc) {
		n.act_buf = calloc(n.act.n_seg ? n.act.n_seg : 1, sizeof(uint32_t));
		n.par_buf = calloc(n.par.n_seg ? n.par.n_seg : 1, sizeof(uint32_t));
		if (!n.act_buf || !n.par_buf)
			n.rc = -ENOMEM;
	}
	char name[96];
	if (n.train)
		snprintf(name, sizeof(name), "%s batch %llu train %s", model, (unsigned long long)batch, n.adam ? "adam" : "sgd");
	else
		snprintf(name, sizeof(name), "%s batch %llu%s", model, (unsigned long long)batch, n.keep ? " autograd" : "");
	if (!n.rc && (gmx_workload_set_str(&g->w->name, name) || gmx_workload_set_str(&g->w->device, "rtx5080") ||
		      gmx_workload_set_str(&g->w->unit, n.train ? "iteration" : "request")))
		n.rc = -ENOMEM;
	for (uint32_t s = 0; !n.rc && s < n.par.n_seg; s++) {
		snprintf(name, sizeof(name), "param_seg%u", s);
		n.par_buf[s] = gen_buffer(g, n.par.seg_size[s], name);
	}
	for (uint32_t s = 0; !n.rc && s < n.act.n_seg; s++) {
		if (!n.used[s])
			continue; /* never touched in the steady state */
		snprintf(name, sizeof(name), "act_seg%u", s);
		n.act_buf[s] = gen_buffer(g, n.act.seg_size[s], name);
	}
	uint8_t *planned = NULL;
	if (!n.rc) {
		cnn_train_restore(&n);
		planned = malloc(n.cap_used ? n.cap_used : 1);
		if (!planned)
			n.rc = -ENOMEM;
		else if (n.cap_used)
			memcpy(planned, n.used, n.cap_used);
	}
	if (!n.rc) {
		n.emit = 1;
		uint32_t cap = n.cap_used;
		request(&n, model);
		gen_sync(g, 0);
		for (uint32_t s = 0; !n.rc && s < n.cap_used; s++)
			if (n.used[s] && (s >= cap || !planned[s])) /* the emitted pass must repeat the planned one */
				n.rc = gen_fail(g, "internal: %s batch %llu touches segment %u its plan did not", model,
						(unsigned long long)batch, s);
	}
	free(planned);
	rc = n.rc ? n.rc : g->rc;
	if (n.rc == -ENOMEM)
		gen_fail(g, "out of memory");
	net_free(&n);
	return rc;
}

const struct gen_kind gen_cnn = {
	"cnn",
	"inference request (or train=1: training iteration) of a torchvision CNN (resnet152, vgg19, inception3, "
	"densenet201) under PyTorch: eager kernels, exact tensor extents, caching-allocator layout",
	cnn_params,
	cnn_build,
};
