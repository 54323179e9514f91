/* The drift verifier through libkvexact: two real vLLM 0.24.0 ZMQ messages
 * (testdata/vectors/versions/vllm-0.24.0/kv_events.json, cases int_stored_prefill_no_parent and
 * int_stored_decode_with_parent: a root and a chained block, then a block chained on the
 * second) verify clean; the same decode message with one token id changed is drift at once
 * (policy: 1 mismatch) with evidence naming the block and the byte offset of its token ids;
 * the counters struct (struct_size in/out), the finding (hash_drift), reset, the Prometheus
 * exposition, a scraper thread reading while the main thread feeds, and refusals (unknown
 * version, undecodable input, bad options, predictions without tracking), with nothing
 * written on failure; then one real TensorRT-LLM 1.3.0rc29 `POST /kv_cache_events` body
 * (testdata/vectors/trtllm/kv_events.json, case drain_prefix_hit_evict_offload, as in
 * events_trtllm.c) verifies clean through kvexact_drift_feed, and with its stored block's hash
 * changed is drift. Small inputs: fast under valgrind. No registry is loaded. */
#include <pthread.h>

#include "kvexact.h"
#include "check.h"

/* Frame 2 of each message (msgspec msgpack of KVEventBatch). */
static const char PREFILL_HEX[] =
    "93cb41da556e40100000918ba474797065ab426c6f636b53746f726564ac626c6f636b5f68617368657392cf"
    "6fc7e5d70d6ff0dacf66bfb8246426d1a8b1706172656e745f626c6f636b5f68617368c0a9746f6b656e5f69"
    "6473dc0020ce00010b2ece0001061dce00023710ce00021234cd0c6ece00015f22cd67b6cddcd1ce0001c06e"
    "cd97bcce00011ef4ce0001ec02cd080ecdc50ace00014f55ce00011b8dce000218c4cdb0cace00015ce6cd87"
    "71ce00010abdcdcb7ace00014ca0cdfe13ce00016253cdfb2ece0001fe90ce00011d6bce00011ac0cd14edcd"
    "7d82ce0001fc90aa626c6f636b5f73697a6510a76c6f72615f6964c0a66d656469756da3475055a96c6f7261"
    "5f6e616d65c0aa65787472615f6b65797392c0c0a967726f75705f69647800b26b765f63616368655f737065"
    "635f6b696e64ae66756c6c5f617474656e74696f6e00";
static const char DECODE_HEX[] =
    "93cb41da556e40100000918ba474797065ab426c6f636b53746f726564ac626c6f636b5f68617368657391cf"
    "080d237d00ab29b2b1706172656e745f626c6f636b5f68617368cf66bfb8246426d1a8a9746f6b656e5f6964"
    "73dc0010cddbdace00019edfcd54f3ce00015b17cdac67cdc699cd1940cde4ccce0002280fcdb5efcd364bce"
    "00023041ce0001ba8ace00022a90cddd87cd05c2aa626c6f636b5f73697a6510a76c6f72615f6964c0a66d65"
    "6469756da3475055a96c6f72615f6e616d65c0aa65787472615f6b65797391c0a967726f75705f69647800b2"
    "6b765f63616368655f737065635f6b696e64ae66756c6c5f617474656e74696f6e00";
/* In DECODE: the token-id array header (dc 00 10) at 89, its first id 56282 (cd db da) at 92. */
#define DECODE_IDS_AT 92
#define DECODE_FIRST_ID_LOW_BYTE 94

/* The TensorRT-LLM body (JSON), byte for byte: a stored block chained on a published parent,
 * a removal, an update. */
static const char TRT_BODY[] =
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
#define TRT_STORED_HASH "12363135677185279526"

static uint8_t prefill[400], decode[400];
static size_t prefill_len, decode_len;

static size_t unhex(const char *hex, uint8_t *out, size_t cap) {
  size_t n = strlen(hex) / 2;
  CHECK(n <= cap);
  for (size_t i = 0; i < n; i++) {
    unsigned v = 0;
    CHECK(sscanf(hex + 2 * i, "%2x", &v) == 1);
    out[i] = (uint8_t)v;
  }
  return n;
}

