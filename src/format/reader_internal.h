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
#define CODEWORD_ROOM                                                                              \
  (256 + 8) /* frames one codeword yields (1 + up to 255), + fill_frames' slack */

typedef struct domain_state {
  uint16_t id;
  int64_t last_time;
  mt_location_decoder locations;
  mt_backtrace_decoder *cache; /* allocated when the first backtrace is decoded */
  int64_t *backtrace;          /* the previous backtrace, outermost first */
  size_t backtrace_length, backtrace_cap;
  int64_t *scratch; /* decoding target when the previous backtrace was cut (§2.7 step 3) */
  size_t scratch_cap;
} domain_state;

struct mt_reader {
  mt_input *source;
  mt_reader_options options;
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
  mt_rbuf content;
  domain_state *domain;
  int64_t allocs_in_packet;
  /* End and failure. */
  bool done;
  bool truncated;
  int64_t truncated_at;
  uint64_t warnings;
  int failed;
  mt_error failure;
  mt_location decoded[MT_LOCATIONS_MAX];
};

/* The decoder state the bound allows once `position` bytes of input were read. */
static inline size_t mt_reader_domain_memory_allowed(int64_t position) {
  return DOMAIN_MEMORY_FREE + (size_t)position * DOMAIN_MEMORY_PER_INPUT_BYTE;
}

/* The state of domain `id`, created if new (NULL when the memory bound is reached). */
domain_state *mt_reader_find_domain(mt_reader *r, uint16_t id);
void mt_reader_free_domain(domain_state *d);

/* Finishes the packet whose events were all returned (its alloc-id check) and moves past it. */
int mt_reader_end_packet(mt_reader *r);

#endif
