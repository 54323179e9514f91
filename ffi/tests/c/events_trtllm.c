/* TensorRT-LLM KV events through libkvexact: one real `POST /kv_cache_events` body
 * (testdata/vectors/trtllm/kv_events.json, case drain_prefix_hit_evict_offload, TensorRT-LLM
 * 1.3.0rc29, 32 tokens per block) decoded with re-hashing: a stored block (re-hashed from its
 * tokens and parent: no mismatch), a batched removal and a cache-level update. Then the same
 * body with the stored block's published hash corrupted (flagged, re-derived hash reported),
 * decode errors (all or nothing) and argument checks. No registry is loaded. */
#include "kvexact.h"
#include "check.h"

/* The response body, byte for byte. */
static const char BODY[] =
    "[{\"event_id\":3,\"data\":{\"type\":\"stored\",\"parent_hash\":3993888653202508573,\"blocks\""
    ":[{\"type\":\"stored_block\",\"block_hash\":12363135677185279526,\"tokens\":[{\"type\":\"uni"
    "que_token\",\"token_id\":95672,\"token_extra_id\":0},{\"type\":\"unique_token\",\"token_id\""
    ":56677,\"token_extra_id\":0},{\"type\":\"unique_token\",\"token_id\":138605,\"token_extra_id"
    "\":0},{\"type\":\"unique_token\",\"token_id\":100331,\"token_extra_id\":0},{\"type\":\"uniqu"
    "e_token\",\"token_id\":22113,\"token_extra_id\":0},{\"type\":\"unique_token\",\"token_id\":8"
    "1151,\"token_extra_id\":0},{\"type\":\"unique_token\",\"token_id\":15847,\"token_extra_id\":"
    "0},{\"type\":\"unique_token\",\"token_id\":140103,\"token_extra_id\":0},{\"type\":\"unique_t"
    "oken\",\"token_id\":56667,\"token_extra_id\":0},{\"type\":\"unique_token\",\"token_id\":2655"
    "3,\"token_extra_id\":0},{\"type\":\"unique_token\",\"token_id\":111011,\"token_extra_id\":0}"
    ",{\"type\":\"unique_token\",\"token_id\":2258,\"token_extra_id\":0},{\"type\":\"unique_token"
    "\",\"token_id\":6154,\"token_extra_id\":0},{\"type\":\"unique_token\",\"token_id\":145512,\""
    "token_extra_id\":0},{\"type\":\"unique_token\",\"token_id\":112487,\"token_extra_id\":0},{\""
    "type\":\"unique_token\",\"token_id\":151349,\"token_extra_id\":0},{\"type\":\"unique_token\""
    ",\"token_id\":53737,\"token_extra_id\":0},{\"type\":\"unique_token\",\"token_id\":66188,\"to"
    "ken_extra_id\":0},{\"type\":\"unique_token\",\"token_id\":112201,\"token_extra_id\":0},{\"ty"
    "pe\":\"unique_token\",\"token_id\":127515,\"token_extra_id\":0},{\"type\":\"unique_token\",\""
    "token_id\":56947,\"token_extra_id\":0},{\"type\":\"unique_token\",\"token_id\":110813,\"toke"
    "n_extra_id\":0},{\"type\":\"unique_token\",\"token_id\":92253,\"token_extra_id\":0},{\"type\""
    ":\"unique_token\",\"token_id\":64034,\"token_extra_id\":0},{\"type\":\"unique_token\",\"toke"
    "n_id\":42573,\"token_extra_id\":0},{\"type\":\"unique_token\",\"token_id\":110708,\"token_ex"
    "tra_id\":0},{\"type\":\"unique_token\",\"token_id\":131243,\"token_extra_id\":0},{\"type\":\""
    "unique_token\",\"token_id\":1979,\"token_extra_id\":0},{\"type\":\"unique_token\",\"token_id"
    "\":132371,\"token_extra_id\":0},{\"type\":\"unique_token\",\"token_id\":99345,\"token_extra_"
    "id\":0},{\"type\":\"unique_token\",\"token_id\":29195,\"token_extra_id\":0},{\"type\":\"uniq"
    "ue_token\",\"token_id\":127003,\"token_extra_id\":0}],\"cache_salt\":null,\"cache_level\":0,"
    "\"priority\":35,\"mm_keys\":[]}]},\"window_size\":32768},{\"event_id\":4,\"data\":{\"type\":"
    "\"removed\",\"block_hashes\":[6619996842688084183,12363135677185279526]},\"window_size\":327"
    "68},{\"event_id\":5,\"data\":{\"type\":\"updated\",\"block_hash\":5036030039658846184,\"cach"
    "e_level\":{\"type\":\"event_diff\",\"new_value\":1,\"old_value\":0},\"priority\":null},\"win"
    "dow_size\":32768}]";

