/* Engine contracts per release through libkvexact: resolving engine versions (static ids,
 * UNKNOWN_ENGINE_VERSION with nothing written), the catalog JSON (size query), a hasher with
 * vLLM 0.17.0's rules reproducing that release's own vector (testdata/vectors/versions/
 * vllm-0.17.0/block_hashes.json, case plain_len48_bs16_seed0) and refusing an unset seed
 * (NONE_HASH rule A), a contract mismatch, and event decoders by release: a vLLM 0.20.0
 * BlockStored payload (versions/vllm-0.20.0/kv_events.json, case
 * int_stored_decode_with_parent) decodes under 0.20's schema and is refused by 0.17's.
 * No registry is loaded. */
#include "kvexact.h"
#include "check.h"

/* The 48 ids and the three u64 block hashes vLLM 0.17.0 computed (sha256_cbor,
 * PYTHONHASHSEED=0, block size 16). */
static const uint32_t IDS[48] = {
    110171, 59236, 93144, 132300, 135681, 21000, 104694, 60516, 88527, 51890, 8919, 43232,
    58224, 142143, 139677, 52213, 43193, 59507, 50984, 61061, 17986, 90871, 32392, 97442,
    92176, 38362, 77979, 5051, 66788, 56988, 12815, 120065, 94807, 45314, 26112, 20618,
    77498, 61042, 150654, 23552, 144921, 55583, 25661, 112994, 68452, 38227, 99891, 92169,
};
static const uint64_t HASHES[3] = {
    UINT64_C(8390710451449911437), UINT64_C(10884815725108557754),
    UINT64_C(12391121987574107748),
};

/* vLLM 0.20.0's ZMQ frame 2: one BlockStored with 10 fields (0.20 added group_idx). */
static const char PAYLOAD_HEX[] =
    "93cb41da556e40100000919aab426c6f636b53746f72656491cf080d237d00ab29b2cf66bfb8246426d1a8dc"
    "0010cddbdace00019edfcd54f3ce00015b17cdac67cdc699cd1940cde4ccce0002280fcdb5efcd364bce0002"
    "3041ce0001ba8ace00022a90cddd87cd05c210c0a3475055c091c00000";
#define STORED_HASH UINT64_C(580158946789763506)
#define PARENT_HASH UINT64_C(7403838778858983848)

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

/* Checks the error object of a failed call and frees it. */
static void expect_error(kvexact_status s, kvexact_error *err, kvexact_status want,
                         const char *code) {
  CHECK_INT(s, want);
  CHECK(err != NULL);
  CHECK_INT(kvexact_error_status(err), want);
  CHECK_STR(kvexact_error_code(err), code);
  printf("refused: %s: %s\n", kvexact_error_code(err), kvexact_error_message(err));
  kvexact_error_free(err);
}

