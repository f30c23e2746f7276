/* dlx_suggest.h - "Did you mean 'axis'?" for a keyword no parameter has. */
#ifndef DLX_SUGGEST_H_
#define DLX_SUGGEST_H_

#include <stddef.h>

/* Names longer than this (after their common prefix and suffix with the other name are
 * dropped) are never close: what CPython's own suggestions allow. */
#define DLX_SUGGEST_MAX_NAME 40

/* The edit distance between a[alen] and b[blen] in CPython's units: 2 per inserted,
 * deleted or replaced byte, 1 for a byte replaced by itself in the other ASCII case. Any
 * result over max_cost is reported as max_cost + 1 (the work stops there). */
size_t dlx_suggest_distance(const char *a, size_t alen, const char *b, size_t blen,
                            size_t max_cost);

/* The index of the name in names[n] (NUL-terminated) closest to wrong[len], as CPython 3.13
 * picks one for an unexpected keyword argument: at most a third of the characters of the
 * two changed, ties to the earlier name, `wrong` itself never; -1 when none is close. */
int dlx_suggest(const char *wrong, size_t len, const char *const *names, size_t n);

#endif
