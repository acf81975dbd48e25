/* The out-of-line half of buf.h: variable-length integers and strings on the write side. */
#include "format/buf.h"

size_t mt_vint_size(int64_t v) {
  if (v >= 0 && v <= 252)
    return 1;
  if (v >= 0 && v <= 0xFFFF)
    return 3;
  if (v >= -(INT64_C(1) << 31) && v < (INT64_C(1) << 31))
    return 5;
  return 9;
}

void mt_wbuf_vint(mt_wbuf *b, int64_t v) {
  if (v >= 0 && v <= 252) {
    mt_wbuf_u8(b, (uint8_t)v);
  } else if (v >= 0 && v <= 0xFFFF) {
    if (mt_wbuf_room(b, 3)) {
      b->data[b->len] = 253;
      mt_store_u16(b->data + b->len + 1, (uint16_t)v);
      b->len += 3;
    }
  } else if (v >= -(INT64_C(1) << 31) && v < (INT64_C(1) << 31)) {
    if (mt_wbuf_room(b, 5)) {
      b->data[b->len] = 254;
      mt_store_u32(b->data + b->len + 1, (uint32_t)v);
      b->len += 5;
    }
  } else if (mt_wbuf_room(b, 9)) {
    b->data[b->len] = 255;
    mt_store_u64(b->data + b->len + 1, (uint64_t)v);
    b->len += 9;
  }
}

void mt_wbuf_string(mt_wbuf *b, const char *s, size_t max_len) {
  size_t n = s ? strnlen(s, max_len) : 0;
  if (mt_wbuf_room(b, n + 1)) {
    if (n)
      memcpy(b->data + b->len, s, n);
    b->data[b->len + n] = 0;
    b->len += n + 1;
  }
}
