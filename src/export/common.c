/* mt_export's dispatch and what every exporter shares: rounding values to integers whose total is
 * exact, JSON and XML text escaping. */
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "analysis/views.h"
#include "common/error.h"
#include "export/export_internal.h"

int mt_export(const mt_analysis *a, mt_export_format format, FILE *out,
              const mt_export_options *options, mt_error *err) {
  mt_export_options defaults = {0};
  if (!options)
    options = &defaults;
  if (options->focus && (format == MT_EXPORT_CHROME || format == MT_EXPORT_HTML))
    return mt_fail(err, MT_E_INVALID, -1,
                   "a focus is for folded stacks, SVG flame graphs, pprof and speedscope");
  if (options->metric == MT_METRIC_TEMPORARY && !mt_analysis_summary(a)->temporary_defined)
    return mt_fail(err, MT_E_UNSUPPORTED, -1,
                   "temporary allocations are only known when every allocation is recorded "
                   "(rate 1)");
  int rc;
  switch (format) {
  case MT_EXPORT_PPROF: rc = mt_export_pprof(a, out, options, err); break;
  case MT_EXPORT_SPEEDSCOPE: rc = mt_export_speedscope(a, out, options, err); break;
  case MT_EXPORT_CHROME: rc = mt_export_chrome(a, out, options, err); break;
  case MT_EXPORT_FOLDED: rc = mt_export_folded(a, out, options, err); break;
  case MT_EXPORT_FLAME_SVG: rc = mt_export_flame_svg(a, out, options, err); break;
  case MT_EXPORT_HTML: rc = mt_export_html(a, out, options, err); break;
  default: return mt_fail(err, MT_E_INVALID, -1, "unknown export format %d", (int)format);
  }
  static const char *const what[] = {
      [MT_EXPORT_PPROF] = "writing the pprof profile",
      [MT_EXPORT_SPEEDSCOPE] = "writing the speedscope profile",
      [MT_EXPORT_CHROME] = "writing the Chrome trace",
      [MT_EXPORT_FOLDED] = "writing the folded stacks",
      [MT_EXPORT_FLAME_SVG] = "writing the flame graph",
      [MT_EXPORT_HTML] = "writing the report",
  };
  if (rc == MT_OK && (fflush(out) != 0 || ferror(out)))
    return mt_fail_io(err, what[format]);
  return rc;
}

typedef struct share_rest {
  double fraction;
  size_t index;
} share_rest;

static int by_fraction_desc(const void *p, const void *q) {
  const share_rest *x = p, *y = q;
  if (x->fraction != y->fraction)
    return x->fraction < y->fraction ? 1 : -1;
  return (x->index > y->index) - (x->index < y->index);
}

/* Values beyond this are clamped to it: no real trace estimates 2^50 objects or bytes at one stack,
 * and a crafted one's (1e157 from a huge sample count) must neither overflow the integers nor
 * make the fix-up below run for ever. */
#define APPORTION_MAX 0x1p50

void mt_apportion(const double *values, size_t count, int64_t total, int64_t *out) {
  int64_t sum = 0;
  bool summed = true; /* the floors' sum fits */
  share_rest *r = malloc((count ? count : 1) * sizeof *r);
  for (size_t i = 0; i < count; i++) {
    double v = values[i] > 0 ? values[i] : 0; /* NaN too */
    if (v > APPORTION_MAX)
      v = APPORTION_MAX;
    out[i] = (int64_t)floor(v);
    summed = summed && !__builtin_add_overflow(sum, out[i], &sum);
    if (r)
      r[i] = (share_rest){v - (double)out[i], i};
  }
  int64_t left;
  /* Inputs that are no rounding error away from the total (more units off than four per value)
   * keep their floors: the total is then not met, but no loop runs through a nonsense gap. */
  if (!r || count == 0 || !summed || __builtin_sub_overflow(total, sum, &left) ||
      left > (int64_t)(4 * count + 1024) || left < -(int64_t)(4 * count + 1024))
    return free(r);
  qsort(r, count, sizeof *r, by_fraction_desc);
  /* Hand out the missing units to the largest remainders (round-robin if inputs were off by
   * more than one unit each); take surplus units back from the smallest ones still positive. */
  for (size_t k = 0; left > 0; k = (k + 1) % count, left--)
    out[r[k].index]++;
  while (left < 0) {
    bool any = false;
    for (size_t k = count; k-- > 0 && left < 0;)
      if (out[r[k].index] > 0)
        out[r[k].index]--, left++, any = true;
    if (!any)
      break;
  }
  free(r);
}

static double metric_total(const mt_analysis *a, mt_metric metric) {
  mt_stats t = mt_analysis_totals(a);
  return mt_analysis_metric(a, &t, metric);
}

int mt_export_focus(const mt_analysis *a, const mt_export_options *o, bool **keep, mt_error *err) {
  *keep = NULL;
  return o->focus ? mt_stacks_through(a, o->focus, keep, NULL, err) : MT_OK;
}

/* The estimated objects of a stats' amount: allocated for MT_METRIC_COUNT, else live or peak. */
static double objects_of(const mt_analysis *a, const mt_stats *s, mt_metric amount) {
  (void)a;
  return amount == MT_METRIC_COUNT  ? s->allocated.objects_estimated
         : amount == MT_METRIC_PEAK ? s->peak.objects_estimated
                                    : s->live.objects_estimated;
}

/* Each stack's value(a, stats, m), 0 for those `keep` leaves out, apportioned to `whole` rounded
 * (without `keep`) or to the kept values' rounded sum. */
