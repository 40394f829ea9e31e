/* Working-set templates: learning from observed launches and prediction from
 * arguments alone (the profile text format is template_text.c). See
 * gpumux/template.h. */
#include "gpumux/template.h"
#include "template_internal.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#define TPL_PAGE 4096ull
/* Distinct feature values a fit is checked against; launches beyond it still
 * vote on structure. Bounds learning time on kernels launched thousands of
 * times with few distinct shapes. */
#define TPL_FIT_MAX_OBS 4096u

typedef unsigned __int128 u128;

typedef struct obs_term {
	uint64_t cand;   /* arguments whose value is the term's start address */
	uint8_t strided;
	uint64_t length; /* single: bytes; strided: count x chunk when contiguous */
	uint64_t count, stride, chunk;
} obs_term_t;

typedef struct obs {
	uint64_t val[GMX_TPL_MAX_ARGS];
	uint32_t dims[6];
	uint32_t first_term, n_terms;
} obs_t;

typedef struct kern {
	char *name;
	uint32_t n_args;
	uint8_t size[GMX_TPL_MAX_ARGS];
	uint64_t ptr_flags;
	int broken; /* launches that no single template can describe */
	obs_t *obs;
	uint32_t n_obs, cap_obs;
	obs_term_t *terms;
	uint32_t n_terms, cap_terms;
} kern_t;

struct gmx_tpl_learner {
	kern_t *k;
	uint32_t n, cap;
};

int gmx_tpl_learner_create(gmx_tpl_learner_t **out)
{
	*out = calloc(1, sizeof(**out));
	return *out ? 0 : -ENOMEM;
}

void gmx_tpl_learner_destroy(gmx_tpl_learner_t *l)
{
	if (!l)
		return;
	for (uint32_t i = 0; i < l->n; i++) {
		free(l->k[i].name);
		free(l->k[i].obs);
		free(l->k[i].terms);
	}
	free(l->k);
	free(l);
}

static kern_t *kern_for(gmx_tpl_learner_t *l, const char *name)
{
	for (uint32_t i = l->n; i-- > 0;) /* launches of one kernel tend to come together */
		if (!strcmp(l->k[i].name, name))
			return &l->k[i];
	if (l->n == l->cap) {
		uint32_t ncap = l->cap ? 2 * l->cap : 16;
		kern_t *p = realloc(l->k, ncap * sizeof(*p));
		if (!p)
			return NULL;
		l->k = p;
		l->cap = ncap;
	}
	kern_t *k = &l->k[l->n];
	memset(k, 0, sizeof(*k));
	k->name = strdup(name);
	if (!k->name)
		return NULL;
	l->n++;
	return k;
}

static uint64_t arg_match(const gmx_tpl_launch_t *x, uint64_t addr)
{
	uint64_t m = 0;
	for (uint32_t j = 0; j < x->n_args; j++)
		if (x->args[j].size == 8 && x->args[j].value == addr)
			m |= 1ull << j;
	return m;
}

static int push_term(kern_t *k, const obs_term_t *t)
{
	if (k->n_terms == k->cap_terms) {
		uint32_t ncap = k->cap_terms ? 2 * k->cap_terms : 64;
		obs_term_t *p = realloc(k->terms, ncap * sizeof(*p));
		if (!p)
			return -ENOMEM;
		k->terms = p;
		k->cap_terms = ncap;
	}
	k->terms[k->n_terms++] = *t;
	return 0;
}

