/* gpumux profile: record kernel profiles from a scenario, learn working-set templates from a
 * workload, and print either file. */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "commands.h"
#include "progress.h"
#include "gpumux/numparse.h"
#include "gpumux/template.h"
#include "gpumux/workload_io.h"
#include "msched.h"
#include "profile.h"
#include "scenario.h"
#include "tpl_file.h"

static void usage(FILE *out)
{
	fprintf(out, "usage: gpumux profile record SCENARIO.ini -o FILE [--duration S] [--seed N]\n"
		     "       gpumux profile templates WORKLOAD.gmxw [WORKLOAD.gmxw ...] -o FILE\n"
		     "       gpumux profile show FILE [--all]\n"
		     "\n"
		     "record  runs each task of the scenario alone on the simulated GPU while the fikit\n"
		     "        policy measures every kernel ID's duration and the idle gap after it, and\n"
		     "        writes the profiles (one per task, keyed by task name) to FILE.\n"
		     "        `gpumux sim SCENARIO --sched fikit --profile FILE` then uses them.\n"
		     "templates  learns working-set templates from workloads' launches and the regions\n"
		     "        each touched, and writes them to FILE for `gpumux run --templates`.\n"
		     "        Give runs at two or more input sizes so that extents that grow with a\n"
		     "        size argument are learned as such (one size can only give fixed extents).\n"
		     "        Kernels that fit no template are left out (their launches migrate whole\n"
		     "        allocations).\n"
		     "show    prints a profile file: per task, each kernel ID with its observations,\n"
		     "        duration p50/p99 and gap p50/p99; --all also lists the per-context entries.\n"
		     "        Given a templates file, prints each kernel's template.\n"
		     "\n"
		     "-o FILE: a regular file is replaced atomically, a FIFO or character device written\n"
		     "through, a symbolic link written through to its file; a directory is refused.\n"
		     "A file that is not valid is refused with FILE:LINE: and the reason. The formats\n"
		     "are in docs/fikit.md (profiles) and docs/msched.md (templates). See\n"
		     "gpumux-profile(1).\n");
}

static int record(int argc, char **argv)
{
	static const struct option longopts[] = {
		{"output", required_argument, 0, 'o'}, {"duration", required_argument, 0, 'd'},
		{"seed", required_argument, 0, 'S'},   {"help", no_argument, 0, 'h'},
		{0, 0, 0, 0},
	};
	const char *outp = NULL;
	double duration = -1;
	uint64_t seed = 0;
	int c, have_seed = 0;
	optind = 1;
	opterr = 0;
	while ((c = getopt_long(argc, argv, "o:h", longopts, NULL)) != -1) {
		switch (c) {
		case 'o': outp = optarg; break;
		case 'd':
			if (gmx_parse_real(optarg, 1e-6, 86400, &duration)) {
				fprintf(stderr, "gpumux profile record: --duration '%s': expected seconds in (0, 86400]\n",
					optarg);
				return 2;
			}
			break;
		case 'S':
			if (gmx_parse_uint(optarg, 0, UINT64_MAX, &seed)) {
				fprintf(stderr, "gpumux profile record: --seed '%s': expected a non-negative decimal integer\n",
					optarg);
				return 2;
			}
			have_seed = 1;
			break;
		case 'h': usage(stdout); return 0;
		default:
			fprintf(stderr, "gpumux profile record: unknown or incomplete option '%s' (try --help)\n",
				argv[optind - 1]);
			return 2;
		}
	}
	if (optind != argc - 1 || !outp) {
		fprintf(stderr, "gpumux profile record: expected one scenario and -o FILE (try --help)\n");
		return 2;
	}
	gmx_scenario_t sc;
	char err[1024];
	if (gmx_scenario_load(argv[optind], &sc, err, sizeof(err))) {
		fprintf(stderr, "gpumux profile record: %s\n", err);
		return 1;
	}
	if (duration > 0)
		sc.duration_ns = (int64_t)llround(duration * 1e9);
	if (have_seed)
		sc.seed = seed;
	gmx_sim_config_t cfg = {
		.device = sc.device,
		.capacity_bytes = sc.capacity_bytes,
		.mem = GMX_MEM_INMEM,
		.policy = gmx_sched_find("fikit"),
		.sched = sc.params,
		.duration_ns = sc.duration_ns,
		.seed = sc.seed,
		.tasks = sc.tasks,
		.n_tasks = sc.n_tasks,
	};
	gmx_progress_t prog = {0};
	gmx_progress_start(&prog, "%s: measuring each task alone", sc.name);
	cfg.progress = gmx_progress_tick;
	cfg.progress_ctx = &prog;
	gmx_kprof_t *p = calloc(sc.n_tasks ? sc.n_tasks : 1, sizeof(*p));
	int rc = p ? gmx_profile_measure(&cfg, p, err, sizeof(err)) : -ENOMEM;
	int measured = rc == 0; /* p holds profiles to free, whether or not writing them works */
	gmx_progress_end(&prog);
	if (!rc)
		rc = gmx_profile_write(outp, p, sc.n_tasks, err, sizeof(err));
	if (rc)
		fprintf(stderr, "gpumux profile record: %s\n", rc == -ENOMEM && !p ? "out of memory" : err);
	else
		for (uint32_t i = 0; i < sc.n_tasks; i++)
			printf("%s: %u entries from %" PRIu64 " units\n", p[i].task, p[i].n, p[i].units);
	if (measured)
		gmx_profile_free(p, sc.n_tasks);
	else
		free(p);
	gmx_scenario_free(&sc);
	return rc ? 1 : 0;
}

