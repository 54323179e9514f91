/* The one-call hot path and the caches from C: encoders and hashers built with options
 * (caches on by default, off with KVEXACT_OPTION_NO_CACHE, one prefix cache shared by two
 * hashers), kvexact_route_keys equal to kvexact_encode_chat + kvexact_block_hashes_u64 on a
 * growing two-turn conversation, the batch form equal to one call per body, the cache
 * counters and clearing, a refusal, and argument checks with nothing written. */
#include <unistd.h>

#include "kvexact.h"
#include "check.h"

#define NOW_MS INT64_C(1721997296000)
#define MAX_IDS 2048
#define MAX_BLOCKS 128

#define LONG_TEXT                                                                          \
  "Please review the following function and explain what it does, line by line, including " \
  "the edge cases, the complexity and what a caller must check before using the result."

static const char TURN1[] =
    "{\"model\":\"Qwen/Qwen2.5-7B-Instruct\",\"messages\":["
    "{\"role\":\"system\",\"content\":\"You are a careful reviewer. " LONG_TEXT "\"},"
    "{\"role\":\"user\",\"content\":\"" LONG_TEXT " def f(x): return [i * i for i in range(x)]\"}]}";

static const char TURN2[] =
    "{\"model\":\"Qwen/Qwen2.5-7B-Instruct\",\"messages\":["
    "{\"role\":\"system\",\"content\":\"You are a careful reviewer. " LONG_TEXT "\"},"
    "{\"role\":\"user\",\"content\":\"" LONG_TEXT " def f(x): return [i * i for i in range(x)]\"},"
    "{\"role\":\"assistant\",\"content\":\"It squares every integer below x. " LONG_TEXT "\"},"
    "{\"role\":\"user\",\"content\":\"And what if x is negative? " LONG_TEXT "\"}]}";

static const char TOOLS[] =
    "{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}],"
    "\"tools\":[{\"type\":\"function\",\"function\":{\"name\":\"f\"}}]}";

static kvexact_encoder *encoder(const kvexact_profile *p, uint32_t flags) {
  kvexact_encoder_options o;
  memset(&o, 0, sizeof o);
  o.struct_size = sizeof o;
  o.flags = flags;
  kvexact_encoder *e = NULL;
  kvexact_error *err = NULL;
  CHECK_STATUS(kvexact_encoder_new_with_options(p, "vllm-kv-map-v3", &o, &e, &err), KVEXACT_OK,
               err);
  return e;
}

static kvexact_hasher *hasher(uint32_t flags, uint64_t entries, const kvexact_hasher *share) {
  kvexact_hasher_options o;
  memset(&o, 0, sizeof o);
  o.struct_size = sizeof o;
  o.flags = flags;
  o.prefix_cache_entries = entries;
  o.share_cache_with = share;
  kvexact_hasher *h = NULL;
  kvexact_error *err = NULL;
  CHECK_STATUS(kvexact_hasher_new_with_options(KVEXACT_SHA256_CBOR, 16, (const uint8_t *)"0", 1,
                                               &o, &h, &err),
               KVEXACT_OK, err);
  return h;
}

static kvexact_cache_stats encoder_stats(const kvexact_encoder *e) {
  kvexact_cache_stats s;
  memset(&s, 0, sizeof s);
  s.struct_size = sizeof s;
  CHECK_INT(kvexact_encoder_cache_stats(e, &s), KVEXACT_OK);
  return s;
}

static kvexact_cache_stats hasher_stats(const kvexact_hasher *h) {
  kvexact_cache_stats s;
  memset(&s, 0, sizeof s);
  s.struct_size = sizeof s;
  CHECK_INT(kvexact_hasher_cache_stats(h, &s), KVEXACT_OK);
  return s;
}

/* The separate calls: ids into ids[], their full-block hashes into hashes[]. */
static void separate(const kvexact_encoder *e, const kvexact_hasher *h, const char *body,
                     uint32_t *ids, size_t *n_ids, uint64_t *hashes, size_t *n_blocks) {
  int32_t n = kvexact_encode_chat(e, (const uint8_t *)body, strlen(body), NOW_MS, ids, MAX_IDS,
                                  NULL);
  CHECK(n > 0);
  int32_t nb = kvexact_block_hashes_u64(h, ids, (size_t)n, 1, hashes, MAX_BLOCKS);
  CHECK(nb >= 0);
  *n_ids = (size_t)n;
  *n_blocks = (size_t)nb;
}

