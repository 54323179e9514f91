/* Minimal libkvexact caller: load a registry, encode one chat request for a model on the vLLM
 * contract, and print its block hashes (vLLM sha256_cbor, block size 16, seed "0").
 *
 * Build (after scripts/ffi-install.sh PREFIX):
 *   cc encode_and_hash.c $(PKG_CONFIG_PATH=PREFIX/lib/pkgconfig pkg-config --cflags --libs kvexact)
 * Run:
 *   LD_LIBRARY_PATH=PREFIX/lib ./a.out testdata/registry Qwen/Qwen2.5-7B-Instruct */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "kvexact.h"

int main(int argc, char **argv) {
  if (argc < 3) {
    fprintf(stderr, "usage: %s REGISTRY_ROOT MODEL\n", argv[0]);
    return 2;
  }
  kvexact_registry_opts opts = {(uint32_t)geteuid(), 0, 0};
  kvexact_registry *reg = NULL;
  kvexact_error *err = NULL;
  if (kvexact_registry_load((const uint8_t *)argv[1], strlen(argv[1]), &opts, 1, &reg, &err) != KVEXACT_OK) {
    fprintf(stderr, "load: %s (%s) %s\n", kvexact_error_code(err), kvexact_error_message(err),
            kvexact_error_path(err) ? kvexact_error_path(err) : "");
    kvexact_error_free(err);
    return 1;
  }
  const kvexact_profile *profile = NULL;
  kvexact_encoder *enc = NULL;
  kvexact_hasher *hasher = NULL;
  int rc = 1;
  if (kvexact_profile_by_model(reg, (const uint8_t *)argv[2], strlen(argv[2]), &profile) != KVEXACT_OK) {
    fprintf(stderr, "no profile for %s\n", argv[2]);
    goto out;
  }
  if (kvexact_encoder_new(profile, "vllm-kv-map-v2", &enc, &err) != KVEXACT_OK) {
    fprintf(stderr, "encoder: %s\n", kvexact_error_message(err));
    kvexact_error_free(err);
    goto out;
  }
  const char *body = "{\"messages\":[{\"role\":\"system\",\"content\":\"You are a terse assistant.\"},{\"role\":\"user\",\"content\":\"Which replica already holds the KV cache for this conversation prefix?\"}]}";
  uint32_t ids[4096];
  kvexact_refusal refusal;
  int32_t n = kvexact_encode_chat(enc, (const uint8_t *)body, strlen(body),
                                  (int64_t)time(NULL) * 1000, ids, 4096, &refusal);
  if (n < 0) {
    fprintf(stderr, "encode: %s (refusal %s)\n", kvexact_status_name(n), kvexact_refusal_name(refusal));
    goto out;
  }
  const uint8_t seed[] = {'0'};
  if (kvexact_hasher_new(KVEXACT_SHA256_CBOR, 16, seed, 1, &hasher, &err) != KVEXACT_OK) {
    fprintf(stderr, "hasher: %s: %s\n", kvexact_error_code(err), kvexact_error_message(err));
    kvexact_error_free(err);
    goto out;
  }
  uint64_t hashes[256];
  int32_t nb = kvexact_block_hashes_u64(hasher, ids, (size_t)n, 1, hashes, 256);
  printf("%d ids, %d full blocks\n", (int)n, (int)nb);
  for (int32_t i = 0; i < nb; i++) printf("block %d: %" PRIu64 "\n", (int)i, hashes[i]);
  rc = nb < 0;
out:
  kvexact_hasher_free(hasher);
  kvexact_encoder_free(enc);
  kvexact_profile_free(profile);
  kvexact_registry_free(reg);
  return rc;
}
