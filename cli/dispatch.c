/* memtap's command dispatcher (cli.h mt_cli_run): picks the subcommand (commands.def) named by
 * argv[1], prints the overview help and the version. main.c calls it once per process; the CLI
 * fuzzer (tests/fuzz/fuzz_cli_args.c) calls it once per input, so it starts getopt afresh. */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

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
  fprintf(out, "\n'memtap help COMMAND' (or 'memtap COMMAND --help') describes one command. "
               "'memtap --version' prints the version.\n");
}

/* Commands set optind = 1, which glibc takes as "carry on": after a run that stopped inside a
 * group of short options ("-qX"), getopt would go on reading the previous argv. optind = 0 makes
 * the next call start from scratch, so make one such call before every command. */
static void reset_getopt(void) {
  static char name[] = "memtap";
  char *argv[] = {name, NULL};
  optind = 0;
  opterr = 1;
  getopt(1, argv, "");
  optind = 1;
}

/* `memtap dump T >> T` would read what it appends: standard output appended to a file named on
 * the command line (or to standard input's file, for "-") is refused before the command runs, as
 * the named outputs are (output_file.c). `record`'s arguments are the program's: left alone. */
static bool stdout_is_an_input(int argc, char **argv) {
  struct stat out, in;
  if (argc < 3 || !strcmp(argv[1], "record") || fstat(STDOUT_FILENO, &out) != 0 ||
      !S_ISREG(out.st_mode))
    return false;
  for (int i = 2; i < argc; i++) {
    bool is_stdin = !strcmp(argv[i], "-");
    if ((is_stdin || argv[i][0] != '-') &&
        (is_stdin ? fstat(STDIN_FILENO, &in) : stat(argv[i], &in)) == 0 &&
        in.st_dev == out.st_dev && in.st_ino == out.st_ino) {
      cli_error("<stdout>", "is the input trace itself (%s); refusing to write over it",
                is_stdin ? "standard input" : argv[i]);
      return true;
    }
  }
  return false;
}

/* What a user who typed `name` probably wants: the names other profilers give their views, and
 * the commands within two typing edits of it. NULL when nothing is near. */
static const char *suggestion(const char *name) {
  static const char *const other_names[][2] = {
      {"peak", "memtap top --by peak (what was live at the peak) or memtap summary"},
      {"flamegraph", "memtap flame"},
      {"pprof", "memtap export --format pprof"},
      {"speedscope", "memtap export --format speedscope"},
      {"html", "memtap report"},
      {"hotspots", "memtap top"},
      {"stats", "memtap summary"},
      {"identify", "memtap info"},
      {"import", "memtap import-go"},
      {"run", "memtap record"},
      {"trace", "memtap record"},
  };
  for (size_t i = 0; i < sizeof other_names / sizeof other_names[0]; i++)
    if (!strcmp(name, other_names[i][0]))
      return other_names[i][1];
  /* Edit distance (insertions, deletions, substitutions) to each command, names up to 31 bytes. */
  static char said[64];
  size_t n = strlen(name);
  if (n > 31)
    return NULL;
  const char *nearest = NULL;
  unsigned nearest_distance = 3;
  for (size_t c = 0; c < sizeof commands / sizeof commands[0]; c++) {
    const char *command = commands[c].name;
    size_t m = strlen(command);
    unsigned row[32];
    for (size_t j = 0; j <= m; j++)
      row[j] = (unsigned)j;
    for (size_t i = 1; i <= n; i++) {
      unsigned diagonal = row[0];
      row[0] = (unsigned)i;
      for (size_t j = 1; j <= m; j++) {
        unsigned above = row[j];
        unsigned best = diagonal + (name[i - 1] != command[j - 1]);
        if (above + 1 < best)
          best = above + 1;
        if (row[j - 1] + 1 < best)
          best = row[j - 1] + 1;
        row[j] = best;
        diagonal = above;
      }
    }
    if (row[m] < nearest_distance && row[m] < m) { /* the nearest, the first of equals */
      nearest = command;
      nearest_distance = row[m];
    }
  }
  if (!nearest)
    return NULL;
  snprintf(said, sizeof said, "memtap %s", nearest);
  return said;
}

static int unknown_command(const char *name) {
  const char *near = suggestion(name);
  if (near)
    fprintf(stderr,
            "memtap: unknown command '%s'; did you mean %s? ('memtap --help' lists the "
            "commands)\n",
            name, near);
  else
    fprintf(stderr, "memtap: unknown command '%s'; 'memtap --help' lists the commands\n", name);
  return MT_EXIT_USAGE;
}

static int run(int argc, char **argv) {
  if (argc < 2) {
    print_help(stderr);
    return MT_EXIT_USAGE;
  }
  const char *name = argv[1];
  bool help = !strcmp(name, "--help") || !strcmp(name, "-h") || !strcmp(name, "help");
  if (argc > 2 && help) { /* "memtap help top" (or --help top) is "memtap top --help" */
    static char help_option[] = "--help";
    char *args[] = {argv[2], help_option, NULL};
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
      if (!strcmp(argv[2], commands[i].name))
        return commands[i].run(2, args);
    return unknown_command(argv[2]);
  }
  if (!strcmp(name, "--version") && argc > 2) { /* an argument it would not read */
    fprintf(stderr, "memtap: --version takes no argument ('%s' given)\n", argv[2]);
    return MT_EXIT_USAGE;
  }
  if (help) {
    print_help(stdout);
    return MT_EXIT_OK;
  }
  if (!strcmp(name, "--version")) {
    printf("memtap %s\n", mt_version());
    return MT_EXIT_OK;
  }
  if (stdout_is_an_input(argc, argv))
    return MT_EXIT_FAILURE;
  for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
    if (!strcmp(name, commands[i].name))
      return commands[i].run(argc - 1, argv + 1);
  return unknown_command(name);
}

int mt_cli_run(int argc, char **argv) {
  reset_getopt();
  int status = run(argc, argv);
  /* What went through stdio (help texts, small reports) must reach standard output too: a command
   * that succeeded fails if it did not. Output written through cli_out is reported by out_finish;
   * the stream's error flag is reset for the next run in this process (the CLI fuzzer). */
  errno = 0;
  bool failed = fflush(stdout) != 0 || ferror(stdout);
  int error = errno;
  clearerr(stdout);
  if (failed && status == MT_EXIT_OK) {
    cli_error("<stdout>", "writing failed: %s", error ? strerror(error) : "I/O error");
    status = MT_EXIT_FAILURE;
  }
  return status;
}