static void resolve(void) {
  const char *release = NULL, *contract = NULL;
  kvexact_error *err = NULL;
  CHECK_STATUS(kvexact_contract_resolve(KVEXACT_VLLM, "0.24.0", &release, &contract, &err),
               KVEXACT_OK, err);
  CHECK(err == NULL);
  CHECK_STR(release, "vllm-kv-map-v2-r0.24");
  CHECK_STR(contract, "vllm-kv-map-v2");
  /* Static strings: the same pointers on the next call, never freed. */
  const char *r2 = NULL, *c2 = NULL;
  CHECK_STATUS(kvexact_contract_resolve(KVEXACT_VLLM, "v0.25.1", &r2, &c2, NULL), KVEXACT_OK,
               NULL);
  CHECK(r2 == release && c2 == contract);
  CHECK_STATUS(kvexact_contract_resolve(KVEXACT_SGLANG, "0.5.23", &r2, &c2, NULL), KVEXACT_OK,
               NULL);
  CHECK_STR(r2, "sglang-kv-map-v2-r0.5.23");
  CHECK_STATUS(kvexact_contract_resolve(KVEXACT_TRTLLM, "1.3.0rc29", &r2, &c2, NULL),
               KVEXACT_OK, NULL);
  CHECK_STR(c2, "trtllm-kv-http-v2");

  /* Unknown version: a status of its own, a stable code, nothing written. */
  const char *untouched = "untouched";
  r2 = untouched;
  c2 = untouched;
  kvexact_status s = kvexact_contract_resolve(KVEXACT_VLLM, "0.35.0", &r2, &c2, &err);
  CHECK(r2 == untouched && c2 == untouched);
  CHECK(strstr(kvexact_error_message(err), "nearest") != NULL);
  expect_error(s, err, KVEXACT_ERR_UNKNOWN_ENGINE_VERSION, "UNKNOWN_ENGINE_VERSION");
  CHECK_STR(kvexact_status_name(KVEXACT_ERR_UNKNOWN_ENGINE_VERSION), "unknown_engine_version");
  CHECK_INT(kvexact_contract_resolve(KVEXACT_VLLM, "0.35.0", &r2, &c2, NULL),
            KVEXACT_ERR_UNKNOWN_ENGINE_VERSION);
  CHECK_INT(kvexact_contract_resolve(9, "0.24.0", &r2, &c2, NULL), KVEXACT_ERR_INVALID_ARGUMENT);
  CHECK_INT(kvexact_contract_resolve(KVEXACT_VLLM, NULL, &r2, &c2, NULL),
            KVEXACT_ERR_NULL_ARGUMENT);
  CHECK_INT(kvexact_contract_resolve(KVEXACT_VLLM, "0.24.0", NULL, &c2, NULL),
            KVEXACT_ERR_NULL_ARGUMENT);
  CHECK(r2 == untouched && c2 == untouched);
}

static void catalog(void) {
  size_t len = 0;
  CHECK_INT(kvexact_contracts_json(NULL, 0, &len), KVEXACT_ERR_BUFFER_TOO_SMALL);
  CHECK(len > 100);
  char *buf = malloc(len + 1);
  CHECK(buf != NULL);
  size_t len2 = 0;
  CHECK_INT(kvexact_contracts_json((uint8_t *)buf, len - 1, &len2), KVEXACT_ERR_BUFFER_TOO_SMALL);
  CHECK_INT(len2, len);
  CHECK_INT(kvexact_contracts_json((uint8_t *)buf, len, &len2), KVEXACT_OK);
  CHECK_INT(len2, len);
  buf[len] = '\0';
  CHECK(strncmp(buf, "{", 1) == 0);
  CHECK(strstr(buf, "\"schema\":\"kvexact-contracts/v1\"") != NULL);
  CHECK(strstr(buf, "\"release\":\"vllm-kv-array-v1-r0.17\"") != NULL);
  CHECK(strstr(buf, "\"release\":\"trtllm-kv-http-v2-r1.3.0rc29\"") != NULL);
  free(buf);
  CHECK_INT(kvexact_contracts_json(NULL, 0, NULL), KVEXACT_ERR_NULL_ARGUMENT);
}

