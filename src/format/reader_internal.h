/* The inside of an mt_reader (format.h), shared by reader.c (decoding) and reader_state.c (saving
 * and restoring the decoder state for checkpoints). Private to src/format. */
#ifndef MEMTAP_SRC_FORMAT_READER_INTERNAL_H
#define MEMTAP_SRC_FORMAT_READER_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "format/backtrace_codec.h"
#include "format/buf.h"
#include "format/input.h"
#include "format/location_codec.h"
#include "format/location_table.h"
#include "format/packet.h"
#include "memtap/format.h"

/* Bounds that keep memory proportional to the input (STYLE.md: every input is untrusted). */
#define MAX_BACKTRACE_FRAMES (1u << 24)
#define DOMAIN_MEMORY_FREE (64u << 20)   /* domain state allowed before any input is read */
#define DOMAIN_MEMORY_PER_INPUT_BYTE 256 /* and then per byte of input read */
#define DOMAIN_COST (sizeof(domain_state) + sizeof(mt_backtrace_decoder)) /* counted per domain */
#define CODEWORD_FRAMES 256 /* frames (and runs) one codeword yields at most: 1 + up to 255 */
#define FILL_SLACK 8        /* frames the flat array's 8-store fill may write past its end */

typedef struct domain_state {
  uint16_t id;
  int64_t last_time;
  mt_location_decoder locations;
  mt_backtrace_decoder *cache; /* allocated when the first backtrace is decoded */
  /* The previous backtrace (`depth` codes, outermost first): as runs when the reader hands out
   * runs only, else as a flat array (reader_backtrace.c); the other form is stale. */
  mt_backtrace_run *runs;
  size_t nruns, runs_cap;
  size_t depth;
  int64_t *backtrace;
  size_t backtrace_cap;
  mt_backtrace_run *scratch; /* decoding target when the previous backtrace was cut (§2.7 step 3) */
  size_t scratch_cap;
  /* mt_reader_next_alloc's fast path runs while nruns is below this: a runs reader, a decoder made
   * and room for the runs of a fast path's codewords (reader_backtrace.c); 0 otherwise. */
  size_t runs_fast_limit;
} domain_state;

struct mt_reader {
  mt_input *source;
  mt_reader_options options;
  bool check_codes; /* mt_reader_set_check_codes */
  mt_trace_info info;
  mt_location_table *locations;
  domain_state **domains;
  size_t ndomains;
  size_t domain_memory;
  /* The packet being decoded. */
  bool in_packet;
  mt_packet_header header;
  size_t header_size;
  size_t packet_size;
  uint64_t packet_span; /* time_end - time_begin */
  int64_t packet_offset;
  int64_t packets_end; /* the latest timestamp_end of the packets read whole */
  mt_rbuf content;
  domain_state *domain;
  int64_t allocs_in_packet;
  /* End and failure. */
  bool done;
  bool truncated;
  int64_t truncated_at;
  uint64_t warnings;
  uint64_t
      foreign_said; /* packets of other processes named to on_warning (MT_READER_FOREIGN_SAID) */
  /* Where the reader last began reading on (0, or the position a state was restored at), and the
   * packets whose warnings were reported before a rewind (mt_reader_rewind), [quiet_from,
   * quiet_to): read again, they are counted but not reported twice. */
  int64_t read_from, quiet_from, quiet_to;
  int failed;
  mt_error failure;
  mt_location decoded[MT_LOCATIONS_MAX];
};

/* The decoder state the bound allows once `position` bytes of input were read. */
static inline size_t mt_reader_domain_memory_allowed(int64_t position) {
  return DOMAIN_MEMORY_FREE + (size_t)position * DOMAIN_MEMORY_PER_INPUT_BYTE;
}

/* Keeps mt_reader_next's fast path out (reader.c) until the next packet is begun: after a failure,
 * at the end, after a restore. */
static inline void mt_reader_stop_fast(mt_reader *r) {
  r->content.end = r->content.p;
}

