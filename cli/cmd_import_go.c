/* memtap import-go: converts a Go execution trace recorded with GODEBUG=traceallocfree=1 into a
 * memtrace trace (memtap/import.h, docs/go.md), and says what it found. */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli.h"
#include "output.h"
#include "memtap/import.h"
#include "output_file.h"

static const char usage[] =
    "usage: memtap import-go [options] IN.trace -o OUT.ctf\n"
    "\n"
    "Reads IN.trace, a Go execution trace written by Go 1.23, 1.24 or 1.25 under\n"
    "GODEBUG=traceallocfree=1 (runtime/trace, or 'go test -trace'; '-' for standard input),\n"
    "and writes OUT.ctf, a memtrace trace of every heap object, heap span and goroutine stack\n"
    "('-' for standard output). Objects take their slot size from their span and their type\n"
    "name as their only frame; frees are when the garbage collector swept them. Every memtap\n"
    "analysis reads OUT.ctf, and also IN.trace directly. OUT may not be IN.\n"
    "\n"
    "  -o, --output OUT   the memtrace trace to write (required)\n"
    "  --only KINDS       write only these kinds, comma-separated: objects, spans, stacks\n"
    "                     (default: all three; a span holds objects, so totals over all kinds\n"
    "                     count that memory twice)\n"
    "  --start-time S     the start time to record, in seconds since the Unix epoch, for Go 1.23\n"
    "                     and 1.24 traces, which carry no wall clock (default: IN's\n"
    "                     modification time; Go 1.25 traces give their own)\n"
    "  --version N        memtrace format of OUT: 3 (default) or 2\n"
    "  -q, --quiet        print nothing but errors and warnings\n"
    "  -h, --help         show this help\n"
    "\n"
    "Prints the counts of what it converted. A trace without the alloc/free experiment gives an\n"
    "empty trace and a warning; frees of memory the trace never showed allocated are counted and\n"
    "left out. A damaged trace is an error naming the byte where it breaks (exit status 1).\n";

/* --only's comma-separated kinds into *kinds. Returns 0 when every item is a kind, else the
 * number (from 1) of the first that is not, *empty saying whether it is empty: strtok would have
 * taken "objects,,spans" as two kinds. */
static int parse_kinds(const char *text, unsigned *kinds, bool *empty) {
  static const struct {
    const char *name;
    unsigned kind;
  } names[] = {{"objects", MT_GO_OBJECTS}, {"spans", MT_GO_SPANS}, {"stacks", MT_GO_STACKS}};
  *kinds = 0;
  for (int item = 1;; item++) {
    size_t n = strcspn(text, ",");
    unsigned kind = 0;
    for (size_t i = 0; i < sizeof names / sizeof *names; i++)
      if (strlen(names[i].name) == n && !strncmp(text, names[i].name, n))
        kind = names[i].kind;
    if (!kind) {
      *empty = n == 0;
      return item;
    }
    *kinds |= kind;
    if (!text[n])
      return 0;
    text += n + 1;
  }
}

/* One kind's line adds up: allocated + in the snapshot - freed = live at the end. Snapshot
 * entries written only; frees written only (those of known memory, and one per reallocation over
 * live memory). The second line says what was left out. */
static void print_counts(const char *what, const mt_go_counts *c, int width) {
  char a[32], b[32], d[32], e[32];
  printf("%-17s %*s allocated %*s in the start snapshot %*s freed %*s live at the end\n", what,
         width, out_format_count((double)c->allocated, a), width,
         out_format_count((double)(c->snapshot - c->duplicates - c->empty), b), width,
         out_format_count((double)c->freed, d), width, out_format_count((double)c->live_end, e));
  if (c->unknown_frees || c->replaced || c->duplicates || c->empty)
    printf("%-17s %*s frees of unknown memory (left out) %*s reallocated while live %*s "
           "snapshotted twice %*s snapshotted without memory\n",
           "", width, out_format_count((double)c->unknown_frees, a), width,
           out_format_count((double)c->replaced, b), width,
           out_format_count((double)c->duplicates, d), width,
           out_format_count((double)c->empty, e));
}

/* The width of the table's number columns: 8, or the widest number of the three kinds. */
static int counts_width(const mt_go_import_stats *st) {
  const mt_go_counts *kinds[] = {&st->objects, &st->spans, &st->stacks};
  int width = 8;
  for (size_t k = 0; k < 3; k++) {
    const mt_go_counts *c = kinds[k];
    uint64_t values[] = {c->allocated,     c->snapshot, c->freed,      c->live_end,
                         c->unknown_frees, c->replaced, c->duplicates, c->empty};
    for (size_t i = 0; i < sizeof values / sizeof values[0]; i++) {
      char text[32];
      int n = (int)strlen(out_format_count((double)values[i], text));
      if (n > width)
        width = n;
    }
  }
  return width;
}

