/* Concurrency: 8 worker threads share the current handles — one encoder (Qwen2.5 profile,
 * vLLM contract) and the hashers of the three engines — for many encode+hash calls while a
 * publisher thread keeps loading new registry generations, building a fresh encoder and
 * hashers from them, swapping them in and dropping the old ones, as the gateway does on a
 * registry publish. Every result is compared with answers computed up front by one thread.
 *
 * Iterations (total calls over all workers): env KVEXACT_TEST_ITERATIONS, default 100000;
 * workers keep going until at least KVEXACT_TEST_GENERATIONS (default 2) registry generations
 * were swapped in under load.
 * Publication follows the gateway's pattern: a worker takes the lock only to retain the
 * current handle (a pointer copy and an atomic increment), then works without any lock and
 * releases its reference; the publisher swaps under the lock and releases the old reference
 * outside it — the handle stays alive until the last worker lets it go. */
#include <pthread.h>
#include <stdatomic.h>
#include <unistd.h>

#include "kvexact.h"
#include "check.h"

#define N_WORKERS 8
#define N_PROMPTS 16
#define N_ALGOS 3
#define MAX_IDS 700
#define MAX_BLOCKS 64

static const kvexact_hash_algo ALGOS[N_ALGOS] = {KVEXACT_SHA256_CBOR, KVEXACT_SHA256_SGLANG,
                                                 KVEXACT_BLOCKHASH_TRTLLM};
static const uint32_t BLOCK_SIZES[N_ALGOS] = {16, 16, 32};

static uint32_t prompts[N_PROMPTS][MAX_IDS];
static size_t prompt_len[N_PROMPTS];
static uint64_t expected[N_ALGOS][N_PROMPTS][MAX_BLOCKS];
static int32_t expected_n[N_ALGOS][N_PROMPTS];

#define N_BODIES 3
static const char *BODIES[N_BODIES] = {
    "{\"model\":\"Qwen/Qwen2.5-7B-Instruct\",\"messages\":[{\"role\":\"user\",\"content\":"
    "\"What is 2+2?\"}]}",
    "{\"model\":\"Qwen/Qwen2.5-7B-Instruct\",\"messages\":[{\"role\":\"system\",\"content\":"
    "\"You are terse.\"},{\"role\":\"user\",\"content\":\"Name three prime numbers and explain "
    "why each is prime, briefly.\"}]}",
    "{\"messages\":[{\"role\":\"user\",\"content\":\"\u4f60\u597d, caf\u00e9 \u2014 ok?\"}]}",
};
static uint32_t body_ids[N_BODIES][512];
static int32_t body_n[N_BODIES];
static uint64_t body_hashes[N_BODIES][32];
static int32_t body_hn[N_BODIES];
static char registry_root[4096];
static const kvexact_encoder *current_encoder;
static kvexact_registry *current_registry;
static uint64_t next_generation = 1;

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static const kvexact_hasher *current[N_ALGOS];
static atomic_int stop = 0;
static long iterations_per_worker = 0;
static atomic_long generations = 0;
static long min_generations = 2;
static int with_registry = 1; /* env KVEXACT_TEST_REGISTRY=0: hashers only (for valgrind) */
static atomic_long calls = 0;

static kvexact_hasher *make_hasher(int a) {
  kvexact_hasher *h = NULL;
  const uint8_t seed[] = {'0'};
  int vllm = ALGOS[a] == KVEXACT_SHA256_CBOR;
  CHECK_STATUS(kvexact_hasher_new(ALGOS[a], BLOCK_SIZES[a], vllm ? seed : NULL, vllm ? 1 : 0, &h),
               KVEXACT_OK, NULL);
  return h;
}

static uint64_t rng_state = 88172645463325252ull;
static uint64_t rng(void) { /* xorshift64, deterministic */
  rng_state ^= rng_state << 13;
  rng_state ^= rng_state >> 7;
  rng_state ^= rng_state << 17;
  return rng_state;
}

