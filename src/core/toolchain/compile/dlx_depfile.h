/*
 * dlx_depfile.h - the compiler's dependency output (gcc, clang and nvcc -MD -MF): every
 * file a compile read, so the cache key can cover each header a source includes. The
 * file is written by whatever program $CC names: parsed as untrusted text.
 */
#ifndef DLX_DEPFILE_H_
#define DLX_DEPFILE_H_

#include <stddef.h>

/* Make-rule syntax: "target: dep dep \<newline> dep", any number of rules. A rule's
 * target ends at the first ':' followed by a blank, a newline or the end. In paths, as
 * gcc, clang and nvcc write them: 2N+1 backslashes and a blank (space or tab) are N
 * backslashes and that blank, 2N and a blank are N backslashes ending the path; "\#" is
 * '#', "$$" a '$', and backslash-newline continues the line; other backslashes are
 * literal. A newline inside a path is written as it is (Make cannot quote it): a line
 * that holds no rule's ':' continues the path the newline interrupted (so an -MP phony
 * rule for such a path is not told apart: dlx does not ask for them). Each
 * prerequisite is handed to dep(ctx, path) once (a repeated path is skipped), in order;
 * dep returning non-zero stops the parse with -1.
 * Returns the number of paths, or -1 with err (a rule without ':', a NUL byte, no
 * memory, or dep's refusal). text[0..len) need not be NUL-terminated. */
int dlx_depfile_parse(const char *text, size_t len, int (*dep)(void *ctx, const char *path),
                      void *ctx, char *err, size_t errlen);

#endif /* DLX_DEPFILE_H_ */