int mt_cmd_import_go(int argc, char **argv) {
  static const struct option options[] = {{"output", required_argument, NULL, 'o'},
                                          {"only", required_argument, NULL, 'k'},
                                          {"start-time", required_argument, NULL, 's'},
                                          {"version", required_argument, NULL, 'v'},
                                          {"quiet", no_argument, NULL, 'q'},
                                          {"help", no_argument, NULL, 'h'},
                                          {0}};
  const char *out = NULL, *start = NULL;
  unsigned kinds = MT_GO_ALL;
  long long version = 3;
  bool quiet = false;
  int c;
  optind = 1;
  while ((c = cli_getopt(argc, argv, "o:qh", options)) != -1) {
    switch (c) {
    case 'o': out = optarg; break;
    case 'k': {
      bool empty;
      int bad = parse_kinds(optarg, &kinds, &empty);
      if (bad && empty && *optarg)
        return cli_usage_error("import-go",
                               "--only '%s': item %d is empty; it takes objects, spans and "
                               "stacks, comma-separated",
                               optarg, bad);
      if (bad)
        return cli_usage_error("import-go", "--only takes objects, spans and stacks, not '%s'",
                               optarg);
      break;
    }
    case 's': start = optarg; break;
    case 'v':
      if (!cli_parse_int(optarg, 2, 3, &version))
        return cli_usage_error("import-go", "--version takes 2 or 3, not '%s'", optarg);
      break;
    case 'q': quiet = true; break;
    case 'h': fputs(usage, stdout); return MT_EXIT_OK;
    default: return cli_bad_option("import-go");
    }
  }
  if (optind != argc - 1)
    return cli_usage_error("import-go", "expected one Go trace IN");
  if (!out)
    return cli_usage_error("import-go", "expected the output trace: -o OUT.ctf");
  const char *in = argv[optind];
  mt_go_import_options o = {.kinds = kinds,
                            .version = (int)version,
                            .on_warning = cli_print_warning,
                            .warning_user = (void *)in};
  if (start) {
    long long s;
    if (!cli_parse_int(start, 0, 9000000000LL, &s))
      return cli_usage_error("import-go", "--start-time takes whole seconds since 1970, not '%s'",
                             start);
    o.start_time = s * 1000000;
  }

  cli_output_file of;
  if (!cli_output_file_open(&of, out, &in, 1))
    return MT_EXIT_FAILURE;
  int fd = strcmp(in, "-") ? open(in, O_RDONLY | O_CLOEXEC) : STDIN_FILENO;
  if (fd < 0) {
    cli_error(in, "cannot open: %s", strerror(errno));
    cli_output_file_close(&of, false);
    return MT_EXIT_FAILURE;
  }
  struct stat st;
  if (!start && fstat(fd, &st) == 0 && S_ISREG(st.st_mode))
    o.start_time = (int64_t)st.st_mtim.tv_sec * 1000000 + st.st_mtim.tv_nsec / 1000;
  mt_go_import_stats stats;
  mt_error err;
  int rc = mt_go_import_fd(fd, of.fd, &o, &stats, &err);
  if (fd != STDIN_FILENO)
    close(fd);
  if (rc)
    cli_report(rc == MT_E_IO && err.sys_errno ? of.name : in, &err);
  if (!cli_output_file_close(&of, rc == MT_OK) || rc)
    return MT_EXIT_FAILURE;
  if (!quiet && !of.is_stdout) {
    char generations[32], events[32], types[32];
    printf("%s: Go trace format go 1.%d, %s generation%s, %s event%s\n", in, stats.format_version,
           out_format_count((double)stats.generations, generations),
           out_plural((double)stats.generations), out_format_count((double)stats.go_events, events),
           out_plural((double)stats.go_events));
    int width = counts_width(&stats);
    print_counts("heap objects", &stats.objects, width);
    print_counts("spans", &stats.spans, width);
    print_counts("goroutine stacks", &stats.stacks, width);
    printf("%s type names; %.3f s traced\n", out_format_count((double)stats.type_names, types),
           (double)(stats.end_time - stats.start_time) / 1e6);
  }
  return MT_EXIT_OK;
}
