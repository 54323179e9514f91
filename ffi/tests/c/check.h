/* Tiny check macros shared by the C test programs (no test framework needed). */
#ifndef KVEXACT_TEST_CHECK_H
#define KVEXACT_TEST_CHECK_H

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CHECK(cond)                                                                     \
  do {                                                                                  \
    if (!(cond)) {                                                                      \
      fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond);        \
      exit(1);                                                                          \
    }                                                                                   \
  } while (0)

#define CHECK_INT(got, want)                                                            \
  do {                                                                                  \
    long long g_ = (long long)(got), w_ = (long long)(want);                            \
    if (g_ != w_) {                                                                     \
      fprintf(stderr, "%s:%d: %s = %lld, want %lld\n", __FILE__, __LINE__, #got, g_, w_); \
      exit(1);                                                                          \
    }                                                                                   \
  } while (0)

#define CHECK_U64(got, want)                                                            \
  do {                                                                                  \
    uint64_t g_ = (uint64_t)(got), w_ = (uint64_t)(want);                               \
    if (g_ != w_) {                                                                     \
      fprintf(stderr, "%s:%d: %s = %" PRIu64 ", want %" PRIu64 "\n", __FILE__, __LINE__, \
              #got, g_, w_);                                                            \
      exit(1);                                                                          \
    }                                                                                   \
  } while (0)

#define CHECK_STR(got, want)                                                            \
  do {                                                                                  \
    const char *g_ = (got), *w_ = (want);                                               \
    if (g_ == NULL || strcmp(g_, w_) != 0) {                                            \
      fprintf(stderr, "%s:%d: %s = \"%s\", want \"%s\"\n", __FILE__, __LINE__, #got,   \
              g_ ? g_ : "(null)", w_);                                                  \
      exit(1);                                                                          \
    }                                                                                   \
  } while (0)

/* Checks a status; on mismatch prints the error object's code and message. */
#define CHECK_STATUS(expr, want, errp)                                                  \
  do {                                                                                  \
    kvexact_status s_ = (expr);                                                         \
    if (s_ != (want)) {                                                                 \
      fprintf(stderr, "%s:%d: %s returned %d (%s), want %d: %s: %s\n", __FILE__,       \
              __LINE__, #expr, (int)s_, kvexact_status_name(s_), (int)(want),          \
              kvexact_error_code(errp), kvexact_error_message(errp));                  \
      exit(1);                                                                          \
    }                                                                                   \
  } while (0)

#endif