/* kvexact_route_keys of body equals the separate calls on the uncached handles. */
static void same_as_separate(const kvexact_encoder *e, const kvexact_hasher *h,
                             const kvexact_encoder *e_ref, const kvexact_hasher *h_ref,
                             const char *body) {
  static uint32_t ids[MAX_IDS], want_ids[MAX_IDS];
  static uint64_t hashes[MAX_BLOCKS], want_hashes[MAX_BLOCKS];
  size_t wi = 0, wb = 0, ni = 0, nb = 0;
  separate(e_ref, h_ref, body, want_ids, &wi, want_hashes, &wb);
  CHECK(wb >= 4);
  kvexact_refusal refusal = 999;
  kvexact_error *err = NULL;
  CHECK_STATUS(kvexact_route_keys(e, h, (const uint8_t *)body, strlen(body), NOW_MS, ids, MAX_IDS,
                                  hashes, MAX_BLOCKS, &ni, &nb, &refusal, &err),
               KVEXACT_OK, err);
  CHECK(err == NULL);
  CHECK_INT(refusal, KVEXACT_REFUSAL_NONE);
  CHECK_U64(ni, wi);
  CHECK_U64(nb, wb);
  CHECK(memcmp(ids, want_ids, wi * sizeof ids[0]) == 0);
  CHECK(memcmp(hashes, want_hashes, wb * sizeof hashes[0]) == 0);
}

static void batch(const kvexact_encoder *e, const kvexact_hasher *h, const kvexact_encoder *e_ref,
                  const kvexact_hasher *h_ref) {
  static uint32_t ids[3 * MAX_IDS], want_ids[MAX_IDS];
  static uint64_t hashes[3 * MAX_BLOCKS], want_hashes[MAX_BLOCKS];
  const char *bodies[3] = {TURN1, TOOLS, TURN2};
  kvexact_route_request reqs[3];
  kvexact_route_result res[3];
  for (int i = 0; i < 3; i++) {
    reqs[i].body = (const uint8_t *)bodies[i];
    reqs[i].len = strlen(bodies[i]);
    reqs[i].now_unix_ms = NOW_MS;
  }
  kvexact_error *err = NULL;
  CHECK_STATUS(kvexact_route_keys_batch(e, h, reqs, 3, ids, MAX_IDS, hashes, MAX_BLOCKS, res, &err),
               KVEXACT_OK, err);
  CHECK_INT(res[1].status, KVEXACT_ERR_UNSUPPORTED);
  CHECK_STR(kvexact_refusal_name(res[1].refusal), "tools");
  for (int i = 0; i < 3; i += 2) {
    size_t wi = 0, wb = 0;
    separate(e_ref, h_ref, bodies[i], want_ids, &wi, want_hashes, &wb);
    CHECK_INT(res[i].status, KVEXACT_OK);
    CHECK_U64(res[i].n_ids, wi);
    CHECK_U64(res[i].n_blocks, wb);
    CHECK(memcmp(ids + i * MAX_IDS, want_ids, wi * sizeof ids[0]) == 0);
    CHECK(memcmp(hashes + i * MAX_BLOCKS, want_hashes, wb * sizeof hashes[0]) == 0);
  }
  /* Arguments are checked before anything is written. */
  CHECK_INT(kvexact_route_keys_batch(e, h, NULL, 3, ids, MAX_IDS, hashes, MAX_BLOCKS, res, NULL),
            KVEXACT_ERR_NULL_ARGUMENT);
  CHECK_INT(kvexact_route_keys_batch(e, h, reqs, 3, ids, SIZE_MAX, hashes, MAX_BLOCKS, res, NULL),
            KVEXACT_ERR_INVALID_ARGUMENT);
}

static void refusals_and_arguments(const kvexact_encoder *e, const kvexact_hasher *h) {
  uint32_t ids[16];
  uint64_t hashes[4];
  size_t ni = 77, nb = 77;
  kvexact_refusal refusal = 999;
  kvexact_error *err = NULL;
  CHECK_INT(kvexact_route_keys(e, h, (const uint8_t *)TOOLS, strlen(TOOLS), NOW_MS, ids, 16,
                               hashes, 4, &ni, &nb, &refusal, &err),
            KVEXACT_ERR_UNSUPPORTED);
  CHECK_STR(kvexact_refusal_name(refusal), "tools");
  CHECK(err != NULL);
  CHECK_STR(kvexact_error_code(err), "tools");
  kvexact_error_free(err);
  CHECK_U64(ni, 77);
  CHECK_U64(nb, 77);
  /* Capped outputs. */
  CHECK_INT(kvexact_route_keys(e, h, (const uint8_t *)TURN2, strlen(TURN2), NOW_MS, ids, 16,
                               hashes, 4, &ni, &nb, NULL, NULL),
            KVEXACT_OK);
  CHECK_U64(ni, 16);
  CHECK_U64(nb, 1);
  /* NULL handles and out-params, a NULL buffer with a capacity. */
  CHECK_INT(kvexact_route_keys(NULL, h, (const uint8_t *)TURN1, strlen(TURN1), NOW_MS, ids, 16,
                               hashes, 4, &ni, &nb, NULL, NULL),
            KVEXACT_ERR_NULL_ARGUMENT);
  CHECK_INT(kvexact_route_keys(e, h, (const uint8_t *)TURN1, strlen(TURN1), NOW_MS, ids, 16,
                               hashes, 4, NULL, &nb, NULL, NULL),
            KVEXACT_ERR_NULL_ARGUMENT);
  CHECK_INT(kvexact_route_keys(e, h, (const uint8_t *)TURN1, strlen(TURN1), NOW_MS, NULL, 16,
                               hashes, 4, &ni, &nb, NULL, NULL),
            KVEXACT_ERR_NULL_ARGUMENT);
  /* Versioned structs: too small a struct_size is refused, nothing written. */
  kvexact_cache_stats s;
  memset(&s, 0xAB, sizeof s);
  s.struct_size = 8;
  CHECK_INT(kvexact_encoder_cache_stats(e, &s), KVEXACT_ERR_INVALID_ARGUMENT);
  CHECK_U64(s.hits, UINT64_C(0xABABABABABABABAB));
  kvexact_hasher_options o;
  memset(&o, 0, sizeof o);
  o.struct_size = sizeof o;
  o.flags = KVEXACT_OPTION_NO_CACHE;
  o.prefix_cache_entries = 10;
  kvexact_hasher *none = (kvexact_hasher *)0x1;
  CHECK_INT(kvexact_hasher_new_with_options(KVEXACT_SHA256_CBOR, 16, (const uint8_t *)"0", 1, &o,
                                            &none, NULL),
            KVEXACT_ERR_INVALID_ARGUMENT);
  CHECK(none == (kvexact_hasher *)0x1);
}

