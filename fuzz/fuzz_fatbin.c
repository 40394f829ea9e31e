/* libFuzzer target for the fatbin/cubin/PTX parser (fatbin/), which reads the code a program
 * hands the driver, inside the program's own process: any input is refused with an error
 * message or parsed into a set whose every kernel has a name, is found by it, and whose
 * parameters lie within its parameter buffer. The input buffer is exactly `size` bytes, so a
 * read past it is an AddressSanitizer error. Each input is parsed twice: as an image of that
 * exact length (a file) and as one known only by its address with `size` readable bytes (what
 * the interposer has for cuModuleLoadData), whose extent comes from its own headers. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "gpumux/fatbin.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check(const uint8_t *data, size_t size, int within)
{
	gmx_fatbin_t *fb = NULL;
	char err[256] = "";
	int rc = within ? gmx_fatbin_parse_within(data, size, &fb, err, sizeof err)
			: gmx_fatbin_parse(data, size, &fb, err, sizeof err);
	if (rc != 0) {
		if (rc >= 0 || fb != NULL || err[0] == '\0')
			abort();
		return;
	}
	if (!fb || (within && gmx_fatbin_image_size(fb) > size))
		abort();
	for (size_t i = 0; i < gmx_fatbin_count(fb); i++) {
		const gmx_kernel_info_t *k = gmx_fatbin_kernel(fb, i);
		if (!k || !k->name || gmx_fatbin_find(fb, k->name) != k)
			abort();
		for (uint32_t j = 0; j < k->n_params; j++)
			if (k->params[j].size == 0 ||
			    k->params[j].offset + k->params[j].size > k->param_bytes)
				abort();
	}
	if (gmx_fatbin_kernel(fb, gmx_fatbin_count(fb)) != NULL)
		abort();
	gmx_fatbin_free(fb);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size == (size_t)-1)
		return 0; /* SIZE_MAX means "no length known" to gmx_fatbin_parse */
	check(data, size, 0);
	check(data, size, 1);
	return 0;
}
