/* gmx-fatbin-dump FILE...: each kernel of a fatbin, cubin or PTX file and its parameter
 * layout, one kernel per line: NAME PARAM_BYTES OFFSET:SIZE ... (sorted by name). */
#include "gpumux/fatbin.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int by_name(const void *a, const void *b)
{
	return strcmp((*(const gmx_kernel_info_t *const *)a)->name,
		      (*(const gmx_kernel_info_t *const *)b)->name);
}

static int dump(const char *path)
{
	FILE *f = fopen(path, "rb");
	if (!f) {
		perror(path);
		return 1;
	}
	size_t cap = 1 << 16, n = 0, r;
	unsigned char *buf = malloc(cap + 1);
	while (buf && (r = fread(buf + n, 1, cap - n, f)) > 0) {
		n += r;
		if (n == cap) {
			unsigned char *nb = realloc(buf, 2 * cap + 1);
			if (!nb) {
				free(buf);
				buf = NULL;
				break;
			}
			buf = nb;
			cap *= 2;
		}
	}
	int ioerr = ferror(f);
	fclose(f);
	if (!buf || ioerr) {
		fprintf(stderr, "%s: %s\n", path, buf ? "read error" : "out of memory");
		free(buf);
		return 1;
	}
	buf[n] = '\0';
	gmx_fatbin_t *fb;
	char err[256];
	if (gmx_fatbin_parse(buf, n, &fb, err, sizeof err) != 0) {
		fprintf(stderr, "%s: %s\n", path, err);
		free(buf);
		return 1;
	}
	size_t k = gmx_fatbin_count(fb);
	const gmx_kernel_info_t **v = calloc(k ? k : 1, sizeof(const gmx_kernel_info_t *));
	for (size_t i = 0; v && i < k; i++)
		v[i] = gmx_fatbin_kernel(fb, i);
	if (v)
		qsort((void *)v, k, sizeof(const gmx_kernel_info_t *), by_name);
	for (size_t i = 0; v && i < k; i++) {
		printf("%s %u", v[i]->name, v[i]->param_bytes);
		for (uint32_t j = 0; j < v[i]->n_params; j++)
			printf(" %u:%u", v[i]->params[j].offset, v[i]->params[j].size);
		printf("\n");
	}
	free(v);
	gmx_fatbin_free(fb);
	free(buf);
	return 0;
}

int main(int argc, char **argv)
{
	if (argc < 2) {
		fprintf(stderr, "usage: gmx-fatbin-dump FILE...\n");
		return 2;
	}
	int rc = 0;
	for (int i = 1; i < argc; i++)
		rc |= dump(argv[i]);
	return rc;
}