static void hashers(void) {
  static const char *const IDS_AND_VERSIONS[][2] = {
      {"vllm-kv-array-v1", "0.17.0"},
      {"vllm-kv-array-v1-r0.17", "0.18.1"},
      {"vllm-kv-array-v1-r0.17", NULL},
  };
  for (size_t i = 0; i < sizeof IDS_AND_VERSIONS / sizeof IDS_AND_VERSIONS[0]; i++) {
    kvexact_hasher *h = NULL;
    kvexact_error *err = NULL;
    CHECK_STATUS(kvexact_hasher_new_for_contract(IDS_AND_VERSIONS[i][0], IDS_AND_VERSIONS[i][1],
                                                 KVEXACT_HASH_ALGO_CONTRACT_DEFAULT, 16,
                                                 (const uint8_t *)"0", 1, &h, &err),
                 KVEXACT_OK, err);
    CHECK(err == NULL && h != NULL);
    uint64_t out[4] = {0};
    CHECK_INT(kvexact_hasher_block_count(h, 48, 1), 3);
    CHECK_INT(kvexact_block_hashes_u64(h, IDS, 48, 1, out, 4), 3);
    for (int b = 0; b < 3; b++) CHECK_U64(out[b], HASHES[b]);
    /* A hasher by contract is an ordinary hasher: retain/free as usual. */
    const kvexact_hasher *again = kvexact_hasher_retain(h);
    CHECK(again == h);
    kvexact_hasher_free(again);
    kvexact_hasher_free(h);
  }

  /* NONE_HASH rule A: an unset seed is random in vLLM 0.17.0, so it is refused. */
  static char dummy;
  kvexact_hasher *const sentinel = (kvexact_hasher *)(void *)&dummy; /* must stay untouched */
  kvexact_hasher *h = sentinel;
  kvexact_error *err = NULL;
  kvexact_status s = kvexact_hasher_new_for_contract("vllm-kv-array-v1", "0.17.0",
                                                     KVEXACT_SHA256_CBOR, 16, NULL, 0, &h, &err);
  CHECK(h == sentinel);
  expect_error(s, err, KVEXACT_ERR_NONE_HASH_UNREPRODUCIBLE, "none_hash_unreproducible");
  /* Under rule B (0.31.0) an unset seed is vLLM's fixed one, as kvexact_hasher_new uses. */
  CHECK_STATUS(kvexact_hasher_new_for_contract("vllm-kv-map-v3", "0.31.0", KVEXACT_SHA256_CBOR,
                                               16, NULL, 0, &h, NULL),
               KVEXACT_OK, NULL);
  kvexact_hasher *ref = NULL;
  CHECK_INT(kvexact_hasher_new(KVEXACT_SHA256_CBOR, 16, NULL, 0, &ref, NULL), KVEXACT_OK);
  uint64_t a[3], b[3];
  CHECK_INT(kvexact_block_hashes_u64(h, IDS, 48, 1, a, 3), 3);
  CHECK_INT(kvexact_block_hashes_u64(ref, IDS, 48, 1, b, 3), 3);
  for (int i = 0; i < 3; i++) CHECK_U64(a[i], b[i]);
  kvexact_hasher_free(h);
  kvexact_hasher_free(ref);

  /* Unknown version, a version of another contract, an unknown id. */
  h = sentinel;
  s = kvexact_hasher_new_for_contract("vllm-kv-map-v3", "0.35.0", KVEXACT_SHA256_CBOR, 16,
                                      (const uint8_t *)"0", 1, &h, &err);
  expect_error(s, err, KVEXACT_ERR_UNKNOWN_ENGINE_VERSION, "UNKNOWN_ENGINE_VERSION");
  s = kvexact_hasher_new_for_contract("vllm-kv-map-v2", "0.31.0", KVEXACT_SHA256_CBOR, 16,
                                      (const uint8_t *)"0", 1, &h, &err);
  expect_error(s, err, KVEXACT_ERR_CONTRACT_MISMATCH, "CONTRACT_MISMATCH");
  s = kvexact_hasher_new_for_contract("no-such-contract", NULL, KVEXACT_SHA256_CBOR, 16,
                                      (const uint8_t *)"0", 1, &h, &err);
  expect_error(s, err, KVEXACT_ERR_NOT_FOUND, "UNKNOWN_NAME");
  CHECK_INT(kvexact_hasher_new_for_contract(NULL, NULL, KVEXACT_SHA256_CBOR, 16, NULL, 0, &h,
                                            NULL),
            KVEXACT_ERR_NULL_ARGUMENT);
  CHECK(h == sentinel);
  CHECK_INT(kvexact_hasher_new(KVEXACT_HASH_ALGO_CONTRACT_DEFAULT, 16, NULL, 0, &ref, NULL),
            KVEXACT_ERR_INVALID_ARGUMENT);
}

