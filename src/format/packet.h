/* Packet headers and event headers of the memtrace format (FORMAT.md §2.3, §2.4): constants,
 * encoding, decoding. No rule checking beyond what the bytes alone say; the reader applies §2.11.
 */
#ifndef MEMTAP_SRC_FORMAT_PACKET_H
#define MEMTAP_SRC_FORMAT_PACKET_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define MT_CTF_MAGIC 0xC1FC1FC1u
#define MT_PACKET_MAX 32768 /* bytes, header included (§2.2) */
#define MT_HEADER_SIZE_V3 68
#define MT_HEADER_SIZE_V2 66
#define MT_HEADER_VERSION_OFFSET 28 /* enough bytes to learn the header's size */
#define MT_NO_VERIFY 0xFFFF
#define MT_TIME_MASK 0x1FFFFFF      /* the 25 time bits of an event header */
#define MT_PACKET_MAX_SPAN 30000000 /* µs a packet may span (§2.4) */

enum mt_event_code {
  MT_CODE_TRACE_INFO = 0,
  MT_CODE_LOCATION = 1,
  MT_CODE_ALLOC = 2,
  MT_CODE_PROMOTE = 3,
  MT_CODE_COLLECT = 4,
  MT_CODE_ALLOC_SHORT_FIRST = 101, /* alloc01 ... alloc16: length = code - 100 */
  MT_CODE_ALLOC_SHORT_LAST = 116,
};

typedef struct mt_packet_header {
  uint32_t magic;
  uint32_t packet_size_bits;
  int64_t time_begin;
  int64_t time_end;
  uint32_t flush_duration;
  uint16_t version;
  int64_t pid;
  uint16_t domain; /* 0 for v1/v2 */
  uint16_t verify_ix;
  uint16_t verify_pred;
  int64_t verify_val;
  int64_t alloc_id_begin;
  int64_t alloc_id_end;
} mt_packet_header;

/* Header size for a packet of `version`: 68 from v3 on, 66 before (§2.3). */
static inline size_t mt_header_size(unsigned version) {
  return version >= 3 ? MT_HEADER_SIZE_V3 : MT_HEADER_SIZE_V2;
}

/* Writes the header for h->version into `out` (mt_header_size bytes). */
void mt_packet_header_encode(const mt_packet_header *h, uint8_t *out);

/* Reads a header from `p`, which holds at least MT_HEADER_VERSION_OFFSET + 2 bytes, and, once the
 * version is known, mt_header_size(version) bytes: `avail` says how many there are. Returns the
 * header's size, or 0 if `avail` is too short (then h->version is set if it could be read). */
size_t mt_packet_header_decode(const uint8_t *p, size_t avail, mt_packet_header *h);

/* An event header word: the code in the top 7 bits, the low 25 bits of the time below. */
static inline uint32_t mt_event_header(unsigned code, int64_t time) {
  return (uint32_t)code << 25 | ((uint32_t)time & MT_TIME_MASK);
}

/* The absolute time of an event header's low bits in a packet that begins at `begin` (§2.4). */
static inline int64_t mt_event_time(uint32_t header, int64_t begin) {
  int64_t low = header & MT_TIME_MASK;
  if (low < (begin & MT_TIME_MASK))
    low += MT_TIME_MASK + 1;
  return (int64_t)(((uint64_t)begin & ~(uint64_t)MT_TIME_MASK) + (uint64_t)low);
}

/* OCaml keeps location codes as 63-bit ints: bit 63 is lost and bit 62 becomes the sign (§2.12). */
static inline int64_t mt_code63(uint64_t code) {
  return (int64_t)(code << 1) >> 1;
}

#endif
