/* The registry extras of §6.2 on the sample registry (testdata/registry), for a program that
 * has already loaded it: discovery JSON (size query, too-small buffer, fetch), the drift check,
 * the profile document as JSON, and rule admission (one admitted rule, one refusal with its
 * rule code). Everything it allocates is freed. Include after kvexact.h and check.h. */
#ifndef KVEXACT_TEST_REGISTRY_CHECKS_H
#define KVEXACT_TEST_REGISTRY_CHECKS_H

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "kvexact.h"
#include "check.h"

/* Fetches a size-query document: size query with no buffer, a buffer one byte short (nothing
 * written), then the exact size. Returns a NUL-terminated malloc'd copy (caller frees). */
#define REGISTRY_CHECKS_FETCH(call_with /* (buf, cap, &len) */, out)                   \
  do {                                                                                  \
    size_t n_ = 0, len_ = 0;                                                            \
    CHECK_INT(call_with(NULL, 0, &n_), KVEXACT_ERR_BUFFER_TOO_SMALL);                    \
    CHECK(n_ > 2);                                                                      \
    char *b_ = (char *)malloc(n_ + 1);                                                  \
    CHECK(b_ != NULL);                                                                  \
    memset(b_, 'x', n_ + 1);                                                            \
    CHECK_INT(call_with((uint8_t *)b_, n_ - 1, &len_), KVEXACT_ERR_BUFFER_TOO_SMALL);    \
    CHECK_INT(len_, n_);                                                                \
    for (size_t i_ = 0; i_ <= n_; i_++) CHECK(b_[i_] == 'x');                           \
    len_ = 0;                                                                           \
    CHECK_INT(call_with((uint8_t *)b_, n_, &len_), KVEXACT_OK);                          \
    CHECK_INT(len_, n_);                                                                \
    CHECK(b_[n_] == 'x');                                                               \
    b_[n_] = '\0';                                                                      \
    (out) = b_;                                                                         \
  } while (0)

static const kvexact_registry *registry_checks_reg_;
static const kvexact_profile *registry_checks_profile_;

static kvexact_status registry_checks_discovery_(uint8_t *buf, size_t cap, size_t *len) {
  return kvexact_registry_discovery_json(registry_checks_reg_, buf, cap, len);
}

static kvexact_status registry_checks_profile_json_(uint8_t *buf, size_t cap, size_t *len) {
  return kvexact_profile_json(registry_checks_profile_, buf, cap, len);
}

static void run_registry_checks(kvexact_registry *reg) {
  const char *qwen3 = "qwen3-06b-default-v1", *qwen25 = "qwen25-7b-instruct-v1";
  const char *model = "Qwen/Qwen3-0.6B";
  kvexact_error *err = NULL;

  /* Discovery: both profiles and this generation's setDigest. */
  registry_checks_reg_ = reg;
  char *doc = NULL;
  REGISTRY_CHECKS_FETCH(registry_checks_discovery_, doc);
  CHECK(strlen(doc) > 2 && doc[0] == '{');
  CHECK(strstr(doc, "\"profileId\":\"qwen3-06b-default-v1\"") != NULL);
  CHECK(strstr(doc, "\"profileId\":\"qwen25-7b-instruct-v1\"") != NULL);
  char hex[65];
  CHECK_STATUS(kvexact_registry_set_digest(reg, hex), KVEXACT_OK, NULL);
  char want_digest[80];
  snprintf(want_digest, sizeof want_digest, "\"setDigest\":\"%s\"", hex);
  CHECK(strstr(doc, want_digest) != NULL);
  free(doc);
  size_t len = 0;
  CHECK_INT(kvexact_registry_discovery_json(NULL, NULL, 0, &len), KVEXACT_ERR_NULL_ARGUMENT);
  CHECK_INT(kvexact_registry_discovery_json(reg, NULL, 0, NULL), KVEXACT_ERR_NULL_ARGUMENT);

  /* Drift check on the tree just loaded; an unknown id is not found. */
  CHECK_STATUS(kvexact_registry_verify_disk(reg, (const uint8_t *)qwen3, strlen(qwen3), &err),
               KVEXACT_OK, err);
  CHECK(err == NULL);
  CHECK_STATUS(kvexact_registry_verify_disk(reg, (const uint8_t *)qwen25, strlen(qwen25), &err),
               KVEXACT_OK, err);
  CHECK_INT(kvexact_registry_verify_disk(reg, (const uint8_t *)"nope", 4, &err),
            KVEXACT_ERR_NOT_FOUND);
  CHECK(err != NULL);
  CHECK_STR(kvexact_error_code(err), "not_found");
  kvexact_error_free(err);
  err = NULL;

  /* The profile document as JSON. */
  const kvexact_profile *p = NULL;
  CHECK_STATUS(kvexact_profile_by_id(reg, (const uint8_t *)qwen3, strlen(qwen3), &p), KVEXACT_OK,
               NULL);
  registry_checks_profile_ = p;
  REGISTRY_CHECKS_FETCH(registry_checks_profile_json_, doc);
  CHECK(strstr(doc, "\"profileId\":\"qwen3-06b-default-v1\"") != NULL);
  CHECK(strstr(doc, "\"baseModel\":\"Qwen/Qwen3-0.6B\"") != NULL);
  free(doc);

  /* Admission: the base model on vLLM serving both surfaces; a model the profile does not
   * serve is refused with the rule as the error code. */
  CHECK_STATUS(kvexact_profile_admit(p, (const uint8_t *)model, strlen(model), "vllm-kv-map-v2",
                                     KVEXACT_API_BOTH, &err),
               KVEXACT_OK, err);
  CHECK(err == NULL);
  const char *other = "Qwen/Qwen2.5-7B-Instruct";
  CHECK_INT(kvexact_profile_admit(p, (const uint8_t *)other, strlen(other), "vllm-kv-map-v2",
                                  KVEXACT_API_CHAT, &err),
            KVEXACT_ERR_PROFILE);
  CHECK(err != NULL);
  CHECK_INT(kvexact_error_status(err), KVEXACT_ERR_PROFILE);
  CHECK_STR(kvexact_error_code(err), "model_not_served");
  CHECK(strncmp(kvexact_error_message(err), "model_not_served: ", 18) == 0);
  CHECK(kvexact_error_path(err) == NULL);
  kvexact_error_free(err);
  err = NULL;
  CHECK_INT(kvexact_profile_admit(p, (const uint8_t *)model, strlen(model), "vllm-kv-map-v2", 7,
                                  NULL),
            KVEXACT_ERR_INVALID_ARGUMENT);
  CHECK_INT(kvexact_profile_admit(NULL, (const uint8_t *)model, strlen(model), "vllm-kv-map-v2",
                                  KVEXACT_API_BOTH, NULL),
            KVEXACT_ERR_NULL_ARGUMENT);
  registry_checks_profile_ = NULL;
  kvexact_profile_free(p);
  registry_checks_reg_ = NULL;
  printf("registry checks: ok\n");
}

#endif