/* Loads a new generation and builds its encoder (the caller owns both). */
static void publish_generation(kvexact_registry **reg_out, kvexact_encoder **enc_out) {
  kvexact_registry_opts opts = {(uint32_t)geteuid(), 0, 0};
  kvexact_registry *reg = NULL;
  kvexact_error *err = NULL;
  CHECK_STATUS(kvexact_registry_load((const uint8_t *)registry_root, strlen(registry_root), &opts,
                                     next_generation++, &reg, &err),
               KVEXACT_OK, err);
  const kvexact_profile *p = NULL;
  const char *model = "qwen2.5-7b-instruct";
  CHECK_STATUS(kvexact_profile_by_model(reg, (const uint8_t *)model, strlen(model), &p), KVEXACT_OK,
               NULL);
  CHECK_STATUS(kvexact_encoder_new(p, "vllm-kv-map-v2", enc_out, &err), KVEXACT_OK, err);
  kvexact_profile_free(p);
  *reg_out = reg;
}

static void encode_and_hash(long id, long i, const kvexact_hasher *vllm) {
  int b = (int)((i + id) % N_BODIES);
  pthread_mutex_lock(&lock);
  const kvexact_encoder *enc = kvexact_encoder_retain(current_encoder);
  pthread_mutex_unlock(&lock);
  uint32_t ids[512];
  uint64_t hashes[32];
  kvexact_refusal r = 999;
  int32_t n = kvexact_encode_chat(enc, (const uint8_t *)BODIES[b], strlen(BODIES[b]), 0, ids, 512, &r);
  kvexact_encoder_free((kvexact_encoder *)enc);
  int32_t hn = n >= 0 ? kvexact_block_hashes_u64(vllm, ids, (size_t)n, 1, hashes, 32) : -1;
  if (n != body_n[b] || memcmp(ids, body_ids[b], (size_t)(n > 0 ? n : 0) * 4) != 0 ||
      hn != body_hn[b] || memcmp(hashes, body_hashes[b], (size_t)(hn > 0 ? hn : 0) * 8) != 0) {
    fprintf(stderr, "worker %ld: encode mismatch body %d (n=%d want %d, refusal %s)\n", id, b,
            (int)n, (int)body_n[b], kvexact_refusal_name(r));
    exit(1);
  }
}

static void *worker(void *arg) {
  long id = (long)(intptr_t)arg;
  uint64_t out[MAX_BLOCKS];
  for (long i = 0; i < iterations_per_worker || atomic_load(&generations) < min_generations; i++) {
    atomic_fetch_add(&calls, 1);
    if (with_registry && i % 4 == 0) { /* one call in four is a full encode + hash */
      pthread_mutex_lock(&lock);
      const kvexact_hasher *vh = kvexact_hasher_retain(current[0]);
      pthread_mutex_unlock(&lock);
      encode_and_hash(id, i, vh);
      kvexact_hasher_free(vh);
      continue;
    }
    int a = (int)((i + id) % N_ALGOS), p = (int)((i * 7 + id) % N_PROMPTS);
    pthread_mutex_lock(&lock);
    const kvexact_hasher *h = kvexact_hasher_retain(current[a]);
    pthread_mutex_unlock(&lock);
    CHECK(h != NULL);
    /* TRT and SGLang also hash the partial tail; vLLM full blocks only. */
    int full_only = ALGOS[a] == KVEXACT_SHA256_CBOR;
    int32_t n = kvexact_block_hashes_u64(h, prompts[p], prompt_len[p], full_only, out, MAX_BLOCKS);
    kvexact_hasher_free(h);
    if (n != expected_n[a][p] || (n > 0 && memcmp(out, expected[a][p], (size_t)n * 8) != 0)) {
      fprintf(stderr, "worker %ld: mismatch algo %d prompt %d (n=%d want %d)\n", id, a, p, (int)n,
              (int)expected_n[a][p]);
      exit(1);
    }
  }
  return NULL;
}

