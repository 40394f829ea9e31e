/* Strict parsing of numbers given by people (command-line options, scenario and config
 * files): plain decimal only. No hexadecimal, no "inf"/"nan", no blanks, no trailing
 * characters; an integer has no sign, fraction or exponent. Every front end parses its
 * numbers here, so `--seed 1.5` and `duration_s = 0x10` are refused the same everywhere. */
#ifndef GPUMUX_NUMPARSE_H
#define GPUMUX_NUMPARSE_H

#include <stdint.h>

/* Parses s as a decimal real ([-]digits[.digits][e[+-]digits]) in [lo, hi] into *out.
 * 0, -EINVAL (not such a number) or -ERANGE (outside [lo, hi]); *out unchanged on error. */
int gmx_parse_real(const char *s, double lo, double hi, double *out);

/* Parses s as a decimal unsigned integer (digits only) in [lo, hi] into *out.
 * 0, -EINVAL (not such a number) or -ERANGE (outside [lo, hi] or past 2^64); *out
 * unchanged on error. */
int gmx_parse_uint(const char *s, uint64_t lo, uint64_t hi, uint64_t *out);

#endif
