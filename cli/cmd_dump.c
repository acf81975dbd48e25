/* memtap dump: every event of a trace as memtrace's dump_trace prints it (FORMAT.md §6), byte for
 * byte, or as JSON lines (docs/cli.md). Location texts are formatted once per code and
 * copied for every frame, so dumping deep OCaml backtraces runs at memory speed. */
#include <getopt.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "common/arena.h"
#include "common/hashmap.h"
#include "output.h"

static const char usage[] =
    "usage: memtap dump [--no-domain | --json] TRACE\n"
    "\n"
    "Prints one line per allocation, promotion and collection, in file order, exactly as\n"
    "memtrace's dump_trace does:\n"
    "  TIME OBJ_ID alloc|alloc_major|alloc_ext NSAMPLES len=WORDS dom=D PREFIX: FRAMES...\n"
    "  TIME OBJ_ID promote|collect\n"
    "TIME is microseconds since the trace started; FRAMES are function@file:line:start-end,\n"
    "outermost first ($CODE for a frame without location).\n"
    "\n"
    "  --no-domain  omit the dom= field, as memtrace 0.2.x's dump_trace\n"
    "  --json       one JSON object per line: the trace info, each location the first time a\n"
    "               backtrace uses it, then the events (schema: docs/cli.md)\n"
    "  -h, --help   show this help\n"
    "\n"
    "Exit status: 0 when the whole trace was printed; 2 when it is truncated (everything before\n"
    "its incomplete last packet was printed, with a warning, as memtrace's dump prints it); 1\n"
    "when it is malformed (the error names the byte offset; everything before it was printed);\n"
    "64 for a bad command line.\n";

typedef struct frame_text {
  size_t len;
  char text[];
} frame_text;

typedef struct dumper {
  mt_reader *reader;
  const char *path;
  cli_out out;
  mt_arena arena;
  mt_hashmap texts; /* code -> frame_text* (text mode) or 1 (json: already described) */
  bool no_domain;
} dumper;

static const char *source_word[] = {"alloc", "alloc_major", "alloc_ext"};

static const frame_text *code_text(dumper *d, int64_t code, int64_t offset) {
  uint64_t found;
  if (mt_hashmap_get(&d->texts, code, &found))
    return (const frame_text *)(uintptr_t)found;
  const mt_location *locs;
  size_t n;
  if (!mt_reader_lookup_location(d->reader, code, &locs, &n)) {
    cli_error(d->path, "malformed trace at byte %lld: invalid location code 0x%" PRIx64,
              (long long)offset, (uint64_t)code);
    return NULL;
  }
  size_t len = 0;
  char small[64];
  if (n == 0)
    len = (size_t)snprintf(small, sizeof small, " $%" PRId64, code);
  for (size_t i = 0; i < n; i++)
    len += (size_t)snprintf(NULL, 0, " %s@%s:%d:%d-%d", locs[i].defname, locs[i].filename,
                            locs[i].line, locs[i].start_char, locs[i].end_char);
  frame_text *t = mt_arena_alloc(&d->arena, sizeof *t + len + 1);
  if (!t || !mt_hashmap_put(&d->texts, code, (uint64_t)(uintptr_t)t)) {
    cli_error(d->path, "out of memory");
    return NULL;
  }
  t->len = len;
  if (n == 0)
    memcpy(t->text, small, len + 1);
  size_t at = 0;
  for (size_t i = 0; i < n; i++)
    at += (size_t)snprintf(t->text + at, len + 1 - at, " %s@%s:%d:%d-%d", locs[i].defname,
                           locs[i].filename, locs[i].line, locs[i].start_char, locs[i].end_char);
  return t;
}

static int dump_text(dumper *d) {
  const mt_trace_info *info = mt_reader_info(d->reader);
  mt_event ev;
  mt_error err;
  int rc;
  while ((rc = mt_reader_next(d->reader, &ev, &err)) > 0 && !d->out.failed) {
    long long time = (long long)((uint64_t)ev.time - (uint64_t)info->start_time);
    if (ev.kind != MT_EVENT_ALLOC) {
      out_printf(&d->out, "%010lld %010lld %s\n", time, (long long)ev.obj_id,
                 ev.kind == MT_EVENT_PROMOTE ? "promote" : "collect");
      continue;
    }
    if (d->no_domain)
      out_printf(&d->out, "%010lld %010lld %s %lld len=%lld % 4lld:", time, (long long)ev.obj_id,
                 source_word[ev.source], (long long)ev.nsamples, (long long)ev.length,
                 (long long)ev.common_prefix);
    else
      out_printf(&d->out, "%010lld %010lld %s %lld len=%lld dom=%u % 4lld:", time,
                 (long long)ev.obj_id, source_word[ev.source], (long long)ev.nsamples,
                 (long long)ev.length, (unsigned)ev.domain, (long long)ev.common_prefix);
    for (size_t i = 0; i < ev.backtrace_length; i++) {
      const frame_text *t = code_text(d, ev.backtrace[i], ev.offset);
      if (!t)
        return MT_EXIT_FAILURE;
      out_bytes(&d->out, t->text, t->len);
    }
    out_bytes(&d->out, "\n", 1);
  }
  if (rc < 0) {
    out_flush(&d->out);
    cli_report(d->path, &err);
    return MT_EXIT_FAILURE;
  }
  return MT_EXIT_OK;
}

