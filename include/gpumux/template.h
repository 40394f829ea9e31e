/* Working-set templates: a kernel's touched memory predicted from its launch
 * arguments alone.
 *
 * Learned from observed launches (arguments, launch dimensions, and the
 * address ranges the launch touched, in access order). Each touched range
 * becomes a *term* that starts at one of the launch's 64-bit arguments (a
 * pointer, or a word of a struct passed by value); its extent is
 *   T1  fixed: the same length at every launch,
 *   T2  linear: length = c x a product of up to three integer features, or
 *   T3  strided: count chunks of `chunk` bytes, `stride` bytes apart, each of
 *       the three constant or linear in a product of features.
 * Features are the integer arguments (8-byte ones also split into their two
 * 32-bit words, as struct members would be) and the grid and block sizes.
 * A kernel whose launches do not fit one template is left uncovered: its
 * launches fall back to demand paging.
 *
 * Pure C: no I/O. The profile text format (gmx_tpl_format / gmx_tpl_parse) is
 * documented in docs/msched.md; reading and writing files is the caller's.
 */
#ifndef GPUMUX_TEMPLATE_H
#define GPUMUX_TEMPLATE_H

#include <stddef.h>
#include <stdint.h>

#include "gpumux/workload.h"

#define GMX_TPL_MAX_ARGS 64    /* arguments a template can refer to */
#define GMX_TPL_MAX_TERMS 64   /* touched ranges per launch a template describes */
#define GMX_TPL_MAX_FACTORS 3  /* features in one product */
#define GMX_TPL_MAX_CHUNKS 65536 /* a strided term with more chunks is predicted as one span */

typedef enum gmx_tpl_kind {
	GMX_TPL_OTHER = 0, /* no template: demand paging */
	GMX_TPL_T1 = 1,
	GMX_TPL_T2 = 2,
	GMX_TPL_T3 = 3,
} gmx_tpl_kind_t;

/* A touched (or predicted) address range. */
typedef struct gmx_tpl_range {
	uint64_t addr, length;
} gmx_tpl_range_t;

/* One observed launch, as a profiler records it. */
typedef struct gmx_tpl_launch {
	const char *name;           /* kernel identity (mangled or demangled name) */
	const gmx_arg_t *args;
	uint32_t n_args;
	uint32_t grid[3], block[3];
	const gmx_tpl_range_t *ranges; /* touched, in access order */
	uint32_t n_ranges;
} gmx_tpl_launch_t;

/* value = num / den x product of features (an empty product is 1). */
typedef struct gmx_tpl_formula {
	uint64_t num, den;
	uint8_t n_factors;
	uint16_t factor[GMX_TPL_MAX_FACTORS]; /* feature ids, see gmx_tpl_feature_name */
} gmx_tpl_formula_t;

typedef struct gmx_tpl_term {
	uint16_t ptr_arg;  /* the argument holding the start address */
	uint8_t strided;   /* 0: one range of `length`; 1: count x chunk, stride apart */
	gmx_tpl_formula_t length, count, stride, chunk;
} gmx_tpl_term_t;

/* The template of one kernel. */
typedef struct gmx_tpl {
	char *name;
	uint32_t n_args;
	uint8_t arg_size[GMX_TPL_MAX_ARGS];
	uint8_t kind;      /* gmx_tpl_kind_t of the whole kernel: T3 > T2 > T1 */
	uint32_t n_terms;
	gmx_tpl_term_t term[GMX_TPL_MAX_TERMS];
} gmx_tpl_t;

/* Templates of many kernels, sorted by name. */
typedef struct gmx_tpl_set {
	gmx_tpl_t *t;
	uint32_t n, cap;
} gmx_tpl_set_t;

typedef struct gmx_tpl_learner gmx_tpl_learner_t;

/* Creates an empty learner. 0 or -ENOMEM. */
int gmx_tpl_learner_create(gmx_tpl_learner_t **out);

/* Frees a learner. */
void gmx_tpl_learner_destroy(gmx_tpl_learner_t *l);

/* Records one launch. 0, -EINVAL (too many args) or -ENOMEM. */
int gmx_tpl_learn(gmx_tpl_learner_t *l, const gmx_tpl_launch_t *launch);

/* Fits a template to every kernel seen; kernels that fit none are left out of
 * *set (their launches fall back to demand paging). 0 or -ENOMEM. */
int gmx_tpl_learner_finish(gmx_tpl_learner_t *l, gmx_tpl_set_t *set);

/* Frees a set's templates (the struct itself is the caller's). */
void gmx_tpl_set_free(gmx_tpl_set_t *set);

/* The template of kernel `name`, or NULL. O(log n). */
const gmx_tpl_t *gmx_tpl_find(const gmx_tpl_set_t *set, const char *name);

/* Predicts the ranges a launch touches, page-aligned (4 KB), in the
 * template's term order (a strided term of more than GMX_TPL_MAX_CHUNKS
 * chunks as the one span that covers them). Writes up to cap ranges and the
 * number needed into *n. An extent of 0 (a size argument of 0) predicts nothing for its
 * term. 0; -ENOENT when the arguments do not match the template's layout or an extent
 * overflows 64 bits; -ENOSPC when cap is too small (*n says how many are needed). */
int gmx_tpl_predict(const gmx_tpl_t *t, const gmx_arg_t *args, uint32_t n_args, const uint32_t grid[3],
		    const uint32_t block[3], gmx_tpl_range_t *out, uint32_t cap, uint32_t *n);

/* Writes the name of feature `f` of a template with n_args arguments
 * ("a3", "a3.lo", "a3.hi", "gx" ... "bz") into buf. */
void gmx_tpl_feature_name(uint32_t n_args, uint16_t f, char *buf, size_t len);

/* Serialises a set as profile text (docs/msched.md) into a malloc'd string.
 * 0 or -ENOMEM. */
int gmx_tpl_format(const gmx_tpl_set_t *set, char **text);

/* Parses profile text into *set (emptied first). 0, or -EINVAL with
 * "line N: what was expected" in err, or -ENOMEM. */
int gmx_tpl_parse(const char *text, gmx_tpl_set_t *set, char *err, size_t err_len);

#endif
