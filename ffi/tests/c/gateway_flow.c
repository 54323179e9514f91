/* The gateway's path through libkvexact: load the sample registry (testdata/registry), look
 * profiles up by model name, build encoders per engine contract, encode chat and completions
 * requests (ids checked against the engines' own token ids, encode_vectors.h), hash them with
 * each engine's hasher, and check refusals, size queries and handle lifetimes. */
#include <unistd.h>

#include "kvexact.h"
#include "check.h"
#include "encode_vectors.h"
#include "probe_checks.h"
#include "registry_checks.h"

#define NOW_MS INT64_C(1772694489000) /* 2026-03-05T07:08:09Z */

static char registry_root[4096];

static kvexact_registry *load(uint64_t number) {
  kvexact_registry_opts opts = {(uint32_t)geteuid(), 0, 0};
  kvexact_registry *reg = NULL;
  kvexact_error *err = NULL;
  CHECK_STATUS(kvexact_registry_load((const uint8_t *)registry_root, strlen(registry_root), &opts,
                                     number, &reg, &err),
               KVEXACT_OK, err);
  CHECK(reg != NULL && err == NULL);
  return reg;
}

static void registry_basics(kvexact_registry *reg) {
  CHECK_U64(kvexact_registry_generation(reg), 7);
  char hex[65];
  memset(hex, 'x', sizeof hex);
  CHECK_STATUS(kvexact_registry_set_digest(reg, hex), KVEXACT_OK, NULL);
  CHECK_INT(strlen(hex), 64);
  for (int i = 0; i < 64; i++) CHECK(strchr("0123456789abcdef", hex[i]) != NULL);

  /* A failed load returns nothing and names the problem and the file. */
  kvexact_registry *none = (kvexact_registry *)0x1;
  kvexact_error *err = NULL;
  const char *missing = "/nonexistent/kvexact-registry";
  kvexact_status s = kvexact_registry_load((const uint8_t *)missing, strlen(missing), NULL, 8,
                                           &none, &err);
  CHECK_INT(s, KVEXACT_ERR_REGISTRY);
  CHECK(none == (kvexact_registry *)0x1);
  CHECK(err != NULL);
  CHECK_INT(kvexact_error_status(err), KVEXACT_ERR_REGISTRY);
  CHECK(strlen(kvexact_error_code(err)) > 0);
  CHECK(strlen(kvexact_error_message(err)) > 0);
  printf("refused load: code=%s path=%s message=%s\n", kvexact_error_code(err),
         kvexact_error_path(err) ? kvexact_error_path(err) : "(none)", kvexact_error_message(err));
  kvexact_error_free(err);
  CHECK_INT(kvexact_registry_load(NULL, 3, NULL, 8, &none, NULL), KVEXACT_ERR_NULL_ARGUMENT);

  const kvexact_profile *p = NULL;
  const char *m = "no/such-model";
  CHECK_INT(kvexact_profile_by_model(reg, (const uint8_t *)m, strlen(m), &p), KVEXACT_ERR_NOT_FOUND);
  CHECK(p == NULL);
  const char *id = "qwen3-06b-default-v1";
  CHECK_STATUS(kvexact_profile_by_id(reg, (const uint8_t *)id, strlen(id), &p), KVEXACT_OK, NULL);
  CHECK_STR(kvexact_profile_id(p), id);
  CHECK_U64(kvexact_profile_generation(p), 7);

  /* An unknown engine contract is a profile-class error with an error object. */
  kvexact_encoder *enc = NULL;
  err = NULL;
  CHECK_INT(kvexact_encoder_new(p, "llamacpp-none-v1", &enc, &err), KVEXACT_ERR_PROFILE);
  CHECK(enc == NULL && err != NULL);
  kvexact_error_free(err);
  CHECK_INT(kvexact_encoder_new(p, NULL, &enc, NULL), KVEXACT_ERR_NULL_ARGUMENT);
  kvexact_profile_free(p);
}

static kvexact_hasher *hasher_for(const char *contract) {
  kvexact_hasher *h = NULL;
  const uint8_t seed[] = {'0'};
  if (strncmp(contract, "vllm", 4) == 0)
    CHECK_STATUS(kvexact_hasher_new(KVEXACT_SHA256_CBOR, 16, seed, 1, &h, NULL), KVEXACT_OK, NULL);
  else if (strncmp(contract, "sglang", 6) == 0)
    CHECK_STATUS(kvexact_hasher_new(KVEXACT_SHA256_SGLANG, 16, NULL, 0, &h, NULL), KVEXACT_OK, NULL);
  else
    CHECK_STATUS(kvexact_hasher_new(KVEXACT_BLOCKHASH_TRTLLM, 32, NULL, 0, &h, NULL), KVEXACT_OK, NULL);
  return h;
}