/* Checks the error object of a failed call and frees it. Takes `&err`, not `err`: the call
 * that writes it is another argument, and C leaves their evaluation order unspecified. */
static void expect_error(int32_t s, kvexact_error **errp, kvexact_status want, const char *code) {
  kvexact_error *err = *errp;
  *errp = NULL;
  CHECK_INT(s, want);
  CHECK(err != NULL);
  CHECK_INT(kvexact_error_status(err), want);
  CHECK_STR(kvexact_error_code(err), code);
  printf("refused: %s: %s\n", kvexact_error_code(err), kvexact_error_message(err));
  kvexact_error_free(err);
}

/* The rule: vLLM sha256_cbor, PYTHONHASHSEED=0, 16 tokens per block. */
static kvexact_drift_options vllm_options(uint32_t mismatches) {
  kvexact_drift_options o;
  memset(&o, 0, sizeof o);
  o.struct_size = sizeof o;
  o.algo = KVEXACT_HASH_ALGO_CONTRACT_DEFAULT;
  o.block_size = 16;
  o.seed = (const uint8_t *)"0";
  o.seed_len = 1;
  o.map_capacity = 1024; /* small: fast under valgrind */
  o.mismatches = mismatches;
  return o;
}

static kvexact_drift_verifier *new_verifier(uint32_t mismatches, uint64_t predict_ms) {
  kvexact_drift_options o = vllm_options(mismatches);
  o.predict_within_ms = predict_ms;
  o.predict_capacity = predict_ms ? 64 : 0;
  kvexact_drift_verifier *v = NULL;
  kvexact_error *err = NULL;
  CHECK_STATUS(kvexact_drift_verifier_new("vllm-kv-map-v2", "0.24.0", &o, &v, &err), KVEXACT_OK,
               err);
  CHECK(v != NULL && err == NULL);
  return v;
}

static int32_t feed(kvexact_drift_verifier *v, uint64_t seq, const uint8_t *p, size_t n) {
  uint8_t s[8];
  for (int i = 0; i < 8; i++) s[i] = (uint8_t)(seq >> (56 - 8 * i));
  kvexact_error *err = NULL;
  int32_t r = kvexact_drift_feed_frames(v, (const uint8_t *)"", 0, s, 8, p, n, &err);
  if (r < 0) {
    fprintf(stderr, "feed: %s: %s\n", kvexact_error_code(err), kvexact_error_message(err));
    exit(1);
  }
  CHECK(err == NULL);
  return r;
}

static kvexact_drift_counters counters(const kvexact_drift_verifier *v) {
  kvexact_drift_counters c;
  memset(&c, 0, sizeof c);
  c.struct_size = sizeof c;
  CHECK_INT(kvexact_drift_get_counters(v, &c), KVEXACT_OK);
  CHECK_INT(c.struct_size, sizeof c);
  return c;
}

/* The report JSON, NUL-terminated; free it. */
static char *report(const kvexact_drift_verifier *v) {
  size_t len = 0;
  CHECK_INT(kvexact_drift_report_json(v, NULL, 0, &len), KVEXACT_ERR_BUFFER_TOO_SMALL);
  char *buf = malloc(len + 1);
  CHECK(buf != NULL);
  size_t len2 = 0;
  CHECK_INT(kvexact_drift_report_json(v, (uint8_t *)buf, len, &len2), KVEXACT_OK);
  CHECK_INT(len2, len);
  buf[len] = '\0';
  return buf;
}