int gmx_tpl_learn(gmx_tpl_learner_t *l, const gmx_tpl_launch_t *x)
{
	if (x->n_args > GMX_TPL_MAX_ARGS)
		return -EINVAL;
	kern_t *k = kern_for(l, x->name);
	if (!k)
		return -ENOMEM;
	if (k->broken)
		return 0;
	uint64_t ptrs = 0;
	for (uint32_t j = 0; j < x->n_args; j++)
		if (x->args[j].is_pointer)
			ptrs |= 1ull << j;
	if (!k->n_obs) {
		k->n_args = x->n_args;
		for (uint32_t j = 0; j < x->n_args; j++)
			k->size[j] = x->args[j].size;
		k->ptr_flags = ptrs;
	} else if (k->n_args != x->n_args || k->ptr_flags != ptrs) {
		k->broken = 1; /* one name, two signatures: nothing to key a template on */
		return 0;
	}
	if (k->n_obs == k->cap_obs) {
		uint32_t ncap = k->cap_obs ? 2 * k->cap_obs : 16;
		obs_t *p = realloc(k->obs, ncap * sizeof(*p));
		if (!p)
			return -ENOMEM;
		k->obs = p;
		k->cap_obs = ncap;
	}
	obs_t *o = &k->obs[k->n_obs];
	memset(o, 0, sizeof(*o));
	for (uint32_t j = 0; j < x->n_args; j++)
		o->val[j] = x->args[j].size == 4 ? (x->args[j].value & 0xffffffffull) : x->args[j].value;
	memcpy(o->dims, x->grid, sizeof(x->grid));
	memcpy(o->dims + 3, x->block, sizeof(x->block));
	o->first_term = k->n_terms;
	/* Group the ranges into terms: each starts at an argument; a run of equal
	 * chunks at a constant stride whose starts are not arguments is one
	 * strided term. */
	for (uint32_t i = 0; i < x->n_ranges;) {
		const gmx_tpl_range_t *r = &x->ranges[i];
		obs_term_t t = {.cand = arg_match(x, r->addr), .length = r->length};
		if (!t.cand || o->n_terms == GMX_TPL_MAX_TERMS) {
			k->broken = 1; /* a range that starts at no argument: pointer chasing */
			return 0;
		}
		uint32_t j = i + 1;
		if (j < x->n_ranges && x->ranges[j].length == r->length && x->ranges[j].addr > r->addr &&
		    !arg_match(x, x->ranges[j].addr)) {
			uint64_t stride = x->ranges[j].addr - r->addr;
			while (j < x->n_ranges && x->ranges[j].length == r->length &&
			       x->ranges[j].addr == x->ranges[j - 1].addr + stride && !arg_match(x, x->ranges[j].addr))
				j++;
			t.strided = 1;
			t.count = j - i;
			t.stride = stride;
			t.chunk = r->length;
			t.length = 0;
		}
		if (push_term(k, &t))
			return -ENOMEM;
		o->n_terms++;
		i = j;
	}
	k->n_obs++;
	return 0;
}

/* ---- fitting ------------------------------------------------------------- */

static uint32_t n_features(uint32_t n_args)
{
	return 3 * n_args + 6;
}

/* Value of feature f of an observation; 0 when it does not exist. */
static uint64_t feature(const uint8_t *size, uint32_t n_args, const uint64_t *val, const uint32_t *dims, uint16_t f)
{
	if (f >= 3 * n_args)
		return dims[f - 3 * n_args];
	uint32_t a = f / 3, sub = f % 3;
	if (sub == 0)
		return val[a];
	if (size[a] != 8)
		return 0;
	return sub == 1 ? (val[a] & 0xffffffffull) : (val[a] >> 32);
}

/* product of the formula's features; *overflow set (and 0 returned) when it exceeds 64 bits */
static uint64_t product(const gmx_tpl_formula_t *f, const uint8_t *size, uint32_t n_args, const uint64_t *val,
			const uint32_t *dims, int *overflow)
{
	u128 p = 1;
	for (uint32_t i = 0; i < f->n_factors; i++) {
		p *= feature(size, n_args, val, dims, f->factor[i]);
		if (p > UINT64_MAX) {
			*overflow = 1;
			return 0;
		}
	}
	return (uint64_t)p;
}

static uint64_t gcd64(uint64_t a, uint64_t b)
{
	while (b) {
		uint64_t t = a % b;
		a = b;
		b = t;
	}
	return a;
}

typedef struct fit_ctx {
	const kern_t *k;
	const uint32_t *obs; /* observation indices taking part */
	const uint64_t *v;   /* the value to explain, per taking part */
	uint32_t n;
	uint16_t feat[3 * GMX_TPL_MAX_ARGS + 6];
	uint32_t n_feat;
} fit_ctx_t;

