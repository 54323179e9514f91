/* §6.5 from C, on the registry gateway_flow.c loaded: the Qwen3 vLLM fixture set (request bytes
 * against the file, the banked ids of `basic-ascii` judged as an engine answer, a changed id
 * judged token_mismatch), identity against the manifest, the TensorRT-LLM oracle, and a hash
 * challenge echoed through kvexact_event values (pass, and a timeout). Included by
 * gateway_flow.c (one registry load: the valgrind run stays short). */
#ifndef KVEXACT_TEST_PROBE_CHECKS_H
#define KVEXACT_TEST_PROBE_CHECKS_H

#include "kvexact.h"
#include "check.h"

static kvexact_finding probe_blank_finding(void) {
  kvexact_finding f;
  memset(&f, 0x7f, sizeof f);
  return f;
}

static void probe_fixtures(kvexact_registry *reg, const kvexact_encoder *enc, const char *root) {
  const char *id = "qwen3-06b-default-v1";
  kvexact_fixtures *fx = NULL;
  kvexact_error *err = NULL;
  CHECK_STATUS(kvexact_fixtures_load(reg, (const uint8_t *)id, strlen(id), KVEXACT_VLLM, &fx, &err),
               KVEXACT_OK, err);
  const kvexact_profile *p = NULL;
  CHECK_STATUS(kvexact_profile_by_id(reg, (const uint8_t *)id, strlen(id), &p), KVEXACT_OK, NULL);
  kvexact_finding f = probe_blank_finding();
  CHECK_STATUS(kvexact_fixtures_check(fx, p, KVEXACT_API_BOTH, &f), KVEXACT_OK, NULL);
  CHECK_INT(f.ok, 1);
  CHECK(f.reason == NULL);
  kvexact_profile_free(p);

  size_t n = kvexact_fixtures_count(fx);
  CHECK(n >= 6);
  size_t basic = n;
  for (size_t i = 0; i < n; i++) {
    kvexact_fixture_info info;
    CHECK_STATUS(kvexact_fixture_describe(fx, i, &info), KVEXACT_OK, NULL);
    CHECK(info.api == KVEXACT_API_CHAT || info.api == KVEXACT_API_COMPLETIONS);
    if (strcmp(info.name, "basic-ascii") == 0) basic = i;
  }
  CHECK(basic < n);

  /* The request bytes are the file's, verbatim. */
  const uint8_t *req = NULL;
  size_t req_len = 0;
  CHECK_STATUS(kvexact_fixture_request(fx, basic, &req, &req_len), KVEXACT_OK, NULL);
  char path[4200];
  snprintf(path, sizeof path, "%s/testdata/registry/probefixtures/%s/basic-ascii.request.json", root, id);
  FILE *file = fopen(path, "rb");
  CHECK(file != NULL);
  char disk[4096];
  size_t disk_len = fread(disk, 1, sizeof disk, file);
  fclose(file);
  CHECK_INT(req_len, disk_len);
  CHECK(memcmp(req, disk, req_len) == 0);

  /* The engine's answer with the banked ids (basic-ascii.expect.json) passes; one changed id
   * is token_mismatch. */
  const char *good = "{\"count\":5,\"tokens\":[785,6722,315,9625,374],\"max_model_len\":40960}";
  f = probe_blank_finding();
  CHECK_STATUS(kvexact_judge_tokenize(enc, fx, basic, 200, (const uint8_t *)good, strlen(good), 0, &f),
               KVEXACT_OK, NULL);
  CHECK_INT(f.ok, 1);
  const char *bad = "{\"count\":5,\"tokens\":[785,6722,316,9625,374],\"max_model_len\":40960}";
  f = probe_blank_finding();
  CHECK_STATUS(kvexact_judge_tokenize(enc, fx, basic, 200, (const uint8_t *)bad, strlen(bad), 0, &f),
               KVEXACT_OK, NULL);
  CHECK_INT(f.ok, 0);
  CHECK_STR(f.reason, "token_mismatch");
  CHECK(strstr(f.detail, "index 2") != NULL);
  f = probe_blank_finding();
  CHECK_STATUS(kvexact_judge_tokenize(enc, fx, basic, 503, (const uint8_t *)"", 0, 0, &f), KVEXACT_OK,
               NULL);
  CHECK_STR(f.reason, "probe_schema_mismatch");
  /* Argument errors are statuses; nothing is written. */
  f = probe_blank_finding();
  CHECK_INT(kvexact_judge_tokenize(enc, fx, n, 200, (const uint8_t *)good, strlen(good), 0, &f),
            KVEXACT_ERR_INVALID_ARGUMENT);
  CHECK_INT(f.ok, 0x7f7f7f7f);
  CHECK_INT(kvexact_judge_tokenize(NULL, fx, 0, 200, NULL, 0, 0, &f), KVEXACT_ERR_NULL_ARGUMENT);
  kvexact_fixtures_free(fx);
  kvexact_fixtures_free(NULL);
}

