/* Concurrency: 8 worker threads share the current handles — the encoders of two profiles
 * (Qwen2.5 and Qwen3, vLLM contract) and the hashers of the three engines — for many
 * encode+hash calls (chat and completions) while a publisher thread keeps loading new registry
 * generations, building fresh encoders and hashers from them, swapping them in and dropping
 * the old ones, as the gateway does on a registry publish. Consecutive generations DIFFER:
 * they alternate between testdata/registry and a copy in which the Qwen2.5 profile pins
 * another chat template (Qwen3's), so the same request has other ids in each; a worker takes
 * a generation's encoder together with that generation's kind, and an answer from the wrong
 * or a mixed generation is a mismatch. Every result is compared with answers computed up
 * front by one thread.
 *
 * Iterations (total calls over all workers): env KVEXACT_TEST_ITERATIONS, default 100000;
 * workers keep going until at least KVEXACT_TEST_GENERATIONS (default 2) registry generations
 * were swapped in under load.
 * Publication follows the gateway's pattern: a worker takes the lock only to retain the
 * current handle (a pointer copy and an atomic increment), then works without any lock and
 * releases its reference; the publisher swaps under the lock and releases the old reference
 * outside it — the handle stays alive until the last worker lets it go. */
#define _DEFAULT_SOURCE /* mkdtemp */
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
static const char *COMPLETION = "def fib(n):\n    return n if n < 2 else fib(n - 1) + fib(n - 2)\n";
#define N_KINDS 2    /* generation kinds: 0 = testdata/registry, 1 = the altered copy */
#define N_PROFILES 2 /* 0 = Qwen2.5, 1 = Qwen3 */
static const char *MODELS[N_PROFILES] = {"qwen2.5-7b-instruct", "Qwen/Qwen3-0.6B"};
static uint32_t body_ids[N_KINDS][N_PROFILES][N_BODIES][512];
static int32_t body_n[N_KINDS][N_PROFILES][N_BODIES];
static uint64_t body_hashes[N_KINDS][N_PROFILES][N_BODIES][32];
static int32_t body_hn[N_KINDS][N_PROFILES][N_BODIES];
static uint32_t comp_ids[N_PROFILES][64];
static int32_t comp_n[N_PROFILES];
static char registry_roots[N_KINDS][4096];

