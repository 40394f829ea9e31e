/* gpumux: the command-line front end. Dispatches to one subcommand per file. */
#include <stdio.h>
#include <string.h>

#include "commands.h"

#ifndef GMX_VERSION
#define GMX_VERSION "unknown"
#endif

struct command {
	const char *name;
	int (*run)(int argc, char **argv);
	const char *summary;
};

static const struct command commands[] = {
	{"sim", gmx_cmd_sim, "run a scenario on the simulated GPU and report its metrics"},
	{"gen", gmx_cmd_gen, "write a generated workload (llm-decode, rodinia, reef, ...) to a file"},
	{"trace", gmx_cmd_trace, "import real GPU traces and print their statistics"},
	{"profile", gmx_cmd_profile, "kernel profiles (fikit) and working-set templates (msched): learn, print"},
	{"bench", gmx_cmd_bench, "benchmarks: calibration, msched, fikit, trace replay, speed"},
	{"run", gmx_cmd_run, "run a program under gpumuxd (priority, name, oversubscription)"},
	{"status", gmx_cmd_status, "show gpumuxd's clients, queues, memory and latency"},
	{"metrics", gmx_cmd_metrics, "print gpumuxd's Prometheus metrics (the text its HTTP endpoint serves)"},
	{"cdi", gmx_cmd_cdi, "write a CDI spec that puts containers' CUDA programs under gpumuxd"},
};

static void usage(FILE *out)
{
	fprintf(out, "usage: gpumux COMMAND [ARGS...]\n\ncommands:\n");
	for (size_t i = 0; i < sizeof(commands) / sizeof(commands[0]); i++)
		fprintf(out, "  %-8s %s\n", commands[i].name, commands[i].summary);
	fprintf(out, "\n`gpumux COMMAND --help` describes one command. See gpumux(1).\n");
}

int main(int argc, char **argv)
{
	if (argc < 2) {
		usage(stderr);
		return 2;
	}
	if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") || !strcmp(argv[1], "help")) {
		usage(stdout);
		return 0;
	}
	if (!strcmp(argv[1], "--version")) {
		printf("gpumux %s\n", GMX_VERSION);
		return 0;
	}
	for (size_t i = 0; i < sizeof(commands) / sizeof(commands[0]); i++)
		if (!strcmp(argv[1], commands[i].name))
			return commands[i].run(argc - 1, argv + 1);
	fprintf(stderr, "gpumux: unknown command '%s' (try gpumux --help)\n", argv[1]);
	return 2;
}
