/* Output files: a regular file or a missing path is replaced atomically (a new inode, the old
 * mode kept); a symbolic link, a FIFO and a character device are written through and stay
 * what they were; a directory and a link to nothing are refused with the reason. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "gpumux/outfile.h"

static char dir[64];

static int setup(void **state)
{
	(void)state;
	snprintf(dir, sizeof(dir), "/tmp/gmx-outfile-XXXXXX");
	return mkdtemp(dir) ? 0 : -1;
}

static int teardown(void **state)
{
	(void)state;
	char cmd[128];
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	return system(cmd) == 0 ? 0 : -1;
}

static void at(char *out, size_t len, const char *name)
{
	snprintf(out, len, "%s/%s", dir, name);
}

/* Writes text to path through gmx_outfile; returns the commit's result (err filled). */
static int write_text(const char *path, const char *text, char *err, size_t len)
{
	gmx_outfile_t o;
	int rc = gmx_outfile_open(&o, path, err, len);
	if (rc)
		return rc;
	fputs(text, o.f);
	return gmx_outfile_commit(&o, err, len);
}

static void expect_content(const char *path, const char *want)
{
	char got[256] = {0};
	FILE *f = fopen(path, "r");
	assert_non_null(f);
	size_t n = fread(got, 1, sizeof(got) - 1, f);
	fclose(f);
	got[n] = '\0';
	assert_string_equal(got, want);
}

/* No temporary is left beside anything in the directory. */
static void expect_no_temporary(void)
{
	char cmd[160];
	snprintf(cmd, sizeof(cmd), "ls -a '%s' | grep -q '\\.tmp\\.'", dir);
	assert_int_not_equal(system(cmd), 0);
}

static void missing_path_is_created(void **state)
{
	(void)state;
	char p[128], err[256];
	at(p, sizeof(p), "new");
	mode_t mask = umask(022);
	assert_int_equal(write_text(p, "one\n", err, sizeof(err)), 0);
	umask(mask);
	expect_content(p, "one\n");
	struct stat st;
	assert_int_equal(stat(p, &st), 0);
	assert_true(S_ISREG(st.st_mode));
	assert_int_equal(st.st_mode & 0777, 0644);
	expect_no_temporary();
}

static void regular_file_is_replaced_atomically(void **state)
{
	(void)state;
	char p[128], err[256];
	at(p, sizeof(p), "reg");
	assert_int_equal(write_text(p, "old\n", err, sizeof(err)), 0);
	assert_int_equal(chmod(p, 0640), 0);
	struct stat before, after;
	assert_int_equal(stat(p, &before), 0);
	/* A reader holding the old file keeps reading the old content. */
	FILE *old = fopen(p, "r");
	assert_non_null(old);
	int root = geteuid() == 0;
	if (root) /* as root, a replaced file keeps its owner */
		assert_int_equal(chown(p, 65534, 65534), 0);
	assert_int_equal(write_text(p, "new\n", err, sizeof(err)), 0);
	assert_int_equal(stat(p, &after), 0);
	assert_int_not_equal(before.st_ino, after.st_ino);
	assert_int_equal(after.st_mode & 07777, 0640);
	if (root)
		assert_true(after.st_uid == 65534 && after.st_gid == 65534);
	char got[16] = {0};
	assert_non_null(fgets(got, sizeof(got), old));
	fclose(old);
	assert_string_equal(got, "old\n");
	expect_content(p, "new\n");
	expect_no_temporary();
}

static void symlink_is_written_through(void **state)
{
	(void)state;
	char target[128], link[128], err[256];
	at(target, sizeof(target), "target");
	at(link, sizeof(link), "link");
	assert_int_equal(write_text(target, "keep\n", err, sizeof(err)), 0);
	assert_int_equal(symlink("target", link), 0);
	assert_int_equal(write_text(link, "through\n", err, sizeof(err)), 0);
	struct stat st;
	assert_int_equal(lstat(link, &st), 0);
	assert_true(S_ISLNK(st.st_mode));
	expect_content(target, "through\n");
	expect_no_temporary();
}

