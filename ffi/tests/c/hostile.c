/* Hostile input through the C ABI: every case is a typed refusal or a correct
 * answer, within its documented bound, as the gateway would see it.
 *
 *  - a 512 MB chat body: KVEXACT_ERR_UNSUPPORTED + KVEXACT_REFUSAL_INPUT_TOO_LARGE, with less
 *    than 50 MB of extra peak RSS (getrusage; the body itself is the caller's);
 *  - the bounds as encoder options (a 2 KB body bound), the error message naming the bound;
 *  - 5000 messages, one 4 MiB word, and a word past the id cap (never reached: 4096 ids);
 *  - a valid 62 MB vLLM event batch of one-byte hashes: refused with under 3x its size in
 *    extra peak RSS, and the decoder still decodes a small batch afterwards.
 *
 * Times are printed, never asserted. env KVEXACT_TEST_BIG_MB replaces 512, KVEXACT_TEST_RSS=0
 * skips the RSS checks (ASan's shadow memory and valgrind inflate RSS), and
 * KVEXACT_TEST_REGISTRY=0 (valgrind) runs the event-decoder case only. */
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "kvexact.h"
#include "check.h"

static long max_rss_kb(void) {
  struct rusage u;
  CHECK(getrusage(RUSAGE_SELF, &u) == 0);
  return u.ru_maxrss;
}

static double now_ms(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec * 1e3 + (double)t.tv_nsec / 1e6;
}

static int check_rss = 1;

/* A chat body with one user message of `n` bytes of `fill` (malloc'd, length in *len). */
static uint8_t *user_body(size_t n, char fill, size_t *len) {
  static const char head[] = "{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":\"";
  static const char tail[] = "\"}]}";
  size_t h = sizeof head - 1, t = sizeof tail - 1;
  uint8_t *b = malloc(h + n + t);
  CHECK(b != NULL);
  memcpy(b, head, h);
  memset(b + h, fill, n);
  memcpy(b + h + n, tail, t);
  *len = h + n + t;
  return b;
}

static int32_t encode(const kvexact_encoder *enc, const uint8_t *body, size_t len,
                      kvexact_refusal *r, uint32_t *ids) {
  *r = 999;
  return kvexact_encode_chat(enc, body, len, 0, ids, 4096, r);
}

static void big_body(const kvexact_encoder *enc, size_t mb) {
  size_t len = 0;
  uint8_t *body = user_body(mb << 20, 'a', &len);
  static uint32_t ids[4096];
  kvexact_refusal r;
  long before = max_rss_kb();
  double t0 = now_ms();
  int32_t n = encode(enc, body, len, &r, ids);
  double t1 = now_ms();
  long extra_kb = max_rss_kb() - before;
  CHECK_INT(n, KVEXACT_ERR_UNSUPPORTED);
  CHECK_INT(r, KVEXACT_REFUSAL_INPUT_TOO_LARGE);
  CHECK_STR(kvexact_refusal_name(r), "input_too_large");
  printf("hostile: %zu MB body refused input_too_large in %.2f ms, +%ld KB peak RSS\n", mb,
         t1 - t0, extra_kb);
  if (check_rss) CHECK(extra_kb < 50 * 1024);
  free(body);
}

/* The header's default bounds are the library's (kvtemplate's InputLimits::default). */
_Static_assert(KVEXACT_DEFAULT_MAX_BODY_BYTES == 8 * 1024 * 1024, "default body bound");
_Static_assert(KVEXACT_DEFAULT_MAX_RENDERED_BYTES == 8 * 1024 * 1024, "default render bound");
_Static_assert(KVEXACT_DEFAULT_MAX_WORD_BYTES == 64 * 1024, "default pre-token bound");
_Static_assert(KVEXACT_DEFAULT_MAX_FALLBACK_BYTES == 1024 * 1024, "default fallback bound");
_Static_assert(KVEXACT_DEFAULT_MAX_MESSAGES == 4096, "default message bound");

