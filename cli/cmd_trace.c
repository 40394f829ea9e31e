/* Placeholder until the trace command lands: says so plainly. */
#include <stdio.h>

#include "commands.h"

int gmx_cmd_trace(int argc, char **argv)
{
	(void)argc;
	(void)argv;
	fprintf(stderr, "gpumux trace: not available in this build\n");
	return 1;
}
