/* Concurrency: 8 worker threads share the current handles (hashers of the three engines)
 * for many hash calls while a publisher thread keeps replacing them with fresh ones and
 * dropping the old ones, as the gateway does on a registry publish. Every result is compared
 * with answers computed up front by a single thread.
 *
 * Iterations (total hash calls over all workers): env KVEXACT_TEST_ITERATIONS, default 100000.
 * Publication follows the gateway's pattern: a worker takes the lock only to retain the
 * current handle (a pointer copy and an atomic increment), then works without any lock and
 * releases its reference; the publisher swaps under the lock and releases the old reference
 * outside it — the handle stays alive until the last worker lets it go. */
#include <pthread.h>
#include <stdatomic.h>

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

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static const kvexact_hasher *current[N_ALGOS];
static atomic_int stop = 0;
static long iterations_per_worker = 0;

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

static void *worker(void *arg) {
  long id = (long)(intptr_t)arg;
  uint64_t out[MAX_BLOCKS];
  for (long i = 0; i < iterations_per_worker; i++) {
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

int main(void) {
  const char *env = getenv("KVEXACT_TEST_ITERATIONS");
  long total = env ? atol(env) : 100000;
  if (total < N_WORKERS) total = N_WORKERS;
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

  pthread_t workers[N_WORKERS], pub;
  long published = 0;
  CHECK(pthread_create(&pub, NULL, publisher, &published) == 0);
  for (long w = 0; w < N_WORKERS; w++)
    CHECK(pthread_create(&workers[w], NULL, worker, (void *)(intptr_t)w) == 0);
  for (int w = 0; w < N_WORKERS; w++) CHECK(pthread_join(workers[w], NULL) == 0);
  stop = 1;
  CHECK(pthread_join(pub, NULL) == 0);
  for (int a = 0; a < N_ALGOS; a++) kvexact_hasher_free(current[a]);
  printf("concurrency: %ld calls on %d threads exact; %ld handles published and dropped\n",
         iterations_per_worker * N_WORKERS, N_WORKERS, published);
  return 0;
}
