/* memtap check: validates a whole trace, backtraces and location codes included (the v3 cache
 * verifier is only checked while decoding backtraces), and says where a cut trace ends. */
#include <getopt.h>
#include <inttypes.h>
#include <stdlib.h>
#include <sys/stat.h>

#include <unistd.h>

#include "cli.h"
#include "go_input.h"
#include "output.h"

static const char usage[] =
    "usage: memtap check [-q] TRACE\n"
    "\n"
    "Reads the whole trace with every rule of the memtrace format applied, decoding every\n"
    "backtrace and checking that every location code it uses was described.\n"
    "\n"
    "  -q, --quiet  print nothing on success\n"
    "  -h, --help   show this help\n"
    "\n"
    "Exit status: 0 well-formed; 1 malformed (the error names the byte offset and the rule);\n"
    "2 well-formed but truncated (the writer stopped mid-packet: everything before the cut is\n"
    "readable; the message says where); 64 bad command line.\n";

int mt_cmd_check(int argc, char **argv) {
  static const struct option options[] = {
      {"quiet", no_argument, NULL, 'q'}, {"help", no_argument, NULL, 'h'}, {0}};
  bool quiet = false;
  int c;
  optind = 1;
  while ((c = cli_getopt(argc, argv, "qh", options)) != -1) {
    switch (c) {
    case 'q': quiet = true; break;
    case 'h': fputs(usage, stdout); return MT_EXIT_OK;
    default: return cli_bad_option("check");
    }
  }
  if (optind != argc - 1)
    return cli_one_trace_expected("check", argc, argv);
  const char *path = argv[optind];
  mt_reader *r = cli_open_trace(path, true);
  if (!r)
    return MT_EXIT_FAILURE;
  mt_reader_set_runs_only(r, true, NULL); /* a code repeated by recursion is handed out once */
  mt_reader_set_check_codes(r, true);     /* every code described, checked as it enters */
  uint64_t events = 0;
  mt_event ev;
  mt_error err;
  int rc, status = MT_EXIT_OK;
  while ((rc = mt_reader_next(r, &ev, &err)) > 0)
    events++;
  if (rc < 0) {
    cli_report(path, &err);
    status = MT_EXIT_FAILURE;
    goto done;
  }
  int64_t cut;
  if (mt_reader_truncated(r, &cut)) {
    char n1[32];
    cli_error(path,
              "truncated at byte %lld (the warning above says how): the %s event%s before it "
              "are well-formed",
              (long long)cut, out_format_count((double)events, n1), out_plural((double)events));
    status = 2;
  } else if (!quiet) {
    cli_out o;
    out_init(&o, STDOUT_FILENO);
    char n1[32], n2[32], n3[32];
    int64_t bytes = mt_reader_position(r);
    struct stat st;
    if (cli_is_go_trace(path) && stat(path, &st) == 0) { /* the file, not what it became */
      char n4[32];
      out_printf(&o,
                 "%s: ok: %s event%s, a Go execution trace of %s byte%s (%s) read as %s of "
                 "memtrace",
                 path, out_format_count((double)events, n1), out_plural((double)events),
                 out_format_count((double)st.st_size, n2), out_plural((double)st.st_size),
                 out_format_bytes((double)st.st_size, n3), out_format_bytes((double)bytes, n4));
    } else {
      out_printf(&o, "%s: ok: %s event%s, %s byte%s (%s)", path,
                 out_format_count((double)events, n1), out_plural((double)events),
                 out_format_count((double)bytes, n2), out_plural((double)bytes),
                 out_format_bytes((double)bytes, n3));
    }
    uint64_t skipped = mt_reader_warning_count(r);
    if (skipped)
      out_printf(&o, ", %s packet%s of other processes skipped",
                 out_format_count((double)skipped, n1), out_plural((double)skipped));
    out_str(&o, "\n");
    if (!out_finish(&o))
      status = MT_EXIT_FAILURE;
  }
done:
  mt_reader_close(r);
  return status;
}
