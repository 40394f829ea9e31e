/* Strict decimal numbers (include/gpumux/numparse.h). */
#include "gpumux/numparse.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>

static int is_digit(char c)
{
	return c >= '0' && c <= '9';
}

/* Length of the run of digits at s. */
static size_t digits(const char *s)
{
	size_t n = 0;
	while (is_digit(s[n]))
		n++;
	return n;
}

int gmx_parse_real(const char *s, double lo, double hi, double *out)
{
	if (!s)
		return -EINVAL;
	const char *p = s;
	if (*p == '-')
		p++;
	size_t whole = digits(p);
	p += whole;
	size_t frac = 0;
	if (*p == '.') {
		p++;
		frac = digits(p);
		p += frac;
	}
	if (!whole && !frac)
		return -EINVAL;
	if (*p == 'e' || *p == 'E') {
		p++;
		if (*p == '+' || *p == '-')
			p++;
		size_t ex = digits(p);
		if (!ex)
			return -EINVAL;
		p += ex;
	}
	if (*p)
		return -EINVAL;
	/* The syntax is checked: strtod now reads exactly that (the C locale's '.'). */
	char *end;
	errno = 0;
	double d = strtod(s, &end);
	if (end != p || !isfinite(d))
		return -ERANGE;
	if (!(d >= lo && d <= hi))
		return -ERANGE;
	*out = d;
	return 0;
}

int gmx_parse_uint(const char *s, uint64_t lo, uint64_t hi, uint64_t *out)
{
	if (!s || !is_digit(*s))
		return -EINVAL;
	uint64_t v = 0;
	for (const char *p = s; *p; p++) {
		if (!is_digit(*p))
			return -EINVAL;
		unsigned d = (unsigned)(*p - '0');
		if (v > (UINT64_MAX - d) / 10)
			return -ERANGE;
		v = v * 10 + d;
	}
	if (v < lo || v > hi)
		return -ERANGE;
	*out = v;
	return 0;
}