static const char *kind_name(uint8_t k)
{
	return k == GMX_TPL_T3 ? "T3" : k == GMX_TPL_T2 ? "T2" : k == GMX_TPL_T1 ? "T1" : "other";
}

#define TEMPLATES_MAX_INPUTS 16

static int templates(int argc, char **argv)
{
	const char *in[TEMPLATES_MAX_INPUTS], *outp = NULL;
	uint32_t n_in = 0;
	for (int i = 1; i < argc; i++) {
		if ((!strcmp(argv[i], "-o") || !strcmp(argv[i], "--output")) && i + 1 < argc)
			outp = argv[++i];
		else if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
			usage(stdout);
			return 0;
		} else if (argv[i][0] == '-') {
			fprintf(stderr, "gpumux profile templates: unexpected '%s' (try --help)\n", argv[i]);
			return 2;
		} else if (n_in == TEMPLATES_MAX_INPUTS) {
			fprintf(stderr, "gpumux profile templates: at most %d workloads\n", TEMPLATES_MAX_INPUTS);
			return 2;
		} else
			in[n_in++] = argv[i];
	}
	if (!n_in || !outp) {
		fprintf(stderr, "gpumux profile templates: expected workloads and -o FILE (try --help)\n");
		return 2;
	}
	gmx_workload_t w[TEMPLATES_MAX_INPUTS];
	const gmx_workload_t *wp[TEMPLATES_MAX_INPUTS];
	char err[1024];
	uint32_t loaded = 0, launches = 0;
	int rc = 0;
	for (; loaded < n_in; loaded++) {
		if (gmx_workload_read(in[loaded], &w[loaded], err, sizeof(err))) {
			fprintf(stderr, "gpumux profile templates: %s\n", err);
			rc = 1;
			break;
		}
		wp[loaded] = &w[loaded];
		for (uint32_t i = 0; i < w[loaded].n_ops; i++)
			launches += w[loaded].ops[i].kind == GMX_OP_KERNEL;
	}
	gmx_tpl_set_t set = {0};
	if (!rc && gmx_msched_learn_many(wp, n_in, &set)) {
		fprintf(stderr, "gpumux profile templates: out of memory\n");
		rc = 1;
	}
	if (!rc && gmx_templates_write(outp, &set, err, sizeof(err))) {
		fprintf(stderr, "gpumux profile templates: %s\n", err);
		rc = 1;
	}
	if (!rc) {
		uint32_t by_kind[4] = {0};
		for (uint32_t i = 0; i < set.n; i++)
			by_kind[set.t[i].kind & 3]++;
		printf("%u workload%s, %u launches; %u templates (T1 %u, T2 %u, T3 %u) written to %s\n", n_in,
		       n_in == 1 ? "" : "s", launches, set.n, by_kind[1], by_kind[2], by_kind[3], outp);
	}
	gmx_tpl_set_free(&set);
	for (uint32_t i = 0; i < loaded; i++)
		gmx_workload_free(&w[i]);
	return rc;
}

