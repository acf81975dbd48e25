/* The location codec (FORMAT.md §2.6): MTF hits and eviction, clamping to the field widths, the
 * "<unknown>" truncation, the v1 reader quirk, and clean errors for empty MTF slots. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "format/location_codec.h"
#include "testutil.h"

typedef struct codec_pair {
  mt_location_encoder enc;
  mt_location_decoder dec;
  mt_location_table *table;
  uint8_t bytes[8192];
  mt_wbuf out;
} codec_pair;

static codec_pair *pair_new(void) {
  codec_pair *p = calloc(1, sizeof *p);
  p->table = mt_location_table_new();
  return p;
}

static void pair_free(codec_pair *p) {
  mt_location_encoder_free(&p->enc);
  mt_location_decoder_free(&p->dec);
  mt_location_table_free(p->table);
  free(p);
}

/* Encodes one list and decodes it back; returns the packed 48-bit word of the first entry. */
static uint64_t encode_decode(codec_pair *p, const mt_location *in, size_t n, mt_location *out,
                              size_t *out_n) {
  mt_wbuf_init(&p->out, p->bytes, sizeof p->bytes);
  assert_true(mt_location_encode(&p->enc, &p->out, 99, in, n));
  assert_false(p->out.overflow);
  assert_true(p->out.len <= MT_LOCATION_EVENT_MAX);
  mt_rbuf r;
  mt_rbuf_init(&r, p->bytes, p->out.len, 0);
  uint64_t code = 0;
  uint8_t count = 0;
  assert_true(mt_rbuf_u64(&r, &code) && mt_rbuf_u8(&r, &count));
  assert_int_equal(code, 99);
  int64_t bad;
  const char *reason;
  assert_int_equal(mt_location_decode(&p->dec, &r, p->table, count, out, &bad, &reason), MT_OK);
  assert_int_equal(mt_rbuf_left(&r), 0);
  *out_n = count;
  return count ? mt_load_u32(p->bytes + 9) | (uint64_t)mt_load_u16(p->bytes + 13) << 32 : 0;
}

static void mtf_hit_moves_to_front_and_reuses_index(void **state) {
  (void)state;
  codec_pair *p = pair_new();
  mt_location a = {"a.ml", "A.f", 1, 2, 3}, b = {"b.ml", "B.g", 4, 5, 6}, out[4];
  size_t n;
  uint64_t w = encode_decode(p, &a, 1, out, &n);
  assert_int_equal(w >> 38 & 31, 31); /* new file */
  assert_int_equal(w >> 43 & 31, 31); /* new defname */
  encode_decode(p, &b, 1, out, &n);
  w = encode_decode(p, &a, 1, out, &n); /* a.ml is now at index 1, A.f at 0 of its table */
  assert_int_equal(w >> 38 & 31, 1);
  assert_int_equal(w >> 43 & 31, 0);
  assert_string_equal(out[0].filename, "a.ml");
  assert_string_equal(out[0].defname, "A.f");
  assert_int_equal(out[0].line, 1);
  assert_int_equal(out[0].start_char, 2);
  assert_int_equal(out[0].end_char, 3);
  w = encode_decode(p, &a, 1, out, &n); /* and now at the front */
  assert_int_equal(w >> 38 & 31, 0);
  pair_free(p);
}

static void the_32nd_file_evicts_the_oldest(void **state) {
  (void)state;
  codec_pair *p = pair_new();
  char names[32][16];
  mt_location l = {NULL, "f", 1, 1, 1}, out[4];
  size_t n;
  for (int i = 0; i < 32; i++) {
    snprintf(names[i], sizeof names[i], "file%d.c", i);
    l.filename = names[i];
    encode_decode(p, &l, 1, out, &n);
    assert_string_equal(out[0].filename, names[i]);
  }
  l.filename = names[0]; /* evicted by file31 */
  uint64_t w = encode_decode(p, &l, 1, out, &n);
  assert_int_equal(w >> 38 & 31, 31);
  l.filename = names[2]; /* still there, at index 30 - 1 = 29 after the push of file0 */
  w = encode_decode(p, &l, 1, out, &n);
  assert_int_equal(w >> 38 & 31, 30);
  assert_string_equal(out[0].filename, names[2]);
  pair_free(p);
}

static void fields_are_clamped_to_their_widths(void **state) {
  (void)state;
  codec_pair *p = pair_new();
  mt_location in[2] = {{"x.c", "f", -1, -5, 5000}, {"x.c", "g", 0x100000, 256, 1024}}, out[2];
  size_t n;
  encode_decode(p, in, 2, out, &n);
  assert_int_equal(n, 2);
  assert_int_equal(out[0].line, 0xFFFFF);
  assert_int_equal(out[0].start_char, 0xFF);
  assert_int_equal(out[0].end_char, 0x3FF);
  assert_int_equal(out[1].line, 0xFFFFF);
  assert_int_equal(out[1].start_char, 0xFF);
  assert_int_equal(out[1].end_char, 0x3FF);
  pair_free(p);
}

