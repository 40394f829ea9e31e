/* libFuzzer target for the native workload reader (workload/workload_read.c), which reads the
 * .gmxw files scenarios and `gpumux profile templates` name: any input is refused with one
 * error line or read, and a workload read writes back to text that reads back and writes the
 * same text again (the writer may refuse what it could not read back unchanged). */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpumux/workload_io.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* The text w writes, or NULL when the writer refuses it. */
static char *written(const gmx_workload_t *w, size_t *len)
{
	char *text = NULL;
	FILE *out = open_memstream(&text, len);
	if (!out)
		return NULL;
	int rc = gmx_workload_write_stream(w, out);
	fclose(out);
	if (rc != 0) {
		free(text);
		return NULL;
	}
	return text;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size == 0)
		return 0;
	FILE *in = fmemopen((void *)data, size, "r");
	if (!in)
		return 0;
	gmx_workload_t w, back;
	char err[512];
	int rc = gmx_workload_read_stream(in, "fuzz", &w, err, sizeof(err));
	fclose(in);
	if (rc != 0) {
		if (!err[0] || strchr(err, '\n'))
			abort(); /* a refusal says why, on one line */
		return 0;
	}
	size_t n1 = 0, n2 = 0;
	char *once = written(&w, &n1);
	if (once) {
		FILE *again = fmemopen(once, n1, "r");
		if (!again || gmx_workload_read_stream(again, "fuzz-written", &back, err, sizeof(err)) != 0)
			abort(); /* what we write, we must read */
		fclose(again);
		char *twice = written(&back, &n2);
		if (!twice || n1 != n2 || memcmp(once, twice, n1) != 0)
			abort();
		free(twice);
		gmx_workload_free(&back);
	}
	free(once);
	gmx_workload_free(&w);
	return 0;
}
