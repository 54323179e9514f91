/* Lifted refusal codes from C: an encoder built with `kvexact_encoder_options.lifted`
 * encodes a chat request with tools exactly as each engine release's serving path does (the
 * engines' own ids, lifted_vectors.h, generated from testdata/vectors/templates), the strict
 * encoder still refuses it, and a code a release does not define is refused when the encoder
 * is built (KVEXACT_ERR_LIFT_NOT_ALLOWED). */
#include <unistd.h>

#include "kvexact.h"
#include "check.h"
#include "lifted_vectors.h"

static kvexact_encoder *lifting(const kvexact_profile *p, const char *contract, const char *version,
                                uint32_t lifted, kvexact_status want, const char *want_code) {
  kvexact_encoder_options o;
  memset(&o, 0, sizeof o);
  o.struct_size = sizeof o;
  o.lifted = lifted;
  o.engine_version = version;
  kvexact_encoder *enc = NULL;
  kvexact_error *err = NULL;
  kvexact_status st = kvexact_encoder_new_with_options(p, contract, &o, &enc, &err);
  if (st != want) {
    fprintf(stderr, "%s %s: status %d (%s: %s), want %d\n", contract, version, (int)st,
            err ? kvexact_error_code(err) : "", err ? kvexact_error_message(err) : "", (int)want);
    exit(1);
  }
  if (want_code != NULL) {
    CHECK(err != NULL);
    CHECK_STR(kvexact_error_code(err), want_code);
  }
  kvexact_error_free(err);
  return enc;
}

int main(int argc, char **argv) {
  CHECK(argc >= 2);
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

  uint32_t bits = 0;
  CHECK_STATUS(kvexact_refusal_bits_parse((const uint8_t *)"tools", 5, &bits, &err), KVEXACT_OK, err);
  CHECK_INT(bits, KVEXACT_REFUSAL_BIT_TOOLS);
  CHECK_INT(kvexact_refusal_bit(KVEXACT_REFUSAL_TOOLS), KVEXACT_REFUSAL_BIT_TOOLS);
  CHECK_INT(kvexact_refusal_bits_parse((const uint8_t *)"tool", 4, &bits, NULL),
            KVEXACT_ERR_INVALID_ARGUMENT);

  static uint32_t ids[4096];
  for (size_t i = 0; i < N_LIFTED_CASES; i++) {
    const lifted_case *c = &LIFTED_CASES[i];
    kvexact_encoder *enc =
        lifting(p, c->contract, c->engine_version, KVEXACT_REFUSAL_BIT_TOOLS, KVEXACT_OK, NULL);
    kvexact_refusal r = 999;
    int32_t n = kvexact_encode_chat(enc, (const uint8_t *)c->body, c->body_len, 0, ids, 4096, &r);
    if (n != (int32_t)c->n_ids || memcmp(ids, c->ids, c->n_ids * 4) != 0) {
      fprintf(stderr, "%s: %d ids (refusal %s), want the engine's %zu\n", c->name, (int)n,
              kvexact_refusal_name(r), c->n_ids);
      exit(1);
    }
    CHECK_INT(r, KVEXACT_REFUSAL_NONE);
    kvexact_encoder_free(enc);
    /* Strict (nothing lifted): the same request is refused `tools`. */
    enc = lifting(p, c->contract, c->engine_version, 0, KVEXACT_OK, NULL);
    CHECK_INT(kvexact_encode_chat(enc, (const uint8_t *)c->body, c->body_len, 0, ids, 4096, &r),
              KVEXACT_ERR_UNSUPPORTED);
    CHECK_INT(r, KVEXACT_REFUSAL_TOOLS);
    kvexact_encoder_free(enc);
    printf("lifted: %s = the engine's %zu ids\n", c->name, c->n_ids);
  }
  /* TensorRT-LLM rejects continue_final_message: its contract does not lift it. */
  CHECK(lifting(p, "trtllm-kv-http-v2", "1.3.0rc29", KVEXACT_REFUSAL_BIT_CONTINUE_FINAL_MESSAGE,
                KVEXACT_ERR_LIFT_NOT_ALLOWED, "LIFT_NOT_ALLOWED") == NULL);
  /* documents is never liftable, whatever the release. */
  {
    kvexact_encoder_options o;
    memset(&o, 0, sizeof o);
    o.struct_size = sizeof o;
    o.lifted = kvexact_refusal_bit(KVEXACT_REFUSAL_DOCUMENTS);
    o.engine_version = "0.31.0";
    kvexact_encoder *enc = NULL;
    kvexact_status st = kvexact_encoder_new_with_options(p, "vllm-kv-map-v3", &o, &enc, &err);
    printf("lifted: documents -> %s (%s)\n", kvexact_status_name(st), kvexact_error_message(err));
    CHECK_INT(st, KVEXACT_ERR_LIFT_NOT_ALLOWED);
    CHECK(enc == NULL);
    kvexact_error_free(err);
    err = NULL;
  }
  kvexact_profile_free(p);
  kvexact_registry_free(reg);
  printf("lifted: ok\n");
  return 0;
}
