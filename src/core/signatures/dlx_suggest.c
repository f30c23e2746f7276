/*
 * dlx_suggest.c - the closest parameter name to a misspelt keyword.
 *
 * A kernel's keyword errors read like a def's (tests compare them with the interpreter's
 * own), and CPython 3.13 adds a suggestion to a def's: the same rule here, over bytes,
 * with a fixed row buffer (names longer than DLX_SUGGEST_MAX_NAME are never close).
 */
#include "dlx_suggest.h"

#include <string.h>

enum { MOVE_COST = 2, CASE_COST = 1 };

static int ascii_lower(int c) { return c >= 'A' && c <= 'Z' ? c + ('a' - 'A') : c; }

static size_t substitution_cost(char x, char y) {
  if (x == y) return 0;
  return ascii_lower((unsigned char)x) == ascii_lower((unsigned char)y) ? CASE_COST : MOVE_COST;
}

size_t dlx_suggest_distance(const char *a, size_t alen, const char *b, size_t blen,
                            size_t max_cost) {
  /* what both share at either end costs nothing and only lengthens the table */
  while (alen && blen && a[0] == b[0]) ++a, ++b, --alen, --blen;
  while (alen && blen && a[alen - 1] == b[blen - 1]) --alen, --blen;
  if (alen == 0 || blen == 0) { /* the rest of the longer inserted */
    size_t cost = (alen + blen) * MOVE_COST;
    return cost > max_cost ? max_cost + 1 : cost;
  }
  if (alen > DLX_SUGGEST_MAX_NAME || blen > DLX_SUGGEST_MAX_NAME) return max_cost + 1;
  if (blen < alen) { /* the row runs along the shorter */
    const char *t = a; a = b; b = t;
    size_t n = alen; alen = blen; blen = n;
  }
  if ((blen - alen) * MOVE_COST > max_cost) return max_cost + 1;
  size_t row[DLX_SUGGEST_MAX_NAME]; /* row[i]: cost of a[0..i] against b's prefix so far */
  for (size_t i = 0; i < alen; ++i) row[i] = (i + 1) * MOVE_COST;
  size_t result = 0;
  for (size_t j = 0; j < blen; ++j) {
    size_t diagonal = j * MOVE_COST, left = diagonal, lowest = (size_t)-1;
    for (size_t i = 0; i < alen; ++i) {
      size_t replace = diagonal + substitution_cost(b[j], a[i]);
      diagonal = row[i];
      size_t move = (left < diagonal ? left : diagonal) + MOVE_COST;
      left = row[i] = move < replace ? move : replace;
      if (left < lowest) lowest = left;
    }
    result = left;
    if (lowest > max_cost) return max_cost + 1; /* no later row can come back under */
  }
  return result;
}

int dlx_suggest(const char *wrong, size_t len, const char *const *names, size_t n) {
  int best = -1;
  size_t best_cost = (size_t)-1;
  for (size_t k = 0; k < n; ++k) {
    size_t nlen = strlen(names[k]);
    if (nlen == len && memcmp(names[k], wrong, len) == 0) continue;
    /* at most a third of the characters of both may change, and only a closer one wins */
    size_t limit = (len + nlen + 3) * MOVE_COST / 6;
    if (best >= 0 && best_cost - 1 < limit) limit = best_cost - 1;
    size_t cost = dlx_suggest_distance(wrong, len, names[k], nlen, limit);
    if (cost <= limit) best = (int)k, best_cost = cost;
  }
  return best;
}
