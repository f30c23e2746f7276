/* dlx_suggest.c: the near name offered for a misspelt keyword, by CPython 3.13's rule. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "dlx_suggest.h"

static size_t dist(const char *a, const char *b, size_t max) {
  return dlx_suggest_distance(a, strlen(a), b, strlen(b), max);
}

static int pick(const char *wrong, const char *const *names, size_t n) {
  return dlx_suggest(wrong, strlen(wrong), names, n);
}

static void test_distance_units(void **state) {
  (void)state;
  assert_int_equal(dist("axis", "axis", 10), 0);
  assert_int_equal(dist("axes", "axis", 10), 2);  /* one replaced */
  assert_int_equal(dist("Axis", "axis", 10), 1);  /* case only */
  assert_int_equal(dist("AXIS", "axis", 10), 4);
  assert_int_equal(dist("ou", "out", 10), 2);     /* one inserted */
  assert_int_equal(dist("outt", "out", 10), 2);   /* one deleted */
  assert_int_equal(dist("", "abc", 10), 6);
  assert_int_equal(dist("kitten", "sitting", 20), 6); /* 2 replaced, 1 inserted */
  assert_int_equal(dist("sitting", "kitten", 20), 6); /* symmetric */
}

static void test_distance_stops_over_the_limit(void **state) {
  (void)state;
  assert_int_equal(dist("kitten", "sitting", 3), 4); /* max + 1 */
  assert_int_equal(dist("a", "abcdefgh", 5), 6);      /* after the prefix: 7 inserts */
  char longer[64];
  memset(longer, 'x', sizeof longer - 1);
  longer[sizeof longer - 1] = 0;
  /* over DLX_SUGGEST_MAX_NAME once the shared ends are gone: never close */
  assert_int_equal(dist("ab", longer, 1000), 1001);
  /* a long name that differs only in one byte is still measured (the ends are shared) */
  char other[64];
  memcpy(other, longer, sizeof other);
  other[30] = 'y';
  assert_int_equal(dist(longer, other, 10), 2);
}

static void test_suggestions_as_cpython_313_gives_them(void **state) {
  (void)state;
  const char *const softmax[] = {"x", "out", "axis"};
  assert_int_equal(pick("axes", softmax, 3), 2);
  assert_int_equal(pick("Axis", softmax, 3), 2);
  assert_int_equal(pick("ou", softmax, 3), 1);
  assert_int_equal(pick("outt", softmax, 3), 1);
  assert_int_equal(pick("axis_", softmax, 3), 2);
  assert_int_equal(pick("xx", softmax, 3), 0);
  /* too far: a third of the characters at most */
  assert_int_equal(pick("AXIS", softmax, 3), -1);
  assert_int_equal(pick("a", softmax, 3), -1);
  assert_int_equal(pick("weights", softmax, 3), -1);
  /* the name itself is never offered; no names, no offer */
  assert_int_equal(pick("x", softmax, 1), -1);
  assert_int_equal(pick("x", softmax, 0), -1);
}

static void test_ties_go_to_the_earlier_name(void **state) {
  (void)state;
  const char *const names[] = {"bat", "cat", "hat"};
  assert_int_equal(pick("rat", names, 3), 0);
  const char *const closer_later[] = {"bta", "bat"};
  assert_int_equal(pick("bot", closer_later, 2), 1); /* 2 beats 4 */
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_distance_units),
      cmocka_unit_test(test_distance_stops_over_the_limit),
      cmocka_unit_test(test_suggestions_as_cpython_313_gives_them),
      cmocka_unit_test(test_ties_go_to_the_earlier_name),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
