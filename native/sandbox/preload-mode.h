/* brokered-sandbox --mode preload (preload-mode.c): the fallback runtime's launcher. */
#ifndef BSH_PRELOAD_MODE_H
#define BSH_PRELOAD_MODE_H

/* argv[0] is the first argument after "--mode preload"; returns only on failure. */
int bsh_preload_main(int argc, char **argv);

#endif