static void clean_stream(void) {
  kvexact_drift_verifier *v = new_verifier(0, 0);
  CHECK_INT(feed(v, 0, prefill, prefill_len), KVEXACT_OK);
  CHECK_INT(feed(v, 1, decode, decode_len), KVEXACT_OK);
  /* The payload alone (no topic or sequence frame) feeds as well. */
  kvexact_error *err = NULL;
  CHECK_STATUS(kvexact_drift_feed(v, decode, decode_len, &err), KVEXACT_OK, err);
  kvexact_drift_counters c = counters(v);
  CHECK_U64(c.batches, 3);
  CHECK_U64(c.stored_events, 3);
  CHECK_U64(c.blocks_seen, 4);
  CHECK_U64(c.matched, 4);
  CHECK_U64(c.rederived, 4);
  CHECK_U64(c.mismatched, 0);
  CHECK_U64(c.unverifiable, 0);
  CHECK_U64(c.drift, 0);
  CHECK_U64(c.map_capacity, 1024);
  CHECK_U64(c.map_bytes, kvexact_drift_map_bytes(1024));
  CHECK_U64(c.predictions, 0);

  kvexact_finding f;
  CHECK_INT(kvexact_drift_finding(v, &f), KVEXACT_OK);
  CHECK_INT(f.ok, 1);
  CHECK(f.reason == NULL);
  printf("clean: %s\n", f.detail);

  char *r = report(v);
  CHECK(strstr(r, "\"verdict\":\"clean\"") != NULL);
  CHECK(strstr(r, "\"release_id\":\"vllm-kv-map-v2-r0.24\"") != NULL);
  CHECK(strstr(r, "\"engine_version\":\"0.24.0\"") != NULL);
  CHECK(strstr(r, "\"evidence\":null") != NULL);
  free(r);
  kvexact_drift_verifier_free(v);
}

static void corrupted_token(void) {
  uint8_t bad[400];
  memcpy(bad, decode, decode_len);
  CHECK(bad[DECODE_FIRST_ID_LOW_BYTE] == 0xda);
  bad[DECODE_FIRST_ID_LOW_BYTE] ^= 1; /* 56282 -> 56283 */
  kvexact_drift_verifier *v = new_verifier(1, 0);
  CHECK_INT(feed(v, 0, prefill, prefill_len), KVEXACT_OK);
  CHECK_INT(feed(v, 1, bad, decode_len), KVEXACT_DRIFT_DETECTED);
  kvexact_drift_counters c = counters(v);
  CHECK_U64(c.blocks_seen, 3);
  CHECK_U64(c.matched, 2);
  CHECK_U64(c.mismatched, 1);
  CHECK_U64(c.mismatched_chained, 1);
  CHECK_U64(c.drift, 1);

  char *r = report(v);
  printf("drift report: %s\n", r);
  CHECK(strstr(r, "\"verdict\":\"drift\"") != NULL);
  CHECK(strstr(r, "\"kind\":\"chained\"") != NULL);
  CHECK(strstr(r, "\"batch_seq\":1") != NULL);
  CHECK(strstr(r, "\"published\":580158946789763506") != NULL);
  CHECK(strstr(r, "\"parent\":7403838778858983848") != NULL);
  char want[64];
  snprintf(want, sizeof want, "\"token_ids_offset\":%d", DECODE_IDS_AT);
  CHECK(strstr(r, want) != NULL);
  CHECK(strstr(r, "\"tokens\":[56283,") != NULL);
  CHECK(strstr(r, "\"reason\":\"hash_drift\"") != NULL);
  free(r);

  kvexact_finding f;
  CHECK_INT(kvexact_drift_finding(v, &f), KVEXACT_OK);
  CHECK_INT(f.ok, 0);
  CHECK_STR(f.reason, "hash_drift");
  printf("finding: %s\n", f.detail);

  /* Sticky until reset; reset keeps the counters. */
  CHECK_INT(feed(v, 2, prefill, prefill_len), KVEXACT_DRIFT_DETECTED);
  CHECK_INT(kvexact_drift_reset_verdict(v), KVEXACT_OK);
  CHECK_INT(feed(v, 3, prefill, prefill_len), KVEXACT_OK);
  c = counters(v);
  CHECK_U64(c.drift, 0);
  CHECK_U64(c.mismatched, 1);
  kvexact_drift_verifier_free(v);
}

