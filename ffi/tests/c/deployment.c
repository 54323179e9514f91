/* Deployments through libkvexact: a vLLM 0.33.0 deployment with EAGLE speculative decoding
 * and two LoRA adapters resolves to look-ahead keys (vLLM 0.33.0's own hashes, cases
 * lookahead1_len49 and lookahead1_len48_last_block_waits of
 * testdata/vectors/versions/vllm-0.33.0/block_hashes.json); a plain deployment keys a
 * request's adapter and salt as vLLM 0.33.0 does (case lora_and_cache_salt_len64); salts the
 * engine rejects and adapters it does not serve are refused with nothing written; options the
 * release cannot honour and unknown fields are refused when the deployment is resolved; the
 * index of a deployment is built from the same handle. No registry is loaded. */
#include "kvexact.h"
#include "check.h"
#include "deployment_vectors.h"

static void expect_error(kvexact_status s, kvexact_error *err, kvexact_status want,
                         const char *code) {
  CHECK_INT(s, want);
  CHECK(err != NULL);
  CHECK_INT(kvexact_error_status(err), want);
  CHECK_STR(kvexact_error_code(err), code);
  printf("refused: %s: %s\n", kvexact_error_code(err), kvexact_error_message(err));
  kvexact_error_free(err);
}

static kvexact_deployment *deployment(const char *version, const char *doc) {
  kvexact_deployment *d = NULL;
  kvexact_error *err = NULL;
  CHECK_STATUS(kvexact_deployment_new(KVEXACT_VLLM, version, (const uint8_t *)doc, strlen(doc),
                                      &d, &err),
               KVEXACT_OK, err);
  CHECK(d != NULL);
  return d;
}

static kvexact_hasher *hasher(const kvexact_deployment *d) {
  kvexact_hasher *h = NULL;
  kvexact_error *err = NULL;
  CHECK_STATUS(kvexact_hasher_new_for_deployment(d, NULL, &h, &err), KVEXACT_OK, err);
  return h;
}

static void lookahead(void) {
  kvexact_deployment *d = deployment(
      "0.33.0", "{\"hashSeed\": \"0\", \"hashAlgorithm\": \"sha256_cbor\", \"speculative\": {\"method\": \"eagle\", "
                "\"numSpeculativeTokens\": 2}}");
  char json[2048];
  size_t len = 0;
  CHECK_INT(kvexact_deployment_json(d, (uint8_t *)json, sizeof json - 1, &len), KVEXACT_OK);
  json[len] = 0;
  printf("deployment: %s\n", json);
  CHECK(strstr(json, "\"keyForm\":\"lookahead-1\"") != NULL);
  kvexact_hasher *h = hasher(d);
  uint64_t out[4] = {0};
  size_t n = 0;
  kvexact_error *err = NULL;
  /* Plain requests of the deployment go through every hash call. */
  CHECK_INT(kvexact_block_hashes_u64(h, LOOKAHEAD1_LEN49_IDS, 49, 1, out, 4), 3);
  for (int i = 0; i < 3; i++) CHECK_U64(out[i], LOOKAHEAD1_LEN49_HASHES[i]);
  CHECK_INT(kvexact_hasher_block_count(h, 48, 1), 2);
  CHECK_STATUS(kvexact_block_hashes_keyed(h, NULL, LOOKAHEAD1_LEN48_LAST_BLOCK_WAITS_IDS, 48, out,
                                          4, &n, &err),
               KVEXACT_OK, err);
  CHECK_INT(n, 2);
  for (int i = 0; i < 2; i++) CHECK_U64(out[i], LOOKAHEAD1_LEN48_LAST_BLOCK_WAITS_HASHES[i]);

  /* The index of the same deployment: one full-attention group of 16-token blocks. */
  kvexact_index *ix = NULL;
  CHECK_STATUS(kvexact_index_new_for_deployment(d, NULL, &ix, &err), KVEXACT_OK, err);
  kvexact_index_free(ix);
  kvexact_hasher_free(h);
  kvexact_deployment_free(d);
}

