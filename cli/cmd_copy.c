/* memtap copy: reads a trace and writes it again through the writer, as memtrace's test/copy does;
 * traces memtrace wrote come out bit for bit. Optionally converts between v2 and v3. */
#include <getopt.h>
#include <stdbool.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli.h"
#include "memtap/record.h"
#include "output_file.h"

static const char usage[] =
    "usage: memtap copy [--version 2|3] [--time-resolution D] IN OUT\n"
    "\n"
    "Reads trace IN (memtrace v1-v3, plain or zstd; '-' for standard input) and writes every\n"
    "event to OUT ('-' for standard output) again. A trace written by memtrace is reproduced bit\n"
    "for bit. OUT may not be IN (the same file, whatever the path).\n"
    "\n"
    "  --version N          format of OUT: 3, or 2 for memtrace <= 0.2.3 and memtrace_viewer\n"
    "                       <= 0.17 (default: IN's version; v1 is written as v2). A trace with\n"
    "                       several domains cannot be written as v2.\n"
    "  --time-resolution D  round event times down to steps of D after the trace's start, 1us\n"
    "                       to 1s (like 1ms): a compressed copy of a long trace shrinks\n"
    "                       several-fold, lifetimes shorter than D read as 0\n"
    "  -h, --help           show this help\n"
    "\n"
    "If IN turns out to be malformed part-way, OUT keeps every event before the error and the\n"
    "exit status is 1; if IN is truncated (cut mid-packet), OUT keeps every whole packet and the\n"
    "exit status is 2, as check's. If writing OUT fails, the file that was there is left as it "
    "was. Packets\n"
    "of other processes are skipped with a warning, as check does; a promote or collect of an\n"
    "object allocated in one is left out when OUT has no name for it, with a warning.\n";

/* Whether IN can be read a second time from its start: a named file, or a standard input that is
 * a regular file at offset 0 (the reader maps it). A pipe can be read only once. */
static bool readable_twice(const char *path) {
  struct stat st;
  return strcmp(path, "-") != 0 || (fstat(STDIN_FILENO, &st) == 0 && S_ISREG(st.st_mode) &&
                                    lseek(STDIN_FILENO, 0, SEEK_CUR) == 0);
}

/* The domains IN uses other than 0, for refusing a v2 conversion before writing anything. */
static int find_nonzero_domain(const char *path, unsigned *domain) {
  mt_reader *r = cli_open_trace(path, false);
  if (!r)
    return -1;
  mt_event ev;
  mt_error err;
  int rc, found = 0;
  while ((rc = mt_reader_next(r, &ev, &err)) > 0)
    if (ev.domain != 0) {
      *domain = ev.domain;
      found = 1;
      break;
    }
  if (rc < 0) {
    cli_report(path, &err);
    found = -1;
  }
  mt_reader_close(r);
  return found;
}

/* The promotes and collects the copy left out (mt_transcode_options.on_left_out), said once: the
 * first, and how many more. */
typedef struct left_out {
  uint64_t count;
  int64_t first_offset;
  char first[160];
} left_out;

static void note_left_out(void *user, int64_t offset, const char *message) {
  left_out *l = user;
  if (l->count++ == 0) {
    l->first_offset = offset;
    snprintf(l->first, sizeof l->first, "%s", message);
  }
}

int mt_cmd_copy(int argc, char **argv) {
  static const struct option options[] = {{"version", required_argument, NULL, 'v'},
                                          {"time-resolution", required_argument, NULL, 't'},
                                          {"help", no_argument, NULL, 'h'},
                                          {0}};
  long long version = 0;
  uint64_t resolution_us = 0;
  int c;
  optind = 1;
  while ((c = cli_getopt(argc, argv, "h", options)) != -1) {
    switch (c) {
    case 'v':
      if (!cli_parse_int(optarg, 2, 3, &version))
        return cli_usage_error("copy", "--version takes 2 or 3, not '%s'", optarg);
      break;
    case 't':
      if (mt_record_parse_time_resolution(optarg, &resolution_us))
        return cli_usage_error(
            "copy", "--time-resolution %s is not a duration from 1us to 1s (like 1ms)", optarg);
      break;
    case 'h': fputs(usage, stdout); return MT_EXIT_OK;
    default: return cli_bad_option("copy");
    }
  }
  if (optind != argc - 2)
    return cli_usage_error("copy", "expected IN and OUT");
  const char *in = argv[optind], *out = argv[optind + 1];

  /* OUT first: refused if it is IN, and created (as a temporary file) before IN is read. */
  cli_output_file of;
  if (!cli_output_file_open(&of, out, &in, 1))
    return MT_EXIT_FAILURE;
  if (!cli_output_file_binary(&of, "copy", "a trace"))
    return MT_EXIT_USAGE;
  mt_reader *r = cli_open_trace(in, true);
  if (!r) {
    cli_output_file_close(&of, false);
    return MT_EXIT_FAILURE;
  }
  const mt_trace_info *info = mt_reader_info(r);
  if (!version)
    version = info->version >= 3 ? 3 : 2;
  /* From a pipe there is no second pass: the writer refuses the first event of another domain. */
  if (version == 2 && info->version >= 3 && readable_twice(in)) {
    unsigned domain;
    int found = find_nonzero_domain(in, &domain);
    if (found) {
      if (found > 0)
        cli_error(in,
                  "has events of domain %u; a v2 trace has no domains, so it cannot be "
                  "written as v2 (copy it as v3)",
                  domain);
      mt_reader_close(r);
      cli_output_file_close(&of, false);
      return MT_EXIT_FAILURE;
    }
  }
  mt_writer_options wopts = {.version = (int)version};
  mt_writer *w;
  mt_error err;
  int status = MT_EXIT_OK;
  bool keep = false; /* whether OUT is a whole trace worth keeping */
  if (mt_writer_create(&w, of.fd, info, &wopts, &err)) {
    cli_report(of.name, &err);
    status = MT_EXIT_FAILURE;
  } else {
    left_out dropped = {0};
    mt_transcode_options topts = {.time_resolution_us = (int64_t)resolution_us,
                                  .on_left_out = note_left_out,
                                  .left_out_user = &dropped};
    int rc = mt_transcode_with(r, w, &topts, &err);
    if (dropped.count > 1)
      cli_error(in,
                "warning: at byte %lld: %s; and %llu more promotes and collects of objects no "
                "allocation read made",
                (long long)dropped.first_offset, dropped.first,
                (unsigned long long)(dropped.count - 1));
    else if (dropped.count)
      cli_error(in, "warning: at byte %lld: %s", (long long)dropped.first_offset, dropped.first);
    /* A malformed IN still gives a well-formed OUT of every event before the damage (kept, exit
     * status 1); a failure to write OUT leaves whatever file was there before. */
    bool read_failed = rc && err.code == MT_E_MALFORMED;
    if (rc) {
      cli_report(read_failed ? in : of.name, &err);
      status = MT_EXIT_FAILURE;
    }
    int closed = mt_writer_close(w, &err);
    if (closed && status == MT_EXIT_OK) {
      cli_report(of.name, &err);
      status = MT_EXIT_FAILURE;
    }
    keep = !closed && (!rc || read_failed);
    /* IN cut mid-packet: OUT is every whole packet before the cut, and says so with 2, as check. */
    if (status == MT_EXIT_OK && mt_reader_truncated(r, NULL))
      status = MT_EXIT_PARTIAL;
  }
  if (!cli_output_file_close(&of, keep))
    status = MT_EXIT_FAILURE;
  mt_reader_close(r);
  return status;
}
