/* memtap check: validates a whole trace, backtraces and location codes included (the v3 cache
 * verifier is only checked while decoding backtraces), and says where a cut trace ends. */
#include <getopt.h>
#include <inttypes.h>
#include <stdlib.h>

#include <unistd.h>

#include "cli.h"
#include "common/hashmap.h"
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
    return cli_usage_error("check", "expected exactly one TRACE");
  const char *path = argv[optind];
  mt_reader *r = cli_open_trace(path, true);
  if (!r)
    return MT_EXIT_FAILURE;
  mt_reader_set_runs_only(r, true, NULL); /* a code repeated by recursion is checked once */
  /* Codes already checked against the location table; seeded, since the trace chooses them. */
  mt_hashmap known = {.seed = mt_hashmap_random_seed()};
  /* In front of it, the codes checked last, direct-mapped: the same codes recur (INT64_MIN, no
   * 63-bit code, marks a free entry). 8192 entries hold the few thousand codes of a compiler's
   * trace: with 1024, ocamlopt_v1 replayed 60 times took 8% longer in the map. */
  enum { RECENT = 8192 };
  int64_t recent[RECENT];
  for (size_t i = 0; i < RECENT; i++)
    recent[i] = INT64_MIN;
  uint64_t events = 0;
  mt_event ev;
  mt_error err;
  int rc, status = MT_EXIT_OK;
  while ((rc = mt_reader_next(r, &ev, &err)) > 0) {
    events++;
    /* Only the runs after those the reader found equal to the domain's previous backtrace's
     * (common_runs) can hold codes not checked then. Checking every frame again would cost the
     * whole backtrace per event, and a 10-byte event can repeat a backtrace of millions of
     * frames. */
    for (size_t j = ev.common_runs; j < ev.backtrace_run_count; j++) {
      const mt_backtrace_run *run = &ev.backtrace_runs[j];
      int64_t code = run->code;
      size_t i = run->start;
      int64_t *memo = &recent[((uint64_t)code * UINT64_C(0x9E3779B97F4A7C15)) >> 51]; /* 13 bits */
      if (*memo == code)
        continue;
      if (mt_hashmap_get(&known, code, NULL)) {
        *memo = code;
        continue;
      }
      const mt_location *locs;
      size_t n;
      if (!mt_reader_lookup_location(r, code, &locs, &n)) {
        cli_error(path,
                  "malformed trace at byte %lld: invalid location code 0x%" PRIx64
                  " (frame %zu of the allocation's backtrace was never described)",
                  (long long)ev.offset, (uint64_t)code, i);
        status = MT_EXIT_FAILURE;
        goto done;
      }
      if (!mt_hashmap_put(&known, code, 1)) {
        cli_error(path, "out of memory");
        status = MT_EXIT_FAILURE;
        goto done;
      }
      *memo = code;
    }
  }
  if (rc < 0) {
    cli_report(path, &err);
    status = MT_EXIT_FAILURE;
    goto done;
  }
  int64_t cut;
  if (mt_reader_truncated(r, &cut)) {
    char n1[32];
    cli_error(path,
              "truncated at byte %lld: the last packet is incomplete; the %s event%s before it "
              "are well-formed",
              (long long)cut, out_format_count((double)events, n1), out_plural((double)events));
    status = 2;
  } else if (!quiet) {
    cli_out o;
    out_init(&o, STDOUT_FILENO);
    char n1[32], n2[32], n3[32];
    int64_t bytes = mt_reader_position(r);
    out_printf(&o, "%s: ok: %s event%s, %s byte%s (%s)", path, out_format_count((double)events, n1),
               out_plural((double)events), out_format_count((double)bytes, n2),
               out_plural((double)bytes), out_format_bytes((double)bytes, n3));
    uint64_t skipped = mt_reader_warning_count(r);
    if (skipped)
      out_printf(&o, ", %" PRIu64 " packets of other processes skipped", skipped);
    out_str(&o, "\n");
    if (!out_finish(&o))
      status = MT_EXIT_FAILURE;
  }
done:
  mt_hashmap_free(&known);
  mt_reader_close(r);
  return status;
}