/* The state of domain `id`, created if new (NULL when the memory bound is reached). */
domain_state *mt_reader_find_domain(mt_reader *r, uint16_t id);
void mt_reader_free_domain(domain_state *d);

/* Finishes the packet whose events were all returned (its alloc-id check) and moves past it. */
int mt_reader_end_packet(mt_reader *r);

/* Fails the reader: malformed input at `offset`, or out of memory for `what`. Return the status. */
int mt_reader_malformed(mt_reader *r, int64_t offset, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
int mt_reader_out_of_memory(mt_reader *r, int64_t offset, const char *what);

/* Every event mt_reader_next's fast path leaves: packet boundaries, locations, damage, the end. */
int mt_reader_next_careful(mt_reader *r, mt_event *ev, mt_error *err);

/* A vint (FORMAT.md §2.1) known to lie whole in the input. */
static inline const uint8_t *mt_vint_at(const uint8_t *p, int64_t *v) {
  uint8_t first = p[0];
  if (__builtin_expect(first < 253, 1)) {
    *v = first;
    return p + 1;
  }
  if (first == 253) {
    *v = mt_load_u16(p + 1);
    return p + 3;
  }
  if (first == 254) {
    *v = (int32_t)mt_load_u32(p + 1);
    return p + 5;
  }
  *v = (int64_t)mt_load_u64(p + 1);
  return p + 9;
}

/* The header of an allocation (event code `code`, an allocation's) at `p`, known to lie whole in
 * the packet: kind, length, nsamples, source, short_form and common_prefix into `ev`, the common
 * prefix and codeword count into *prefix and *count; returns where its codewords start. NULL when
 * it breaks a rule (the careful path then says which). */
static inline __attribute__((always_inline)) const uint8_t *
mt_alloc_header(const uint8_t *p, unsigned code, mt_event *ev, int64_t *prefix, unsigned *count) {
  const uint8_t *q = p + 4;
  if (code != MT_CODE_ALLOC) {
    q = mt_vint_at(q, prefix);
    *count = *q++;
    if (*prefix < 0)
      return NULL;
    ev->length = code - 100;
    ev->nsamples = 1;
    ev->source = MT_SOURCE_MINOR;
    ev->short_form = true;
  } else {
    q = mt_vint_at(q, &ev->length);
    q = mt_vint_at(q, &ev->nsamples);
    unsigned source = *q++;
    q = mt_vint_at(q, prefix);
    *count = mt_load_u16(q);
    q += 2;
    if (source > MT_SOURCE_EXTERNAL || *prefix < 0 || ev->length < 0 || ev->nsamples < 1)
      return NULL; /* the careful path says why */
    ev->source = (mt_source)source;
    ev->short_form = false;
  }
  ev->kind = MT_EVENT_ALLOC;
  ev->common_prefix = *prefix;
  return q;
}

/* reader_backtrace.c */
/* Decodes an allocation's `count` codewords after `prefix` frames of the domain's previous
 * backtrace into `ev` (FORMAT.md §2.7 reader algorithm). */
int mt_reader_decode_backtrace(mt_reader *r, mt_event *ev, int64_t prefix, unsigned count);
/* mt_reader_next's allocation whose header (at `p`, its time `time` checked) lies whole in the
 * packet, read with backtraces: returns 1 with *ev stored, or a negative status with the reader's
 * failure copied to `err` (may be NULL). Anything unusual goes to the careful path. */
int mt_reader_next_alloc(mt_reader *r, mt_event *ev, mt_error *err, const uint8_t *p, unsigned code,
                         int64_t time);
/* The domain's flat backtrace rebuilt from its runs, or its runs from its flat backtrace of
 * `depth` codes. False when memory runs out. */
bool mt_reader_flatten(domain_state *d);
bool mt_reader_runs_of_flat(domain_state *d);
/* Frees a run array (they keep a sentinel before their first run). */
void mt_reader_free_runs(mt_backtrace_run *runs);

#endif
