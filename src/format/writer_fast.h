/* The trace writer's state (writer.c) and its fast paths, inline for the writer itself and for a
 * caller that writes millions of events (the recorder, src/record/order.c): the common allocation
 * and collect without a call, the arguments passed in registers, and none of the general path's
 * bookkeeping. Private to the library. */
#ifndef MEMTAP_SRC_FORMAT_WRITER_FAST_H
#define MEMTAP_SRC_FORMAT_WRITER_FAST_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "format/backtrace_codec.h"
#include "common/file_identity.h"
#include "format/buf.h"
#include "format/location_codec.h"
#include "format/packet.h"
#include "memtap/format.h"

#define MT_WRITER_HEADROOM 4196 /* 100 + max(4096, 4096): room one event may need (§2.10) */
#define MT_WRITER_MAX_NEW_LOCATIONS 128 /* more staged locations than this force a flush */

typedef struct domain_writer {
  uint16_t domain;
  uint8_t packet[MT_PACKET_MAX];
  mt_wbuf buf;
  mt_packet_header open; /* verifier fields of the open events packet */
  int64_t t0, t1;
  int64_t start, next, chunk_end;
  unsigned verify_ix;
  /* Location events staged since the last flush, already encoded, in miss order. */
  uint8_t *staged;
  size_t staged_len, staged_cap;
  uint32_t *staged_sizes;
  size_t staged_count, staged_sizes_cap;
  mt_location_encoder locations;
  mt_backtrace_encoder cache;
  uint64_t *prev; /* previous full stack, OUTERMOST first: updating it costs only the new frames */
  size_t prev_len, prev_cap;
} domain_writer;

/* What every writer of one trace file shares: the descriptor, the trace-wide facts, the object-id
 * counter that hands out chunks, and the set of domains that have a writer. Writers of different
 * domains may run on different threads: the lock orders packet writes and chunk grabs. */
typedef struct trace_file {
  pthread_mutex_t lock;
  _Atomic int refs; /* writers sharing this; not under the lock, which a forked child may find
                       held forever (fork copies it as another thread held it) */
  int fd;
  mt_file_identity identity; /* fd's file at creation: packets go only there */
  int version;
  size_t header_size;
  int64_t pid;                   /* written into every packet */
  pid_t creator;                 /* getpid() at creation: a forked child must not write */
  unsigned long fork_generation; /* mt_writer_fork_generation at creation */
  int64_t start_time;
  int64_t id_counter; /* v3: the next chunk's first id */
  uint64_t domains_taken[65536 / 64];
} trace_file;

struct mt_writer {
  trace_file *file;
  domain_writer **domains;
  size_t ndomains;
  domain_writer *current;
  bool multiplexed; /* may switch domains (the initial writer); domain writers may not */
  int failed;       /* the status that stopped the writer, or 0 */
  /* The put_alloc in progress: its resolver, for misses. */
  mt_resolve_fn resolve;
  void *resolve_user;
  int resolve_status;
};

/* Bumped in a child at every fork (pthread_atfork, writer.c): a writer whose creation saw another
 * value belongs to a parent. */
extern atomic_ulong mt_writer_fork_generation;

/* The cheap check, for every put. */
static inline bool mt_writer_forked_since(const trace_file *f) {
  return atomic_load_explicit(&mt_writer_fork_generation, memory_order_relaxed) !=
         f->fork_generation;
}

static inline bool mt_writer_chunk_exhausted(const mt_writer *w, const domain_writer *d) {
  return w->file->version >= 3 && d->next == d->chunk_end;
}

/* A vint at `o`, where the room is known (begin_event's MT_WRITER_HEADROOM), the two-byte case
 * inline too; returns where the next byte goes. Bytes go through a local pointer: stores through
 * b->data could alias b itself, which would reload it after every byte. */
static inline __attribute__((always_inline)) uint8_t *mt_writer_vint_at(mt_wbuf *b, uint8_t *o,
                                                                        int64_t v) {
  if ((uint64_t)v <= 252) {
    *o = (uint8_t)v;
    return o + 1;
  }
  if ((uint64_t)v <= 0xFFFF) {
    o[0] = 253;
    mt_store_u16(o + 1, (uint16_t)v);
    return o + 3;
  }
  b->len = (size_t)(o - b->data);
  mt_wbuf_vint(b, v);
  return b->data + b->len;
}

/* Frames outside the common prefix that the fast path encodes itself. */
#define MT_WRITER_FAST_NEW_FRAMES 8

/* The common allocation, written without the general path's bookkeeping: the current domain, no
 * flush due, and a call stack that shares all but at most MT_WRITER_FAST_NEW_FRAMES frames with
 * the previous stack, counted from the outermost end, those frames valid codes already in the
 * backtrace cache (so that no location is staged: the same stack again, a sibling call site, a
 * loop calling from a few places). Writes the same bytes as mt_writer_put_alloc_in; false when
 * the general path must take it, having changed nothing. */