static void counters_struct(void) {
  kvexact_drift_verifier *v = new_verifier(0, 0);
  kvexact_drift_counters c;
  memset(&c, 0, sizeof c);
  c.struct_size = 8; /* older than any version: refused, nothing written */
  c.batches = 42;
  CHECK_INT(kvexact_drift_get_counters(v, &c), KVEXACT_ERR_INVALID_ARGUMENT);
  CHECK_INT(c.struct_size, 8);
  CHECK_U64(c.batches, 42);
  CHECK_INT(kvexact_drift_get_counters(v, NULL), KVEXACT_ERR_NULL_ARGUMENT);
  CHECK_INT(kvexact_drift_get_counters(NULL, &c), KVEXACT_ERR_NULL_ARGUMENT);
  CHECK_STR(kvexact_drift_unverifiable_name(0), "parent_never_seen");
  CHECK_STR(kvexact_drift_unverifiable_name(1), "parent_evicted");
  CHECK(kvexact_drift_unverifiable_name(KVEXACT_DRIFT_UNVERIFIABLE_SLOTS) == NULL);
  /* A chained block whose parent was never published: unverifiable, in slot 0. */
  CHECK_INT(feed(v, 0, decode, decode_len), KVEXACT_OK);
  c = counters(v);
  CHECK_U64(c.unverifiable, 1);
  CHECK_U64(c.unverifiable_by_reason[0], 1);
  kvexact_drift_verifier_free(v);
}

static void predictions(void) {
  kvexact_drift_verifier *v = new_verifier(0, 60000);
  const uint64_t predicted[2] = {UINT64_C(8054659170381590746), UINT64_C(7403838778858983848)};
  CHECK_INT(kvexact_drift_predict(v, predicted, 2), KVEXACT_OK);
  CHECK_INT(feed(v, 0, prefill, prefill_len), KVEXACT_OK);
  kvexact_drift_counters c = counters(v);
  CHECK_U64(c.predictions, 1);
  CHECK_U64(c.predicted, 2);
  CHECK_U64(c.predicted_stored_within, 2);
  CHECK_U64(c.predicted_pending, 0);
  kvexact_drift_verifier_free(v);
  /* Without tracking: refused. */
  v = new_verifier(0, 0);
  CHECK_INT(kvexact_drift_predict(v, predicted, 2), KVEXACT_ERR_INVALID_ARGUMENT);
  CHECK_INT(kvexact_drift_predict(v, NULL, 2), KVEXACT_ERR_NULL_ARGUMENT);
  kvexact_drift_verifier_free(v);
}

static void prometheus(void) {
  kvexact_drift_verifier *v = new_verifier(0, 0);
  CHECK_INT(feed(v, 0, prefill, prefill_len), KVEXACT_OK);
  const char *name = "endpoint", *value = "10.0.0.7:8000";
  kvexact_drift_label l = {(const uint8_t *)name, strlen(name), (const uint8_t *)value,
                           strlen(value)};
  kvexact_drift_series s = {v, &l, 1};
  size_t len = 0;
  CHECK_INT(kvexact_drift_prometheus(&s, 1, NULL, 0, &len, NULL), KVEXACT_ERR_BUFFER_TOO_SMALL);
  CHECK(len > 100);
  char *buf = malloc(len + 1);
  CHECK(buf != NULL);
  size_t len2 = 0;
  kvexact_error *err = NULL;
  CHECK_STATUS(kvexact_drift_prometheus(&s, 1, (uint8_t *)buf, len, &len2, &err), KVEXACT_OK,
               err);
  CHECK_INT(len2, len);
  buf[len] = '\0';
  CHECK(strstr(buf, "# HELP kvexact_drift_blocks_total ") != NULL);
  CHECK(strstr(buf, "# TYPE kvexact_drift_blocks_total counter\n") != NULL);
  CHECK(strstr(buf, "kvexact_drift_blocks_matched_total{endpoint=\"10.0.0.7:8000\","
                    "release=\"vllm-kv-map-v2-r0.24\"} 2\n") != NULL);
  CHECK(strstr(buf, "# TYPE kvexact_drift_detected gauge\n") != NULL);
  CHECK(strstr(buf, "predict") == NULL);
  free(buf);

  /* A reserved label name: refused with a message. */
  const char *reserved = "release";
  l.name = (const uint8_t *)reserved;
  l.name_len = strlen(reserved);
  len = 0;
  expect_error(kvexact_drift_prometheus(&s, 1, NULL, 0, &len, &err), &err,
               KVEXACT_ERR_INVALID_ARGUMENT, "invalid_argument");
  kvexact_drift_verifier_free(v);
}

/* A scraper thread reads counters while the main thread feeds. */
static void *scrape(void *arg) {
  const kvexact_drift_verifier *v = arg;
  for (int i = 0; i < 50; i++) {
    kvexact_drift_counters c = counters(v);
    CHECK(c.matched + c.mismatched + c.unverifiable == c.blocks_seen);
  }
  return NULL;
}