/* Expected values from the vector's `decoded` view. */
#define STORED_HASH UINT64_C(12363135677185279526)
#define STORED_PARENT UINT64_C(3993888653202508573)
#define REMOVED_0 UINT64_C(6619996842688084183)
#define REMOVED_1 UINT64_C(12363135677185279526)
#define UPDATED_HASH UINT64_C(5036030039658846184)
static const uint32_t STORED_TOKENS[32] = {
    95672, 56677, 138605, 100331, 22113, 81151, 15847, 140103,
    56667, 26553, 111011, 2258, 6154, 145512, 112487, 151349,
    53737, 66188, 112201, 127515, 56947, 110813, 92253, 64034,
    42573, 110708, 131243, 1979, 132371, 99345, 29195, 127003,
};

/* Decodes `len` bytes of `body`; returns the status, filling the outputs on success. On
 * failure checks that nothing was written and that the error object agrees. */
static kvexact_status decode(kvexact_event_decoder *dec, const char *body, size_t len,
                             const kvexact_event **events, size_t *n) {
  const kvexact_event *ev = NULL;
  size_t count = 99;
  int64_t rank = 99;
  kvexact_error *err = NULL;
  kvexact_status s = kvexact_event_decode(dec, (const uint8_t *)body, len, &ev, &count, &rank, &err);
  if (s != KVEXACT_OK) {
    CHECK(ev == NULL && count == 99 && rank == 99);
    CHECK(err != NULL);
    CHECK_INT(kvexact_error_status(err), s);
    printf("refused: %s: %s\n", kvexact_error_code(err), kvexact_error_message(err));
    kvexact_error_free(err);
    return s;
  }
  CHECK(err == NULL);
  CHECK_INT(rank, -1); /* TensorRT-LLM has no batch rank */
  *events = ev;
  *n = count;
  return s;
}

/* The three events of BODY; `stored_flag` is the expected rehash_mismatch of the block. */
static void check_events(const kvexact_event *ev, size_t n, int stored_flag) {
  CHECK_INT(n, 3);

  CHECK_INT(ev[0].kind, KVEXACT_EVENT_STORED);
  CHECK_INT(ev[0].event_id, 3);
  CHECK_INT(ev[0].dp_rank, -1);
  CHECK_INT(ev[0].n_hashes, 1);
  CHECK_U64(ev[0].hashes[0], STORED_HASH); /* the published, or re-derived, hash */
  CHECK_INT(ev[0].rehash_mismatch, stored_flag);
  CHECK_INT(ev[0].n_tokens, 32);
  CHECK_INT(ev[0].block_size, 32);
  for (size_t i = 0; i < 32; i++) CHECK_U64(ev[0].token_ids[i], STORED_TOKENS[i]);
  CHECK_INT(ev[0].has_parent, 1);
  CHECK_U64(ev[0].parent_hash, STORED_PARENT);
  CHECK_INT(ev[0].has_lora, 0);
  CHECK_INT(ev[0].has_extra_keys, 0);

  CHECK_INT(ev[1].kind, KVEXACT_EVENT_REMOVED);
  CHECK_INT(ev[1].event_id, 4);
  CHECK_INT(ev[1].n_hashes, 2);
  CHECK_U64(ev[1].hashes[0], REMOVED_0);
  CHECK_U64(ev[1].hashes[1], REMOVED_1);
  CHECK_INT(ev[1].n_tokens, 0);
  CHECK_INT(ev[1].rehash_mismatch, 0);

  CHECK_INT(ev[2].kind, KVEXACT_EVENT_UPDATED);
  CHECK_INT(ev[2].event_id, 5);
  CHECK_INT(ev[2].n_hashes, 1);
  CHECK_U64(ev[2].hashes[0], UPDATED_HASH);
  CHECK_INT(ev[2].n_tokens, 0);
}