static int fits(const fit_ctx_t *c, gmx_tpl_formula_t *f)
{
	const kern_t *k = c->k;
	const obs_t *o0 = &k->obs[c->obs[0]];
	int overflow = 0; /* a product of 0, overflowed or not, explains nothing */
	uint64_t p0 = product(f, k->size, k->n_args, o0->val, o0->dims, &overflow);
	if (!p0)
		return 0;
	for (uint32_t i = 1; i < c->n; i++) {
		const obs_t *o = &k->obs[c->obs[i]];
		uint64_t p = product(f, k->size, k->n_args, o->val, o->dims, &overflow);
		if (!p || (u128)c->v[i] * p0 != (u128)c->v[0] * p)
			return 0;
	}
	uint64_t g = gcd64(c->v[0], p0);
	f->num = c->v[0] / g;
	f->den = p0 / g;
	return 1;
}

/* Finds value = c x (product of up to 3 features) over the taking-part
 * observations, fewest factors first. 0 or -1 (no fit). */
static int fit(const fit_ctx_t *c, gmx_tpl_formula_t *f)
{
	memset(f, 0, sizeof(*f));
	uint32_t i;
	for (i = 1; i < c->n && c->v[i] == c->v[0]; i++)
		;
	if (i == c->n) {
		f->num = c->v[0];
		f->den = 1;
		return 0;
	}
	uint32_t F = c->n_feat;
	for (uint32_t a = 0; a < F; a++) {
		*f = (gmx_tpl_formula_t){.n_factors = 1, .factor = {c->feat[a]}};
		if (fits(c, f))
			return 0;
	}
	for (uint32_t a = 0; a < F; a++)
		for (uint32_t b = a; b < F; b++) {
			*f = (gmx_tpl_formula_t){.n_factors = 2, .factor = {c->feat[a], c->feat[b]}};
			if (fits(c, f))
				return 0;
		}
	for (uint32_t a = 0; a < F; a++)
		for (uint32_t b = a; b < F; b++)
			for (uint32_t d = b; d < F; d++) {
				*f = (gmx_tpl_formula_t){.n_factors = 3,
							 .factor = {c->feat[a], c->feat[b], c->feat[d]}};
				if (fits(c, f))
					return 0;
			}
	return -1;
}

static uint64_t eval(const gmx_tpl_formula_t *f, const uint8_t *size, uint32_t n_args, const uint64_t *val,
		     const uint32_t *dims, int *bad)
{
	int overflow = 0;
	uint64_t p = product(f, size, n_args, val, dims, &overflow);
	if (overflow) {
		*bad = 1;
		return 0;
	}
	u128 v = ((u128)f->num * p + f->den - 1) / f->den; /* round up: never predict short */
	if (v > UINT64_MAX) {
		*bad = 1;
		return 0;
	}
	return (uint64_t)v;
}

/* Fits one term across observations. 0 or -1. */
static int fit_term(const kern_t *k, uint32_t ti, fit_ctx_t *c, uint32_t *idx, uint64_t *v, gmx_tpl_term_t *out)
{
	int strided = 0;
	for (uint32_t i = 0; i < k->n_obs; i++)
		strided |= k->terms[k->obs[i].first_term + ti].strided;
	out->strided = (uint8_t)strided;
	c->obs = idx;
	c->v = v;
	if (!strided) {
		c->n = 0;
		for (uint32_t i = 0; i < k->n_obs && c->n < TPL_FIT_MAX_OBS; i++) {
			idx[c->n] = i;
			v[c->n++] = k->terms[k->obs[i].first_term + ti].length;
		}
		return fit(c, &out->length);
	}
	/* Strided: fit count, stride, chunk on the strided launches, then check
	 * the contiguous ones are the same pattern with stride == chunk. */
	for (int what = 0; what < 3; what++) {
		c->n = 0;
		for (uint32_t i = 0; i < k->n_obs && c->n < TPL_FIT_MAX_OBS; i++) {
			const obs_term_t *t = &k->terms[k->obs[i].first_term + ti];
			if (!t->strided)
				continue;
			idx[c->n] = i;
			v[c->n++] = what == 0 ? t->count : what == 1 ? t->stride : t->chunk;
		}
		if (fit(c, what == 0 ? &out->count : what == 1 ? &out->stride : &out->chunk))
			return -1;
	}
	for (uint32_t i = 0; i < k->n_obs; i++) {
		const obs_term_t *t = &k->terms[k->obs[i].first_term + ti];
		if (t->strided)
			continue;
		const obs_t *o = &k->obs[i];
		int bad = 0;
		uint64_t n = eval(&out->count, k->size, k->n_args, o->val, o->dims, &bad);
		uint64_t s = eval(&out->stride, k->size, k->n_args, o->val, o->dims, &bad);
		uint64_t ch = eval(&out->chunk, k->size, k->n_args, o->val, o->dims, &bad);
		if (bad || s != ch || (u128)n * ch != t->length)
			return -1;
	}
	return 0;
}