static void encode_cases(kvexact_registry *reg) {
  kvexact_encoder *enc = NULL;
  const char *enc_model = NULL, *enc_contract = NULL;
  for (size_t i = 0; i < N_ENCODE_CASES; i++) {
    const encode_case *c = &ENCODE_CASES[i];
    if (!enc || strcmp(enc_model, c->model) != 0 || strcmp(enc_contract, c->contract) != 0) {
      kvexact_encoder_free(enc);
      const kvexact_profile *p = NULL;
      CHECK_STATUS(kvexact_profile_by_model(reg, (const uint8_t *)c->model, strlen(c->model), &p),
                   KVEXACT_OK, NULL);
      kvexact_error *err = NULL;
      CHECK_STATUS(kvexact_encoder_new(p, c->contract, &enc, &err), KVEXACT_OK, err);
      kvexact_profile_free(p); /* the encoder keeps what it needs */
      enc_model = c->model;
      enc_contract = c->contract;
    }
    uint32_t ids[4096];
    kvexact_refusal refusal = 999;
    int32_t n = c->chat ? kvexact_encode_chat(enc, (const uint8_t *)c->input, c->input_len, NOW_MS,
                                              ids, 4096, &refusal)
                        : kvexact_encode_completions(enc, (const uint8_t *)c->input, c->input_len,
                                                     ids, 4096);
    if (n != (int32_t)c->n_ids || memcmp(ids, c->ids, c->n_ids * 4) != 0) {
      fprintf(stderr, "%s: got %d ids (refusal %s), want %zu\n", c->name, (int)n,
              kvexact_refusal_name(refusal), c->n_ids);
      exit(1);
    }
    if (c->chat) CHECK_INT(refusal, KVEXACT_REFUSAL_NONE);

    /* Truncated to the caller's maximum. */
    uint32_t few[3] = {0, 0, 0};
    int32_t m = c->chat ? kvexact_encode_chat(enc, (const uint8_t *)c->input, c->input_len, NOW_MS,
                                              few, 3, NULL)
                        : kvexact_encode_completions(enc, (const uint8_t *)c->input, c->input_len,
                                                     few, 3);
    CHECK_INT(m, c->n_ids < 3 ? c->n_ids : 3);
    CHECK(memcmp(few, c->ids, (size_t)m * 4) == 0);

    /* Hash the ids with the contract's engine; must equal hashing the engine's own ids. */
    kvexact_hasher *h = hasher_for(c->contract);
    uint64_t a[256], b[256];
    int32_t na = kvexact_block_hashes_u64(h, ids, (size_t)n, 1, a, 256);
    int32_t nb = kvexact_block_hashes_u64(h, c->ids, c->n_ids, 1, b, 256);
    CHECK(na >= 0 && na == nb && memcmp(a, b, (size_t)na * 8) == 0);
    kvexact_hasher_free(h);
    printf("%s (%s): %d ids, %d blocks ok\n", c->name, c->contract, (int)n, (int)na);
  }
  kvexact_encoder_free(enc);
}