int main(int argc, char **argv) {
  (void)argc;
  (void)argv;
  const size_t len = sizeof BODY - 1;

  kvexact_hasher *h = NULL;
  CHECK_STATUS(kvexact_hasher_new(KVEXACT_BLOCKHASH_TRTLLM, 32, NULL, 0, &h, NULL), KVEXACT_OK, NULL);

  /* A ZMQ schema takes no re-hasher; a TensorRT-LLM schema takes only a TensorRT-LLM one. */
  kvexact_event_decoder *dec = NULL;
  kvexact_error *err = NULL;
  CHECK_INT(kvexact_event_decoder_new("vllm-kv-map-v3", h, &dec, &err), KVEXACT_ERR_INVALID_ARGUMENT);
  CHECK_STR(kvexact_error_code(err), "invalid_argument");
  CHECK(strstr(kvexact_error_message(err), "rehash") != NULL);
  kvexact_error_free(err);
  err = NULL;
  CHECK_INT(kvexact_event_decoder_new("no-such-schema", NULL, &dec, &err),
            KVEXACT_ERR_INVALID_ARGUMENT);
  CHECK(strstr(kvexact_error_message(err), "wire_schema_id") != NULL);
  kvexact_error_free(err);
  kvexact_hasher *sg = NULL;
  CHECK_STATUS(kvexact_hasher_new(KVEXACT_SHA256_SGLANG, 16, NULL, 0, &sg, NULL), KVEXACT_OK, NULL);
  CHECK_INT(kvexact_event_decoder_new("trtllm-kv-http-preview-v1", sg, &dec, NULL),
            KVEXACT_ERR_INVALID_ARGUMENT);
  kvexact_hasher_free(sg);
  CHECK_INT(kvexact_event_decoder_new("trtllm-kv-http-preview-v1", h, NULL, NULL),
            KVEXACT_ERR_NULL_ARGUMENT);
  CHECK(dec == NULL);

  CHECK_STATUS(kvexact_event_decoder_new("trtllm-kv-http-preview-v1", h, &dec, NULL), KVEXACT_OK, NULL);
  kvexact_event_decoder *plain = NULL;
  CHECK_STATUS(kvexact_event_decoder_new("trtllm-kv-http-v1", NULL, &plain, NULL), KVEXACT_OK, NULL);
  /* The decoder keeps its own copy of the hasher's configuration. */
  kvexact_hasher_free(h);

  const kvexact_event *ev = NULL;
  size_t n = 0;
  CHECK_STATUS(decode(dec, BODY, len, &ev, &n), KVEXACT_OK, NULL);
  check_events(ev, n, 0);
  CHECK_STATUS(decode(plain, BODY, len, &ev, &n), KVEXACT_OK, NULL);
  check_events(ev, n, 0);

  /* Corrupt the stored block's published hash (its first occurrence; the second is in the
   * removal): the re-hashing decoder flags it and reports the hash the tokens give. */
  char *bad = malloc(sizeof BODY);
  CHECK(bad != NULL);
  memcpy(bad, BODY, sizeof BODY);
  char *at = strstr(bad, "12363135677185279526");
  CHECK(at != NULL);
  at[19] = '7';
  CHECK_STATUS(decode(dec, bad, len, &ev, &n), KVEXACT_OK, NULL);
  check_events(ev, n, 1);
  CHECK_STATUS(decode(plain, bad, len, &ev, &n), KVEXACT_OK, NULL);
  CHECK_INT(ev[0].rehash_mismatch, 0);
  CHECK_U64(ev[0].hashes[0], STORED_HASH + 1); /* passed on as published */

  /* All or nothing: a truncated body, or a bad last event, fails the whole payload. */
  CHECK_INT(decode(dec, BODY, len - 1, &ev, &n), KVEXACT_ERR_EVENT_DECODE);
  memcpy(bad, BODY, sizeof BODY);
  at = strstr(bad, "\"updated\"");
  CHECK(at != NULL);
  memcpy(at + 1, "upgrade", 7);
  CHECK_INT(decode(dec, bad, len, &ev, &n), KVEXACT_ERR_EVENT_SCHEMA);
  free(bad);

  /* An empty drain; NULL arguments. */
  CHECK_STATUS(decode(dec, "[]", 2, &ev, &n), KVEXACT_OK, NULL);
  CHECK_INT(n, 0);
  int64_t rank = 0;
  CHECK_INT(kvexact_event_decode(NULL, (const uint8_t *)"[]", 2, &ev, &n, &rank, NULL),
            KVEXACT_ERR_NULL_ARGUMENT);
  CHECK_INT(kvexact_event_decode(dec, NULL, 2, &ev, &n, &rank, NULL), KVEXACT_ERR_NULL_ARGUMENT);
  CHECK_INT(kvexact_event_decode(dec, (const uint8_t *)"[]", 2, &ev, &n, NULL, NULL),
            KVEXACT_ERR_NULL_ARGUMENT);

  kvexact_event_decoder_free(plain);
  kvexact_event_decoder_free(dec);
  kvexact_event_decoder_free(NULL);
  printf("events_trtllm: ok\n");
  return 0;
}
