/* memtap's entry point: dispatches to one subcommand (commands.def), prints the overview help. */
#include <stdio.h>
#include <string.h>

#include "cli.h"

struct command {
  const char *name;
  int (*run)(int argc, char **argv);
  const char *summary;
};

static const struct command commands[] = {
#define MT_COMMAND(name, fn, summary) {name, fn, summary},
#include "commands.def"
#undef MT_COMMAND
};

static void print_help(FILE *out) {
  fprintf(out,
          "usage: memtap COMMAND [OPTIONS] ...\n\n"
          "memtap reads and writes memory-allocation traces in the memtrace format (v1-v3).\n\n"
          "commands:\n");
  for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
    fprintf(out, "  %-10s %s\n", commands[i].name, commands[i].summary);
  fprintf(out, "\n'memtap COMMAND --help' describes one command. 'memtap --version' prints the "
               "version.\n");
}

int main(int argc, char **argv) {
  if (argc < 2) {
    print_help(stderr);
    return MT_EXIT_USAGE;
  }
  const char *name = argv[1];
  if (!strcmp(name, "--help") || !strcmp(name, "-h") || !strcmp(name, "help")) {
    print_help(stdout);
    return MT_EXIT_OK;
  }
  if (!strcmp(name, "--version")) {
    printf("memtap %s\n", mt_version());
    return MT_EXIT_OK;
  }
  for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
    if (!strcmp(name, commands[i].name))
      return commands[i].run(argc - 1, argv + 1);
  fprintf(stderr, "memtap: unknown command '%s'; 'memtap --help' lists the commands\n", name);
  return MT_EXIT_USAGE;
}
