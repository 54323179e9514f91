/* Minimal libkvexact caller, the gateway's path for one request: load the registry, resolve
 * the engine release from the version the engine reports (vLLM's GET /version), build the
 * encoder and the hasher of that release, then compute the request's routing keys (its token
 * ids and full-block hashes) in one call, kvexact_route_keys.
 *
 * The release fixes the rendering, tokenization and hashing rules, and the hash algorithm
 * (KVEXACT_HASH_ALGO_CONTRACT_DEFAULT: sha256_cbor for vLLM unless the engine was launched
 * with another --prefix-caching-hash-algo). The block size and the NONE_HASH seed are the
 * engine's launch settings, not its release's: vLLM's --block-size (16 by default) and its
 * PYTHONHASHSEED (the gateway's LLB_KV_NONE_HASH_SEED, "0" here).
 *
 * Build (after scripts/ffi-install.sh PREFIX):
 *   cc encode_and_hash.c $(PKG_CONFIG_PATH=PREFIX/lib/pkgconfig pkg-config --cflags --libs kvexact)
 * Run (VLLM_VERSION defaults to 0.31.0):
 *   LD_LIBRARY_PATH=PREFIX/lib ./a.out testdata/registry Qwen/Qwen3-0.6B [VLLM_VERSION]
 * Its output for the default arguments is examples/encode_and_hash.out (the Rust and Go
 * examples print the same; ffi/tests/c_programs.rs checks this one's). */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "kvexact.h"

/* The engine's launch settings (see above). */
#define BLOCK_SIZE 16
#define NONE_HASH_SEED "0"

static void report(const char *what, kvexact_error *err) {
  fprintf(stderr, "%s: %s (%s)\n", what, kvexact_error_code(err), kvexact_error_message(err));
  kvexact_error_free(err);
}

int main(int argc, char **argv) {
  if (argc < 3 || argc > 4) {
    fprintf(stderr, "usage: %s REGISTRY_ROOT MODEL [VLLM_VERSION]\n", argv[0]);
    return 2;
  }
  const char *version = argc == 4 ? argv[3] : "0.31.0";
  kvexact_error *err = NULL;

  /* 1. The engine release: one catalog entry per version, or UNKNOWN_ENGINE_VERSION. */
  const char *release_id = NULL, *contract_id = NULL;
  if (kvexact_contract_resolve(KVEXACT_VLLM, version, &release_id, &contract_id, &err) != KVEXACT_OK) {
    report("resolve", err);
    return 1;
  }
  printf("vLLM %s: release %s (contract %s)\n", version, release_id, contract_id);

  /* 2. The trusted registry, and the profile serving the model. */
  kvexact_registry_opts opts = {(uint32_t)geteuid(), 0, 0};
  kvexact_registry *reg = NULL;
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

  /* 3. The encoder and the hasher of that release (built once, shared by every request). */
  kvexact_encoder_options eo;
  memset(&eo, 0, sizeof eo);
  eo.struct_size = sizeof eo;
  eo.engine_version = version;
  if (kvexact_encoder_new_with_options(profile, contract_id, &eo, &enc, &err) != KVEXACT_OK) {
    report("encoder", err);
    goto out;
  }
  if (kvexact_hasher_new_for_contract(contract_id, version, KVEXACT_HASH_ALGO_CONTRACT_DEFAULT, BLOCK_SIZE,
                                      (const uint8_t *)NONE_HASH_SEED, strlen(NONE_HASH_SEED), &hasher,
                                      &err) != KVEXACT_OK) {
    report("hasher", err);
    goto out;
  }

  /* 4. Per request: the routing keys. A refusal is an ordinary outcome: route without keys. */
  const char *body = "{\"messages\":[{\"role\":\"system\",\"content\":\"You are a terse assistant.\"},{\"role\":\"user\",\"content\":\"Which replica already holds the KV cache for this conversation prefix?\"}]}";
  uint32_t ids[4096];
  uint64_t hashes[256];
  size_t n_ids = 0, n_blocks = 0;
  kvexact_refusal refusal = KVEXACT_REFUSAL_NONE;
  kvexact_status st = kvexact_route_keys(enc, hasher, (const uint8_t *)body, strlen(body),
                                         (int64_t)time(NULL) * 1000, ids, 4096, hashes, 256, &n_ids,
                                         &n_blocks, &refusal, &err);
  if (st == KVEXACT_ERR_UNSUPPORTED) {
    printf("refused: %s\n", kvexact_refusal_name(refusal));
    kvexact_error_free(err);
    rc = 0;
    goto out;
  }
  if (st != KVEXACT_OK) {
    report("route keys", err);
    goto out;
  }
  printf("%zu ids, %zu full block(s) of %d tokens\n", n_ids, n_blocks, BLOCK_SIZE);
  for (size_t i = 0; i < n_blocks; i++) printf("block %zu: %" PRIu64 "\n", i, hashes[i]);
  rc = 0;
out:
  kvexact_hasher_free(hasher);
  kvexact_encoder_free(enc);
  kvexact_profile_free(profile);
  kvexact_registry_free(reg);
  return rc;
}