/* One published generation: its registry, an encoder per profile, and which kind it is. */
typedef struct {
  kvexact_registry *registry;
  kvexact_encoder *enc[N_PROFILES];
  int kind;
} generation;
static generation current_gen;
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
  CHECK_STATUS(kvexact_hasher_new(ALGOS[a], BLOCK_SIZES[a], vllm ? seed : NULL, vllm ? 1 : 0, &h, NULL),
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

/* Loads generation number `next_generation` from the root of `kind` and builds its encoders
 * (the caller owns them). */
static generation publish_generation(int kind) {
  generation g;
  kvexact_registry_opts opts = {(uint32_t)geteuid(), 0, 0};
  kvexact_error *err = NULL;
  const char *root = registry_roots[kind];
  CHECK_STATUS(kvexact_registry_load((const uint8_t *)root, strlen(root), &opts, next_generation++,
                                     &g.registry, &err),
               KVEXACT_OK, err);
  for (int pr = 0; pr < N_PROFILES; pr++) {
    const kvexact_profile *p = NULL;
    CHECK_STATUS(kvexact_profile_by_model(g.registry, (const uint8_t *)MODELS[pr],
                                          strlen(MODELS[pr]), &p),
                 KVEXACT_OK, NULL);
    CHECK_STATUS(kvexact_encoder_new(p, "vllm-kv-map-v2", &g.enc[pr], &err), KVEXACT_OK, err);
    kvexact_profile_free(p);
  }
  g.kind = kind;
  return g;
}

static void drop_generation(generation g) {
  for (int pr = 0; pr < N_PROFILES; pr++) kvexact_encoder_free(g.enc[pr]);
  kvexact_registry_free(g.registry); /* in-flight calls hold their own encoder references */
}

/* The altered copy of testdata/registry: the Qwen2.5 profile pins Qwen3's chat template
 * (same tokenizer), so its prompts render differently (no default system prompt). */
static void make_altered_registry(const char *root, char *out, size_t cap) {
  char tmpl[] = "/tmp/kvexact-conc-XXXXXX";
  CHECK(mkdtemp(tmpl) != NULL);
  snprintf(out, cap, "%s", tmpl);
  static char cmd[16384];
  CHECK(snprintf(cmd, sizeof cmd, "cp -R '%s/.' '%s/'", root, out) < (int)sizeof cmd);
  CHECK(system(cmd) == 0);
  static char path[8192];
  CHECK(snprintf(path, sizeof path, "%s/qwen25-7b-instruct-v1.yaml", out) < (int)sizeof path);
  FILE *f = fopen(path, "rb");
  CHECK(f != NULL);
  static char text[65536];
  size_t n = fread(text, 1, sizeof text - 1, f);
  fclose(f);
  text[n] = 0;
  const char *from = "cd8e9439f0570856fd70470bf8889ebd8b5d1107207f67a5efb46e342330527f";
  const char *to = "87a2728cb8dc9fe424d624542f6060ec05a1d285ebbec578bb078900e33396b5";
  int replaced = 0;
  for (char *at = strstr(text, from); at != NULL; at = strstr(at, from)) {
    memcpy(at, to, strlen(to));
    replaced++;
  }
  CHECK_INT(replaced, 2); /* templateArtifact and templateSha256 */
  f = fopen(path, "wb");
  CHECK(f != NULL);
  CHECK(fwrite(text, 1, n, f) == n);
  CHECK(fclose(f) == 0);
}

/* Takes the current generation's encoder of profile `pr` and its kind, under the lock. */
static const kvexact_encoder *take_encoder(int pr, int *kind) {
  pthread_mutex_lock(&lock);
  const kvexact_encoder *enc = kvexact_encoder_retain(current_gen.enc[pr]);
  *kind = current_gen.kind;
  pthread_mutex_unlock(&lock);
  return enc;
}

static void encode_and_hash(long id, long i, const kvexact_hasher *vllm) {
  int b = (int)((i + id) % N_BODIES), pr = (int)((i / 4 + id) % N_PROFILES), kind = -1;
  const kvexact_encoder *enc = take_encoder(pr, &kind);
  uint32_t ids[512];
  uint64_t hashes[32];
  kvexact_refusal r = 999;
  if ((i / 4) % 5 == 0) { /* one encode in five is a completions prompt */
    int32_t n = kvexact_encode_completions(enc, (const uint8_t *)COMPLETION, strlen(COMPLETION),
                                           ids, 64);
    kvexact_encoder_free((kvexact_encoder *)enc);
    if (n != comp_n[pr] || memcmp(ids, comp_ids[pr], (size_t)(n > 0 ? n : 0) * 4) != 0) {
      fprintf(stderr, "worker %ld: completions mismatch profile %d (n=%d want %d)\n", id, pr,
              (int)n, (int)comp_n[pr]);
      exit(1);
    }
    return;
  }
  int32_t n = kvexact_encode_chat(enc, (const uint8_t *)BODIES[b], strlen(BODIES[b]), 0, ids, 512, &r);
  kvexact_encoder_free((kvexact_encoder *)enc);
  int32_t hn = n >= 0 ? kvexact_block_hashes_u64(vllm, ids, (size_t)n, 1, hashes, 32) : -1;
  if (n != body_n[kind][pr][b] || memcmp(ids, body_ids[kind][pr][b], (size_t)(n > 0 ? n : 0) * 4) != 0 ||
      hn != body_hn[kind][pr][b] ||
      memcmp(hashes, body_hashes[kind][pr][b], (size_t)(hn > 0 ? hn : 0) * 8) != 0) {
    fprintf(stderr,
            "worker %ld: encode mismatch generation kind %d profile %d body %d (n=%d want %d, "
            "refusal %s)\n",
            id, kind, pr, b, (int)n, (int)body_n[kind][pr][b], kvexact_refusal_name(r));
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
      pthread_mutex_lock(&lock);
      int next_kind = 1 - current_gen.kind; /* consecutive generations differ */
      pthread_mutex_unlock(&lock);
      generation fresh = publish_generation(next_kind);
      pthread_mutex_lock(&lock);
      generation old = current_gen;
      current_gen = fresh;
      pthread_mutex_unlock(&lock);
      drop_generation(old); /* in-flight calls hold their own encoder references */
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
    snprintf(registry_roots[0], sizeof registry_roots[0], "%s/testdata/registry", argv[1]);
    make_altered_registry(registry_roots[0], registry_roots[1], sizeof registry_roots[1]);
    for (int kind = N_KINDS - 1; kind >= 0; kind--) { /* ends with kind 0 current */
      generation g = publish_generation(kind);
      for (int pr = 0; pr < N_PROFILES; pr++) {
        for (int b = 0; b < N_BODIES; b++) {
          kvexact_refusal r = 999;
          body_n[kind][pr][b] = kvexact_encode_chat(g.enc[pr], (const uint8_t *)BODIES[b],
                                                    strlen(BODIES[b]), 0, body_ids[kind][pr][b],
                                                    512, &r);
          CHECK(body_n[kind][pr][b] > 0);
          body_hn[kind][pr][b] = kvexact_block_hashes_u64(
              current[0], body_ids[kind][pr][b], (size_t)body_n[kind][pr][b], 1,
              body_hashes[kind][pr][b], 32);
          CHECK(body_hn[kind][pr][b] >= 0);
        }
        int32_t n = kvexact_encode_completions(g.enc[pr], (const uint8_t *)COMPLETION,
                                               strlen(COMPLETION), comp_ids[pr], 64);
        CHECK(n > 0);
        if (kind == N_KINDS - 1) comp_n[pr] = n;
        CHECK_INT(n, comp_n[pr]);
      }
      if (kind == 0) {
        current_gen = g;
      } else {
        drop_generation(g);
      }
    }
    /* The kinds answer the same request differently (else a mix-up would go unseen), and the
     * two profiles do too. */
    CHECK(body_n[0][0][0] != body_n[1][0][0] ||
          memcmp(body_ids[0][0][0], body_ids[1][0][0], (size_t)body_n[0][0][0] * 4) != 0);
    CHECK(body_n[0][0][0] != body_n[0][1][0] ||
          memcmp(body_ids[0][0][0], body_ids[0][1][0], (size_t)body_n[0][0][0] * 4) != 0);
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
  if (with_registry) {
    drop_generation(current_gen);
    static char cmd[8192];
    CHECK(snprintf(cmd, sizeof cmd, "rm -rf '%s'", registry_roots[1]) < (int)sizeof cmd);
    CHECK(system(cmd) == 0);
  }
  printf("concurrency: %ld calls (%s) on %d threads exact; %ld registry "
         "generations (alternating, differing) and %ld hashers published and dropped\n",
         (long)atomic_load(&calls),
         with_registry ? "1 in 4 encode (chat+hash or completions, 2 profiles)" : "hash only",
         N_WORKERS, (long)atomic_load(&generations), published);
  return 0;
}