static void options_bound(const kvexact_profile *p) {
  kvexact_encoder_options o;
  memset(&o, 0, sizeof o);
  o.struct_size = sizeof o;
  o.max_body_bytes = 2048;
  o.max_messages = 2;
  kvexact_encoder *enc = NULL;
  kvexact_error *err = NULL;
  CHECK_STATUS(kvexact_encoder_new_with_options(p, "vllm-kv-map-v2", &o, &enc, &err), KVEXACT_OK,
               err);
  size_t len = 0;
  uint8_t *body = user_body(4096, 'b', &len);
  uint32_t ids[16];
  uint32_t n_ids_cap = 16;
  kvexact_refusal r;
  CHECK_INT(kvexact_encode_chat(enc, body, len, 0, ids, n_ids_cap, &r), KVEXACT_ERR_UNSUPPORTED);
  CHECK_INT(r, KVEXACT_REFUSAL_INPUT_TOO_LARGE);
  free(body);
  body = user_body(100, 'b', &len);
  CHECK(kvexact_encode_chat(enc, body, len, 0, ids, n_ids_cap, &r) > 0);
  free(body);
  const char *three = "{\"messages\":[{\"role\":\"user\",\"content\":\"a\"},{\"role\":\"assistant\","
                      "\"content\":\"b\"},{\"role\":\"user\",\"content\":\"c\"}]}";
  CHECK_INT(kvexact_encode_chat(enc, (const uint8_t *)three, strlen(three), 0, ids, n_ids_cap, &r),
            KVEXACT_ERR_UNSUPPORTED);
  CHECK_INT(r, KVEXACT_REFUSAL_INPUT_TOO_LARGE);
  kvexact_encoder_free(enc);

  /* A field past this version's struct must be zero; struct_size too small is refused. */
  o.struct_size = 8;
  CHECK_INT(kvexact_encoder_new_with_options(p, "vllm-kv-map-v2", &o, &enc, NULL),
            KVEXACT_ERR_INVALID_ARGUMENT);
}

static void many_messages(const kvexact_encoder *enc) {
  const char *msg = "{\"role\":\"user\",\"content\":\"a\"},";
  size_t m = strlen(msg), count = 5000;
  size_t cap = 64 + m * count;
  char *b = malloc(cap);
  CHECK(b != NULL);
  size_t at = (size_t)sprintf(b, "{\"messages\":[");
  for (size_t i = 0; i < count; i++) {
    memcpy(b + at, msg, m);
    at += m;
  }
  b[at - 1] = ']';
  b[at++] = '}';
  uint32_t ids[4096];
  kvexact_refusal r;
  CHECK_INT(encode(enc, (const uint8_t *)b, at, &r, ids), KVEXACT_ERR_UNSUPPORTED);
  CHECK_INT(r, KVEXACT_REFUSAL_INPUT_TOO_LARGE);
  free(b);
}

static void long_word(const kvexact_encoder *enc) {
  size_t len = 0;
  uint8_t *body = user_body((size_t)4 << 20, 'x', &len);
  static uint32_t ids[4096];
  kvexact_refusal r;
  double t0 = now_ms();
  CHECK_INT(encode(enc, body, len, &r, ids), KVEXACT_ERR_UNSUPPORTED);
  printf("hostile: one 4 MiB word refused in %.2f ms\n", now_ms() - t0);
  CHECK_INT(r, KVEXACT_REFUSAL_INPUT_TOO_LARGE);
  /* The same word after 4096 ids' worth of text is never reached. */
  const char *w = "hello world ";
  size_t wl = strlen(w);
  for (size_t i = 0; i < 4096; i++) memcpy(body + 51 + i * wl, w, wl);
  CHECK_INT(encode(enc, body, len, &r, ids), 4096);
  CHECK_INT(r, KVEXACT_REFUSAL_NONE);
  free(body);
}

/* [ts, [events x n], 0] of BlockRemoved events with `hashes` one-byte hashes each. */
static uint8_t *removed_batch(uint32_t n, uint32_t hashes, size_t *len) {
  static const uint8_t type_k[] = {0xa4, 't', 'y', 'p', 'e'};
  static const uint8_t type_v[] = {0xac, 'B', 'l', 'o', 'c', 'k', 'R', 'e', 'm', 'o', 'v', 'e', 'd'};
  static const uint8_t hashes_k[] = {0xac, 'b', 'l', 'o', 'c', 'k', '_', 'h', 'a', 's', 'h', 'e', 's'};
  static const uint8_t tail[] = {0xa6, 'm', 'e', 'd', 'i', 'u', 'm', 0xa3, 'G', 'P', 'U',
                                 0xa9, 'g', 'r', 'o', 'u', 'p', '_', 'i', 'd', 'x', 0x00};
  size_t per = 1 + sizeof type_k + sizeof type_v + sizeof hashes_k + 5 + hashes + sizeof tail;
  size_t total = 2 + 8 + 5 + per * n + 1;
  uint8_t *p = malloc(total), *q = p;
  CHECK(p != NULL);
  *q++ = 0x93;
  *q++ = 0xcb;
  const uint8_t ts[8] = {0x41, 0xd9, 0x54, 0xfc, 0x40, 0x00, 0x00, 0x00};
  memcpy(q, ts, 8);
  q += 8;
  *q++ = 0xdd;
  *q++ = (uint8_t)(n >> 24); *q++ = (uint8_t)(n >> 16); *q++ = (uint8_t)(n >> 8); *q++ = (uint8_t)n;
  for (uint32_t e = 0; e < n; e++) {
    *q++ = 0x84;
    memcpy(q, type_k, sizeof type_k); q += sizeof type_k;
    memcpy(q, type_v, sizeof type_v); q += sizeof type_v;
    memcpy(q, hashes_k, sizeof hashes_k); q += sizeof hashes_k;
    *q++ = 0xdd;
    *q++ = (uint8_t)(hashes >> 24); *q++ = (uint8_t)(hashes >> 16);
    *q++ = (uint8_t)(hashes >> 8); *q++ = (uint8_t)hashes;
    memset(q, 0x01, hashes);
    q += hashes;
    memcpy(q, tail, sizeof tail); q += sizeof tail;
  }
  *q++ = 0x00;
  CHECK((size_t)(q - p) == total);
  *len = total;
  return p;
}