static void probe_identity_and_oracle(kvexact_registry *reg) {
  const char *id = "qwen3-06b-default-v1";
  kvexact_manifest *m = NULL;
  kvexact_error *err = NULL;
  CHECK_STATUS(kvexact_manifest_load(reg, (const uint8_t *)id, strlen(id), &m, &err), KVEXACT_OK, err);
  CHECK_INT(strlen(kvexact_manifest_digest(m)), 64);
  CHECK_STR(kvexact_manifest_engine_version(m), "0.28.0");
  const char *v = "{\"version\":\"0.28.0\"}";
  kvexact_finding f = probe_blank_finding();
  CHECK_STATUS(kvexact_judge_identity(KVEXACT_VLLM, m, 200, (const uint8_t *)v, strlen(v), &f),
               KVEXACT_OK, NULL);
  CHECK_INT(f.ok, 1);
  const char *old = "{\"version\":\"0.20.1\"}";
  CHECK_STATUS(kvexact_judge_identity(KVEXACT_VLLM, m, 200, (const uint8_t *)old, strlen(old), &f),
               KVEXACT_OK, NULL);
  CHECK_STR(f.reason, "identity_mismatch");
  CHECK_INT(kvexact_judge_identity(9, m, 200, (const uint8_t *)v, strlen(v), &f),
            KVEXACT_ERR_INVALID_ARGUMENT);
  kvexact_manifest_free(m);

  const char *sg = "{\"page_size\":16,\"kv_events\":{\"endpoint_port_base\":5557,\"dp_size\":2}}";
  CHECK_STATUS(kvexact_judge_geometry(KVEXACT_SGLANG, 200, (const uint8_t *)sg, strlen(sg), 16, 5557, 1, &f),
               KVEXACT_OK, NULL);
  CHECK_STR(f.reason, "engine_geometry_mismatch");
  CHECK_STATUS(kvexact_judge_geometry(KVEXACT_SGLANG, 200, (const uint8_t *)sg, strlen(sg), 16, 5557, 2, &f),
               KVEXACT_OK, NULL);
  CHECK_INT(f.ok, 1);

  /* TensorRT-LLM: no tokenize route; the approved oracle re-derives every fixture. */
  CHECK(kvexact_tokenize_path(KVEXACT_TRTLLM) == NULL);
  CHECK_STR(kvexact_tokenize_path(KVEXACT_VLLM), "/tokenize");
  const kvexact_profile *p = NULL;
  CHECK_STATUS(kvexact_profile_by_id(reg, (const uint8_t *)id, strlen(id), &p), KVEXACT_OK, NULL);
  kvexact_encoder *trt = NULL;
  CHECK_STATUS(kvexact_encoder_new(p, "trtllm-kv-http-preview-v1", &trt, &err), KVEXACT_OK, err);
  kvexact_profile_free(p);
  kvexact_fixtures *fx = NULL;
  CHECK_STATUS(kvexact_fixtures_load(reg, (const uint8_t *)id, strlen(id), KVEXACT_TRTLLM, &fx, &err),
               KVEXACT_OK, err);
  const char *model = "Qwen/Qwen3-0.6B";
  f = probe_blank_finding();
  CHECK_STATUS(kvexact_judge_oracle(trt, fx, (const uint8_t *)model, strlen(model), KVEXACT_API_BOTH, 0, &f),
               KVEXACT_OK, NULL);
  CHECK_INT(f.ok, 1);
  CHECK_INT(f.oracle, 1);
  kvexact_fixtures_free(fx);
  kvexact_encoder_free(trt);
}

