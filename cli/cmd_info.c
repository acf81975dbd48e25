/* memtap info: what memtrace's `identify` shows about a trace (who ran, where, when, at which rate;
 * event counts, estimated allocation rates, the size distribution), as text or JSON. */
#include <getopt.h>
#include <inttypes.h>
#include <math.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "memtap/analysis.h"
#include "go_input.h"
#include "output.h"

static const char usage[] =
    "usage: memtap info [--json] TRACE\n"
    "\n"
    "Describes a trace: file size, format version, start time (UTC), duration, executable,\n"
    "host, pid, word size, sampling rate, runtime parameters and context; event counts by kind;\n"
    "estimated allocation rates (samples / rate, per second of trace); and the distribution of\n"
    "sampled allocation sizes.\n"
    "\n"
    "  --json      one JSON object (schema memtap.info/1, see docs/cli.md)\n"
    "  -h, --help  show this help\n";

typedef struct tally {
  uint64_t allocs[3];  /* sampled allocation events by source */
  uint64_t samples[3]; /* nsamples by source */
  uint64_t promotes, collects;
  uint64_t size_le4, size_le16, size_le256, size_larger; /* sampled allocations by length */
  int64_t max_length;
  int64_t last_time;
  uint64_t domains_seen[1024]; /* bitmap of domain ids */
  unsigned domain_count;
} tally;

static void format_utc(int64_t us, char *buf, size_t size) {
  time_t seconds = (time_t)(us / 1000000);
  struct tm tm;
  if (!gmtime_r(&seconds, &tm)) {
    snprintf(buf, size, "?");
    return;
  }
  size_t n = strftime(buf, size, "%Y-%m-%dT%H:%M:%S", &tm);
  snprintf(buf + n, size - n, ".%06lldZ", (long long)(us % 1000000));
}

static double pct(uint64_t part, uint64_t whole) {
  return whole ? 100.0 * (double)part / (double)whole : 0.0;
}

