/* mt_go_import (memtap/import.h): the driver that reads a Go trace generation by generation
 * (go_batch), reads its tables (go_tables), merges its per-M events by time (go_merge) and hands
 * the alloc/free events to the conversion (go_heap), which writes the memtrace trace. */
#include "memtap/import.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "common/count_text.h"
#include "common/error.h"
#include "format/input.h"
#include "import/go_batch.h"
#include "import/go_events.h"
#include "import/go_heap.h"
#include "import/go_merge.h"
#include "import/go_tables.h"

bool mt_go_trace_detect(const void *data, size_t size) {
  return go_header_looks_like_trace(data, size);
}

typedef struct importer {
  mt_go_import_options o;
  mt_go_import_stats *stats;
  int out_fd;
  go_framer f;
  go_generation g;
  go_tables t;
  go_info info;
  go_merge m;
  go_heap h;
  bool heap_ready;
  mt_writer *w;
  uint64_t start_ticks;
  double start_ticks_d; /* (double)start_ticks, converted once */
  int64_t start_us;
  double us_per_tick; /* of the current generation */
  int64_t last_us;
} importer;

static int create_writer(importer *im, int64_t start, mt_error *err) {
  char params[128];
  snprintf(params, sizeof params, "memtap-go=%s,format=go1.%d,kinds=%s%s%s", mt_version(),
           im->f.version, (im->o.kinds & MT_GO_OBJECTS) ? "o" : "",
           (im->o.kinds & MT_GO_SPANS) ? "s" : "", (im->o.kinds & MT_GO_STACKS) ? "g" : "");
  mt_trace_info info = {
      .version = im->o.version,
      .start_time = start,
      .sample_rate = 1.0,
      .word_size = 64,
      .executable_name = im->o.executable_name ? im->o.executable_name : "go program",
      .host_name = "",
      .ocaml_runtime_params = params,
      .pid = 0,
      .context = "imported from a Go execution trace (GODEBUG=traceallocfree=1)",
  };
  mt_writer_options wo = {.version = im->o.version};
  int rc = mt_writer_create(&im->w, im->out_fd, &info, &wo, err);
  if (rc)
    return rc;
  go_heap_init(&im->h, im->w, im->o.kinds, &im->info, im->stats);
  im->heap_ready = true;
  im->last_us = start;
  im->stats->start_time = im->stats->end_time = start;
  return MT_OK;
}

/* Microseconds as int64, absurd values (only damaged traces have them) held within +-2^61. */
static int64_t to_int64(double us) {
  const double limit = (double)(INT64_C(1) << 61);
  if (!(us > -limit)) /* also NaN */
    return -(INT64_C(1) << 61);
  return us < limit ? (int64_t)us : INT64_C(1) << 61;
}

/* Sets the clock of a generation; the first one also fixes the trace's start. */
static int start_generation(importer *im, mt_error *err) {
  im->us_per_tick = 1e6 / (double)im->t.frequency;
  if (im->w)
    return MT_OK;
  im->start_ticks = im->g.min_time;
  im->start_ticks_d = (double)im->start_ticks;
  int64_t start = im->o.start_time;
  if (im->t.have_clock) {
    double wall = (double)im->t.clock_sec * 1e6 + (double)(im->t.clock_nsec / 1000);
    double since = ((double)im->t.clock_time - (double)im->start_ticks) * im->us_per_tick;
    start = to_int64(wall - since);
    im->stats->wall_clock = true;
  }
  const int64_t limit = INT64_C(1) << 61;
  im->start_us = start < -limit ? -limit : start > limit ? limit : start;
  return create_writer(im, im->start_us, err);
}

static int64_t to_us(const importer *im, uint64_t ticks) {
  double since = ((double)ticks - im->start_ticks_d) * im->us_per_tick;
  int64_t t = im->start_us + to_int64(since); /* both within +-2^61: no overflow */
  return t < im->last_us ? im->last_us : t;   /* the writer's times never go back */
}

static int run(importer *im, struct mt_input *in, mt_error *err) {
  int rc = go_framer_init(&im->f, in, err);
  if (rc)
    return rc;
  im->stats->format_version = im->f.version;
  for (;;) {
    rc = go_framer_next(&im->f, &im->g, err);
    if (rc <= 0)
      break;
    im->stats->generations++;
    im->stats->batches += im->g.nbatches;
    if (im->g.data.len > im->stats->largest_generation)
      im->stats->largest_generation = im->g.data.len;
    if ((rc = go_tables_read(&im->t, &im->g, im->f.version, &im->info, err)))
      break;
    im->stats->go_events += im->t.records;
    im->t.records = 0;
    if (im->info.present)
      im->stats->experiment = true;
    if ((rc = start_generation(im, err)))
      break;
    go_heap_new_generation(&im->h);
    if ((rc = go_merge_start(&im->m, &im->g, &im->t, im->f.version, err)))
      break;
    const go_event *ev;
    while ((rc = go_merge_next(&im->m, &ev, err)) > 0) {
      int64_t t = to_us(im, ev->time);
      im->last_us = t;
      if ((rc = go_heap_event(&im->h, ev, &im->t, t, err)))
        break;
    }
    im->stats->go_events += im->m.events;
    im->m.events = 0;
    if (rc < 0)
      break;
  }
  /* A generation handed over before damage that it could not do without (its tables come last):
   * the damage is what to say. */
  if (rc < 0 && im->g.damaged && im->f.deferred) {
    rc = im->f.deferred;
    if (err)
      *err = im->f.deferred_error;
  }
  if (rc == 0 && !im->w)
    rc = create_writer(im, im->o.start_time, err); /* no generation: an empty trace */
  return rc;
}

