/* Reader -> writer copy (format.h mt_transcode): events in file order, domain for domain,
 * backtraces turned back to innermost-first, locations resolved from the reader's table, object ids
 * mapped so that collects and promotes follow their objects whatever ids the writer hands out;
 * times optionally rounded to a coarser resolution. */
#include <stdlib.h>

#include "common/error.h"
#include "common/hashmap.h"
#include "memtap/format.h"

typedef struct transcode {
  mt_reader *reader;
  mt_hashmap ids; /* reader id -> writer id, for objects not yet collected */
  uint64_t *stack;
  size_t stack_cap;
} transcode;

static int resolve_from_reader(void *user, uint64_t code, const mt_location **entries,
                               size_t *count) {
  transcode *t = user;
  if (!mt_reader_lookup_location(t->reader, (int64_t)code, entries, count)) {
    *entries = NULL;
    *count = 0;
  }
  return MT_OK;
}

static int64_t mapped_id(transcode *t, int64_t id, bool forget) {
  uint64_t v;
  if (!mt_hashmap_get(&t->ids, id, &v))
    return id; /* never allocated in this trace: pass it through unchanged */
  if (forget)
    mt_hashmap_remove(&t->ids, id);
  return (int64_t)v;
}

/* `time` rounded down to a multiple of `step` after `start` (times before the start as they are:
 * monotonic either way). */
static inline int64_t rounded(int64_t time, int64_t start, int64_t step) {
  if (step <= 1 || time < start)
    return time;
  return time - (int64_t)((uint64_t)(time - start) % (uint64_t)step);
}

int mt_transcode(mt_reader *r, mt_writer *w, mt_error *err) {
  return mt_transcode_with(r, w, NULL, err);
}

int mt_transcode_with(mt_reader *r, mt_writer *w, const mt_transcode_options *options,
                      mt_error *err) {
  int64_t step = options ? options->time_resolution_us : 1;
  if (step < 0)
    return mt_fail(err, MT_E_INVALID, -1, "time resolution %lld us is negative", (long long)step);
  int64_t start = mt_reader_info(r)->start_time;
  /* The writer takes flat backtraces: a reader handing out runs is switched to flat arrays for the
   * copy and back to runs after it. */
  bool was_runs_only = mt_reader_runs_only(r), was_checking = mt_reader_check_codes(r);
  int rc;
  if (was_runs_only && (rc = mt_reader_set_runs_only(r, false, err)) != MT_OK)
    return rc;
  /* A code no location event described makes the trace malformed (FORMAT.md §6), as check and
   * dump say: the copy stops there rather than describe it as a frame without location. */
  mt_reader_set_check_codes(r, true);
  transcode t = {.reader = r, .ids = {.seed = mt_hashmap_random_seed()}}; /* ids: the trace's */
  mt_event ev;
  while ((rc = mt_reader_next(r, &ev, err)) > 0) {
    ev.time = rounded(ev.time, start, step);
    if (ev.kind == MT_EVENT_ALLOC) {
      if (ev.backtrace_length > t.stack_cap) {
        size_t cap = ev.backtrace_length * 2;
        uint64_t *grown = realloc(t.stack, cap * sizeof *grown);
        if (!grown) {
          rc = mt_fail(err, MT_E_NOMEM, -1, "out of memory");
          break;
        }
        t.stack = grown;
        t.stack_cap = cap;
      }
      for (size_t i = 0; i < ev.backtrace_length; i++)
        t.stack[i] = (uint64_t)ev.backtrace[ev.backtrace_length - 1 - i];
      int64_t id;
      rc = mt_writer_put_alloc_in(w, ev.domain, ev.time, ev.length, ev.nsamples, ev.source, t.stack,
                                  ev.backtrace_length, resolve_from_reader, &t, &id, err);
      if (rc)
        break;
      if (id != ev.obj_id || t.ids.count) {
        if (!mt_hashmap_put(&t.ids, ev.obj_id, (uint64_t)id)) {
          rc = mt_fail(err, MT_E_NOMEM, -1, "out of memory");
          break;
        }
      }
    } else if (ev.kind == MT_EVENT_PROMOTE) {
      rc = mt_writer_put_promote_in(w, ev.domain, ev.time, mapped_id(&t, ev.obj_id, false), err);
    } else {
      rc = mt_writer_put_collect_in(w, ev.domain, ev.time, mapped_id(&t, ev.obj_id, true), err);
    }
    if (rc == MT_E_INVALID) {
      /* The writer refuses an object no allocation read so far made (a reader skips packets it
       * cannot trust, a flipped pid among them): the input's fault, said at its byte. */
      rc = mt_fail(err, MT_E_MALFORMED, ev.offset,
                   "malformed trace at byte %lld: %s of object %lld, which no allocation read "
                   "before it made (was its packet skipped?)",
                   (long long)ev.offset, ev.kind == MT_EVENT_PROMOTE ? "promote" : "collect",
                   (long long)ev.obj_id);
    }
    if (rc)
      break;
  }
  /* A trace that went on past its last event (mt_reader_end_time) keeps its length. */
  if (rc == 0)
    rc = mt_writer_extend(w, rounded(mt_reader_end_time(r), start, step), err);
  mt_hashmap_free(&t.ids);
  free(t.stack);
  mt_reader_set_check_codes(r, was_checking);
  if (was_runs_only) {
    mt_error ignored;
    int back = mt_reader_set_runs_only(r, true, rc < 0 ? &ignored : err);
    if (rc >= 0 && back != MT_OK)
      rc = back;
  }
  return rc < 0 ? rc : MT_OK;
}