static int64_t *apportioned(const mt_analysis *a, const bool *keep,
                            double (*value)(const mt_analysis *, const mt_stats *, mt_metric),
                            mt_metric m, double whole) {
  size_t n = mt_analysis_stack_count(a);
  double *v = malloc((n ? n : 1) * sizeof *v);
  int64_t *out = malloc((n ? n : 1) * sizeof *out);
  if (!v || !out) {
    free(v);
    free(out);
    return NULL;
  }
  double kept = 0;
  for (size_t i = 0; i < n; i++) {
    v[i] = keep && !keep[i] ? 0 : value(a, mt_analysis_stack_stats(a, i), m);
    kept += v[i] > 0 ? v[i] : 0;
  }
  double total = keep ? kept : whole;
  mt_apportion(v, n, total > 0 ? llround(total < 0x1p62 ? total : 0x1p62) : 0, out);
  free(v);
  return out;
}

int64_t *mt_export_stack_values(const mt_analysis *a, mt_metric metric, const bool *keep) {
  return apportioned(a, keep, mt_analysis_metric, metric, metric_total(a, metric));
}

int mt_export_values(const mt_analysis *a, const mt_export_options *o, mt_metric metric,
                     int64_t **values, mt_error *err) {
  bool *keep;
  *values = NULL;
  int rc = mt_export_focus(a, o, &keep, err);
  if (rc)
    return rc;
  *values = mt_export_stack_values(a, metric, keep);
  free(keep);
  return *values ? MT_OK : mt_fail(err, MT_E_NOMEM, -1, "out of memory");
}

int64_t *mt_export_stack_objects(const mt_analysis *a, bool inuse, bool at_peak, const bool *keep) {
  const mt_summary *s = mt_analysis_summary(a);
  const mt_amount *whole = !inuse ? &s->allocated : at_peak ? &s->at_peak : &s->live_end;
  mt_metric amount = !inuse ? MT_METRIC_COUNT : at_peak ? MT_METRIC_PEAK : MT_METRIC_LIVE;
  return apportioned(a, keep, objects_of, amount, whole->objects_estimated);
}

/* Length of the valid UTF-8 sequence at s, or 0. */
static size_t utf8_length(const unsigned char *s) {
  if (s[0] < 0x80)
    return 1;
  size_t n = s[0] >= 0xF0 && s[0] <= 0xF4 ? 4 : s[0] >= 0xE0 ? 3 : s[0] >= 0xC2 ? 2 : 0;
  if (s[0] > 0xF4)
    return 0;
  for (size_t i = 1; i < n; i++)
    if ((s[i] & 0xC0) != 0x80)
      return 0;
  if (n == 3 && ((s[0] == 0xE0 && s[1] < 0xA0) || (s[0] == 0xED && s[1] >= 0xA0)))
    return 0; /* overlong, or a surrogate */
  if (n == 4 && ((s[0] == 0xF0 && s[1] < 0x90) || (s[0] == 0xF4 && s[1] >= 0x90)))
    return 0;
  return n;
}

/* The JSON escape of the character at s (written to buf, at most 7 bytes) and how many bytes of s
 * it takes. */
static size_t json_escape(const unsigned char *s, char buf[8], size_t *len) {
  size_t n = utf8_length(s);
  if (n == 0) {
    *len = (size_t)snprintf(buf, 8, "\\udc%02x", *s);
    return 1;
  }
  if (n > 1) {
    memcpy(buf, s, n);
    *len = n;
    return n;
  }
  if (*s == '"' || *s == '\\') {
    buf[0] = '\\', buf[1] = (char)*s, *len = 2;
  } else if (*s < 0x20 || *s == 0x7F) {
    *len = (size_t)snprintf(buf, 8, "\\u%04x", *s);
  } else if (*s == '<') { /* keeps "</script>" out of JSON embedded in HTML */
    memcpy(buf, "\\u003c", 6), *len = 6;
  } else {
    buf[0] = (char)*s, *len = 1;
  }
  return 1;
}

void mt_json_string_cut(FILE *out, const char *str, size_t max) {
  static const char ellipsis[] = "\xe2\x80\xa6"; /* U+2026, 3 bytes */
  const unsigned char *s = (const unsigned char *)str;
  size_t written = 0;
  fputc('"', out);
  while (*s) {
    char buf[8];
    size_t len, used = json_escape(s, buf, &len);
    /* Room for this character and, unless it is the last, an ellipsis after it. */
    if (written + len + (s[used] ? sizeof ellipsis - 1 : 0) > max) {
      if (written + sizeof ellipsis - 1 <= max)
        fputs(ellipsis, out);
      break;
    }
    fwrite(buf, 1, len, out);
    written += len;
    s += used;
  }
  fputc('"', out);
}

void mt_json_string(FILE *out, const char *str) {
  mt_json_string_cut(out, str, SIZE_MAX);
}

void mt_xml_text(FILE *out, const char *str) {
  const unsigned char *u = (const unsigned char *)str;
  for (const char *s = str; *s; s++) {
    size_t n = utf8_length(u + (s - str));
    if (n == 0) { /* not UTF-8: XML must be */
      fputc('?', out);
      continue;
    }
    if (n > 1) {
      fwrite(s, 1, n, out);
      s += n - 1;
      continue;
    }
    switch (*s) {
    case '<': fputs("&lt;", out); break;
    case '>': fputs("&gt;", out); break;
    case '&': fputs("&amp;", out); break;
    case '"': fputs("&quot;", out); break;
    default:
      if ((unsigned char)*s < 0x20 && *s != '\t' && *s != '\n')
        fputc('?', out);
      else
        fputc(*s, out);
    }
  }
}