static void refusals_and_rendering(kvexact_registry *reg) {
  const kvexact_profile *p = NULL;
  const char *model = "Qwen/Qwen2.5-7B-Instruct";
  CHECK_STATUS(kvexact_profile_by_model(reg, (const uint8_t *)model, strlen(model), &p), KVEXACT_OK,
               NULL);
  kvexact_encoder *enc = NULL;
  CHECK_STATUS(kvexact_encoder_new(p, "vllm-kv-map-v2", &enc, NULL), KVEXACT_OK, NULL);
  kvexact_profile_free(p);

  static const struct {
    const char *body;
    kvexact_status status;
    kvexact_refusal refusal;
  } cases[] = {
      {"{\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}],\"tools\":[]}",
       KVEXACT_ERR_UNSUPPORTED, KVEXACT_REFUSAL_TOOLS},
      {"{\"messages\":[{\"role\":\"user\",\"content\":\"hi\"},{\"role\":\"assistant\",\"content\":"
       "\"yo\"}]}",
       KVEXACT_ERR_UNSUPPORTED, KVEXACT_REFUSAL_TRAILING_ASSISTANT},
      {"{\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":\"a\"},{\"type\":"
       "\"text\",\"text\":\"b\"}]}]}",
       KVEXACT_ERR_UNSUPPORTED, KVEXACT_REFUSAL_MULTI_TEXT_PART},
      {"{\"messages\":", KVEXACT_ERR_UNSUPPORTED, KVEXACT_REFUSAL_UNPARSEABLE},
      {"{\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}],\"cache_salt\":\"x\"}",
       KVEXACT_ERR_UNSUPPORTED, KVEXACT_REFUSAL_CACHE_SALT},
  };
  uint32_t ids[64];
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    kvexact_refusal r = 999;
    ids[0] = 12345;
    int32_t n = kvexact_encode_chat(enc, (const uint8_t *)cases[i].body, strlen(cases[i].body),
                                    NOW_MS, ids, 64, &r);
    if (n != cases[i].status || r != cases[i].refusal) {
      fprintf(stderr, "refusal case %zu: got %d/%s, want %d/%s\n", i, (int)n,
              kvexact_refusal_name(r), (int)cases[i].status, kvexact_refusal_name(cases[i].refusal));
      exit(1);
    }
    CHECK_INT(ids[0], 12345); /* nothing written on failure */
  }
  /* Completions: NUL is a refusal, empty text a request error, bad UTF-8 a request error. */
  CHECK_INT(kvexact_encode_completions(enc, (const uint8_t *)"a\0b", 3, ids, 64),
            KVEXACT_ERR_UNSUPPORTED);
  CHECK_INT(kvexact_encode_completions(enc, (const uint8_t *)"", 0, ids, 64), KVEXACT_ERR_REQUEST);
  CHECK_INT(kvexact_encode_completions(enc, (const uint8_t *)"\xff", 1, ids, 64),
            KVEXACT_ERR_REQUEST);
  CHECK_INT(kvexact_encode_completions(NULL, (const uint8_t *)"a", 1, ids, 64),
            KVEXACT_ERR_NULL_ARGUMENT);
  CHECK_INT(kvexact_encode_chat(enc, NULL, 5, NOW_MS, ids, 64, NULL), KVEXACT_ERR_NULL_ARGUMENT);
  /* The same completions calls with the refusal typed: written on every return. */
  {
    kvexact_refusal cr = 999;
    CHECK_INT(kvexact_encode_completions_with_refusal(enc, (const uint8_t *)"a\0b", 3, ids, 64, &cr),
              KVEXACT_ERR_UNSUPPORTED);
    CHECK_INT(cr, KVEXACT_REFUSAL_NUL_BYTE);
    cr = 999;
    CHECK_INT(kvexact_encode_completions_with_refusal(enc, (const uint8_t *)"", 0, ids, 64, &cr),
              KVEXACT_ERR_REQUEST);
    CHECK_INT(cr, KVEXACT_REFUSAL_NONE);
    cr = 999;
    int32_t a = kvexact_encode_completions(enc, (const uint8_t *)"hello", 5, ids, 64);
    CHECK_INT(kvexact_encode_completions_with_refusal(enc, (const uint8_t *)"hello", 5, ids, 64, &cr), a);
    CHECK(a > 0);
    CHECK_INT(cr, KVEXACT_REFUSAL_NONE);
    CHECK_INT(kvexact_encode_completions_with_refusal(NULL, (const uint8_t *)"a", 1, ids, 64, NULL),
              KVEXACT_ERR_NULL_ARGUMENT);
  }

  /* Render with a size query first. */
  const char *body = "{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":\"What is 2+2?\"}]}";
  size_t need = 0;
  kvexact_refusal r = 999;
  CHECK_INT(kvexact_render_chat(enc, (const uint8_t *)body, strlen(body), NOW_MS, NULL, 0, &need, &r),
            KVEXACT_ERR_BUFFER_TOO_SMALL);
  CHECK(need > 0);
  CHECK_INT(r, KVEXACT_REFUSAL_NONE);
  char *buf = malloc(need + 1);
  size_t got = 0;
  CHECK_STATUS(kvexact_render_chat(enc, (const uint8_t *)body, strlen(body), NOW_MS, (uint8_t *)buf,
                                   need, &got, &r),
               KVEXACT_OK, NULL);
  CHECK_INT(got, need);
  buf[got] = 0;
  CHECK(strstr(buf, "<|im_start|>user\nWhat is 2+2?<|im_end|>\n<|im_start|>assistant\n") != NULL);
  free(buf);
  kvexact_encoder_free(enc);
}

/* Handles keep what they need alive: free the registry first, then use the encoder. Takes
 * over the caller's registry reference (a second load would double the valgrind run). */
static void lifetimes(kvexact_registry *reg) {
  const kvexact_profile *p = NULL;
  const char *model = "Qwen/Qwen3-0.6B";
  CHECK_STATUS(kvexact_profile_by_model(reg, (const uint8_t *)model, strlen(model), &p), KVEXACT_OK,
               NULL);
  kvexact_registry *extra = kvexact_registry_retain(reg);
  CHECK(extra == reg);
  kvexact_registry_free(extra);
  kvexact_registry_free(reg);
  kvexact_encoder *enc = NULL;
  CHECK_STATUS(kvexact_encoder_new(p, "vllm-kv-map-v2", &enc, NULL), KVEXACT_OK, NULL);
  kvexact_profile_free(p);
  const kvexact_encoder *e2 = kvexact_encoder_retain(enc);
  kvexact_encoder_free(enc);
  uint32_t ids[16];
  CHECK(kvexact_encode_completions(e2, (const uint8_t *)"hello", 5, ids, 16) > 0);
  kvexact_encoder_free((kvexact_encoder *)e2);
  kvexact_registry_free(NULL);
  kvexact_profile_free(NULL);
  kvexact_encoder_free(NULL);
}

int main(int argc, char **argv) {
  CHECK(argc >= 2);
  snprintf(registry_root, sizeof registry_root, "%s/testdata/registry", argv[1]);
  kvexact_registry *reg = load(7);
  registry_basics(reg);
  encode_cases(reg);
  refusals_and_rendering(reg);
  run_registry_checks(reg);
  run_probe_checks(reg, argv[1]);
  lifetimes(reg);
  printf("gateway_flow: %zu encode cases ok\n", (size_t)N_ENCODE_CASES);
  return 0;
}