static void decoders(void) {
  uint8_t payload[256];
  size_t len = unhex(PAYLOAD_HEX, payload, sizeof payload);
  kvexact_event_decoder *r020 = NULL, *r017 = NULL, *family = NULL;
  kvexact_error *err = NULL;
  CHECK_STATUS(kvexact_event_decoder_new_for_contract("vllm-kv-array-v1", "0.20.0", NULL, &r020,
                                                      &err),
               KVEXACT_OK, err);
  CHECK_STATUS(kvexact_event_decoder_new_for_contract("vllm-kv-array-v1-r0.17", NULL, NULL,
                                                      &r017, &err),
               KVEXACT_OK, err);
  CHECK_INT(kvexact_event_decoder_new("vllm-kv-array-v1", NULL, &family, NULL), KVEXACT_OK);

  kvexact_event_decoder *const decs[2] = {r020, family};
  for (int d = 0; d < 2; d++) {
    const kvexact_event *ev = NULL;
    size_t n = 0;
    int64_t rank = 99;
    CHECK_STATUS(kvexact_event_decode(decs[d], payload, len, &ev, &n, &rank, &err), KVEXACT_OK,
                 err);
    CHECK_INT(n, 1);
    CHECK_INT(rank, 0);
    CHECK_INT(ev[0].kind, KVEXACT_EVENT_STORED);
    CHECK_INT(ev[0].n_hashes, 1);
    CHECK_U64(ev[0].hashes[0], STORED_HASH);
    CHECK_INT(ev[0].has_parent, 1);
    CHECK_U64(ev[0].parent_hash, PARENT_HASH);
    CHECK_INT(ev[0].n_tokens, 16);
    CHECK_INT(ev[0].token_ids[0], 56282);
    CHECK_INT(ev[0].block_size, 16);
  }

  /* 0.17's schema has no group_idx: the 0.20 event is refused, nothing written. */
  const kvexact_event *ev = NULL;
  size_t n = 77;
  int64_t rank = 77;
  kvexact_status s = kvexact_event_decode(r017, payload, len, &ev, &n, &rank, &err);
  CHECK(ev == NULL && n == 77 && rank == 77);
  expect_error(s, err, KVEXACT_ERR_EVENT_SCHEMA, "schema_mismatch");

  /* A vLLM release takes no re-hasher; an unknown version makes no decoder. */
  kvexact_hasher *trt = NULL;
  CHECK_INT(kvexact_hasher_new(KVEXACT_BLOCKHASH_TRTLLM, 32, NULL, 0, &trt, NULL), KVEXACT_OK);
  kvexact_event_decoder *none = NULL;
  s = kvexact_event_decoder_new_for_contract("vllm-kv-map-v3-r0.31", NULL, trt, &none, &err);
  expect_error(s, err, KVEXACT_ERR_INVALID_ARGUMENT, "invalid_argument");
  CHECK_STATUS(kvexact_event_decoder_new_for_contract("trtllm-kv-http-v2", "1.3.0rc29", trt,
                                                      &none, &err),
               KVEXACT_OK, err);
  kvexact_hasher_free(trt); /* the decoder keeps its own copy */
  kvexact_event_decoder_free(none);
  none = NULL;
  s = kvexact_event_decoder_new_for_contract("vllm-kv-array-v1", "0.16.0", NULL, &none, &err);
  expect_error(s, err, KVEXACT_ERR_UNKNOWN_ENGINE_VERSION, "UNKNOWN_ENGINE_VERSION");
  CHECK(none == NULL);

  kvexact_event_decoder_free(r020);
  kvexact_event_decoder_free(r017);
  kvexact_event_decoder_free(family);
}

int main(void) {
  resolve();
  catalog();
  hashers();
  decoders();
  printf("contracts: ok\n");
  return 0;
}
