/* The floor of reading with backtraces, for bench_reader --read floor: the least work any reader
 * must do per event on a trace it trusts. Every event's header is read; every allocation's
 * codewords are read and the backtrace cache updated as FORMAT.md §2.7 says (the bucket each
 * codeword names, the prediction chain walked to its last bucket, the code of a miss stored), since
 * later events cannot be decoded without it; location events are decoded (their MTF tables run on
 * too). Nothing is checked and nothing is handed out: no event, no backtrace, no runs. Not a
 * reader: valid traces only (it stops at the first thing it does not expect). */
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "bench_floor.h"
#include "format/backtrace_codec.h"
#include "format/buf.h"
#include "format/location_codec.h"
#include "format/location_table.h"
#include "format/packet.h"

/* A vint (FORMAT.md §2.1) at p. */
static inline const uint8_t *skip_vint(const uint8_t *p) {
  uint8_t first = *p;
  return p + (first < 253 ? 1 : first == 253 ? 3 : first == 254 ? 5 : 9);
}

/* The codewords of one allocation: the cache updated, the bytes consumed. A miss stores its code
 * into its bucket, any other codeword into a spare slot, so that the codeword's kind costs no
 * misprediction; the prediction chain stops at a bucket that predicts itself (recursion: the
 * rest of the chain stays there). */
static inline const uint8_t *codewords(mt_backtrace_decoder *c, int64_t *spare, const uint8_t *p,
                                       unsigned count) {
  unsigned pred = 0;
  for (; count > 0; count--) {
    unsigned word = mt_load_u16(p), bucket = word >> 2, tag = word & 3;
    c->next[pred] = (uint16_t)bucket;
    int64_t *slot = tag == 3 ? &c->loc[bucket] : spare;
    *slot = mt_code63(mt_load_u64(p + 2)); /* the trace is padded: see bench_floor */
    unsigned steps = tag == 1 ? 1 : tag == 2 ? p[2] : 0;
    p += tag == 2 ? 3 : tag == 3 ? 10 : 2;
    pred = bucket;
    for (; steps > 0 && c->next[pred] != pred; steps--) /* a bucket predicting itself stays */
      pred = c->next[pred];
  }
  return p;
}

/* One packet's events after its header, [p, end). Returns the events, or -1 on what it does not
 * expect. */
static long packet_events(mt_backtrace_decoder *c, int64_t *spare, mt_location_decoder *ld,
                          mt_location_table *t, const uint8_t *p, const uint8_t *end) {
  static mt_location entries[MT_LOCATIONS_MAX];
  long events = 0;
  while (p < end) {
    unsigned code = mt_load_u32(p) >> 25;
    p += 4;
    if (code == MT_CODE_COLLECT || code == MT_CODE_PROMOTE) {
      p = skip_vint(p);
      events++;
    } else if (code >= MT_CODE_ALLOC_SHORT_FIRST && code <= MT_CODE_ALLOC_SHORT_LAST) {
      p = skip_vint(p);
      unsigned count = *p++;
      p = codewords(c, spare, p, count);
      events++;
    } else if (code == MT_CODE_ALLOC) {
      p = skip_vint(skip_vint(p)) + 1; /* length, nsamples, source */
      p = skip_vint(p);                /* common prefix */
      unsigned count = mt_load_u16(p);
      p = codewords(c, spare, p + 2, count);
      events++;
    } else if (code == MT_CODE_LOCATION) {
      mt_rbuf b;
      mt_rbuf_init(&b, p + 9, (size_t)(end - p - 9), 0);
      int64_t bad;
      const char *reason;
      if (mt_location_decode(ld, &b, t, p[8], entries, &bad, &reason))
        return -1;
      p = b.p;
    } else {
      return -1;
    }
  }
  return events;
}

int bench_floor(const char *path, long *events_out) {
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  struct stat st;
  if (fd < 0 || fstat(fd, &st) < 0)
    return -1;
  size_t size = (size_t)st.st_size;
  /* One page more than the file, so that a codeword's 8-byte load past the last one stays mapped
   * (the file's last page is padded with zeros; the one after is mapped anonymously). */
  uint8_t *data = mmap(NULL, size + 4096, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (data == MAP_FAILED ||
      mmap(data, size, PROT_READ, MAP_PRIVATE | MAP_FIXED, fd, 0) == MAP_FAILED) {
    close(fd);
    return -1;
  }
  close(fd);
  madvise(data, size, MADV_SEQUENTIAL); /* as the reader's input does */
  mt_backtrace_decoder *c = calloc(1, sizeof *c);
  mt_location_decoder ld = {0};
  mt_location_table *t = mt_location_table_new();
  int64_t spare = 0;
  long events = 0;
  int rc = 0;
  size_t at = 0;
  for (bool first = true; at + MT_HEADER_SIZE_V3 <= size; first = false) {
    mt_packet_header h;
    size_t hsize = mt_packet_header_decode(data + at, size - at, &h);
    size_t psize = h.packet_size_bits / 8;
    if (!hsize || psize < hsize || at + psize > size || h.domain != 0) {
      rc = -1;
      break;
    }
    if (!first) { /* packet 0 is trace_info */
      long n = packet_events(c, &spare, &ld, t, data + at + hsize, data + at + psize);
      if (n < 0) {
        rc = -1;
        break;
      }
      events += n;
    }
    at += psize;
  }
  mt_location_decoder_free(&ld);
  mt_location_table_free(t);
  free(c);
  munmap(data, size + 4096);
  *events_out = events;
  return rc;
}