static void oversized_lists_become_unknown(void **state) {
  (void)state;
  codec_pair *p = pair_new();
  char *long_name = malloc(5000);
  memset(long_name, 'x', 4999);
  long_name[4999] = 0;
  mt_location big = {long_name, "f", 7, 7, 7}, out[MT_LOCATIONS_MAX];
  size_t n;
  encode_decode(p, &big, 1, out, &n);
  assert_int_equal(n, 1);
  assert_string_equal(out[0].filename, "<unknown>");
  assert_string_equal(out[0].defname, "??");
  assert_int_equal(out[0].line, 1);
  mt_location *many = calloc(256, sizeof *many);
  for (int i = 0; i < 256; i++)
    many[i] = (mt_location){"a.c", "f", i, 0, 0};
  encode_decode(p, many, 256, out, &n);
  assert_int_equal(n, 1);
  assert_string_equal(out[0].filename, "<unknown>");
  encode_decode(p, many, 255, out, &n); /* 255 short entries fit */
  assert_int_equal(n, 255);
  assert_int_equal(out[254].line, 254);
  free(many);
  free(long_name);
  pair_free(p);
}

/* Hand-encoded entry: line 1, given file/def indices, optional strings. */
static size_t put_entry(uint8_t *at, unsigned file_ix, unsigned def_ix, const char *file,
                        const char *def) {
  uint64_t packed = 1 | (uint64_t)file_ix << 38 | (uint64_t)def_ix << 43;
  mt_store_u32(at, (uint32_t)packed);
  mt_store_u16(at + 4, (uint16_t)(packed >> 32));
  size_t n = 6;
  if (file) {
    memcpy(at + n, file, strlen(file) + 1);
    n += strlen(file) + 1;
  }
  if (def) {
    memcpy(at + n, def, strlen(def) + 1);
    n += strlen(def) + 1;
  }
  return n;
}

static void v1_quirk_new_file_inherits_evicted_defnames(void **state) {
  (void)state;
  mt_location_table *table = mt_location_table_new();
  mt_location_decoder dec = {0};
  uint8_t bytes[4096];
  size_t len = 0;
  char file[16], def[16];
  for (int i = 0; i < 31; i++) {
    snprintf(file, sizeof file, "f%d", i);
    snprintf(def, sizeof def, "d%d", i);
    len += put_entry(bytes + len, 31, 31, file, def);
  }
  /* A 32nd file whose defname is "index 0" of a table it never filled: only the quirk (inherit
   * the table of evicted f0, holding d0) makes this decodable. */
  len += put_entry(bytes + len, 31, 0, "f31", NULL);
  mt_rbuf r;
  mt_rbuf_init(&r, bytes, len, 0);
  mt_location out[32];
  int64_t bad;
  const char *reason;
  assert_int_equal(mt_location_decode(&dec, &r, table, 32, out, &bad, &reason), MT_OK);
  assert_string_equal(out[31].filename, "f31");
  assert_string_equal(out[31].defname, "d0");
  mt_location_decoder_free(&dec);
  mt_location_table_free(table);
}

static void empty_mtf_slot_is_a_clean_error(void **state) {
  (void)state;
  mt_location_table *table = mt_location_table_new();
  mt_location_decoder dec = {0};
  uint8_t bytes[64];
  size_t len = put_entry(bytes, 31, 31, "a", "b");
  size_t second = len;
  len += put_entry(bytes + len, 5, 0, NULL, NULL); /* only one file known */
  mt_rbuf r;
  mt_rbuf_init(&r, bytes, len, 1000);
  mt_location out[2];
  int64_t bad = -1;
  const char *reason = NULL;
  assert_int_equal(mt_location_decode(&dec, &r, table, 2, out, &bad, &reason), MT_E_MALFORMED);
  assert_int_equal(bad, 1000 + (int64_t)second);
  assert_non_null(strstr(reason, "empty slot"));
  mt_location_decoder_free(&dec);
  mt_location_table_free(table);
}

static void table_rejects_a_code_described_differently(void **state) {
  (void)state;
  mt_location_table *t = mt_location_table_new();
  const char *f = mt_location_table_intern(t, "a.c", 3);
  const char *g = mt_location_table_intern(t, "g", 1);
  assert_ptr_equal(f, mt_location_table_intern(t, "a.c", 3));
  mt_location one = {f, g, 1, 2, 3}, other = {f, g, 2, 2, 3};
  assert_int_equal(mt_location_table_add(t, 5, &one, 1), 1);
  assert_int_equal(mt_location_table_add(t, 5, &one, 1), 0);
  assert_int_equal(mt_location_table_add(t, 5, &other, 1), MT_E_MALFORMED);
  assert_int_equal(mt_location_table_add(t, 5, &one, 0), MT_E_MALFORMED);
  const mt_location *e;
  size_t n;
  assert_true(mt_location_table_lookup(t, 5, &e, &n));
  assert_int_equal(n, 1);
  assert_int_equal(e[0].line, 1);
  assert_false(mt_location_table_lookup(t, 6, &e, &n));
  mt_location_table_free(t);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(mtf_hit_moves_to_front_and_reuses_index),
      cmocka_unit_test(the_32nd_file_evicts_the_oldest),
      cmocka_unit_test(fields_are_clamped_to_their_widths),
      cmocka_unit_test(oversized_lists_become_unknown),
      cmocka_unit_test(v1_quirk_new_file_inherits_evicted_defnames),
      cmocka_unit_test(empty_mtf_slot_is_a_clean_error),
      cmocka_unit_test(table_rejects_a_code_described_differently),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