static void threads(void) {
  kvexact_drift_verifier *v = new_verifier(0, 0);
  pthread_t t;
  CHECK(pthread_create(&t, NULL, scrape, v) == 0);
  for (uint64_t i = 0; i < 20; i++) {
    CHECK_INT(feed(v, 2 * i, prefill, prefill_len), KVEXACT_OK);
    CHECK_INT(feed(v, 2 * i + 1, decode, decode_len), KVEXACT_OK);
  }
  CHECK(pthread_join(t, NULL) == 0);
  kvexact_drift_counters c = counters(v);
  CHECK_U64(c.batches, 40);
  CHECK_U64(c.matched, 60);
  kvexact_drift_verifier_free(v);
}

static void refusals(void) {
  static char dummy;
  kvexact_drift_verifier *const sentinel = (kvexact_drift_verifier *)(void *)&dummy;
  kvexact_drift_verifier *v = sentinel;
  kvexact_error *err = NULL;
  kvexact_drift_options o = vllm_options(0);

  expect_error(kvexact_drift_verifier_new("vllm-kv-map-v2", "0.35.0", &o, &v, &err), &err,
               KVEXACT_ERR_UNKNOWN_ENGINE_VERSION, "UNKNOWN_ENGINE_VERSION");
  CHECK(v == sentinel);
  expect_error(kvexact_drift_verifier_new("vllm-kv-map-v3", "0.24.0", &o, &v, &err), &err,
               KVEXACT_ERR_CONTRACT_MISMATCH, "CONTRACT_MISMATCH");
  o.block_size = 0;
  expect_error(kvexact_drift_verifier_new("vllm-kv-map-v2-r0.24", NULL, &o, &v, &err), &err,
               KVEXACT_ERR_INVALID_ARGUMENT, "invalid_argument");
  o = vllm_options(0);
  o.struct_size = sizeof o - 8;
  expect_error(kvexact_drift_verifier_new("vllm-kv-map-v2-r0.24", NULL, &o, &v, &err), &err,
               KVEXACT_ERR_INVALID_ARGUMENT, "invalid_argument");
  o = vllm_options(0);
  o.seed = NULL; /* with seed_len 1 */
  CHECK_INT(kvexact_drift_verifier_new("vllm-kv-map-v2-r0.24", NULL, &o, &v, NULL),
            KVEXACT_ERR_NULL_ARGUMENT);
  /* SGLang takes no seed. */
  o = vllm_options(0);
  expect_error(kvexact_drift_verifier_new("sglang-kv-map-v2-r0.5.23", NULL, &o, &v, &err), &err,
               KVEXACT_ERR_INVALID_ARGUMENT, "invalid_argument");
  CHECK_INT(kvexact_drift_verifier_new("vllm-kv-map-v2-r0.24", NULL, NULL, &v, NULL),
            KVEXACT_ERR_NULL_ARGUMENT);
  o = vllm_options(0);
  CHECK_INT(kvexact_drift_verifier_new("vllm-kv-map-v2-r0.24", NULL, &o, NULL, NULL),
            KVEXACT_ERR_NULL_ARGUMENT);
  CHECK(v == sentinel);

  /* Input that does not decode: counted, nothing fed. A truncated message is decode_error;
   * well-formed msgpack that is no event batch (an unused type byte first) schema_mismatch. */
  v = new_verifier(0, 0);
  expect_error(kvexact_drift_feed(v, prefill, prefill_len / 2, &err), &err,
               KVEXACT_ERR_EVENT_DECODE, "decode_error");
  const uint8_t junk[3] = {0xc1, 0x00, 0x00};
  expect_error(kvexact_drift_feed(v, junk, sizeof junk, &err), &err, KVEXACT_ERR_EVENT_SCHEMA,
               "schema_mismatch");
  const uint8_t seq4[4] = {0, 0, 0, 0};
  expect_error(kvexact_drift_feed_frames(v, NULL, 0, seq4, 4, prefill, prefill_len, &err), &err,
               KVEXACT_ERR_EVENT_DECODE, "decode_error");
  kvexact_drift_counters c = counters(v);
  CHECK_U64(c.undecodable, 3);
  CHECK_U64(c.batches, 0);
  CHECK_INT(kvexact_drift_feed(NULL, junk, 1, NULL), KVEXACT_ERR_NULL_ARGUMENT);
  CHECK_INT(kvexact_drift_feed(v, NULL, 1, NULL), KVEXACT_ERR_NULL_ARGUMENT);
  kvexact_finding f;
  CHECK_INT(kvexact_drift_finding(NULL, &f), KVEXACT_ERR_NULL_ARGUMENT);
  CHECK_INT(kvexact_drift_reset_verdict(NULL), KVEXACT_ERR_NULL_ARGUMENT);
  size_t len = 0;
  CHECK_INT(kvexact_drift_report_json(v, NULL, 0, NULL), KVEXACT_ERR_NULL_ARGUMENT);
  CHECK_INT(kvexact_drift_report_json(NULL, NULL, 0, &len), KVEXACT_ERR_NULL_ARGUMENT);
  kvexact_drift_verifier_free(v);
  kvexact_drift_verifier_free(NULL);
}