static int fit_kernel(const kern_t *k, gmx_tpl_t *out, uint32_t *idx, uint64_t *v)
{
	if (k->broken || !k->n_obs)
		return -1;
	uint32_t nt = k->obs[0].n_terms;
	for (uint32_t i = 1; i < k->n_obs; i++)
		if (k->obs[i].n_terms != nt)
			return -1;
	memset(out, 0, sizeof(*out));
	out->n_args = k->n_args;
	memcpy(out->arg_size, k->size, sizeof(out->arg_size));
	out->n_terms = nt;
	uint64_t used = k->ptr_flags;
	for (uint32_t t = 0; t < nt; t++) {
		uint64_t cand = ~0ull;
		for (uint32_t i = 0; i < k->n_obs; i++)
			cand &= k->terms[k->obs[i].first_term + t].cand;
		if (!cand)
			return -1;
		out->term[t].ptr_arg = (uint16_t)__builtin_ctzll(cand);
		used |= 1ull << out->term[t].ptr_arg;
	}
	/* Integer features: not addresses, and not zero anywhere (a zero factor
	 * cannot explain a non-empty range). */
	fit_ctx_t c = {.k = k};
	for (uint32_t f = 0; f < n_features(k->n_args); f++) {
		if (f < 3 * k->n_args && ((used >> (f / 3)) & 1))
			continue;
		if (f < 3 * k->n_args && f % 3 && k->size[f / 3] != 8)
			continue;
		int ok = 1;
		for (uint32_t i = 0; i < k->n_obs && ok; i++)
			ok = feature(k->size, k->n_args, k->obs[i].val, k->obs[i].dims, f) != 0;
		if (ok)
			c.feat[c.n_feat++] = f;
	}
	out->kind = GMX_TPL_T1;
	for (uint32_t t = 0; t < nt; t++) {
		if (fit_term(k, t, &c, idx, v, &out->term[t]))
			return -1;
		if (out->term[t].strided)
			out->kind = GMX_TPL_T3;
		else if (out->term[t].length.n_factors && out->kind < GMX_TPL_T2)
			out->kind = GMX_TPL_T2;
	}
	return 0;
}

int gmx_tpl_learner_finish(gmx_tpl_learner_t *l, gmx_tpl_set_t *set)
{
	memset(set, 0, sizeof(*set));
	uint32_t *idx = malloc(TPL_FIT_MAX_OBS * sizeof(uint32_t));
	uint64_t *v = malloc(TPL_FIT_MAX_OBS * sizeof(uint64_t));
	if (!idx || !v) {
		free(idx);
		free(v);
		return -ENOMEM;
	}
	int rc = 0;
	for (uint32_t i = 0; i < l->n && !rc; i++) {
		gmx_tpl_t *t = gmx_tpl__set_add(set);
		if (!t) {
			rc = -ENOMEM;
			break;
		}
		if (fit_kernel(&l->k[i], t, idx, v))
			continue;
		t->name = strdup(l->k[i].name);
		if (!t->name)
			rc = -ENOMEM;
		else
			set->n++;
	}
	free(idx);
	free(v);
	if (rc) {
		gmx_tpl_set_free(set);
		return rc;
	}
	if (set->n)
		qsort(set->t, set->n, sizeof(*set->t), gmx_tpl__cmp_by_name);
	return 0;
}