/* Prints a templates file: one line per kernel, one per term. */
static int show_templates(const char *file)
{
	gmx_tpl_set_t set = {0};
	char err[1024];
	if (gmx_templates_read(file, &set, err, sizeof(err))) {
		fprintf(stderr, "gpumux profile show: %s\n", err);
		gmx_tpl_set_free(&set);
		return 1;
	}
	printf("working-set templates: %u kernels\n", set.n);
	for (uint32_t i = 0; i < set.n; i++) {
		const gmx_tpl_t *t = &set.t[i];
		printf("  %-5s %u args, %u terms  %.80s\n", kind_name(t->kind), t->n_args, t->n_terms, t->name);
	}
	gmx_tpl_set_free(&set);
	return 0;
}

static void us(char *buf, size_t len, int64_t ns)
{
	if (ns >= 10000000)
		snprintf(buf, len, "%.1fms", ns / 1e6);
	else
		snprintf(buf, len, "%.1fus", ns / 1e3);
}

static int show(int argc, char **argv)
{
	int all = 0;
	const char *file = NULL;
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--all"))
			all = 1;
		else if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
			usage(stdout);
			return 0;
		} else if (argv[i][0] == '-' || file) {
			fprintf(stderr, "gpumux profile show: unexpected '%s' (try --help)\n", argv[i]);
			return 2;
		} else
			file = argv[i];
	}
	if (!file) {
		fprintf(stderr, "gpumux profile show: expected a profile file (try --help)\n");
		return 2;
	}
	FILE *peek = fopen(file, "r");
	char head[32] = "";
	if (peek) {
		if (!fgets(head, sizeof(head), peek))
			head[0] = '\0';
		fclose(peek);
	}
	if (!strncmp(head, "gpumux-templates", 16))
		return show_templates(file);
	gmx_kprof_t *p;
	uint32_t n;
	char err[1024];
	if (gmx_profile_read(file, &p, &n, err, sizeof(err))) {
		fprintf(stderr, "gpumux profile show: %s\n", err);
		return 1;
	}
	for (uint32_t t = 0; t < n; t++) {
		uint32_t ctx = 0;
		for (uint32_t i = 0; i < p[t].n; i++)
			ctx += p[t].e[i].prev != 0;
		printf("task %s: %u kernel IDs, %u per-context entries, measured over %" PRIu64 " units\n", p[t].task,
		       p[t].n - ctx, ctx, p[t].units);
		printf("  %-16s %-16s %8s %10s %10s %10s %10s  %s\n", "kernel", "after", "n", "dur p50", "dur p99",
		       "gap p50", "gap p99", "name");
		for (uint32_t i = 0; i < p[t].n; i++) {
			const gmx_kprof_entry_t *e = &p[t].e[i];
			if (e->prev && !all)
				continue;
			char d50[32], d99[32], g50[32], g99[32], prev[20];
			us(d50, sizeof(d50), gmx_kdist_quantile(&e->dur, 0.5));
			us(d99, sizeof(d99), gmx_kdist_quantile(&e->dur, 0.99));
			us(g50, sizeof(g50), gmx_kdist_quantile(&e->gap, 0.5));
			us(g99, sizeof(g99), gmx_kdist_quantile(&e->gap, 0.99));
			if (e->prev)
				snprintf(prev, sizeof(prev), "%016" PRIx64, e->prev);
			else
				snprintf(prev, sizeof(prev), "%s", "any");
			const gmx_kprof_entry_t *b = e->prev ? gmx_kprof_find(&p[t], e->id, 0) : e;
			const char *name = b && b->name ? b->name : "";
			printf("  %016" PRIx64 " %-16s %8" PRIu64 " %10s %10s %10s %10s  %.60s\n", e->id, prev, e->n, d50,
			       d99, g50, g99, name);
		}
		if (t + 1 < n)
			printf("\n");
	}
	gmx_profile_free(p, n);
	return 0;
}

int gmx_cmd_profile(int argc, char **argv)
{
	if (argc < 2) {
		usage(stderr);
		return 2;
	}
	if (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help")) {
		usage(stdout);
		return 0;
	}
	if (!strcmp(argv[1], "record"))
		return record(argc - 1, argv + 1);
	if (!strcmp(argv[1], "show"))
		return show(argc - 1, argv + 1);
	if (!strcmp(argv[1], "templates"))
		return templates(argc - 1, argv + 1);
	fprintf(stderr, "gpumux profile: unknown subcommand '%s' (expected record, templates or show)\n",
		argv[1]);
	return 2;
}