int main(int argc, char **argv) {
  CHECK(argc >= 2);
  char root[4096];
  snprintf(root, sizeof root, "%s/testdata/registry", argv[1]);
  kvexact_registry_opts ropts = {(uint32_t)geteuid(), 0, 0};
  kvexact_registry *reg = NULL;
  kvexact_error *err = NULL;
  CHECK_STATUS(kvexact_registry_load((const uint8_t *)root, strlen(root), &ropts, 5, &reg, &err),
               KVEXACT_OK, err);
  const kvexact_profile *prof = NULL;
  const char *id = "qwen25-7b-instruct-v1";
  CHECK_STATUS(kvexact_profile_by_id(reg, (const uint8_t *)id, strlen(id), &prof), KVEXACT_OK,
               NULL);

  kvexact_encoder *on = encoder(prof, 0), *off = encoder(prof, KVEXACT_OPTION_NO_CACHE);
  kvexact_hasher *h_on = hasher(0, 0, NULL), *h_off = hasher(KVEXACT_OPTION_NO_CACHE, 0, NULL);
  kvexact_hasher *h_shared = hasher(0, 0, h_on);

  kvexact_cache_stats es = encoder_stats(on), hs = hasher_stats(h_on);
  CHECK_INT(es.enabled, 1);
  CHECK_U64(es.capacity, KVEXACT_SEGMENT_CACHE_DEFAULT_BYTES);
  CHECK_INT(hs.enabled, 1);
  CHECK(hs.capacity >= KVEXACT_PREFIX_CACHE_DEFAULT_ENTRIES);
  CHECK_INT(encoder_stats(off).enabled, 0);
  CHECK_INT(hasher_stats(h_off).enabled, 0);

  same_as_separate(on, h_on, off, h_off, TURN1);
  same_as_separate(on, h_on, off, h_off, TURN2);
  es = encoder_stats(on);
  hs = hasher_stats(h_on);
  CHECK(es.hits > 0 && es.misses > 0 && es.bytes > 0 && es.entries > 0);
  CHECK(hs.hits > 0 && hs.misses > 0 && hs.entries > 0);
  /* The sharing hasher sees the same cache and gives the same keys. */
  CHECK_U64(hasher_stats(h_shared).hits, hs.hits);
  same_as_separate(on, h_shared, off, h_off, TURN2);
  CHECK(hasher_stats(h_on).hits > hs.hits);

  batch(on, h_on, off, h_off);
  refusals_and_arguments(on, h_on);

  /* Clearing empties the caches, keeps the counters and the answers. */
  CHECK_INT(kvexact_encoder_cache_clear(on), KVEXACT_OK);
  CHECK_INT(kvexact_hasher_cache_clear(h_shared), KVEXACT_OK);
  CHECK_U64(encoder_stats(on).entries, 0);
  CHECK_U64(hasher_stats(h_on).entries, 0);
  CHECK(encoder_stats(on).hits >= es.hits);
  same_as_separate(on, h_on, off, h_off, TURN2);
  CHECK_INT(kvexact_encoder_cache_clear(NULL), KVEXACT_ERR_NULL_ARGUMENT);

  kvexact_hasher_free(h_shared);
  kvexact_hasher_free(h_on);
  kvexact_hasher_free(h_off);
  kvexact_encoder_free(on);
  kvexact_encoder_free(off);
  kvexact_profile_free(prof);
  kvexact_registry_free(reg);
  printf("route_keys: ok\n");
  return 0;
}
