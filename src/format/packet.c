/* Packet header encoding and decoding (FORMAT.md §2.3): field order and sizes for v1/v2 (66 bytes)
 * and v3 (68 bytes, with a domain). */
#include "format/packet.h"

#include "format/buf.h"

void mt_packet_header_encode(const mt_packet_header *h, uint8_t *out) {
  mt_store_u32(out + 0, h->magic);
  mt_store_u32(out + 4, h->packet_size_bits);
  mt_store_u64(out + 8, (uint64_t)h->time_begin);
  mt_store_u64(out + 16, (uint64_t)h->time_end);
  mt_store_u32(out + 24, h->flush_duration);
  mt_store_u16(out + 28, h->version);
  mt_store_u64(out + 30, (uint64_t)h->pid);
  uint8_t *p = out + 38;
  if (h->version >= 3) {
    mt_store_u16(p, h->domain);
    p += 2;
  }
  mt_store_u16(p, h->verify_ix);
  mt_store_u16(p + 2, h->verify_pred);
  mt_store_u64(p + 4, (uint64_t)h->verify_val);
  mt_store_u64(p + 12, (uint64_t)h->alloc_id_begin);
  mt_store_u64(p + 20, (uint64_t)h->alloc_id_end);
}

size_t mt_packet_header_decode(const uint8_t *p, size_t avail, mt_packet_header *h) {
  if (avail < MT_HEADER_VERSION_OFFSET + 2)
    return 0;
  h->version = mt_load_u16(p + 28);
  size_t size = mt_header_size(h->version);
  if (avail < size)
    return 0;
  h->magic = mt_load_u32(p + 0);
  h->packet_size_bits = mt_load_u32(p + 4);
  h->time_begin = (int64_t)mt_load_u64(p + 8);
  h->time_end = (int64_t)mt_load_u64(p + 16);
  h->flush_duration = mt_load_u32(p + 24);
  h->pid = (int64_t)mt_load_u64(p + 30);
  const uint8_t *q = p + 38;
  h->domain = 0;
  if (h->version >= 3) {
    h->domain = mt_load_u16(q);
    q += 2;
  }
  h->verify_ix = mt_load_u16(q);
  h->verify_pred = mt_load_u16(q + 2);
  h->verify_val = (int64_t)mt_load_u64(q + 4);
  h->alloc_id_begin = (int64_t)mt_load_u64(q + 12);
  h->alloc_id_end = (int64_t)mt_load_u64(q + 20);
  return size;
}
