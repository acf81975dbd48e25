/* libFuzzer target for the trace reader: any bytes, read with and without backtrace decoding, every
 * backtrace code looked up (and checked by the reader itself, mt_reader_set_check_codes, against
 * those lookups), and every event copied through the writer (to /dev/null), which must either
 * accept it or refuse it with a status. Backtraces handed out as runs (runs_only, switched
 * on and off along the way as the first byte says) must expand to exactly the flat backtraces of a
 * second reader on the same bytes, with the same events and the same end. Nothing may crash, hang
 * or leak. */
#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "memtap/format.h"

static int dev_null = -1;

static void read_all(const uint8_t *data, size_t size, bool backtraces) {
  mt_reader_options options = {.backtraces = backtraces};
  mt_reader *r;
  if (mt_reader_open_memory(&r, data, size, &options, NULL))
    return;
  mt_event ev;
  while (mt_reader_next(r, &ev, NULL) > 0) {
    for (size_t i = 0; i < ev.backtrace_length; i++) {
      const mt_location *locs;
      size_t n;
      if (mt_reader_lookup_location(r, ev.backtrace[i], &locs, &n) && n)
        (void)locs[n - 1].defname[0];
    }
  }
  mt_reader_close(r);
}

/* Whether `runs` (from a runs-mode event) are maximal, cover the whole depth and spell `flat`. */
static bool runs_spell(const mt_event *runs, const mt_event *flat, const mt_event *previous) {
  if (runs->backtrace_length != flat->backtrace_length || runs->backtrace ||
      (runs->backtrace_length && !runs->backtrace_run_count))
    return false;
  size_t at = 0;
  for (size_t i = 0; i < runs->backtrace_run_count; i++) {
    const mt_backtrace_run *run = &runs->backtrace_runs[i];
    if (run->start != at || !run->count || run->count > flat->backtrace_length - at ||
        (i && runs->backtrace_runs[i - 1].code == run->code))
      return false;
    for (uint32_t k = 0; k < run->count; k++)
      if (flat->backtrace[at + k] != run->code)
        return false;
    at += run->count;
  }
  if (at != flat->backtrace_length || runs->common_runs > runs->backtrace_run_count)
    return false;
  /* The shared runs equal the previous allocation's (same domain) when it was read as runs too. */
  if (previous && previous->backtrace_runs)
    for (size_t i = 0; i < runs->common_runs; i++)
      if (i >= previous->backtrace_run_count ||
          memcmp(&runs->backtrace_runs[i], &previous->backtrace_runs[i], sizeof(mt_backtrace_run)))
        return false;
  return true;
}

/* The previous allocation's runs per domain (copied: the reader's are borrowed). */
typedef struct kept_runs {
  mt_event event;
  mt_backtrace_run *runs;
  size_t cap;
  bool valid;
} kept_runs;

static void keep(kept_runs *k, const mt_event *ev) {
  k->valid = ev->backtrace_runs != NULL;
  k->event = *ev;
  if (!k->valid)
    return;
  if (ev->backtrace_run_count > k->cap) {
    free(k->runs);
    k->cap = ev->backtrace_run_count;
    k->runs = malloc(k->cap * sizeof *k->runs);
    if (!k->runs)
      abort();
  }
  if (ev->backtrace_run_count)
    memcpy(k->runs, ev->backtrace_runs, ev->backtrace_run_count * sizeof *k->runs);
  k->event.backtrace_runs = k->runs;
}