static void probe_challenge(const kvexact_encoder *enc) {
  kvexact_hasher *h = NULL;
  CHECK_STATUS(kvexact_hasher_new(KVEXACT_SHA256_CBOR, 16, (const uint8_t *)"0", 1, &h, NULL), KVEXACT_OK, NULL);
  uint8_t nonce[16];
  for (int i = 0; i < 16; i++) nonce[i] = (uint8_t)(0xa0 + i);
  const char *model = "Qwen/Qwen3-0.6B";
  kvexact_challenge_opts opts = {(const uint8_t *)model, strlen(model), 1};
  for (int timed_out = 0; timed_out <= 1; timed_out++) {
    kvexact_challenge *c = NULL;
    kvexact_error *err = NULL;
    CHECK_STATUS(kvexact_challenge_new(enc, h, nonce, &opts, &c, &err), KVEXACT_OK, err);
    size_t need = 0;
    CHECK_INT(kvexact_challenge_request_body(c, NULL, 0, 0, NULL, 0, &need), KVEXACT_ERR_BUFFER_TOO_SMALL);
    char *body = malloc(need + 1);
    CHECK(body != NULL);
    size_t len = 0;
    CHECK_STATUS(kvexact_challenge_request_body(c, NULL, 0, 0, (uint8_t *)body, need, &len), KVEXACT_OK, NULL);
    body[len] = 0;
    CHECK(strstr(body, "\"prompt\":\"loxilb kv exact attestation challenge nonce a0a1a2a3") != NULL);
    CHECK(strstr(body, "\"max_tokens\":1,\"temperature\":0}") != NULL);
    free(body);

    const uint64_t *hashes = NULL;
    const uint32_t *tokens = NULL;
    size_t nh = 0, nt = 0;
    CHECK_STATUS(kvexact_challenge_expected(c, &hashes, &nh, &tokens, &nt), KVEXACT_OK, NULL);
    CHECK(nh >= 2);
    CHECK_INT(nt, nh * 16);
    /* The expected hashes are the hot path's hashes of the expected tokens. */
    uint64_t again[256];
    CHECK(nh <= 256);
    CHECK_INT(kvexact_block_hashes_u64(h, tokens, nt, 1, again, 256), (int)nh);
    CHECK(memcmp(again, hashes, nh * sizeof *hashes) == 0);

    kvexact_event ev;
    memset(&ev, 0, sizeof ev);
    ev.kind = KVEXACT_EVENT_STORED;
    ev.hashes = hashes;
    ev.n_hashes = timed_out ? 1 : nh;
    ev.token_ids = tokens;
    ev.n_tokens = timed_out ? 16 : nt;
    ev.block_size = 16;
    CHECK_INT(kvexact_challenge_observe(c, -1, &ev), timed_out ? 0 : 1);
    kvexact_finding f = probe_blank_finding();
    CHECK_STATUS(kvexact_challenge_result(c, timed_out, &f), KVEXACT_OK, NULL);
    kvexact_rank_coverage *cov = NULL;
    CHECK_STATUS(kvexact_rank_coverage_new(1, &cov, NULL), KVEXACT_OK, NULL);
    if (timed_out) {
      CHECK_INT(f.ok, 0);
      CHECK_STR(f.reason, "challenge_timeout");
      CHECK_INT(kvexact_rank_coverage_record(cov, c), KVEXACT_ERR_INVALID_ARGUMENT);
    } else {
      CHECK_INT(f.ok, 1);
      /* One rank, a stream without ranks: the passed challenge covers it. */
      CHECK_INT(kvexact_rank_coverage_record(cov, c), 0);
      f = probe_blank_finding();
      CHECK_STATUS(kvexact_rank_coverage_result(cov, &f), KVEXACT_OK, NULL);
      CHECK_INT(f.ok, 1);
    }
    kvexact_rank_coverage_free(cov);
    kvexact_challenge_free(c);
  }
  kvexact_challenge_free(NULL);
  kvexact_hasher_free(h);
}

static void run_probe_checks(kvexact_registry *reg, const char *root) {
  const char *id = "qwen3-06b-default-v1";
  const kvexact_profile *p = NULL;
  CHECK_STATUS(kvexact_profile_by_id(reg, (const uint8_t *)id, strlen(id), &p), KVEXACT_OK, NULL);
  kvexact_encoder *enc = NULL;
  kvexact_error *err = NULL;
  CHECK_STATUS(kvexact_encoder_new(p, "vllm-kv-map-v2", &enc, &err), KVEXACT_OK, err);
  kvexact_profile_free(p);
  probe_fixtures(reg, enc, root);
  probe_identity_and_oracle(reg);
  probe_challenge(enc);
  kvexact_encoder_free(enc);
  printf("probe checks ok\n");
}

#endif
