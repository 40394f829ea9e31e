/* Placeholder until the gen command lands: says so plainly. */
#include <stdio.h>

#include "commands.h"

int gmx_cmd_gen(int argc, char **argv)
{
	(void)argc;
	(void)argv;
	fprintf(stderr, "gpumux gen: not available in this build\n");
	return 1;
}