static inline __attribute__((always_inline)) bool
mt_writer_alloc_fast(mt_writer *w, int64_t time, int64_t length, int64_t nsamples, mt_source source,
                     const uint64_t *callstack, size_t callstack_length, bool same,
                     int64_t *obj_id) {
  domain_writer *d = w->current;
  size_t n = callstack_length, prefix = n;
  if (n == 0 || n > 252) /* 252: the prefix is a one-byte vint */
    return false;
  if (__builtin_expect(!same || n != d->prev_len, 0)) { /* same: the previous stack again */
    if (n > d->prev_cap)
      return false;
    size_t common = n < d->prev_len ? n : d->prev_len;
    prefix = 0;
    while (prefix < common && d->prev[prefix] == callstack[n - 1 - prefix])
      prefix++;
    if (n - prefix > MT_WRITER_FAST_NEW_FRAMES)
      return false;
    for (size_t i = 0; i < n - prefix; i++)
      if (!callstack[i] || (uint64_t)mt_code63(callstack[i]) != callstack[i] ||
          !mt_backtrace_cached(&d->cache, callstack[i]))
        return false;
  }
  if (mt_writer_forked_since(w->file) || w->failed || length < 0 || nsamples < 1 ||
      (unsigned)source > MT_SOURCE_EXTERNAL || time < d->t1 ||
      MT_PACKET_MAX - d->buf.len < MT_WRITER_HEADROOM ||
      d->staged_count > MT_WRITER_MAX_NEW_LOCATIONS ||
      (uint64_t)time - (uint64_t)d->t0 > MT_PACKET_MAX_SPAN || mt_writer_chunk_exhausted(w, d))
    return false;
  /* begin_event without a flush; MT_WRITER_HEADROOM leaves room for all of this event. */
  bool short_form = length >= 1 && length <= 16 && source == MT_SOURCE_MINOR && nsamples == 1;
  d->t1 = time;
  uint8_t *o = d->buf.data + d->buf.len, *count_at;
  mt_store_u32(o, mt_event_header(short_form ? (unsigned)(100 + length) : MT_CODE_ALLOC, time));
  o += 4;
  if (short_form) {
    o[0] = (uint8_t)prefix;
    o[1] = 0; /* no new code words, unless some are written below */
    count_at = o + 1;
    o += 2;
  } else {
    o = mt_writer_vint_at(&d->buf, o, length);
    o = mt_writer_vint_at(&d->buf, o, nsamples);
    o[0] = (uint8_t)source;
    o[1] = (uint8_t)prefix;
    mt_store_u16(o + 2, 0);
    count_at = o + 2;
    o += 4;
  }
  int64_t id = d->next++;
  if (prefix < n) {
    unsigned codewords =
        mt_backtrace_encode_cached(&d->cache, o, callstack, (long)(n - prefix) - 1, id, &o);
    if (short_form)
      count_at[0] = (uint8_t)codewords;
    else
      mt_store_u16(count_at, (uint16_t)codewords);
    for (size_t i = prefix; i < n; i++)
      d->prev[i] = callstack[n - 1 - i];
  }
  d->buf.len = (size_t)(o - d->buf.data);
  *obj_id = id;
  d->prev_len = n;
  return true;
}

/* The common collect (mt_writer_put_collect), as put_object_event and begin_event write it when
 * no flush is due; false when the general path must take it. */
static inline __attribute__((always_inline)) bool mt_writer_collect_fast(mt_writer *w, int64_t time,
                                                                         int64_t obj_id) {
  domain_writer *d = w->current;
  if (mt_writer_forked_since(w->file) || w->failed || time < d->t1 || obj_id < 0 ||
      (obj_id >= d->next && w->file->version < 3) ||
      MT_PACKET_MAX - d->buf.len < MT_WRITER_HEADROOM ||
      d->staged_count > MT_WRITER_MAX_NEW_LOCATIONS ||
      (uint64_t)time - (uint64_t)d->t0 > MT_PACKET_MAX_SPAN || mt_writer_chunk_exhausted(w, d))
    return false;
  d->t1 = time;
  uint8_t *o = d->buf.data + d->buf.len;
  mt_store_u32(o, mt_event_header(MT_CODE_COLLECT, time));
  o = mt_writer_vint_at(&d->buf, o + 4, (d->next - 1) - obj_id);
  d->buf.len = (size_t)(o - d->buf.data);
  return true;
}

/* The general path of mt_writer_put_alloc, for a caller that has tried mt_writer_alloc_fast. */
int mt_writer_put_alloc_general(mt_writer *w, int64_t time, int64_t length, int64_t nsamples,
                                mt_source source, const uint64_t *callstack,
                                size_t callstack_length, mt_resolve_fn resolve, void *resolve_user,
                                int64_t *obj_id, mt_error *err);

#endif
