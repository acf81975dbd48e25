/* Backtrace encoding (FORMAT.md §2.7, writer algorithm): two hash choices per code with the "older
 * bucket loses, ties go to h2" rule, runs of correct predictions folded into one codeword (at most
 * 255 each), and the cut at 4096 - 10 bytes past the first codeword. Decoding is inlined in the
 * reader's event loop (reader.c), where it runs for every allocation. */
#include "format/backtrace_codec.h"

static void emit_hit(mt_wbuf *out, unsigned bucket, unsigned n) {
  if (n == 0) {
    mt_wbuf_u16(out, (uint16_t)(bucket << 2));
  } else if (n == 1) {
    mt_wbuf_u16(out, (uint16_t)(bucket << 2 | 1));
  } else {
    mt_wbuf_u16(out, (uint16_t)(bucket << 2 | 2));
    mt_wbuf_u8(out, (uint8_t)n);
  }
}

long mt_backtrace_encode(mt_backtrace_encoder *enc, mt_wbuf *out, const uint64_t *stack, long first,
                         int64_t alloc_id, mt_miss_fn on_miss, void *user) {
  size_t limit = out->len + MT_BACKTRACE_ENCODING_MAX - 10;
  long pos = first, codewords = 0;
  unsigned predictor = 0;
  while (pos >= 0 && out->len <= limit) {
    uint64_t code = stack[pos];
    unsigned h1 = mt_backtrace_hash1(code), h2 = mt_backtrace_hash2(code), hit;
    if (enc->loc[h1] == code) {
      hit = h1;
    } else if (enc->loc[h2] == code) {
      hit = h2;
    } else {
      if (!on_miss(user, code))
        return -1;
      unsigned b = enc->date[h1] < enc->date[h2] ? h1 : h2;
      enc->loc[b] = code;
      enc->date[b] = alloc_id;
      enc->next[predictor] = (uint16_t)b;
      mt_wbuf_u16(out, (uint16_t)(b << 2 | 3));
      mt_wbuf_u64(out, code);
      codewords++;
      predictor = b;
      pos--;
      continue;
    }
    enc->date[hit] = alloc_id;
    enc->next[predictor] = (uint16_t)hit;
    unsigned orig = hit, p = hit, n = 0;
    pos--;
    for (;;) {
      if (pos < 0 || out->len + 2 > limit) {
        emit_hit(out, orig, n);
        codewords++;
        return codewords;
      }
      unsigned q = enc->next[p];
      if (enc->loc[q] != stack[pos]) {
        emit_hit(out, orig, n);
        codewords++;
        predictor = p; /* the mispredicted frame is examined again from scratch */
        break;
      }
      if (n == 255) {
        emit_hit(out, orig, 255);
        codewords++;
        enc->date[q] = alloc_id;
        orig = q;
        n = 0;
      } else {
        n++;
      }
      p = q;
      pos--;
    }
  }
  return codewords;
}
