/* Helpers shared by the subcommands (cli.h): error and warning printing in the house style, trace
 * opening, integer parsing. */
#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

void cli_error(const char *file, const char *fmt, ...) {
  fflush(stdout);
  fputs("memtap: ", stderr);
  if (file)
    fprintf(stderr, "%s: ", file);
  va_list ap;
  va_start(ap, fmt);
  vfprintf(stderr, fmt, ap);
  va_end(ap);
  fputc('\n', stderr);
}

void cli_report(const char *file, const mt_error *err) {
  cli_error(file, "%s", err->message[0] ? err->message : mt_status_name(err->code));
}

int cli_usage_error(const char *cmd, const char *fmt, ...) {
  fprintf(stderr, "memtap %s: ", cmd);
  va_list ap;
  va_start(ap, fmt);
  vfprintf(stderr, fmt, ap);
  va_end(ap);
  fprintf(stderr, "\n'memtap %s --help' shows the usage\n", cmd);
  return MT_EXIT_USAGE;
}

void cli_print_warning(void *user, int64_t offset, const char *message) {
  (void)offset;
  fflush(stdout);
  fprintf(stderr, "memtap: %s: warning: %s\n", (const char *)user, message);
}

mt_reader *cli_open_trace(const char *path, bool backtraces) {
  mt_reader_options options = {
      .backtraces = backtraces, .on_warning = cli_print_warning, .warning_user = (void *)path};
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

bool cli_parse_int(const char *text, long long min, long long max, long long *out) {
  if (!text || !*text)
    return false;
  errno = 0;
  char *end;
  long long v = strtoll(text, &end, 10);
  if (errno || *end || v < min || v > max)
    return false;
  *out = v;
  return true;
}