static void event_batch(uint32_t events) {
  kvexact_event_decoder *dec = NULL;
  CHECK_INT(kvexact_event_decoder_new("vllm-kv-map-v3", NULL, &dec, NULL), KVEXACT_OK);
  size_t len = 0;
  uint8_t *p = removed_batch(events, 1u << 20, &len);
  const kvexact_event *ev = NULL;
  size_t n = 0;
  int64_t rank = 0;
  kvexact_error *err = NULL;
  long before = max_rss_kb();
  double t0 = now_ms();
  kvexact_status st = kvexact_event_decode(dec, p, len, &ev, &n, &rank, &err);
  double t1 = now_ms();
  long extra_kb = max_rss_kb() - before;
  CHECK(st != KVEXACT_OK);
  CHECK(err != NULL);
  printf("hostile: %zu byte event batch refused (%s: %s) in %.2f ms, +%ld KB peak RSS\n", len,
         kvexact_error_code(err), kvexact_error_message(err), t1 - t0, extra_kb);
  kvexact_error_free(err);
  if (check_rss) CHECK((size_t)extra_kb * 1024 < 3 * len);
  free(p);
  /* The decoder is still usable: a small batch decodes. */
  p = removed_batch(2, 8, &len);
  CHECK_STATUS(kvexact_event_decode(dec, p, len, &ev, &n, &rank, &err), KVEXACT_OK, err);
  CHECK_INT(n, 2);
  CHECK_INT(rank, 0);
  free(p);
  kvexact_event_decoder_free(dec);
}

int main(int argc, char **argv) {
  CHECK(argc >= 2);
  const char *mb_env = getenv("KVEXACT_TEST_BIG_MB");
  size_t mb = mb_env ? (size_t)atol(mb_env) : 512;
  const char *rss_env = getenv("KVEXACT_TEST_RSS");
  if (rss_env && strcmp(rss_env, "0") == 0) check_rss = 0;
  if (mb < 9) mb = 9; /* over the 8 MiB default bound */

  /* The event batch first: peak RSS is a high-water mark, which the big body then raises. */
  event_batch(mb >= 62 ? 62 : (uint32_t)mb);
  const char *wr = getenv("KVEXACT_TEST_REGISTRY");
  if (wr && strcmp(wr, "0") == 0) { /* valgrind: the encoder cases run under ASan and plain */
    printf("hostile: ok (event decoder only)\n");
    return 0;
  }
  char root[4096];
  snprintf(root, sizeof root, "%s/testdata/registry", argv[1]);
  kvexact_registry_opts opts = {(uint32_t)geteuid(), 0, 0};
  kvexact_registry *reg = NULL;
  kvexact_error *err = NULL;
  CHECK_STATUS(kvexact_registry_load((const uint8_t *)root, strlen(root), &opts, 1, &reg, &err),
               KVEXACT_OK, err);
  const kvexact_profile *p = NULL;
  const char *model = "qwen2.5-7b-instruct";
  CHECK_STATUS(kvexact_profile_by_model(reg, (const uint8_t *)model, strlen(model), &p), KVEXACT_OK,
               NULL);
  kvexact_encoder *enc = NULL;
  CHECK_STATUS(kvexact_encoder_new(p, "vllm-kv-map-v2", &enc, &err), KVEXACT_OK, err);

  big_body(enc, mb);
  options_bound(p);
  many_messages(enc);
  long_word(enc);

  kvexact_encoder_free(enc);
  kvexact_profile_free(p);
  kvexact_registry_free(reg);
  printf("hostile: ok\n");
  return 0;
}