void gmx_tpl_set_free(gmx_tpl_set_t *set)
{
	for (uint32_t i = 0; set->t && i < set->n; i++)
		free(set->t[i].name);
	free(set->t);
	memset(set, 0, sizeof(*set));
}

const gmx_tpl_t *gmx_tpl_find(const gmx_tpl_set_t *set, const char *name)
{
	uint32_t lo = 0, hi = set->n;
	while (lo < hi) {
		uint32_t mid = lo + (hi - lo) / 2;
		int c = strcmp(set->t[mid].name, name);
		if (!c)
			return &set->t[mid];
		if (c < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	return NULL;
}

/* ---- prediction ---------------------------------------------------------- */

static void emit(gmx_tpl_range_t *out, uint32_t cap, uint32_t *n, uint64_t addr, uint64_t len)
{
	if (!len)
		return;
	/* Rounding up must not wrap: a range that would reach past the top ends at the top page. */
	const uint64_t room = UINT64_MAX - (TPL_PAGE - 1);
	uint64_t lo = addr & ~(TPL_PAGE - 1);
	uint64_t hi = addr > room || len > room - addr ? room & ~(TPL_PAGE - 1)
						       : (addr + len + TPL_PAGE - 1) & ~(TPL_PAGE - 1);
	if (hi <= lo)
		return;
	/* Consecutive chunks sharing a page merge, so a narrow stride costs one range. */
	if (*n && *n <= cap) {
		gmx_tpl_range_t *last = &out[*n - 1];
		if (lo >= last->addr && lo <= last->addr + last->length) {
			if (hi > last->addr + last->length)
				last->length = hi - last->addr;
			return;
		}
	}
	if (*n < cap)
		out[*n] = (gmx_tpl_range_t){lo, hi - lo};
	(*n)++;
}

int gmx_tpl_predict(const gmx_tpl_t *t, const gmx_arg_t *args, uint32_t n_args, const uint32_t grid[3],
		    const uint32_t block[3], gmx_tpl_range_t *out, uint32_t cap, uint32_t *n)
{
	*n = 0;
	if (n_args != t->n_args)
		return -ENOENT;
	uint64_t val[GMX_TPL_MAX_ARGS];
	for (uint32_t j = 0; j < n_args; j++) {
		if (args[j].size != t->arg_size[j])
			return -ENOENT;
		val[j] = args[j].size == 4 ? (args[j].value & 0xffffffffull) : args[j].value;
	}
	uint32_t dims[6] = {grid[0], grid[1], grid[2], block[0], block[1], block[2]};
	int bad = 0;
	for (uint32_t i = 0; i < t->n_terms; i++) {
		const gmx_tpl_term_t *m = &t->term[i];
		uint64_t start = val[m->ptr_arg];
		if (!m->strided) {
			emit(out, cap, n, start, eval(&m->length, t->arg_size, n_args, val, dims, &bad));
			continue;
		}
		uint64_t cnt = eval(&m->count, t->arg_size, n_args, val, dims, &bad);
		uint64_t s = eval(&m->stride, t->arg_size, n_args, val, dims, &bad);
		uint64_t ch = eval(&m->chunk, t->arg_size, n_args, val, dims, &bad);
		if (s <= ch || cnt > GMX_TPL_MAX_CHUNKS) {
			/* Contiguous or overlapping, or too many chunks to list (a hostile or
			 * mistaken file must not stall a launch): the span that covers them. */
			if (cnt && s && cnt - 1 > (UINT64_MAX - ch) / s) {
				bad = 1;
				break;
			}
			emit(out, cap, n, start, cnt ? (cnt - 1) * s + ch : 0);
			continue;
		}
		for (uint64_t k = 0; k < cnt && !bad; k++)
			emit(out, cap, n, start + k * s, ch);
	}
	if (bad)
		return -ENOENT;
	return *n > cap ? -ENOSPC : 0;
}
