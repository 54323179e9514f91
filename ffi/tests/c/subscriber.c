/* kvexact's own subscriber through libkvexact (kvexact_subscriber_*): a C caller follows an
 * engine's KV events with no ZMQ code of its own. Loopback only, bounded in time.
 *
 * With KVEXACT_TEST_PUBLISHER set (ffi/tests/c_programs.rs starts the loopback emulator and
 * posts its prefix-cache reset until this program exits), the subscriber follows the
 * emulator's ZMQ PUB: the endpoint, joined midway (unknown), comes in step from the
 * AllBlocksCleared batch it received itself. Without it (the ASan and valgrind runs), the
 * publisher is a port nothing listens on: the rank is marked lost at once
 * (KVEXACT_UNKNOWN_STREAM_LOST), never a count. Either way: bad options refused with nothing
 * made, counters, Prometheus text, stop (the rank lost: nothing follows it) and free. */
#define _POSIX_C_SOURCE 200809L
#include <time.h>

#include "kvexact.h"
#include "check.h"

static void nap(void) {
  struct timespec ts = {0, 20 * 1000 * 1000};
  nanosleep(&ts, NULL);
}

static kvexact_index_prediction predict(const kvexact_index *index) {
  uint64_t keys[1] = {1};
  kvexact_index_prediction out[4];
  size_t n = 0;
  CHECK_INT(kvexact_index_predict(index, keys, 1, 17, 0, out, 4, &n, NULL), KVEXACT_OK);
  CHECK_INT(n, 1);
  return out[0];
}

static kvexact_stream_state stream(const kvexact_index *index) {
  kvexact_index_rank_status st[1];
  size_t n = 0;
  CHECK_INT(kvexact_index_status(index, st, 1, &n), KVEXACT_OK);
  return st[0].stream;
}

static kvexact_subscriber_counters counters(const kvexact_subscriber *sub) {
  kvexact_subscriber_counters c;
  memset(&c, 0, sizeof c);
  c.struct_size = sizeof c;
  CHECK_INT(kvexact_subscriber_get_counters(sub, &c), KVEXACT_OK);
  return c;
}

int main(int argc, char **argv) {
  (void)argc;
  (void)argv;
  const char *live = getenv("KVEXACT_TEST_PUBLISHER");
  kvexact_error *err = NULL;
  kvexact_index *index = NULL;
  CHECK_STATUS(kvexact_index_new("vllm-kv-map-v3-r0.31", NULL, 16, NULL, &index, &err), KVEXACT_OK,
               err);
  kvexact_index_endpoint ep;
  memset(&ep, 0, sizeof ep);
  ep.struct_size = sizeof ep;
  ep.dp_ranks = 1;
  ep.name = (const uint8_t *)"engine";
  ep.name_len = 6;
  ep.gpu_blocks = 4096;
  ep.starts_empty = live ? 0 : 1;
  uint32_t id = 0;
  CHECK_STATUS(kvexact_index_add_endpoint(index, &ep, &id, &err), KVEXACT_OK, err);

  const char *publishers[1] = {live ? live : "127.0.0.1:1"};
  const char *replays[1] = {NULL};
  kvexact_subscriber_options o;
  memset(&o, 0, sizeof o);
  o.struct_size = sizeof o;
  o.endpoint = id;
  o.publishers = publishers;
  o.replays = replays;
  o.n_ranks = 2;
  o.queue = 64;
  kvexact_subscriber *sub = NULL;
  CHECK_STATUS(kvexact_subscriber_new(index, &o, &sub, &err), KVEXACT_ERR_INVALID_ARGUMENT, err);
  CHECK(sub == NULL);
  kvexact_error_free(err);
  err = NULL;
  o.n_ranks = 1;
  o.struct_size = 8;
  CHECK_STATUS(kvexact_subscriber_new(index, &o, &sub, &err), KVEXACT_ERR_INVALID_ARGUMENT, err);
  kvexact_error_free(err);
  err = NULL;
  o.struct_size = sizeof o;
  CHECK_STATUS(kvexact_subscriber_new(NULL, &o, &sub, &err), KVEXACT_ERR_NULL_ARGUMENT, err);
  kvexact_error_free(err);
  err = NULL;
  CHECK_STATUS(kvexact_subscriber_new(index, &o, &sub, &err), KVEXACT_OK, err);
  CHECK_INT(counters(sub).running, 0);
  CHECK_STATUS(kvexact_subscriber_start(sub, &err), KVEXACT_OK, err);
  CHECK_STATUS(kvexact_subscriber_start(sub, &err), KVEXACT_OK, err);
  CHECK_INT(counters(sub).running, 1);

  /* Bounded waits: 3000 naps of 20 ms (a hang becomes a failure, never a timed check). */
  int ok = 0;
  for (int i = 0; i < 3000 && !ok; i++) {
    if (live) {
      ok = stream(index) == KVEXACT_STREAM_IN_STEP;
    } else {
      kvexact_index_prediction p = predict(index);
      ok = p.status == KVEXACT_PREDICTION_UNKNOWN &&
           p.unknown_reason == KVEXACT_UNKNOWN_STREAM_LOST;
    }
    if (!ok) nap();
  }
  CHECK(ok);
  kvexact_subscriber_counters c = counters(sub);
  if (live) {
    CHECK(c.received >= 1 && c.delivered >= 1);
    CHECK_INT(c.refused, 0);
    CHECK_INT(predict(index).status, KVEXACT_PREDICTION_CACHED);
  } else {
    CHECK(c.disconnects >= 1 && c.lost >= 1);
  }

  size_t len = 0;
  CHECK_INT(kvexact_subscriber_prometheus(sub, NULL, 0, &len), KVEXACT_ERR_BUFFER_TOO_SMALL);
  char *text = malloc(len + 1);
  CHECK(text != NULL);
  CHECK_INT(kvexact_subscriber_prometheus(sub, (uint8_t *)text, len, &len), KVEXACT_OK);
  text[len] = 0;
  CHECK(strstr(text, "kvexact_subscriber_received_total{subscriber=\"engine\"}") != NULL);
  free(text);

  CHECK_INT(kvexact_subscriber_stop(sub), KVEXACT_OK);
  CHECK_INT(counters(sub).running, 0);
  CHECK_INT(stream(index), KVEXACT_STREAM_LOST);
  CHECK_INT(kvexact_subscriber_stop(NULL), KVEXACT_ERR_NULL_ARGUMENT);
  kvexact_subscriber_free(sub);
  kvexact_subscriber_free(NULL);
  kvexact_index_free(index);
  printf("subscriber: %s path ok\n", live ? "emulator" : "unreachable");
  return 0;
}
