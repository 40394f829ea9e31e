/* libFuzzer target for the working-set templates parser (core/template.c), which reads files a
 * user hands to `gpumux run --templates`: any input is refused with an error or parsed, and a
 * parsed set formats to text that parses back to the same text. Predictions from a parsed set
 * on arguments of its layout succeed, or say an extent overflowed. */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "gpumux/template.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *text = malloc(size + 1);
	if (!text)
		return 0;
	memcpy(text, data, size);
	text[size] = '\0';
	gmx_tpl_set_t set, back;
	char err[256];
	if (gmx_tpl_parse(text, &set, err, sizeof(err)) == 0) {
		char *once = NULL, *twice = NULL;
		if (gmx_tpl_format(&set, &once) == 0) {
			if (gmx_tpl_parse(once, &back, err, sizeof(err)) != 0)
				abort(); /* what we write, we must read */
			if (gmx_tpl_format(&back, &twice) == 0 && strcmp(once, twice) != 0)
				abort();
			gmx_tpl_set_free(&back);
		}
		free(once);
		free(twice);
		for (uint32_t i = 0; i < set.n; i++) {
			const gmx_tpl_t *t = &set.t[i];
			gmx_arg_t args[GMX_TPL_MAX_ARGS];
			for (uint32_t a = 0; a < t->n_args; a++)
				args[a] = (gmx_arg_t){.value = 0x100000ull * (a + 1) + a, .size = t->arg_size[a]};
			uint32_t grid[3] = {7, 3, 1}, block[3] = {128, 2, 1}, n = 0;
			gmx_tpl_range_t out[64];
			int rc = gmx_tpl_predict(t, args, t->n_args, grid, block, out, 64, &n);
			if (rc != 0 && rc != -ENOSPC && rc != -ENOENT)
				abort();
			if (rc == 0)
				for (uint32_t k = 0; k < n; k++)
					if (out[k].addr + out[k].length < out[k].addr || out[k].length == 0)
						abort(); /* a wrapped or empty range */
		}
		gmx_tpl_set_free(&set);
	}
	free(text);
	return 0;
}