static void adapters_and_salts(void) {
  kvexact_deployment *d = deployment(
      "0.33.0", "hashSeed: '0'\nhashAlgorithm: sha256_cbor\nloraAdapters:\n  - {name: sql-lora-2, path: /adapters/sql-lora-2}\n"
                "  - {name: chat, path: /adapters/chat}\n");
  kvexact_hasher *h = hasher(d);
  const char *salt = "tenant-a-2", *adapter = "sql-lora-2";
  kvexact_request_keys k;
  memset(&k, 0, sizeof k);
  k.struct_size = sizeof k;
  k.has_cache_salt = 1;
  k.cache_salt = (const uint8_t *)salt;
  k.cache_salt_len = strlen(salt);
  k.adapter = (const uint8_t *)adapter;
  k.adapter_len = strlen(adapter);
  uint64_t out[4] = {0};
  size_t n = 0;
  kvexact_error *err = NULL;
  CHECK_STATUS(kvexact_block_hashes_keyed(h, &k, LORA_AND_CACHE_SALT_LEN64_IDS, 64, out, 4, &n,
                                          &err),
               KVEXACT_OK, err);
  CHECK_INT(n, 4);
  for (int i = 0; i < 4; i++) CHECK_U64(out[i], LORA_AND_CACHE_SALT_LEN64_HASHES[i]);

  /* A salt vLLM answers with HTTP 400, and an adapter the deployment does not serve: no keys,
   * nothing written. */
  uint64_t untouched[4] = {7, 7, 7, 7};
  size_t n2 = 99;
  k.cache_salt = (const uint8_t *)"a/b";
  k.cache_salt_len = 3;
  err = NULL;
  {
    kvexact_status st_ = kvexact_block_hashes_keyed(h, &k, LORA_AND_CACHE_SALT_LEN64_IDS, 64, untouched, 4,
                                          &n2, &err);
    expect_error(st_, err, KVEXACT_ERR_REQUEST, "SALT_REJECTED");
  }
  CHECK_INT(n2, 99);
  CHECK_U64(untouched[0], 7);
  k.has_cache_salt = 0;
  k.adapter = (const uint8_t *)"nope";
  k.adapter_len = 4;
  err = NULL;
  {
    kvexact_status st_ = kvexact_block_hashes_keyed(h, &k, LORA_AND_CACHE_SALT_LEN64_IDS, 64, untouched, 4,
                                          &n2, &err);
    expect_error(st_, err, KVEXACT_ERR_UNSUPPORTED, "UNKNOWN_ADAPTER");
  }
  kvexact_hasher_free(h);
  kvexact_deployment_free(d);
}

static void refusals(void) {
  kvexact_deployment *d = NULL;
  kvexact_error *err = NULL;
  const char *ngram = "{\"speculative\": {\"method\": \"ngram\", \"numSpeculativeTokens\": 3}}";
  {
    kvexact_status st_ = kvexact_deployment_new(KVEXACT_VLLM, "0.33.0", (const uint8_t *)ngram,
                                      strlen(ngram), &d, &err);
    expect_error(st_, err, KVEXACT_ERR_DEPLOYMENT_UNSUPPORTED, "DEPLOYMENT_UNSUPPORTED");
  }
  const char *eagle = "{\"blockSize\": 16, \"speculative\": {\"method\": \"eagle\", "
                      "\"numSpeculativeTokens\": 1}}";
  err = NULL;
  /* vLLM 0.31.0 drops the last block on EAGLE hits: no vectors prove it. */
  {
    kvexact_status st_ = kvexact_deployment_new(KVEXACT_VLLM, "0.31.0", (const uint8_t *)eagle,
                                      strlen(eagle), &d, &err);
    expect_error(st_, err, KVEXACT_ERR_DEPLOYMENT_UNSUPPORTED, "DEPLOYMENT_UNSUPPORTED");
  }
  const char *unknown = "{\"blockSize\": 16, \"tensorParallel\": 2}";
  err = NULL;
  {
    kvexact_status st_ = kvexact_deployment_new(KVEXACT_VLLM, "0.33.0", (const uint8_t *)unknown,
                                      strlen(unknown), &d, &err);
    expect_error(st_, err, KVEXACT_ERR_INVALID_ARGUMENT, "DEPLOYMENT_SCHEMA");
  }
  err = NULL;
  {
    kvexact_status st_ = kvexact_deployment_new(KVEXACT_VLLM, "0.99.0", (const uint8_t *)"{}", 2, &d, &err);
    expect_error(st_, err, KVEXACT_ERR_UNKNOWN_ENGINE_VERSION, "UNKNOWN_ENGINE_VERSION");
  }
  CHECK(d == NULL);
  /* A hasher that is not a deployment's has no keyed call. */
  kvexact_hasher *plain = NULL;
  CHECK_STATUS(kvexact_hasher_new(KVEXACT_SHA256_CBOR, 16, (const uint8_t *)"0", 1, &plain, &err),
               KVEXACT_OK, err);
  uint64_t out[4];
  size_t n = 0;
  err = NULL;
  {
    kvexact_status st_ = kvexact_block_hashes_keyed(plain, NULL, LOOKAHEAD1_LEN49_IDS, 49, out, 4, &n, &err);
    expect_error(st_, err, KVEXACT_ERR_INVALID_ARGUMENT, "invalid_argument");
  }
  kvexact_hasher_free(plain);
  kvexact_deployment_free(NULL);
}

int main(void) {
  lookahead();
  adapters_and_salts();
  refusals();
  printf("deployment: ok\n");
  return 0;
}
