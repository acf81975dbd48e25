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
    return cli_usage_error("info", "expected exactly one TRACE");
  const char *path = argv[optind];
  mt_reader *r = cli_open_trace(path, false);
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
  if (rc < 0) {
    cli_report(path, &err);
    mt_reader_close(r);
    return MT_EXIT_FAILURE;
  }
  struct stat st;
  long long file_size = stat(path, &st) == 0 ? (long long)st.st_size : -1;
  double duration = (double)((uint64_t)t.last_time - (uint64_t)info->start_time) / 1e6;
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
               ",\"file_size\":%lld,\"version\":%d,\"start_time\":%lld,\"start_time_utc\":\"%s\","
               "\"duration_s\":%.6f,\"executable\":",
               file_size, info->version, (long long)info->start_time, start, duration);
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
               "\"truncated\":%s,\"skipped_packets\":%" PRIu64 "}\n",
               pct(t.promotes, t.allocs[0]), t.size_le4, t.size_le16, t.size_le256, t.size_larger,
               (long long)t.max_length, truncated ? "true" : "false",
               mt_reader_warning_count(r) - (truncated ? 1 : 0));
  } else {
    out_printf(&o, "file:           %s (%lld bytes)\n", path, file_size);
    out_printf(&o, "format:         memtrace v%d\n", info->version);
    out_printf(&o, "start time:     %s\n", start);
    out_printf(&o, "duration:       %.6f s\n", duration);
    out_printf(&o, "executable:     %s\n", info->executable_name);
    out_printf(&o, "host:           %s\n", info->host_name);
    out_printf(&o, "pid:            %lld\n", (long long)info->pid);
    out_printf(&o, "word size:      %d bits\n", info->word_size);
    out_printf(&o, "sample rate:    %g%s\n", info->sample_rate,
               rate_ok ? "" : " (invalid: estimates are not available)");
    out_printf(&o, "runtime params: %s\n", info->ocaml_runtime_params);
    out_printf(&o, "context:        %s\n", info->context[0] ? info->context : "(none)");
    out_printf(&o, "domains:        %u\n", t.domain_count);
    out_printf(&o,
               "events:         %" PRIu64 " allocations (%" PRIu64 " minor, %" PRIu64
               " major, %" PRIu64 " external), %" PRIu64 " promotions, %" PRIu64 " collections\n",
               nallocs, t.allocs[0], t.allocs[1], t.allocs[2], t.promotes, t.collects);
    out_printf(&o, "samples:        %" PRIu64 "\n", t.samples[0] + t.samples[1] + t.samples[2]);
    if (rate_ok) {
      out_printf(&o, "allocation rate (estimated from samples):\n");
      out_printf(&o, "  minor:        %.4g words/s (%.1f%% of sampled minor blocks promoted)\n",
                 est[0] * per_second, pct(t.promotes, t.allocs[0]));
      out_printf(&o, "  major:        %.4g words/s\n", est[1] * per_second);
      out_printf(&o, "  external:     %.4g words/s (%.4g bytes/s)\n", est[2] * per_second,
                 est[2] * per_second * info->word_size / 8);
    }
    out_printf(&o, "sizes (sampled allocations):\n");
    out_printf(&o, "  <= 4 words:   %" PRIu64 " (%.1f%%)\n", t.size_le4, pct(t.size_le4, nallocs));
    out_printf(&o, "  <= 16 words:  %" PRIu64 " (%.1f%%)\n", t.size_le16,
               pct(t.size_le16, nallocs));
    out_printf(&o, "  <= 256 words: %" PRIu64 " (%.1f%%)\n", t.size_le256,
               pct(t.size_le256, nallocs));
    out_printf(&o, "  larger:       %" PRIu64 " (%.1f%%)\n", t.size_larger,
               pct(t.size_larger, nallocs));
    out_printf(&o, "  largest:      %lld words\n", (long long)t.max_length);
    if (truncated)
      out_printf(&o, "truncated:      at byte %lld (the writer stopped mid-packet)\n",
                 (long long)cut);
  }
  int status = out_finish(&o) ? MT_EXIT_OK : MT_EXIT_FAILURE;
  mt_reader_close(r);
  return status;
}