static void runs_against_flat(const uint8_t *data, size_t size) {
  if (!size)
    return;
  unsigned switch_every = 1 + data[0] % 8; /* 8: never */
  mt_reader_options flat_options = {.backtraces = true};
  mt_reader_options runs_options = {.backtraces = true, .runs_only = true};
  mt_reader *flat, *runs;
  int a = mt_reader_open_memory(&flat, data, size, &flat_options, NULL);
  int b = mt_reader_open_memory(&runs, data, size, &runs_options, NULL);
  if ((a == MT_OK) != (b == MT_OK))
    abort();
  if (a != MT_OK)
    return;
  static kept_runs previous[65536];
  for (size_t i = 0; i < 65536; i++)
    previous[i].valid = false;
  mt_event f, r;
  for (unsigned n = 1;; n++) {
    int rf = mt_reader_next(flat, &f, NULL), rr = mt_reader_next(runs, &r, NULL);
    if (rf != rr)
      abort();
    if (rf <= 0)
      break;
    if (f.kind != r.kind || f.obj_id != r.obj_id || f.time != r.time || f.offset != r.offset)
      abort();
    if (f.kind == MT_EVENT_ALLOC) {
      bool as_runs = mt_reader_runs_only(runs);
      kept_runs *p = &previous[r.domain];
      if (as_runs ? !runs_spell(&r, &f, p->valid ? &p->event : NULL)
                  : (r.backtrace_length != f.backtrace_length ||
                     (f.backtrace_length &&
                      memcmp(r.backtrace, f.backtrace, f.backtrace_length * sizeof(int64_t)))))
        abort();
      keep(p, &r);
    }
    if (switch_every < 8 && n % switch_every == 0 &&
        mt_reader_set_runs_only(runs, !mt_reader_runs_only(runs), NULL) != MT_OK)
      abort();
  }
  for (size_t i = 0; i < 65536; i++) {
    free(previous[i].runs);
    previous[i].runs = NULL;
    previous[i].cap = 0;
  }
  mt_reader_close(flat);
  mt_reader_close(runs);
}

/* mt_reader_set_check_codes against looking every handed-out code up: a reader that checks codes
 * (runs, as memtap check reads) reads the same events as one that does not (flat), until it
 * fails; and it has failed by the time the other hands out a code no location event described.
 * (It may fail earlier: a miss never handed out is checked too.) */
static void checked_codes_against_lookups(const uint8_t *data, size_t size) {
  mt_reader_options flat_options = {.backtraces = true};
  mt_reader_options runs_options = {.backtraces = true, .runs_only = true};
  mt_reader *flat, *checked;
  int a = mt_reader_open_memory(&flat, data, size, &flat_options, NULL);
  int b = mt_reader_open_memory(&checked, data, size, &runs_options, NULL);
  if ((a == MT_OK) != (b == MT_OK))
    abort();
  if (a != MT_OK)
    return;
  mt_reader_set_check_codes(checked, true);
  mt_event f, c;
  mt_error err;
  for (;;) {
    int rf = mt_reader_next(flat, &f, NULL), rc = mt_reader_next(checked, &c, &err);
    bool undescribed = false;
    for (size_t i = 0; rf > 0 && i < f.backtrace_length && !undescribed; i++) {
      const mt_location *locs;
      size_t n;
      undescribed = !mt_reader_lookup_location(flat, f.backtrace[i], &locs, &n);
    }
    if (rc < 0 && strstr(err.message, "invalid location code"))
      break; /* at this event or before the flat reader meets an undescribed code */
    if (undescribed || rf != rc)
      abort();
    if (rf <= 0)
      break;
    if (f.kind != c.kind || f.obj_id != c.obj_id || f.time != c.time || f.offset != c.offset ||
        f.backtrace_length != c.backtrace_length)
      abort();
  }
  mt_reader_close(flat);
  mt_reader_close(checked);
}

static void transcode(const uint8_t *data, size_t size) {
  mt_reader_options options = {.backtraces = true};
  mt_reader *r;
  if (mt_reader_open_memory(&r, data, size, &options, NULL))
    return;
  mt_writer *w;
  mt_writer_options wopts = {.version = mt_reader_info(r)->version >= 3 ? 3 : 2};
  if (mt_writer_create(&w, dev_null, mt_reader_info(r), &wopts, NULL) == MT_OK) {
    mt_transcode(r, w, NULL);
    mt_writer_close(w, NULL);
  }
  mt_reader_close(r);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (dev_null < 0)
    dev_null = open("/dev/null", O_WRONLY);
  read_all(data, size, false);
  read_all(data, size, true);
  runs_against_flat(data, size);
  checked_codes_against_lookups(data, size);
  transcode(data, size);
  return 0;
}