static void trtllm_body(void) {
  kvexact_drift_options o;
  memset(&o, 0, sizeof o);
  o.struct_size = sizeof o;
  o.algo = KVEXACT_HASH_ALGO_CONTRACT_DEFAULT;
  o.block_size = 32;
  o.map_capacity = 64;
  o.mismatches = 1;
  kvexact_drift_verifier *v = NULL;
  kvexact_error *err = NULL;
  CHECK_STATUS(kvexact_drift_verifier_new("trtllm-kv-http-v2", "1.3.0rc29", &o, &v, &err),
               KVEXACT_OK, err);
  const size_t n = strlen(TRT_BODY);
  CHECK_STATUS(kvexact_drift_feed(v, (const uint8_t *)TRT_BODY, n, &err), KVEXACT_OK, err);
  kvexact_drift_counters c = counters(v);
  CHECK_U64(c.batches, 1);
  CHECK_U64(c.events, 3);
  CHECK_U64(c.stored_events, 1);
  CHECK_U64(c.removed_events, 1);
  CHECK_U64(c.other_events, 1);
  CHECK_U64(c.blocks_seen, 1);
  CHECK_U64(c.matched, 1);
  CHECK_U64(c.drift, 0);
  /* JSON bodies are not ZMQ frames: refused, not counted. */
  const uint8_t seq[8] = {0};
  expect_error(kvexact_drift_feed_frames(v, NULL, 0, seq, 8, (const uint8_t *)TRT_BODY, n, &err),
               &err, KVEXACT_ERR_INVALID_ARGUMENT, "invalid_argument");
  /* The stored block's published hash changed (first occurrence: the stored block, not the
   * removal): drift, with the published hash in the evidence. */
  char *bad = malloc(n + 1);
  CHECK(bad != NULL);
  memcpy(bad, TRT_BODY, n + 1);
  char *h = strstr(bad, TRT_STORED_HASH);
  CHECK(h != NULL);
  h[strlen(TRT_STORED_HASH) - 1] = h[strlen(TRT_STORED_HASH) - 1] == '6' ? '7' : '6';
  CHECK_STATUS(kvexact_drift_feed(v, (const uint8_t *)bad, n, &err), KVEXACT_DRIFT_DETECTED,
               err);
  free(bad);
  c = counters(v);
  CHECK_U64(c.blocks_seen, 2);
  CHECK_U64(c.mismatched, 1);
  CHECK_U64(c.drift, 1);
  char *rep = report(v);
  CHECK(strstr(rep, "\"published\":12363135677185279527") != NULL);
  CHECK(strstr(rep, "\"release_id\":\"trtllm-") != NULL);
  free(rep);
  kvexact_drift_verifier_free(v);
}

int main(int argc, char **argv) {
  (void)argc;
  (void)argv;
  prefill_len = unhex(PREFILL_HEX, prefill, sizeof prefill);
  decode_len = unhex(DECODE_HEX, decode, sizeof decode);
  clean_stream();
  corrupted_token();
  counters_struct();
  predictions();
  prometheus();
  threads();
  refusals();
  trtllm_body();
  printf("drift: ok\n");
  return 0;
}