static void *publisher(void *arg) {
  long *published = arg;
  while (!stop) {
    if (with_registry) {
      kvexact_registry *reg = NULL;
      kvexact_encoder *enc = NULL;
      publish_generation(&reg, &enc);
      pthread_mutex_lock(&lock);
      kvexact_registry *old_reg = current_registry;
      const kvexact_encoder *old_enc = current_encoder;
      current_registry = reg;
      current_encoder = enc;
      pthread_mutex_unlock(&lock);
      kvexact_encoder_free((kvexact_encoder *)old_enc); /* in-flight calls hold their own refs */
      kvexact_registry_free(old_reg);
      atomic_fetch_add(&generations, 1);
    }
    for (int a = 0; a < N_ALGOS; a++) {
      kvexact_hasher *fresh = make_hasher(a);
      pthread_mutex_lock(&lock);
      const kvexact_hasher *old = current[a];
      current[a] = fresh;
      pthread_mutex_unlock(&lock);
      kvexact_hasher_free(old); /* in-flight workers keep their own references */
      (*published)++;
    }
  }
  return NULL;
}

int main(int argc, char **argv) {
  CHECK(argc >= 2);
  snprintf(registry_root, sizeof registry_root, "%s/testdata/registry", argv[1]);
  const char *env = getenv("KVEXACT_TEST_ITERATIONS");
  long total = env ? atol(env) : 100000;
  if (total < N_WORKERS) total = N_WORKERS;
  const char *g = getenv("KVEXACT_TEST_GENERATIONS"); /* swaps that must happen under load */
  if (g) min_generations = atol(g);
  const char *wr = getenv("KVEXACT_TEST_REGISTRY");
  if (wr && strcmp(wr, "0") == 0) {
    with_registry = 0;
    min_generations = 0;
  }
  iterations_per_worker = total / N_WORKERS;

  for (int p = 0; p < N_PROMPTS; p++) {
    prompt_len[p] = (size_t)(rng() % MAX_IDS);
    for (size_t i = 0; i < prompt_len[p]; i++) prompts[p][i] = (uint32_t)(rng() % 152000);
  }
  for (int a = 0; a < N_ALGOS; a++) {
    current[a] = make_hasher(a);
    for (int p = 0; p < N_PROMPTS; p++) {
      int full_only = ALGOS[a] == KVEXACT_SHA256_CBOR;
      expected_n[a][p] = kvexact_block_hashes_u64(current[a], prompts[p], prompt_len[p], full_only,
                                                  expected[a][p], MAX_BLOCKS);
      CHECK(expected_n[a][p] >= 0);
    }
  }

  if (with_registry) {
    kvexact_encoder *enc = NULL;
    publish_generation(&current_registry, &enc);
    current_encoder = enc;
    for (int b = 0; b < N_BODIES; b++) {
      kvexact_refusal r = 999;
      body_n[b] = kvexact_encode_chat(current_encoder, (const uint8_t *)BODIES[b], strlen(BODIES[b]),
                                      0, body_ids[b], 512, &r);
      CHECK(body_n[b] > 0);
      body_hn[b] = kvexact_block_hashes_u64(current[0], body_ids[b], (size_t)body_n[b], 1,
                                            body_hashes[b], 32);
      CHECK(body_hn[b] >= 0);
    }
  }

  pthread_t workers[N_WORKERS], pub;
  long published = 0;
  CHECK(pthread_create(&pub, NULL, publisher, &published) == 0);
  for (long w = 0; w < N_WORKERS; w++)
    CHECK(pthread_create(&workers[w], NULL, worker, (void *)(intptr_t)w) == 0);
  for (int w = 0; w < N_WORKERS; w++) CHECK(pthread_join(workers[w], NULL) == 0);
  stop = 1;
  CHECK(pthread_join(pub, NULL) == 0);
  for (int a = 0; a < N_ALGOS; a++) kvexact_hasher_free(current[a]);
  kvexact_encoder_free((kvexact_encoder *)current_encoder);
  kvexact_registry_free(current_registry);
  printf("concurrency: %ld calls (%s) on %d threads exact; %ld registry "
         "generations and %ld hashers published and dropped\n",
         (long)atomic_load(&calls), with_registry ? "1 in 4 encode+hash" : "hash only", N_WORKERS, (long)atomic_load(&generations), published);
  return 0;
}
