/* The working-set templates file: file I/O around core's gmx_tpl_format/parse. */
#include "tpl_file.h"

#include "gpumux/outfile.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define TPL_FILE_MAX (64L << 20) /* larger is not a templates file */

int gmx_templates_write(const char *path, const gmx_tpl_set_t *set, char *err, size_t err_len)
{
	char *text = NULL;
	if (gmx_tpl_format(set, &text)) {
		snprintf(err, err_len, "%s: out of memory", path);
		return -ENOMEM;
	}
	gmx_outfile_t o;
	int rc = gmx_outfile_open(&o, path, err, err_len);
	if (!rc) {
		fputs(text, o.f);
		rc = gmx_outfile_commit(&o, err, err_len);
	}
	free(text);
	return rc;
}

int gmx_templates_read(const char *path, gmx_tpl_set_t *set, char *err, size_t err_len)
{
	FILE *f = fopen(path, "rb");
	if (!f) {
		int rc = -errno;
		snprintf(err, err_len, "%s: %s", path, strerror(errno));
		return rc;
	}
	long size = -1;
	if (fseek(f, 0, SEEK_END) == 0)
		size = ftell(f);
	if (size < 0 || size > TPL_FILE_MAX || fseek(f, 0, SEEK_SET) != 0) {
		fclose(f);
		snprintf(err, err_len, "%s: not a templates file (unreadable size or over %ld MB)", path,
			 TPL_FILE_MAX >> 20);
		return -EINVAL;
	}
	char *text = malloc((size_t)size + 1);
	if (!text) {
		fclose(f);
		snprintf(err, err_len, "%s: out of memory", path);
		return -ENOMEM;
	}
	size_t got = fread(text, 1, (size_t)size, f);
	int bad = ferror(f);
	fclose(f);
	if (bad || got != (size_t)size) {
		free(text);
		snprintf(err, err_len, "%s: read failed", path);
		return -EIO;
	}
	text[got] = '\0';
	if (memchr(text, '\0', got)) {
		free(text);
		snprintf(err, err_len, "%s: not a templates file (binary data)", path);
		return -EINVAL;
	}
	char why[512];
	int rc = gmx_tpl_parse(text, set, why, sizeof(why));
	free(text);
	if (rc == -ENOMEM)
		snprintf(err, err_len, "%s: out of memory", path);
	else if (rc)
		snprintf(err, err_len, "%s: %s", path, why);
	return rc;
}

int gmx_templates_check(const char *path, char *err, size_t err_len)
{
	gmx_tpl_set_t set = {0};
	int rc = gmx_templates_read(path, &set, err, err_len);
	gmx_tpl_set_free(&set);
	return rc;
}
