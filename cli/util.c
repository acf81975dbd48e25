/* Helpers shared by the subcommands (cli.h): error and warning printing in the house style (control
 * characters defused on a terminal), option parsing with one-line messages, trace opening, integer
 * parsing. */
#include <ctype.h>
#include <errno.h>
#include <getopt.h>
#include <stdarg.h>
#include <stdlib.h>
#include <time.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "go_input.h"
#include "output.h"

/* Prints fmt to stderr as one piece. On a terminal its control characters become '?' by cli_out's
 * rule (out_defuse, output.h): messages quote names a traced program or a trace chose (program
 * paths, file names), which must not drive the user's terminal. Into a file or a pipe every byte
 * is kept. */
static void vprint_stderr(const char *fmt, va_list ap) {
  char *text = NULL;
  if (vasprintf(&text, fmt, ap) < 0) {
    fputs("memtap: out of memory for a message\n", stderr);
    return;
  }
  if (isatty(STDERR_FILENO))
    out_defuse(text, strlen(text));
  fputs(text, stderr);
  free(text);
}

static void print_stderr(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void print_stderr(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vprint_stderr(fmt, ap);
  va_end(ap);
}

void cli_error(const char *file, const char *fmt, ...) {
  fflush(stdout);
  if (file)
    print_stderr("memtap: %s: ", file);
  else
    fputs("memtap: ", stderr);
  va_list ap;
  va_start(ap, fmt);
  vprint_stderr(fmt, ap);
  va_end(ap);
  fputc('\n', stderr);
}

void cli_report(const char *file, const mt_error *err) {
  cli_error(file, "%s", err->message[0] ? err->message : mt_status_name(err->code));
}

void cli_damage_text(const mt_error *damage, char *text, size_t size) {
  static const char compressed[] = "malformed compressed trace at byte ";
  const char *message = damage->message;
  if (!strncmp(message, compressed, sizeof compressed - 1)) { /* placed in the .zst file */
    snprintf(text, size, "the compressed trace is damaged at byte %s",
             message + sizeof compressed - 1);
    return;
  }
  /* "malformed trace at byte N: " says where, which the warning says already. */
  const char *what = strstr(message, ": ");
  what = !strncmp(message, "malformed trace at byte", 23) && what ? what + 2 : message;
  snprintf(text, size, "the trace is damaged at byte %lld (%s)", (long long)damage->offset, what);
}

int cli_usage_error(const char *cmd, const char *fmt, ...) {
  fflush(stdout);
  fprintf(stderr, "memtap %s: ", cmd);
  va_list ap;
  va_start(ap, fmt);
  vprint_stderr(fmt, ap);
  va_end(ap);
  fprintf(stderr, " (see memtap %s --help)\n", cmd);
  return MT_EXIT_USAGE;
}

int cli_one_trace_expected(const char *cmd, int argc, char **argv) {
  /* No word left for TRACE because the last one went to an option that takes a value
   * (`summary --from T.ctf`): say so, rather than only that TRACE is missing. */
  if (optind == argc && argc >= 3 && argv[argc - 2][0] == '-' && strcmp(argv[argc - 2], "--") &&
      argv[argc - 1][0] != '-')
    return cli_usage_error(cmd, "expected exactly one TRACE ('%s' was taken as the value of %s)",
                           argv[argc - 1], argv[argc - 2]);
  return cli_usage_error(cmd, "expected exactly one TRACE");
}

/* What cli_getopt last saw: the option's name as written ("--from", "-n") and, when it refused
 * it, why. */
static struct {
  char name[64];
  enum {
    OPTION_OK,
    OPTION_UNKNOWN,
    OPTION_AMBIGUOUS,
    OPTION_NEEDS_ARGUMENT,
    OPTION_NO_ARGUMENT,
    OPTION_REPEATED
  } why;
  /* The options with a value seen in this parse (their getopt codes and values), for repeats. */
  int seen[64];
  const char *seen_value[64];
  size_t nseen;
} last_option;

/* Options that may be given more than once, their values adding up (docs/cli.md). */
static bool repeatable(const char *long_name) {
  return long_name && !strcmp(long_name, "hide");
}

/* The long name of the option with getopt code `val`, or NULL. */
static const char *long_name_of(const struct option *longopts, int val) {
  for (const struct option *o = longopts; o && o->name; o++)
    if (!o->flag && o->val == val)
      return o->name;
  return NULL;
}

/* An option given a second time with another value: the first would be dropped in silence (`top
 * -n 1 -n 3`, `report -o a.html -o b.html`), so it is refused, unless its values add up. The same
 * value again (a script that adds `--by live` to a command line that has it) changes nothing. */
static bool repeated(const struct option *longopts, int c, int index) {
  const char *name = index >= 0 ? longopts[index].name : long_name_of(longopts, c);
  if (!optarg || repeatable(name))
    return false;
  for (size_t i = 0; i < last_option.nseen; i++)
    if (last_option.seen[i] == c)
      return strcmp(last_option.seen_value[i], optarg) != 0;
  if (last_option.nseen < sizeof last_option.seen / sizeof last_option.seen[0]) {
    last_option.seen[last_option.nseen] = c;
    last_option.seen_value[last_option.nseen++] = optarg;
  }
  return false;
}

/* "--name" from "--name=value". */
static void set_long_name(const char *text) {
  size_t n = strcspn(text, "=");
  if (n >= sizeof last_option.name)
    n = sizeof last_option.name - 1;
  memcpy(last_option.name, text, n);
  last_option.name[n] = 0;
}

/* How many long options start with `prefix` (what glibc calls ambiguous when more than one). */
static int long_matches(const struct option *longopts, const char *prefix) {
  size_t n = strlen(prefix);
  int count = 0;
  for (const struct option *o = longopts; o && o->name; o++) {
    if (!strncmp(o->name, prefix, n) && !o->name[n])
      return 1; /* an exact match is never ambiguous */
    count += !strncmp(o->name, prefix, n);
  }
  return count;
}

/* Whether a long option starting with `prefix` has `val` (getopt_long takes abbreviations). */
static bool long_has_val(const struct option *longopts, const char *prefix, int val) {
  size_t n = strlen(prefix);
  for (const struct option *o = longopts; o && o->name; o++)
    if (!strncmp(o->name, prefix, n) && !o->flag && o->val == val)
      return true;
  return false;
}

int cli_getopt(int argc, char **argv, const char *shortopts, const struct option *longopts) {
  /* A ':' after any '+' or '-' makes a missing argument return ':' (not '?'); opterr = 0 silences
   * getopt's own messages, which have no "memtap" and a second line. */
  char spec[64];
  size_t mode = shortopts[0] == '+' || shortopts[0] == '-';
  snprintf(spec, sizeof spec, "%.*s:%s", (int)mode, shortopts, shortopts + mode);
  opterr = 0;
  if (optind <= 1) /* a new parse (the commands set optind = 1 first) */
    last_option.nseen = 0;
  int index = -1;
  int c = getopt_long(argc, argv, spec, longopts, &index);
  last_option.why = OPTION_OK;
  if (c == -1)
    return c;
  const char *element = optind > 0 && optind <= argc ? argv[optind - 1] : "";
  if (c != '?' && c != ':') {
    if (index >= 0)
      snprintf(last_option.name, sizeof last_option.name, "--%s", longopts[index].name);
    else
      snprintf(last_option.name, sizeof last_option.name, "-%c", c);
    if (repeated(longopts, c, index)) {
      last_option.why = OPTION_REPEATED;
      return '?';
    }
    return c;
  }
  /* A short option's error inside a group ("-qX") leaves optind on that group: the element before
   * it may be a long option that went well. A long option's error has optopt 0 (unknown) or the
   * option's val, and the element names it. */
  bool long_error = false;
  if (!strncmp(element, "--", 2)) {
    set_long_name(element);
    long_error = optopt == 0 || long_has_val(longopts, last_option.name + 2, optopt);
  }
  if (long_error) {
    if (c == ':')
      last_option.why = OPTION_NEEDS_ARGUMENT;
    else if (optopt)
      last_option.why = OPTION_NO_ARGUMENT;
    else
      last_option.why =
          long_matches(longopts, last_option.name + 2) > 1 ? OPTION_AMBIGUOUS : OPTION_UNKNOWN;
  } else {
    snprintf(last_option.name, sizeof last_option.name, "-%c", optopt);
    last_option.why = c == ':' ? OPTION_NEEDS_ARGUMENT : OPTION_UNKNOWN;
  }
  return '?';
}

int cli_bad_option(const char *cmd) {
  switch (last_option.why) {
  case OPTION_AMBIGUOUS: return cli_usage_error(cmd, "ambiguous option '%s'", last_option.name);
  case OPTION_NEEDS_ARGUMENT:
    return cli_usage_error(cmd, "option '%s' needs an argument", last_option.name);
  case OPTION_NO_ARGUMENT:
    return cli_usage_error(cmd, "option '%s' takes no argument", last_option.name);
  case OPTION_REPEATED:
    return cli_usage_error(cmd, "option '%s' given twice, with different values", last_option.name);
  case OPTION_UNKNOWN:
  case OPTION_OK:
  default: return cli_usage_error(cmd, "unknown option '%s'", last_option.name);
  }
}

void cli_print_warning(void *user, int64_t offset, const char *message) {
  (void)offset;
  fflush(stdout);
  print_stderr("memtap: %s: warning: %s\n", (const char *)user, message);
}

mt_reader *cli_open_trace(const char *path, bool backtraces) {
  return cli_open_trace_partial(path, backtraces, NULL);
}

/* Opens `path`, its warnings printed or not (`warn`). */
static mt_reader *open_trace(const char *path, bool backtraces, bool *damaged, bool warn) {
  if (!*path) {
    cli_error(NULL, "the trace's file name is empty");
    return NULL;
  }
  mt_reader_options options = {.backtraces = backtraces,
                               .on_warning = warn ? cli_print_warning : NULL,
                               .warning_user = (void *)path};
  if (cli_is_go_trace(path)) /* a Go execution trace: converted first (docs/go.md) */
    return cli_open_go_trace(path, &options, damaged);
  mt_reader *r;
  mt_error err;
  int rc = strcmp(path, "-") ? mt_reader_open(&r, path, &options, &err)
                             : mt_reader_open_fd(&r, 0, &options, &err);
  if (rc) {
    cli_report(path, &err);
    return NULL;
  }
  return r;
}

mt_reader *cli_open_trace_partial(const char *path, bool backtraces, bool *damaged) {
  return open_trace(path, backtraces, damaged, true);
}

mt_reader *cli_open_trace_unwarned(const char *path, bool *damaged) {
  return open_trace(path, false, damaged, false);
}

bool cli_parse_int(const char *text, long long min, long long max, long long *out) {
  /* strtoll would skip leading white space (' 5'), and a trailing one is refused: neither is. */
  if (!text || !*text || isspace((unsigned char)*text))
    return false;
  errno = 0;
  char *end;
  long long v = strtoll(text, &end, 10);
  if (errno || *end || v < min || v > max)
    return false;
  *out = v;
  return true;
}

const char *cli_debug_cache_dir(char *out, size_t size) {
  const char *xdg = getenv("XDG_CACHE_HOME"), *home = getenv("HOME");
  if (xdg && xdg[0] == '/')
    snprintf(out, size, "%s/memtap", xdg);
  else if (home && home[0] == '/')
    snprintf(out, size, "%s/.cache/memtap", home);
  else
    out[0] = 0;
  return out;
}

int64_t cli_monotonic_us(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

int64_t cli_realtime_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}
