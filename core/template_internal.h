/* What the template learner (template.c) and the profile text format
 * (template_text.c) share. Not a public interface. */
#ifndef GMX_CORE_TEMPLATE_INTERNAL_H
#define GMX_CORE_TEMPLATE_INTERNAL_H

#include <stdlib.h>
#include <string.h>

#include "gpumux/template.h"

/* A new, uninitialised slot at the end of set (set->n is not advanced); NULL
 * when out of memory. */
static inline gmx_tpl_t *gmx_tpl__set_add(gmx_tpl_set_t *set)
{
	if (set->n == set->cap) {
		uint32_t ncap = set->cap ? 2 * set->cap : 16;
		gmx_tpl_t *p = realloc(set->t, ncap * sizeof(*p));
		if (!p)
			return NULL;
		set->t = p;
		set->cap = ncap;
	}
	return &set->t[set->n];
}

/* qsort order of templates: by kernel name. */
static inline int gmx_tpl__cmp_by_name(const void *a, const void *b)
{
	return strcmp(((const gmx_tpl_t *)a)->name, ((const gmx_tpl_t *)b)->name);
}

#endif
