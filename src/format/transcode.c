/* Reader -> writer copy (format.h mt_transcode): events in file order, domain for domain,
 * backtraces turned back to innermost-first, locations resolved from the reader's table, object ids
 * mapped so that collects and promotes follow their objects whatever ids the writer hands out;
 * times optionally rounded to a coarser resolution. A promote or collect of an object the reader
 * returned no allocation of (its packet skipped as another process's) keeps its id, unless that
 * names another object of the copy or the writer refuses it: then it is left out. */
#include <stdio.h>
#include <stdlib.h>

#include "common/error.h"
#include "common/hashmap.h"
#include "memtap/format.h"

typedef struct transcode {
  mt_reader *reader;
  mt_hashmap ids;     /* reader id -> writer id, for objects not yet collected */
  mt_hashmap renamed; /* the writer ids in `ids`: another object's, if a reader id named them */
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

/* The copy's id of the object the reader calls `id`; -1 when the copy has no name for it. */
static int64_t mapped_id(transcode *t, int64_t id, bool forget) {
  uint64_t v;
  if (!mt_hashmap_get(&t->ids, id, &v)) {
    /* No allocation read made it (or it was collected already): its id unchanged names nothing
     * in the copy either, unless the writer handed that id to another object that is still live
     * there (its allocation's packet skipped, the ids after it shift: FORMAT.md §2.11). */
    return mt_hashmap_get(&t->renamed, id, NULL) ? -1 : id;
  }
  if (forget) {
    mt_hashmap_remove(&t->ids, id);
    mt_hashmap_remove(&t->renamed, (int64_t)v);
  }
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
  uint64_t seed = mt_hashmap_random_seed(); /* ids: the trace's */
  transcode t = {.reader = r, .ids = {.seed = seed}, .renamed = {.seed = seed}};
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
      uint64_t old;
      if (id != ev.obj_id || t.ids.count) {
        if (mt_hashmap_get(&t.ids, ev.obj_id, &old)) /* an id the trace reuses */
          mt_hashmap_remove(&t.renamed, (int64_t)old);
        if (!mt_hashmap_put(&t.ids, ev.obj_id, (uint64_t)id) ||
            !mt_hashmap_put(&t.renamed, id, 0)) {
          rc = mt_fail(err, MT_E_NOMEM, -1, "out of memory");
          break;
        }
      }
    } else {
      bool promote = ev.kind == MT_EVENT_PROMOTE;
      bool known = mt_hashmap_get(&t.ids, ev.obj_id, NULL);
      int64_t id = mapped_id(&t, ev.obj_id, !promote);
      rc = id < 0    ? MT_E_INVALID
           : promote ? mt_writer_put_promote_in(w, ev.domain, ev.time, id, err)
                     : mt_writer_put_collect_in(w, ev.domain, ev.time, id, err);
      /* The object's allocation was not read (the reader skipped its packet, as memtrace's does,
       * and goes on: the trace is well-formed, as check says), and the copy cannot name it: the
       * event is left out, as its allocation was. */
      if (rc == MT_E_INVALID && !known) {
        rc = MT_OK;
        if (options && options->on_left_out) {
          char message[160];
          snprintf(message, sizeof message,
                   "%s of object %lld left out: no allocation read made it (its packet was "
                   "skipped?)",
                   promote ? "promote" : "collect", (long long)ev.obj_id);
          options->on_left_out(options->left_out_user, ev.offset, message);
        }
      }
    }
    if (rc)
      break;
  }
  /* A trace that went on past its last event (mt_reader_end_time) keeps its length. */
  if (rc == 0)
    rc = mt_writer_extend(w, rounded(mt_reader_end_time(r), start, step), err);
  mt_hashmap_free(&t.ids);
  mt_hashmap_free(&t.renamed);
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
