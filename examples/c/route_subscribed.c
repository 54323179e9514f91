/* A gateway's routing loop over kvexact's own subscriptions: no ZMQ code here. For each engine
 * the program adds an endpoint to a prefix index (kvexact_index_*) and starts kvexact's
 * subscriber on the engine's KV-event publisher (kvexact_subscriber_*: sockets, reconnects,
 * sequence gaps and lost streams are the library's); then, for each request body read from
 * stdin (one JSON chat request per line), it computes the routing keys (kvexact_route_keys),
 * predicts every engine's cached tokens (kvexact_index_predict) and routes to the engine that
 * holds the most. An engine whose stream is not known (joined midway, lost) predicts
 * "unknown", never a stale count; such an engine is skipped here.
 *
 * Build (after scripts/ffi-install.sh PREFIX):
 *   cc route_subscribed.c $(PKG_CONFIG_PATH=PREFIX/lib/pkgconfig pkg-config --cflags --libs kvexact)
 * Run against engines (or the loopback emulator, conformance/examples/emulator.rs):
 *   ./a.out REGISTRY_ROOT MODEL VLLM_VERSION tcp://127.0.0.1:5557 tcp://127.0.0.1:5558 ...
 * It prints "ready" once every engine's stream is in step (an engine joined midway comes in
 * step at its next prefix-cache reset, vLLM's POST /reset_prefix_cache), then one "route:"
 * line per request. ffi/tests/c_programs.rs runs it against two emulators. */
#define _POSIX_C_SOURCE 200809L
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "kvexact.h"

/* The engines' launch settings: vLLM's --block-size and PYTHONHASHSEED. */
#define BLOCK_SIZE 16
#define NONE_HASH_SEED "0"
#define MAX_ENGINES 16
/* Bounded waits: naps of 20 ms (a test turns a hang into a failure this way, never a time). */
#define NAPS 3000

static void nap(void) {
  struct timespec ts = {0, 20 * 1000 * 1000};
  nanosleep(&ts, NULL);
}

static void report(const char *what, kvexact_error *err) {
  fprintf(stderr, "%s: %s (%s)\n", what, kvexact_error_code(err), kvexact_error_message(err));
  kvexact_error_free(err);
}

/* Whether every rank of the index is in step. */
static int all_in_step(const kvexact_index *index, size_t engines) {
  kvexact_index_rank_status st[MAX_ENGINES];
  size_t n = 0;
  if (kvexact_index_status(index, st, MAX_ENGINES, &n) != KVEXACT_OK || n != engines) return 0;
  for (size_t i = 0; i < n; i++)
    if (st[i].stream != KVEXACT_STREAM_IN_STEP) return 0;
  return 1;
}

/* The name of the engine an index endpoint id stands for. */
static const char *name_of(const uint32_t *ids, char names[][16], size_t engines, uint32_t endpoint) {
  for (size_t i = 0; i < engines; i++)
    if (ids[i] == endpoint) return names[i];
  return "?";
}