static bool json_describe(dumper *d, int64_t code, int64_t offset) {
  if (mt_hashmap_get(&d->texts, code, NULL))
    return true;
  const mt_location *locs;
  size_t n;
  if (!mt_reader_lookup_location(d->reader, code, &locs, &n)) {
    out_flush(&d->out);
    cli_error(d->path, "malformed trace at byte %lld: invalid location code 0x%" PRIx64,
              (long long)offset, (uint64_t)code);
    return false;
  }
  mt_hashmap_put(&d->texts, code, 1);
  out_printf(&d->out, "{\"type\":\"location\",\"code\":%" PRId64 ",\"locations\":[", code);
  for (size_t i = 0; i < n; i++) {
    out_str(&d->out, i ? ",{\"function\":" : "{\"function\":");
    out_json_string(&d->out, locs[i].defname);
    out_str(&d->out, ",\"file\":");
    out_json_string(&d->out, locs[i].filename);
    out_printf(&d->out, ",\"line\":%d,\"start_char\":%d,\"end_char\":%d}", locs[i].line,
               locs[i].start_char, locs[i].end_char);
  }
  out_str(&d->out, "]}\n");
  return true;
}

static const char *source_name[] = {"minor", "major", "external"};

static int dump_json(dumper *d) {
  const mt_trace_info *info = mt_reader_info(d->reader);
  cli_out *o = &d->out;
  out_printf(o,
             "{\"type\":\"trace_info\",\"schema\":\"memtap.dump/1\",\"version\":%d,"
             "\"start_time\":%lld,\"sample_rate\":%.17g,\"word_size\":%d,\"executable\":",
             info->version, (long long)info->start_time, info->sample_rate, info->word_size);
  out_json_string(o, info->executable_name);
  out_str(o, ",\"host\":");
  out_json_string(o, info->host_name);
  out_str(o, ",\"runtime_params\":");
  out_json_string(o, info->ocaml_runtime_params);
  out_printf(o, ",\"pid\":%lld,\"context\":", (long long)info->pid);
  out_json_string(o, info->context);
  out_str(o, "}\n");
  mt_event ev;
  mt_error err;
  int rc;
  while ((rc = mt_reader_next(d->reader, &ev, &err)) > 0 && !o->failed) {
    long long time = (long long)((uint64_t)ev.time - (uint64_t)info->start_time);
    if (ev.kind != MT_EVENT_ALLOC) {
      out_printf(o, "{\"type\":\"%s\",\"time\":%lld,\"id\":%lld,\"domain\":%u}\n",
                 ev.kind == MT_EVENT_PROMOTE ? "promote" : "collect", time, (long long)ev.obj_id,
                 (unsigned)ev.domain);
      continue;
    }
    for (size_t i = 0; i < ev.backtrace_length; i++)
      if (!json_describe(d, ev.backtrace[i], ev.offset))
        return MT_EXIT_FAILURE;
    out_printf(o,
               "{\"type\":\"alloc\",\"time\":%lld,\"id\":%lld,\"domain\":%u,\"source\":\"%s\","
               "\"nsamples\":%lld,\"length\":%lld,\"common_prefix\":%lld,\"backtrace\":[",
               time, (long long)ev.obj_id, (unsigned)ev.domain, source_name[ev.source],
               (long long)ev.nsamples, (long long)ev.length, (long long)ev.common_prefix);
    for (size_t i = 0; i < ev.backtrace_length; i++)
      out_printf(o, i ? ",%" PRId64 : "%" PRId64, ev.backtrace[i]);
    out_str(o, "]}\n");
  }
  if (rc < 0) {
    out_flush(o);
    cli_report(d->path, &err);
    return MT_EXIT_FAILURE;
  }
  return MT_EXIT_OK;
}

int mt_cmd_dump(int argc, char **argv) {
  static const struct option options[] = {{"no-domain", no_argument, NULL, 'n'},
                                          {"json", no_argument, NULL, 'j'},
                                          {"help", no_argument, NULL, 'h'},
                                          {0}};
  bool json = false, no_domain = false;
  int c;
  optind = 1;
  while ((c = cli_getopt(argc, argv, "h", options)) != -1) {
    switch (c) {
    case 'n': no_domain = true; break;
    case 'j': json = true; break;
    case 'h': fputs(usage, stdout); return MT_EXIT_OK;
    default: return cli_bad_option("dump");
    }
  }
  if (optind != argc - 1)
    return cli_one_trace_expected("dump", argc, argv);
  if (json && no_domain)
    return cli_usage_error("dump", "--json and --no-domain do not go together");
  /* Codes come from the trace: a seeded map, so they cannot be chosen to collide. */
  dumper d = {
      .path = argv[optind], .no_domain = no_domain, .texts = {.seed = mt_hashmap_random_seed()}};
  if (!(d.reader = cli_open_trace(d.path, true)))
    return MT_EXIT_FAILURE;
  out_init(&d.out, STDOUT_FILENO);
  int status = json ? dump_json(&d) : dump_text(&d);
  if (!out_finish(&d.out))
    status = MT_EXIT_FAILURE;
  /* Printed whole up to a cut: 2, as check and the analyses say of a truncated trace. */
  if (status == MT_EXIT_OK && mt_reader_truncated(d.reader, NULL))
    status = MT_EXIT_PARTIAL;
  mt_reader_close(d.reader);
  mt_hashmap_free(&d.texts);
  mt_arena_free(&d.arena);
  return status;
}
