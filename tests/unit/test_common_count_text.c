/* Grouped counts (common/count_text.h), the one style of every count memtap prints: commas every
 * three digits from the right, none below 1,000, all 20 digits of the largest count. */
#include <stdint.h>
#include <string.h>

#include "common/count_text.h"
#include "testutil.h"

static void digits_are_grouped_by_three_from_the_right(void **state) {
  (void)state;
  static const struct {
    uint64_t value;
    const char *text;
  } cases[] = {{0, "0"},
               {7, "7"},
               {999, "999"},
               {1000, "1,000"},
               {12345, "12,345"},
               {981315, "981,315"},
               {1000000, "1,000,000"},
               {10000000, "10,000,000"},
               {UINT64_MAX, "18,446,744,073,709,551,615"}};
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    char buf[MT_COUNT_TEXT_SIZE + 5];
    memset(buf, 'x', sizeof buf);
    assert_string_equal(mt_count_text(cases[i].value, buf), cases[i].text);
    assert_true(strlen(buf) < MT_COUNT_TEXT_SIZE);
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(digits_are_grouped_by_three_from_the_right),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