int main(int argc, char **argv) {
  if (argc < 5 || argc - 4 > MAX_ENGINES) {
    fprintf(stderr, "usage: %s REGISTRY_ROOT MODEL VLLM_VERSION PUBLISHER... (at most %d)\n", argv[0],
            MAX_ENGINES);
    return 2;
  }
  const char *version = argv[3];
  size_t engines = (size_t)(argc - 4);
  kvexact_error *err = NULL;
  int rc = 1;
  kvexact_registry *reg = NULL;
  const kvexact_profile *profile = NULL;
  kvexact_encoder *enc = NULL;
  kvexact_hasher *hasher = NULL;
  kvexact_index *index = NULL;
  kvexact_subscriber *subs[MAX_ENGINES] = {0};
  uint32_t ids[MAX_ENGINES] = {0};
  char names[MAX_ENGINES][16];

  /* The release, the registry's profile, its encoder and hasher (as examples/c/encode_and_hash.c). */
  const char *release_id = NULL, *contract_id = NULL;
  if (kvexact_contract_resolve(KVEXACT_VLLM, version, &release_id, &contract_id, &err) != KVEXACT_OK) {
    report("resolve", err);
    return 1;
  }
  kvexact_registry_opts opts = {(uint32_t)geteuid(), 0, 0};
  if (kvexact_registry_load((const uint8_t *)argv[1], strlen(argv[1]), &opts, 1, &reg, &err) != KVEXACT_OK) {
    report("load", err);
    return 1;
  }
  if (kvexact_profile_by_model(reg, (const uint8_t *)argv[2], strlen(argv[2]), &profile) != KVEXACT_OK) {
    fprintf(stderr, "no profile for %s\n", argv[2]);
    goto out;
  }
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

  /* The index of the release's event schema and hit rule, one endpoint per engine, joined
   * midway (unknown until its stream shows its cache), each followed by kvexact's subscriber. */
  if (kvexact_index_new(release_id, NULL, BLOCK_SIZE, NULL, &index, &err) != KVEXACT_OK) {
    report("index", err);
    goto out;
  }
  for (size_t i = 0; i < engines; i++) {
    snprintf(names[i], sizeof names[i], "engine-%c", (char)('a' + i));
    kvexact_index_endpoint ep;
    memset(&ep, 0, sizeof ep);
    ep.struct_size = sizeof ep;
    ep.dp_ranks = 1;
    ep.name = (const uint8_t *)names[i];
    ep.name_len = strlen(names[i]);
    ep.gpu_blocks = 4096; /* the engine's pool: vLLM's num_gpu_blocks - 1 */
    if (kvexact_index_add_endpoint(index, &ep, &ids[i], &err) != KVEXACT_OK) {
      report("add endpoint", err);
      goto out;
    }
    const char *publishers[1] = {argv[4 + i]};
    kvexact_subscriber_options o;
    memset(&o, 0, sizeof o);
    o.struct_size = sizeof o;
    o.endpoint = ids[i];
    o.publishers = publishers;
    o.n_ranks = 1;
    if (kvexact_subscriber_new(index, &o, &subs[i], &err) != KVEXACT_OK ||
        kvexact_subscriber_start(subs[i], &err) != KVEXACT_OK) {
      report("subscriber", err);
      goto out;
    }
  }
  int ready = 0;
  for (int i = 0; i < NAPS && !ready; i++) {
    ready = all_in_step(index, engines);
    if (!ready) nap();
  }
  if (!ready) {
    fprintf(stderr, "the engines' streams did not come in step\n");
    for (size_t i = 0; i < engines; i++) {
      kvexact_subscriber_counters c;
      memset(&c, 0, sizeof c);
      c.struct_size = sizeof c;
      kvexact_subscriber_get_counters(subs[i], &c);
      fprintf(stderr, "%s: received %" PRIu64 ", delivered %" PRIu64 ", refused %" PRIu64 ", lost %" PRIu64 "\n",
              names[i], c.received, c.delivered, c.refused, c.lost);
    }
    goto out;
  }
  printf("ready\n");
  fflush(stdout);

  /* Per request: keys, predictions, the engine holding the most. */
  char line[16384];
  while (fgets(line, sizeof line, stdin)) {
    size_t len = strcspn(line, "\n");
    if (len == 0) continue;
    uint32_t tokens[4096];
    uint64_t keys[256];
    size_t n_ids = 0, n_blocks = 0;
    kvexact_refusal refusal = KVEXACT_REFUSAL_NONE;
    kvexact_status st = kvexact_route_keys(enc, hasher, (const uint8_t *)line, len, (int64_t)time(NULL) * 1000,
                                           tokens, 4096, keys, 256, &n_ids, &n_blocks, &refusal, &err);
    if (st != KVEXACT_OK) {
      /* A refusal is an ordinary outcome: route without keys (here: to the first engine). */
      printf("route: %s (no keys: %s)\n", names[0], st == KVEXACT_ERR_UNSUPPORTED ? kvexact_refusal_name(refusal) : kvexact_error_code(err));
      kvexact_error_free(err);
      err = NULL;
      fflush(stdout);
      continue;
    }
    kvexact_index_prediction p[MAX_ENGINES];
    size_t n = 0;
    /* A gateway predicts at once; this program waits (bounded) until the request's blocks
     * are known somewhere, so that a test sees the events of the request it just sent. */
    size_t best = 0;
    uint64_t most = 0;
    for (int i = 0; i < NAPS && most == 0; i++) {
      if (kvexact_index_predict(index, keys, n_blocks, n_ids, 0, p, MAX_ENGINES, &n, &err) != KVEXACT_OK) {
        report("predict", err);
        goto out;
      }
      for (size_t k = 0; k < n; k++)
        if (p[k].status == KVEXACT_PREDICTION_CACHED && p[k].tokens > most) {
          most = p[k].tokens;
          best = k;
        }
      if (most == 0) nap();
    }
    for (size_t k = 0; k < n; k++) {
      const char *name = name_of(ids, names, engines, p[k].endpoint);
      if (p[k].status == KVEXACT_PREDICTION_CACHED)
        printf("%s: %" PRIu64 " cached tokens of %zu\n", name, p[k].tokens, n_ids);
      else
        printf("%s: unknown\n", name);
    }
    printf("route: %s\n", n ? name_of(ids, names, engines, p[best].endpoint) : names[0]);
    fflush(stdout);
  }
  rc = 0;
out:
  for (size_t i = 0; i < engines; i++) {
    if (subs[i]) kvexact_subscriber_stop(subs[i]);
    kvexact_subscriber_free(subs[i]);
  }
  kvexact_index_free(index);
  kvexact_hasher_free(hasher);
  kvexact_encoder_free(enc);
  kvexact_profile_free(profile);
  kvexact_registry_free(reg);
  return rc;
}