int mt_cmd_info(int argc, char **argv) {
  static const struct option options[] = {
      {"json", no_argument, NULL, 'j'}, {"help", no_argument, NULL, 'h'}, {0}};
  bool json = false;
  int c;
  optind = 1;
  while ((c = cli_getopt(argc, argv, "h", options)) != -1) {
    switch (c) {
    case 'j': json = true; break;
    case 'h': fputs(usage, stdout); return MT_EXIT_OK;
    default: return cli_bad_option("info");
    }
  }
  if (optind != argc - 1)
    return cli_one_trace_expected("info", argc, argv);
  const char *path = argv[optind];
  bool go_damaged = false;
  mt_reader *r = cli_open_trace_partial(path, false, &go_damaged);
  if (!r)
    return MT_EXIT_FAILURE;
  const mt_trace_info *info = mt_reader_info(r);
  tally t = {.last_time = info->start_time};
  mt_event ev;
  mt_error err;
  int rc;
  while ((rc = mt_reader_next(r, &ev, &err)) > 0) {
    if (ev.time > t.last_time)
      t.last_time = ev.time;
    if (!(t.domains_seen[ev.domain / 64] >> (ev.domain % 64) & 1)) {
      t.domains_seen[ev.domain / 64] |= UINT64_C(1) << (ev.domain % 64);
      t.domain_count++;
    }
    if (ev.kind == MT_EVENT_PROMOTE) {
      t.promotes++;
    } else if (ev.kind == MT_EVENT_COLLECT) {
      t.collects++;
    } else {
      t.allocs[ev.source]++;
      t.samples[ev.source] += (uint64_t)ev.nsamples;
      if (ev.length <= 4)
        t.size_le4++;
      else if (ev.length <= 16)
        t.size_le16++;
      else if (ev.length <= 256)
        t.size_le256++;
      else
        t.size_larger++;
      if (ev.length > t.max_length)
        t.max_length = ev.length;
    }
  }
  /* The trace lasts until its last event or its last packet's end, whichever is later (a sampled
   * program's last sample may come long before it ended). */
  if (mt_reader_end_time(r) > t.last_time)
    t.last_time = mt_reader_end_time(r);
  /* Damage part-way: what was read before it is described, with a warning (exit 2). */
  bool damaged = rc < 0 && err.code == MT_E_MALFORMED;
  if (rc < 0 && !damaged) {
    cli_report(path, &err);
    mt_reader_close(r);
    return MT_EXIT_FAILURE;
  }
  bool go = cli_is_go_trace(path); /* converted first: the reader saw memtrace */
  /* Standard input that is a pipe has no size: what was read from it is. */
  struct stat st;
  bool piped = !strcmp(path, "-");
  int stat_rc = piped ? fstat(STDIN_FILENO, &st) : stat(path, &st);
  if (piped && stat_rc == 0 && !S_ISREG(st.st_mode))
    stat_rc = -1;
  long long file_size = stat_rc == 0 ? (long long)st.st_size : (long long)mt_reader_position(r);
  /* Counted as every analysis counts it: a damaged or crafted trace's times may be anything. */
  double duration = (double)mt_analysis_elapsed(t.last_time, info->start_time) / 1e6;
  uint64_t nallocs = t.allocs[0] + t.allocs[1] + t.allocs[2];
  bool rate_ok = info->sample_rate > 0 && info->sample_rate <= 1;
  double words_per_sample = rate_ok ? 1.0 / info->sample_rate : NAN;
  double est[3];
  for (int i = 0; i < 3; i++)
    est[i] = (double)t.samples[i] * words_per_sample;
  double per_second = duration > 0 ? 1.0 / duration : 0;
  char start[64];
  format_utc(info->start_time, start, sizeof start);
  int64_t cut = -1;
  bool truncated = mt_reader_truncated(r, &cut);
  static const char *names[] = {"minor", "major", "external"};

  cli_out o;
  out_init(&o, STDOUT_FILENO);
  if (json) {
    out_str(&o, "{\"schema\":\"memtap.info/1\",\"file\":");
    out_json_string(&o, path);
    out_printf(&o,
               ",\"file_size\":%lld,\"source\":\"%s\",\"version\":%d,\"start_time\":%lld,"
               "\"start_time_utc\":\"%s\",\"duration_s\":%.6f,\"executable\":",
               file_size, go ? "go" : "memtrace", info->version, (long long)info->start_time, start,
               duration);
    out_json_string(&o, info->executable_name);
    out_str(&o, ",\"host\":");
    out_json_string(&o, info->host_name);
    out_printf(&o, ",\"pid\":%lld,\"word_size\":%d,\"sample_rate\":%.17g,\"runtime_params\":",
               (long long)info->pid, info->word_size, info->sample_rate);
    out_json_string(&o, info->ocaml_runtime_params);
    out_str(&o, ",\"context\":");
    out_json_string(&o, info->context);
    out_printf(&o,
               ",\"domains\":%u,\"events\":{\"alloc\":%" PRIu64 ",\"alloc_major\":%" PRIu64
               ",\"alloc_ext\":%" PRIu64 ",\"promote\":%" PRIu64 ",\"collect\":%" PRIu64
               "},\"samples\":%" PRIu64,
               t.domain_count, t.allocs[0], t.allocs[1], t.allocs[2], t.promotes, t.collects,
               t.samples[0] + t.samples[1] + t.samples[2]);
    out_str(&o, ",\"estimated_words\":{");
    for (int i = 0; i < 3; i++)
      out_printf(&o, "%s\"%s\":%.0f", i ? "," : "", names[i], rate_ok ? est[i] : 0.0);
    out_str(&o, "},\"words_per_second\":{");
    for (int i = 0; i < 3; i++)
      out_printf(&o, "%s\"%s\":%.1f", i ? "," : "", names[i], rate_ok ? est[i] * per_second : 0);
    out_printf(&o,
               "},\"promoted_percent\":%.2f,\"sizes\":{\"le4\":%" PRIu64 ",\"le16\":%" PRIu64
               ",\"le256\":%" PRIu64 ",\"larger\":%" PRIu64 ",\"max_words\":%lld},"
               "\"truncated\":%s,\"skipped_packets\":%" PRIu64 ",\"damaged_at\":%lld}\n",
               pct(t.promotes, t.allocs[0]), t.size_le4, t.size_le16, t.size_le256, t.size_larger,
               (long long)t.max_length, truncated ? "true" : "false",
               mt_reader_warning_count(r) - (truncated ? 1 : 0),
               damaged ? (long long)err.offset : -1LL);
  } else {
    char n1[32], n2[32], n3[32], n4[32], n5[32], n6[32];
    out_printf(&o, "file:           %s (%s, %s byte%s%s)\n", path,
               out_format_bytes((double)file_size, n1), out_format_count((double)file_size, n2),
               out_plural((double)file_size), stat_rc == 0 ? "" : " read");
    if (go) { /* what the file is, then what memtap read it as */
      const char *f = strstr(info->ocaml_runtime_params, "format=");
      int flen = f ? (int)strcspn(f + 7, ",") : 0;
      out_printf(&o, "format:         Go execution trace%s%.*s%s, read as memtrace v%d\n",
                 f ? " (" : "", flen, f ? f + 7 : "", f ? ")" : "", info->version);
    } else {
      out_printf(&o, "format:         memtrace v%d\n", info->version);
    }
    out_printf(&o, "start time:     %s\n", start);
    out_printf(&o, "duration:       %.6f s\n", duration);
    out_line_field(&o, "executable:     ", info->executable_name);
    out_line_field(&o, "host:           ", info->host_name);
    out_printf(&o, "pid:            %lld\n", (long long)info->pid);
    out_printf(&o, "word size:      %d bits\n", info->word_size);
    char r1[40];
    out_printf(&o, "sample rate:    %s%s\n", out_format_decimal(info->sample_rate, r1),
               rate_ok ? "" : " (invalid: estimates are not available)");
    out_line_field(&o, "runtime params: ", info->ocaml_runtime_params);
    out_line_field(&o, "context:        ", info->context[0] ? info->context : "(none)");
    out_printf(&o, "domains:        %u\n", t.domain_count);
    out_printf(&o, "events:         %s allocation%s (%s minor, %s major, %s external), ",
               out_format_count((double)nallocs, n1), out_plural((double)nallocs),
               out_format_count((double)t.allocs[0], n2), out_format_count((double)t.allocs[1], n3),
               out_format_count((double)t.allocs[2], n4));
    out_printf(&o, "%s promotion%s, %s collection%s\n", out_format_count((double)t.promotes, n5),
               out_plural((double)t.promotes), out_format_count((double)t.collects, n6),
               out_plural((double)t.collects));
    out_printf(&o, "samples:        %s\n",
               out_format_count((double)(t.samples[0] + t.samples[1] + t.samples[2]), n1));
    if (rate_ok) {
      /* Words of the trace's word size; external blocks are bytes in the end (malloc), so they
       * get bytes per second too. */
      double bytes_per_second = est[2] * per_second * info->word_size / 8;
      out_printf(&o, "allocation rate (estimated from samples):\n");
      out_printf(&o, "  minor:        %s words/s (%.1f%% of sampled minor blocks promoted)\n",
                 out_format_count(est[0] * per_second, n1), pct(t.promotes, t.allocs[0]));
      out_printf(&o, "  major:        %s words/s\n", out_format_count(est[1] * per_second, n1));
      out_printf(&o, "  external:     %s words/s (%s/s)\n",
                 out_format_count(est[2] * per_second, n1), out_format_bytes(bytes_per_second, n2));
    }
    out_printf(&o, "sizes (sampled allocations):\n");
    out_printf(&o, "  <= 4 words:   %s (%.1f%%)\n", out_format_count((double)t.size_le4, n1),
               pct(t.size_le4, nallocs));
    out_printf(&o, "  <= 16 words:  %s (%.1f%%)\n", out_format_count((double)t.size_le16, n1),
               pct(t.size_le16, nallocs));
    out_printf(&o, "  <= 256 words: %s (%.1f%%)\n", out_format_count((double)t.size_le256, n1),
               pct(t.size_le256, nallocs));
    out_printf(&o, "  larger:       %s (%.1f%%)\n", out_format_count((double)t.size_larger, n1),
               pct(t.size_larger, nallocs));
    out_printf(&o, "  largest:      %s word%s\n", out_format_count((double)t.max_length, n1),
               out_plural((double)t.max_length));
    if (truncated)
      out_printf(&o,
                 "truncated:      at byte %lld (cut mid-packet: the writer stopped, or the "
                 "file was cut short)\n",
                 (long long)cut);
  }
  int status = out_finish(&o) ? MT_EXIT_OK : MT_EXIT_FAILURE;
  if (damaged) {
    char where[sizeof err.message + 64], read[32];
    cli_damage_text(&err, where, sizeof where);
    cli_error(path,
              "warning: %s; the figures above cover the %s read before it. memtrace traces carry "
              "no checksums, so events just before the damage may already be wrong",
              where, out_format_bytes((double)err.offset, read));
    if (status == MT_EXIT_OK)
      status = MT_EXIT_PARTIAL;
  }
  if ((truncated || go_damaged) && status == MT_EXIT_OK) /* the figures cover what came before */
    status = MT_EXIT_PARTIAL;
  mt_reader_close(r);
  return status;
}
