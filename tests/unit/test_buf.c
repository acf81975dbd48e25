/* Primitive encodings (FORMAT.md §2.1): vint sizes at every boundary, negative values, the reader's
 * unsigned-253 / sign-extended-254 rule, strings, and reads that must not run past the end. */
#include <string.h>

#include "format/buf.h"
#include "testutil.h"

static int64_t round_trip(int64_t v, size_t *size) {
  uint8_t bytes[16];
  mt_wbuf w;
  mt_wbuf_init(&w, bytes, sizeof bytes);
  mt_wbuf_vint(&w, v);
  assert_false(w.overflow);
  *size = w.len;
  assert_int_equal(w.len, mt_vint_size(v));
  mt_rbuf r;
  mt_rbuf_init(&r, bytes, w.len, 0);
  int64_t back;
  assert_true(mt_rbuf_vint(&r, &back));
  assert_int_equal(mt_rbuf_left(&r), 0);
  return back;
}

static void vint_sizes_at_every_boundary(void **state) {
  (void)state;
  struct {
    int64_t v;
    size_t size;
  } cases[] = {
      {0, 1},
      {252, 1},
      {253, 3},
      {0xFFFF, 3},
      {0x10000, 5},
      {INT32_MAX, 5},
      {(int64_t)INT32_MAX + 1, 9},
      {-1, 5},
      {INT32_MIN, 5},
      {(int64_t)INT32_MIN - 1, 9},
      {INT64_MAX, 9},
      {INT64_MIN, 9},
      {(INT64_C(1) << 62) - 1, 9},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    size_t size;
    assert_int_equal(round_trip(cases[i].v, &size), cases[i].v);
    assert_int_equal(size, cases[i].size);
  }
}

static void vint_253_is_unsigned_and_254_sign_extends(void **state) {
  (void)state;
  const uint8_t u16[] = {253, 0xFF, 0xFF};
  const uint8_t s32[] = {254, 0xFE, 0xFF, 0xFF, 0xFF};
  mt_rbuf r;
  int64_t v;
  mt_rbuf_init(&r, u16, sizeof u16, 0);
  assert_true(mt_rbuf_vint(&r, &v));
  assert_int_equal(v, 65535);
  mt_rbuf_init(&r, s32, sizeof s32, 0);
  assert_true(mt_rbuf_vint(&r, &v));
  assert_int_equal(v, -2);
}

static void reads_never_pass_the_end(void **state) {
  (void)state;
  const uint8_t bytes[] = {255, 1, 2, 3, 4, 5, 6, 7}; /* a 9-byte vint cut at 8 */
  mt_rbuf r;
  int64_t v;
  uint64_t u64;
  uint32_t u32;
  mt_rbuf_init(&r, bytes, sizeof bytes, 100);
  assert_false(mt_rbuf_vint(&r, &v));
  assert_int_equal(mt_rbuf_offset(&r), 100); /* nothing consumed */
  mt_rbuf_init(&r, bytes, 7, 0);
  assert_false(mt_rbuf_u64(&r, &u64));
  mt_rbuf_init(&r, bytes, 3, 0);
  assert_false(mt_rbuf_u32(&r, &u32));
  const uint8_t no_nul[] = {'a', 'b'};
  const char *s;
  size_t len;
  mt_rbuf_init(&r, no_nul, sizeof no_nul, 0);
  assert_false(mt_rbuf_string(&r, &s, &len));
}

static void integers_are_little_endian(void **state) {
  (void)state;
  uint8_t bytes[16];
  mt_wbuf w;
  mt_wbuf_init(&w, bytes, sizeof bytes);
  mt_wbuf_u32(&w, 0xC1FC1FC1u);
  mt_wbuf_u16(&w, 0x0302);
  const uint8_t expected[] = {0xC1, 0x1F, 0xFC, 0xC1, 0x02, 0x03};
  assert_memory_equal(bytes, expected, sizeof expected);
}

static void strings_stop_at_nul_and_writes_never_overflow(void **state) {
  (void)state;
  uint8_t bytes[8];
  mt_wbuf w;
  mt_wbuf_init(&w, bytes, sizeof bytes);
  mt_wbuf_string(&w, "abc", 100);
  assert_int_equal(w.len, 4);
  assert_memory_equal(bytes, "abc", 4);
  mt_wbuf_string(&w, "toolong", 100); /* 8 bytes needed, 4 left */
  assert_true(w.overflow);
  assert_int_equal(w.len, 4);
  mt_rbuf r;
  mt_rbuf_init(&r, bytes, 4, 0);
  const char *s;
  size_t len;
  assert_true(mt_rbuf_string(&r, &s, &len));
  assert_int_equal(len, 3);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(vint_sizes_at_every_boundary),
      cmocka_unit_test(vint_253_is_unsigned_and_254_sign_extends),
      cmocka_unit_test(reads_never_pass_the_end),
      cmocka_unit_test(integers_are_little_endian),
      cmocka_unit_test(strings_stop_at_nul_and_writes_never_overflow),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