static void warn(const importer *im, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void warn(const importer *im, const char *fmt, ...) {
  if (!im->o.on_warning)
    return;
  char message[256];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(message, sizeof message, fmt, ap);
  va_end(ap);
  im->o.on_warning(im->o.warning_user, -1, message);
}

static void final_warnings(const importer *im) {
  const mt_go_import_stats *s = im->stats;
  if (!s->experiment) {
    warn(im, "the Go trace has no alloc/free events (it was not recorded with "
             "GODEBUG=traceallocfree=1 under Go 1.23 or later): no allocations imported");
    return;
  }
  uint64_t unknown = s->objects.unknown_frees + s->spans.unknown_frees + s->stacks.unknown_frees;
  /* Why, as far as the trace tells: without a start snapshot, whatever existed before tracing
   * is unknown; with one, stack memory (stacks, and the spans that hold them) that Go's runtime
   * reuses or caches without an event, in every real trace seen so far (docs/go.md). */
  bool snapshot = s->objects.snapshot || s->spans.snapshot || s->stacks.snapshot;
  const char *why = !snapshot ? "a trace without its start snapshot?"
                    : !s->objects.unknown_frees
                        ? "the usual cause: stack memory Go's runtime reuses without an event"
                        : "see docs/go.md";
  char n[4][32];
  if (unknown)
    warn(im,
         "%s free%s of memory the trace never showed allocated (%s objects, %s spans, %s stacks; "
         "%s) %s left out",
         mt_count_text(unknown, n[0]), unknown == 1 ? "" : "s",
         mt_count_text(s->objects.unknown_frees, n[1]), mt_count_text(s->spans.unknown_frees, n[2]),
         mt_count_text(s->stacks.unknown_frees, n[3]), why, unknown == 1 ? "was" : "were");
  if (s->objects_outside_spans)
    warn(im, "%s heap object%s in no span the trace showed: sized by %s type",
         mt_count_text(s->objects_outside_spans, n[0]), s->objects_outside_spans == 1 ? "" : "s",
         s->objects_outside_spans == 1 ? "its" : "their");
}

static int import_from(struct mt_input *in, int out_fd, const mt_go_import_options *options,
                       mt_go_import_stats *stats, mt_error *err) {
  mt_go_import_stats local;
  importer im;
  memset(&im, 0, sizeof im);
  if (options)
    im.o = *options;
  if (!im.o.kinds)
    im.o.kinds = MT_GO_ALL;
  if (!im.o.version)
    im.o.version = 3;
  if (im.o.version != 2 && im.o.version != 3)
    return mt_fail(err, MT_E_INVALID, -1, "memtrace version %d: 2 or 3", im.o.version);
  im.stats = stats ? stats : &local;
  memset(im.stats, 0, sizeof *im.stats);
  im.out_fd = out_fd;
  int rc = run(&im, in, err);
  if (im.heap_ready) {
    im.stats->objects.live_end = im.h.live_objects;
    im.stats->spans.live_end = im.h.spans.count;
    im.stats->stacks.live_end = im.h.stacks.count;
    im.stats->end_time = im.last_us;
  }
  /* Go writes a generation at least, even when tracing stops at once: a trace of its header
   * alone was cut short (it was a warning with an empty trace, exit 0, for every command). */
  if (rc == 0 && im.stats->generations == 0)
    rc = go_fail(err, (int64_t)mt_input_position(in),
                 "the trace ends after its header: it was cut short (or its program ended "
                 "before the trace was first written out), no generation to import");
  if (rc == 0) {
    rc = mt_writer_close(im.w, err);
    im.w = NULL;
    if (rc == 0)
      final_warnings(&im);
  }
  mt_writer_close(im.w, NULL);
  if (im.heap_ready)
    go_heap_free(&im.h);
  go_merge_free(&im.m);
  go_tables_free(&im.t);
  go_generation_free(&im.g);
  go_framer_free(&im.f);
  return rc;
}

int mt_go_import_fd(int in_fd, int out_fd, const mt_go_import_options *options,
                    mt_go_import_stats *stats, mt_error *err) {
  struct mt_input *in;
  int rc = mt_input_open_fd(&in, in_fd, false, err);
  if (rc)
    return rc;
  rc = import_from(in, out_fd, options, stats, err);
  mt_input_close(in);
  return rc;
}

int mt_go_import_memory(const void *data, size_t size, int out_fd,
                        const mt_go_import_options *options, mt_go_import_stats *stats,
                        mt_error *err) {
  struct mt_input *in;
  int rc = mt_input_open_memory(&in, data, size, err);
  if (rc)
    return rc;
  rc = import_from(in, out_fd, options, stats, err);
  mt_input_close(in);
  return rc;
}