static void dangling_symlink_is_refused(void **state)
{
	(void)state;
	char link[128], err[256];
	at(link, sizeof(link), "dangling");
	assert_int_equal(symlink("nowhere", link), 0);
	assert_int_equal(write_text(link, "x\n", err, sizeof(err)), -ENOENT);
	assert_non_null(strstr(err, "symbolic link to nothing"));
	struct stat st;
	assert_int_equal(lstat(link, &st), 0);
	assert_true(S_ISLNK(st.st_mode));
	char nowhere[128];
	at(nowhere, sizeof(nowhere), "nowhere");
	assert_int_not_equal(access(nowhere, F_OK), 0);
}

static void fifo_is_written_through(void **state)
{
	(void)state;
	char p[128], out[128], err[256];
	at(p, sizeof(p), "fifo");
	at(out, sizeof(out), "fifo.out");
	assert_int_equal(mkfifo(p, 0600), 0);
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		FILE *in = fopen(p, "r"), *o = fopen(out, "w");
		int c;
		while (in && o && (c = fgetc(in)) != EOF)
			fputc(c, o);
		_exit(in && o && fclose(o) == 0 ? 0 : 1);
	}
	assert_int_equal(write_text(p, "piped\n", err, sizeof(err)), 0);
	int status;
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	struct stat st;
	assert_int_equal(lstat(p, &st), 0);
	assert_true(S_ISFIFO(st.st_mode));
	expect_content(out, "piped\n");
	expect_no_temporary();
}

static void character_device_is_written_through(void **state)
{
	(void)state;
	char err[256];
	struct stat st;
	assert_int_equal(write_text("/dev/null", "gone\n", err, sizeof(err)), 0);
	assert_int_equal(lstat("/dev/null", &st), 0);
	assert_true(S_ISCHR(st.st_mode));
	/* A device that refuses the data: the error is reported, the device stays. */
	if (access("/dev/full", W_OK) == 0) {
		assert_int_equal(write_text("/dev/full", "x\n", err, sizeof(err)), -ENOSPC);
		assert_non_null(strstr(err, "/dev/full: write failed"));
		assert_int_equal(lstat("/dev/full", &st), 0);
		assert_true(S_ISCHR(st.st_mode));
	}
}

static void directory_is_refused(void **state)
{
	(void)state;
	char p[128], err[256];
	at(p, sizeof(p), "sub");
	assert_int_equal(mkdir(p, 0700), 0);
	assert_int_equal(write_text(p, "x\n", err, sizeof(err)), -EISDIR);
	assert_non_null(strstr(err, "is a directory"));
	struct stat st;
	assert_int_equal(lstat(p, &st), 0);
	assert_true(S_ISDIR(st.st_mode));
	expect_no_temporary();
}

static void abort_leaves_the_old_file(void **state)
{
	(void)state;
	char p[128], err[256];
	at(p, sizeof(p), "aborted");
	assert_int_equal(write_text(p, "old\n", err, sizeof(err)), 0);
	gmx_outfile_t o;
	assert_int_equal(gmx_outfile_open(&o, p, err, sizeof(err)), 0);
	fputs("half", o.f);
	gmx_outfile_abort(&o);
	expect_content(p, "old\n");
	expect_no_temporary();
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(missing_path_is_created),
		cmocka_unit_test(regular_file_is_replaced_atomically),
		cmocka_unit_test(symlink_is_written_through),
		cmocka_unit_test(dangling_symlink_is_refused),
		cmocka_unit_test(fifo_is_written_through),
		cmocka_unit_test(character_device_is_written_through),
		cmocka_unit_test(directory_is_refused),
		cmocka_unit_test(abort_leaves_the_old_file),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
