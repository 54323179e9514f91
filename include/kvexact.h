/*
 * libkvexact — exact KV-cache block hashes, chat rendering and tokenization for LLM gateways.
 *
 * Contents. Part A. Constants (versions, limits, defaults and flags, in section order);
 * Part B. Types (the opaque handles, then the others as the sections use them);
 * Part C. Enumeration values (engines, API modes, hash algorithms, event kinds, refusals,
 * statuses); Part D. Functions, in the order a gateway calls them:
 *    1. Library version ........... kvexact_version; KVEXACT_VERSION_MAJOR/_MINOR/_PATCH and
 *                                   KVEXACT_ABI_VERSION (the soname's number: libkvexact.so.0)
 *    2. Registry and profiles ..... kvexact_registry_load, kvexact_profile_by_model, admission
 *    3. Encoder ................... kvexact_encoder_new[_with_options], kvexact_encode_chat
 *    4. Hasher .................... kvexact_hasher_new[_with_options],
 *                                   kvexact_hasher_new_for_contract[_with_options], block hashes
 *    5. Route keys and cache counters  kvexact_route_keys[_batch], kvexact_*_cache_stats
 *    6. Prefix index .............. kvexact_index_new, feeding, kvexact_index_predict, reports
 *    7. KV events ................. kvexact_event_decoder_new[_for_contract], kvexact_event_decode
 *    8. Probes and readiness ...... manifests, fixtures, judges, challenges, rank coverage,
 *                                   kvexact_readiness_evaluate
 *    9. Drift ..................... kvexact_drift_verifier_new, feeding, verdict, Prometheus text
 *   10. Engine contracts .......... kvexact_contract_resolve, kvexact_contracts_json
 *   11. Errors, statuses and refusals  kvexact_error_*, kvexact_status_name, kvexact_refusal_*
 * In the header, each part and section opens with a banner comment that names it.
 *
 * Conventions (every function):
 *  - Fallible calls return kvexact_status: KVEXACT_OK (0) or a negative KVEXACT_ERR_* value.
 *    -1 … -7 equal the gateway's LLB_KV_TOK_ERR_* codes; all other failures are <= -100.
 *    Calls that return a count (int32_t) return the same negative values on failure.
 *  - No function unwinds or aborts on bad input: a NULL or out-of-range argument is a status,
 *    and an internal panic is caught and reported as KVEXACT_ERR_PANIC.
 *  - Outputs are written only on success. Buffer functions that report a needed length write
 *    that length (and nothing else) when the buffer is too small.
 *  - Byte strings are (const uint8_t *ptr, size_t len); ptr may be NULL when len is 0; no NUL
 *    terminator is needed. Strings returned by libkvexact are NUL-terminated UTF-8.
 *  - Errors: every constructor (kvexact_*_new*, kvexact_*_load) and every call whose failure
 *    needs more than its status (registry checks and admission, contract resolution, event
 *    decoding, drift feeding and its Prometheus text, route keys, the prefix index's
 *    construction, endpoints, feeding, predictions and observations, the readiness ladder,
 *    refusal-name parsing) takes a last `kvexact_error **err` parameter: on failure, when err is not NULL,
 *    it receives a new error object the caller frees with kvexact_error_free (on success it is
 *    left untouched). The other calls (per-request encode/render/hash calls, lookups,
 *    accessors, size queries, judges, whose verdict is the kvexact_finding) report through
 *    their status alone. There is no thread-local "last error" (a goroutine may change OS
 *    thread between two calls).
 *  - Error codes (kvexact_error_code) are stable identifiers: the status's lower-case name
 *    (kvexact_status_name: "null_argument", "none_hash_unreproducible", "schema_mismatch" ...)
 *    unless a finer code exists, which keeps the spelling of its vocabulary: the registry's
 *    upper-case REFUSED codes ("INSECURE_MODE", "TOKENIZER_SHA_MISMATCH", "MANIFEST_MISSING"),
 *    the contract catalog's ("UNKNOWN_ENGINE_VERSION", "CONTRACT_MISMATCH", "UNKNOWN_NAME",
 *    "CONFIG", "LIFT_NOT_ALLOWED"), and the lower-case refusal feature codes ("tools"),
 *    admission rules ("model_not_served") and readiness reasons ("challenge_failed").
 *  - Handles are opaque; each has a NULL-safe *_free. Registry, profile, encoder, hasher,
 *    manifest and fixture-set handles are reference-counted, immutable and safe to share
 *    between threads. Event decoders, challenges and rank-coverage trackers have one owner
 *    at a time (move them between threads, never use one from two at once); a drift verifier
 *    serialises concurrent calls itself; a prefix index (kvexact_index) is reference-counted
 *    and safe to share: predictions run while other threads feed it. Error objects belong to
 *    the caller.
 *  - Enumerations (kvexact_engine, kvexact_api_mode, kvexact_hash_algo, kvexact_refusal,
 *    kvexact_event_kind) are integer typedefs with #define'd values, not C enums: their size
 *    is fixed and an out-of-range argument is KVEXACT_ERR_INVALID_ARGUMENT (the functions
 *    that return a static name or route return their documented fallback or NULL instead).
 */

#ifndef KVEXACT_H
#define KVEXACT_H

/* Generated by cbindgen from ffi/src (ffi/tests/header.rs). Do not edit by hand:
 * regenerate with  KVEXACT_BLESS=1 cargo test -p kvexact-ffi --test ffi header:: */

#include <stddef.h>
#include <stdint.h>

/* ==== Part A. Constants ============================================================= */

/**
 * The library's major version (the `0` of `"0.1.0"`), equal to the crate version's and to the
 * first number of [`kvexact_version`]; a compile-time check keeps it so.
 */
#define KVEXACT_VERSION_MAJOR 0

/**
 * The library's minor version (the `1` of `"0.1.0"`), equal to the crate version's and to the
 * second number of [`kvexact_version`].
 */
#define KVEXACT_VERSION_MINOR 1

/**
 * The library's patch version (the last `0` of `"0.1.0"`), equal to the crate version's and to
 * the third number of [`kvexact_version`].
 */
#define KVEXACT_VERSION_PATCH 0

/**
 * The ABI major: the number in the shared library's soname (`libkvexact.so.0`). A program
 * built against one ABI major runs against every later library with the same one; a change
 * that removes or alters an exported function, type or value raises it. Before 1.0 it is 0
 * (an incompatible 0.x change is announced under `### C ABI` in CHANGELOG.md and raises the
 * minor version); from 1.0 on it is the major version.
 */
#define KVEXACT_ABI_VERSION 0

/**
 * Default segment-cache capacity of an encoder: 8 MiB.
 */
#define KVEXACT_SEGMENT_CACHE_DEFAULT_BYTES 8388608

/**
 * Largest segment-cache capacity an encoder accepts: 4 GiB.
 */
#define KVEXACT_SEGMENT_CACHE_MAX_BYTES 4294967296

/**
 * Default `kvexact_encoder_options.max_body_bytes`: 8 MiB.
 */
#define KVEXACT_DEFAULT_MAX_BODY_BYTES (8 << 20)

/**
 * Default `kvexact_encoder_options.max_rendered_bytes`: 8 MiB.
 */
#define KVEXACT_DEFAULT_MAX_RENDERED_BYTES (8 << 20)

/**
 * Default `kvexact_encoder_options.max_word_bytes`: 64 KiB.
 */
#define KVEXACT_DEFAULT_MAX_WORD_BYTES (64 << 10)

/**
 * Default `kvexact_encoder_options.max_fallback_bytes`: 1 MiB.
 */
#define KVEXACT_DEFAULT_MAX_FALLBACK_BYTES (1 << 20)

/**
 * Default `kvexact_encoder_options.max_messages`: 4096.
 */
#define KVEXACT_DEFAULT_MAX_MESSAGES 4096

/**
 * What `kvexact_deployment_check` is given: one ZMQ message's msgpack payload (frame 2) of
 * the endpoint's KV events (vLLM, SGLang).
 */
#define KVEXACT_DEPLOYMENT_EVIDENCE_EVENTS 1

/**
 * SGLang's `GET /get_server_info` body (JSON).
 */
#define KVEXACT_DEPLOYMENT_EVIDENCE_SGLANG_SERVER_INFO 2

/**
 * vLLM's `GET /v1/models` body (JSON).
 */
#define KVEXACT_DEPLOYMENT_EVIDENCE_VLLM_MODELS 3

/**
 * vLLM's `GET /metrics` body (Prometheus text; its `vllm:cache_config_info` gauge's
 * `block_size` and `prefix_caching_hash_algo` labels).
 */
#define KVEXACT_DEPLOYMENT_EVIDENCE_VLLM_METRICS 4

/**
 * Default prefix-chain cache capacity of a hasher: 16,384 blocks (64 conversations of the
 * gateway's 256-block cap; about 7 MiB at block size 16, see
 * `kvexact_hasher_options.prefix_cache_entries`).
 */
#define KVEXACT_PREFIX_CACHE_DEFAULT_ENTRIES 16384

/**
 * Largest prefix-chain cache capacity a hasher accepts: 4,194,304 blocks.
 */
#define KVEXACT_PREFIX_CACHE_MAX_ENTRIES 4194304

/**
 * Default `kvexact_index_options.max_slots`: 1,024 endpoint × rank slots.
 */
#define KVEXACT_INDEX_DEFAULT_MAX_SLOTS 1024

/**
 * Largest `kvexact_index_options.max_slots`: 1,048,576.
 */
#define KVEXACT_INDEX_MAX_SLOTS (1 << 20)

/**
 * `kvexact_index_mark_lost`'s `rank` for every rank of the endpoint.
 */
#define KVEXACT_INDEX_ALL_RANKS UINT32_MAX

/**
 * `kvexact_index_check_capacity`'s `*mismatch` bit: the GPU blocks differ.
 */
#define KVEXACT_CAPACITY_GPU_DIFFERS 1

/**
 * `kvexact_index_check_capacity`'s `*mismatch` bit: the other-media blocks differ.
 */
#define KVEXACT_CAPACITY_OTHER_DIFFERS 2

/**
 * `kvexact_index_check_capacity`'s `other_blocks` when the engine states none.
 */
#define KVEXACT_CAPACITY_NOT_STATED UINT64_MAX

/**
 * Flags of a request (`kvexact_index_predict`'s `flags`): it skips reading the prefix cache
 * (vLLM `prompt_logprobs`): no hit. (A request's LoRA adapter and `cache_salt` are in its
 * hashes where the release's events show them; where they do not, endpoints with adapters
 * loaded are `KVEXACT_UNKNOWN_LORA_NOT_IN_EVENTS` whatever the request names.)
 */
#define KVEXACT_PREDICT_SKIP_PREFIX_CACHE 2

/**
 * Flag of a prediction (`kvexact_index_predict`'s `flags`): list only the endpoint ranks whose
 * prediction is not "cached, 0 tokens" — those holding some of the request and those that
 * are unknown — in the same order as the full answer; every rank not listed is
 * `KVEXACT_PREDICTION_CACHED` with `tokens` 0, `other_media_tokens` 0 on an index of one
 * KV-cache group (-1 on several) and the release's `proven`. The form of the peers'
 * answers, and the cheaper one where most endpoints hold nothing of the request.
 */
#define KVEXACT_PREDICT_SPARSE 4

/**
 * `kvexact_index_rank_status.endpoint` of an endpoint removed while the status was read.
 */
#define KVEXACT_INDEX_NO_ENDPOINT UINT32_MAX

/**
 * Default `kvexact_subscriber_options.queue`: 8,192 messages.
 */
#define KVEXACT_SUBSCRIBER_DEFAULT_QUEUE 8192

/**
 * Largest `kvexact_subscriber_options.queue`: 1,048,576 messages.
 */
#define KVEXACT_SUBSCRIBER_MAX_QUEUE (1 << 20)

/**
 * Most `kvexact_subscriber_options.n_ranks`: 1,024 (an endpoint's ranks).
 */
#define KVEXACT_SUBSCRIBER_MAX_RANKS 1024

/**
 * Most bytes of C-visible storage (hashes, token ids, `kvexact_event`s) one decoded batch may
 * fill: 64 MiB.
 */
#define KVEXACT_EVENT_STORAGE_BUDGET (64 << 20)

/**
 * Storage a decoder keeps reserved between calls after a larger batch: 1 MiB per vector.
 */
#define KVEXACT_EVENT_RETAINED_BYTES (1 << 20)

/**
 * What `kvexact_drift_feed` and `kvexact_drift_feed_frames` return once the verdict is
 * `drift` (sticky until `kvexact_drift_reset_verdict`); they return `KVEXACT_OK` (0) while it
 * is clean.
 */
#define KVEXACT_DRIFT_DETECTED 1

/**
 * `kvexact_drift_counters.verdict` and `kvexact_drift_verdict`: the stream is clean (most
 * stored blocks re-derived, none the evidence of drift).
 */
#define KVEXACT_DRIFT_VERDICT_CLEAN 0

/**
 * `kvexact_drift_counters.verdict` and `kvexact_drift_verdict`: drift (the evidence is in
 * `kvexact_drift_report_json`).
 */
#define KVEXACT_DRIFT_VERDICT_DRIFT 1

/**
 * `kvexact_drift_counters.verdict` and `kvexact_drift_verdict`: unverifiable (no stored block
 * seen, or fewer than half of them re-derived; the reasons are in `unverifiable_by_reason`).
 * Never clean.
 */
#define KVEXACT_DRIFT_VERDICT_UNVERIFIABLE 2

/**
 * Length of `kvexact_drift_counters.unverifiable_by_reason`: room for the reasons to come
 * (19 are defined; `kvexact_drift_unverifiable_name` names each slot).
 */
#define KVEXACT_DRIFT_UNVERIFIABLE_SLOTS 32

/**
 * Most entries of the hash → digest map (`kvexact_drift_options.map_capacity`), and most
 * pending predictions (`predict_capacity`): 2^24 (the map then takes about 1.5 GiB).
 */
#define KVEXACT_DRIFT_MAX_CAPACITY (1 << 24)

/**
 * The lift bit of `KVEXACT_REFUSAL_CACHE_SALT` (`1 << code`), for
 * `kvexact_encoder_options.lifted`: liftable where the engine release's salt handling is
 * catalog data (`deployment.cacheSalt`); the prompt is rendered as without the salt, and a
 * deployment's hasher (`kvexact_hasher_new_for_deployment`) keys it.
 */
#define KVEXACT_REFUSAL_BIT_CACHE_SALT (1 << KVEXACT_REFUSAL_CACHE_SALT)

/**
 * The lift bit of `KVEXACT_REFUSAL_TOOLS` (`1 << code`), for `kvexact_encoder_options.lifted`.
 */
#define KVEXACT_REFUSAL_BIT_TOOLS (1 << KVEXACT_REFUSAL_TOOLS)

/**
 * The lift bit of `KVEXACT_REFUSAL_TEMPLATE_KWARGS`.
 */
#define KVEXACT_REFUSAL_BIT_TEMPLATE_KWARGS (1 << KVEXACT_REFUSAL_TEMPLATE_KWARGS)

/**
 * The lift bit of `KVEXACT_REFUSAL_ADD_GENERATION_PROMPT`.
 */
#define KVEXACT_REFUSAL_BIT_ADD_GENERATION_PROMPT (1 << KVEXACT_REFUSAL_ADD_GENERATION_PROMPT)

/**
 * The lift bit of `KVEXACT_REFUSAL_CONTINUE_FINAL_MESSAGE`.
 */
#define KVEXACT_REFUSAL_BIT_CONTINUE_FINAL_MESSAGE (1 << KVEXACT_REFUSAL_CONTINUE_FINAL_MESSAGE)

/**
 * The lift bit of `KVEXACT_REFUSAL_MULTI_TEXT_PART`.
 */
#define KVEXACT_REFUSAL_BIT_MULTI_TEXT_PART (1 << KVEXACT_REFUSAL_MULTI_TEXT_PART)

/**
 * The lift bit of `KVEXACT_REFUSAL_TRAILING_ASSISTANT`.
 */
#define KVEXACT_REFUSAL_BIT_TRAILING_ASSISTANT (1 << KVEXACT_REFUSAL_TRAILING_ASSISTANT)

/**
 * The lift bit of `KVEXACT_REFUSAL_MESSAGE_FIELD`.
 */
#define KVEXACT_REFUSAL_BIT_MESSAGE_FIELD (1 << KVEXACT_REFUSAL_MESSAGE_FIELD)

/**
 * The lift bit of `KVEXACT_REFUSAL_NULL_CONTENT`.
 */
#define KVEXACT_REFUSAL_BIT_NULL_CONTENT (1 << KVEXACT_REFUSAL_NULL_CONTENT)

/**
 * `kvexact_encoder_options.flags` / `kvexact_hasher_options.flags`: no cache for this
 * handle (every call computes everything; results are the same).
 */
#define KVEXACT_OPTION_NO_CACHE 1

/* ==== Part B. Types ================================================================= */

/**
 * One armed hash challenge (docs/contracts/registry.md §8.5): the nonce prompt, its expected tokens and
 * block hashes, and the judging of the KV events the engine publishes for it. Opaque; owned
 * by one caller at a time (not for concurrent use). Free with `kvexact_challenge_free`.
 */
typedef struct kvexact_challenge kvexact_challenge;

/**
 * A deployment resolved against one engine release. Opaque, immutable and
 * reference-counted: share one pointer between any number of threads; free each reference
 * once with `kvexact_deployment_free`.
 */
typedef struct kvexact_deployment kvexact_deployment;

/**
 * A drift verifier for one endpoint: re-derives every block hash its KV events publish under
 * one engine release's contract. Opaque. Safe to use from several threads at once (calls are
 * serialised by an internal mutex); feed one stream's batches in order, from one thread.
 * Free with `kvexact_drift_verifier_free` once no call on it is in flight.
 */
typedef struct kvexact_drift_verifier kvexact_drift_verifier;

/**
 * An encoder for one profile on one engine contract (e.g. `"vllm-kv-map-v3"`,
 * `"sglang-kv-rank-v1"`): the compiled chat template and the pinned tokenizer, with the
 * contract's quirks. Opaque, immutable and reference-counted; share one between all worker
 * threads. It keeps its profile and generation alive. Release with `kvexact_encoder_free`.
 */
typedef struct kvexact_encoder kvexact_encoder;

/**
 * An error returned through a `kvexact_error **err` out-parameter. Opaque; owned by the
 * caller, who frees it with `kvexact_error_free`. Read it with `kvexact_error_status`,
 * `kvexact_error_code`, `kvexact_error_message` and `kvexact_error_path`. Not shared between
 * threads by libkvexact; reading it from several threads at once is safe.
 */
typedef struct kvexact_error kvexact_error;

/**
 * A stateful decoder for one wire schema: a wire family's union schema
 * (`kvexact_event_decoder_new`) or one engine release's exact schema
 * (`kvexact_event_decoder_new_for_contract`). Opaque; owned by one caller at a time (not for
 * concurrent use: give each subscriber its own). Free with `kvexact_event_decoder_free`.
 */
typedef struct kvexact_event_decoder kvexact_event_decoder;

/**
 * One engine's probe-fixture set for a profile (`probefixtures/<profile-id>/<engine>/`,
 * docs/contracts/registry.md §5). Opaque, immutable and reference-counted; release with
 * `kvexact_fixtures_free`.
 */
typedef struct kvexact_fixtures kvexact_fixtures;

/**
 * A configured block hasher: algorithm, block size and (vLLM) NONE_HASH seed. Opaque,
 * immutable and reference-counted: share one pointer between any number of threads; free
 * each reference (from `kvexact_hasher_new` or `kvexact_hasher_retain`) once with
 * `kvexact_hasher_free`.
 */
typedef struct kvexact_hasher kvexact_hasher;

/**
 * The exact prefix index of one model pool under one engine release: per endpoint × DP
 * rank × KV-cache group × medium, the blocks the engine holds, from its own KV events.
 * Opaque, reference-counted and safe to share between threads (predict on request threads
 * while event threads feed). Free each reference (from `kvexact_index_new` or
 * `kvexact_index_retain`) once with `kvexact_index_free`.
 */
typedef struct kvexact_index kvexact_index;

/**
 * A profile's engine manifest (`manifests/<profile-id>.yaml`, docs/contracts/registry.md §4), the trust
 * root of identity probes. Opaque, immutable and reference-counted; release with
 * `kvexact_manifest_free`.
 */
typedef struct kvexact_manifest kvexact_manifest;

/**
 * One published profile. Opaque and reference-counted; it keeps its generation alive, so it
 * stays valid after the registry handle it came from is freed. Release with
 * `kvexact_profile_free`.
 */
typedef struct kvexact_profile kvexact_profile;

/**
 * SGLang rank coverage (docs/contracts/registry.md §8.5.6): with several DP ranks declared, challenges
 * are repeated with fresh nonces until every declared rank echoed one, within 4 attempts per
 * rank. Opaque; owned by one caller at a time. Free with `kvexact_rank_coverage_free`.
 */
typedef struct kvexact_rank_coverage kvexact_rank_coverage;

/**
 * One immutable registry generation: every profile with its verified artifact bytes, templates
 * compiled and tokenizers checked at load. Opaque and reference-counted; share it between
 * threads freely. Release each reference (from `kvexact_registry_load` or
 * `kvexact_registry_retain`) once with `kvexact_registry_free`; the generation lives until its
 * last reference — including those held by profiles and encoders — is gone.
 */
typedef struct kvexact_registry kvexact_registry;

/**
 * A subscriber feeding one endpoint of an index from its engine's KV-event sockets. Opaque;
 * made by `kvexact_subscriber_new`, freed (stopped first) by `kvexact_subscriber_free`. The
 * `kvexact_subscriber_*` functions are in a libkvexact built with its cargo feature
 * `subscriber` (the default; `scripts/ffi-install.sh` builds it); a library built with
 * `--no-default-features` lacks them and is fed by the caller (`kvexact_index_feed_*`).
 * `kvexact_subscriber_start`, `_stop`, `_get_counters` and `_prometheus` may be called from
 * any thread; the subscriber holds a reference to its index.
 */
typedef struct kvexact_subscriber kvexact_subscriber;

/**
 * The result of every fallible call: `KVEXACT_OK` (0) or a negative `KVEXACT_ERR_*` value.
 * Functions that return a count (`int32_t`) use the same negative values for failures.
 */
typedef int32_t kvexact_status;

/**
 * Options of `kvexact_registry_load`. Pass NULL for the defaults.
 */
typedef struct {
  /**
   * Owner uid trusted besides 0 (the gateway passes `geteuid()`).
   */
  uint32_t trusted_uid;
  /**
   * Cap on a profile document's size; 0 = default (1 MiB).
   */
  uint64_t max_profile_bytes;
  /**
   * Cap on an artifact's size (tokenizer.json, template); 0 = default (64 MiB).
   */
  uint64_t max_artifact_bytes;
} kvexact_registry_opts;

/**
 * The surfaces a rule serves (`kvexact_profile_admit`, `kvexact_fixtures_check`,
 * `kvexact_judge_oracle`), or the surface one fixture probes (`kvexact_fixture_info.api`):
 * `KVEXACT_API_BOTH`, `KVEXACT_API_COMPLETIONS`, `KVEXACT_API_CHAT` (the data-plane word's
 * values).
 */
typedef uint32_t kvexact_api_mode;

/**
 * Options of `kvexact_encoder_new_with_options`. Zero-initialise it, set `struct_size` to
 * `sizeof(kvexact_encoder_options)` and the fields you need: every zero field is the default
 * (`kvexact_encoder_new`'s behaviour), and passing NULL instead of the struct means all
 * defaults. The struct only ever grows at its end; a caller built against an older header
 * passes its smaller `struct_size` and gets the defaults for the fields it does not know.
 *
 * ```c
 * kvexact_encoder_options o = {0};
 * o.struct_size = sizeof o;
 * o.engine_version = "0.31.0";
 * o.lifted = KVEXACT_REFUSAL_BIT_TOOLS | KVEXACT_REFUSAL_BIT_MESSAGE_FIELD;
 * ```
 */
typedef struct {
  /**
   * `sizeof(kvexact_encoder_options)` as the caller compiled it (at least this version's
   * size; a larger one must have all bytes past this version zero).
   */
  uint32_t struct_size;
  /**
   * The strict-rule refusal codes to lift, as a mask of `kvexact_refusal_bit(code)` (the
   * `KVEXACT_REFUSAL_BIT_*` constants, or `kvexact_refusal_bits_parse`); 0 = none, the
   * strict rules exactly. A request whose refusal scan hits only lifted codes is rendered
   * and tokenized as the engine release's own serving path does (tools, tool calls and
   * results, `chat_template_kwargs`, …); any other hit is still refused with its own
   * code, in the same scan order. Lifting needs one engine release: `engine_version`, or
   * a `contract_id` that is a release id (or a contract with a single release). A code
   * that release's contract does not list as liftable (`chat.liftable` in
   * `kvexact_contracts_json`) is refused here with `KVEXACT_ERR_LIFT_NOT_ALLOWED`.
   */
  uint32_t lifted;
  /**
   * The engine release, as the engine reports its version (NUL-terminated, e.g. vLLM's
   * `/version` `"0.31.0"`), resolved within `contract_id` exactly as
   * `kvexact_hasher_new_for_contract` does (`KVEXACT_ERR_UNKNOWN_ENGINE_VERSION`,
   * `KVEXACT_ERR_CONTRACT_MISMATCH`); the encoder then has that release's chat rules and
   * quirks. NULL: the release or contract `contract_id` names (as `kvexact_encoder_new`).
   * Only read during the call.
   */
  const char *engine_version;
  /**
   * Capacity of the encoder's segment cache (token ids of the text between added tokens,
   * reused across requests: every earlier turn of a conversation is found instead of
   * re-encoded). 0 = the default, `KVEXACT_SEGMENT_CACHE_DEFAULT_BYTES` (8 MiB); at most
   * `KVEXACT_SEGMENT_CACHE_MAX_BYTES` (4 GiB). The capacity bounds everything the cache
   * holds: segment text, 4 bytes per id and 128 bytes of bookkeeping per segment. A quarter
   * of it goes to the encoder's render cache when the chat template is proven to allow one
   * (recent renders' per-message output: a conversation's next turn renders only its new
   * messages; bounded by the messages' text and the output held), and half of the rest to
   * its prompt cache (recent prompts' ids: a conversation's next prompt takes over the
   * previous one's up to a cut proven safe and only the rest is encoded), bounded the same
   * way (text, 4 bytes per id, 16 per cut, 128 per prompt).
   */
  uint64_t segment_cache_bytes;
  /**
   * `KVEXACT_OPTION_NO_CACHE`: no segment, prompt or render cache
   * (`segment_cache_bytes` must then be 0).
   * Other bits are `KVEXACT_ERR_INVALID_ARGUMENT`.
   */
  uint32_t flags;
  /**
   * Must be 0.
   */
  uint32_t reserved;
  /**
   * Largest request body accepted, in bytes, checked before it is parsed (over it:
   * `KVEXACT_REFUSAL_INPUT_TOO_LARGE`, the error message naming the bound). 0 = the
   * default, `KVEXACT_DEFAULT_MAX_BODY_BYTES` (8 MiB); `UINT64_MAX` = no bound.
   */
  uint64_t max_body_bytes;
  /**
   * Largest text handed to the tokenizer, in bytes: the rendered chat prompt (the render
   * stops once over) and a completions prompt. 0 = `KVEXACT_DEFAULT_MAX_RENDERED_BYTES`
   * (8 MiB); `UINT64_MAX` = no bound.
   */
  uint64_t max_rendered_bytes;
  /**
   * Longest pre-token (text the tokenizer's pre-tokenizer does not split, e.g. a word
   * without spaces) encoded, in bytes, checked before it is encoded. 0 =
   * `KVEXACT_DEFAULT_MAX_WORD_BYTES` (64 KiB); `UINT64_MAX` = no bound.
   */
  uint64_t max_word_bytes;
  /**
   * Longest text handed whole to a tokenizer kvexact has no fast path for (a layout
   * kvtoken does not recognise), in bytes. 0 = `KVEXACT_DEFAULT_MAX_FALLBACK_BYTES` (1 MiB); `UINT64_MAX` =
   * no bound.
   */
  uint64_t max_fallback_bytes;
  /**
   * Most messages in one chat request, checked before rendering. 0 =
   * `KVEXACT_DEFAULT_MAX_MESSAGES` (4096); `UINT32_MAX` = no bound.
   */
  uint32_t max_messages;
  /**
   * Must be 0.
   */
  uint32_t reserved2;
} kvexact_encoder_options;

/**
 * Why a strict rule refused a request (`KVEXACT_REFUSAL_*`); written by `kvexact_encode_chat`
 * next to `KVEXACT_ERR_UNSUPPORTED`.
 *
 * An integer typedef rather than a C enum: a C enum's size is implementation-defined, and an
 * out-of-range value passed from C into a Rust enum would be undefined behaviour, whereas
 * `kvexact_refusal_name` answers `"unrecognized_refusal"` for it.
 */
typedef uint32_t kvexact_refusal;

/**
 * An engine family, for the judges and `kvexact_contract_resolve`: `KVEXACT_VLLM`,
 * `KVEXACT_SGLANG`, `KVEXACT_TRTLLM`.
 */
typedef uint32_t kvexact_engine;

/**
 * Options of `kvexact_hasher_new_with_options` and
 * `kvexact_hasher_new_for_contract_with_options`. Zero-initialise it and set `struct_size` to
 * `sizeof(kvexact_hasher_options)`: every zero field is the default, and NULL instead of the
 * struct means all defaults (what `kvexact_hasher_new` and `kvexact_hasher_new_for_contract`
 * use). The struct only ever grows at its end (see `kvexact_encoder_options`).
 */
typedef struct {
  /**
   * `sizeof(kvexact_hasher_options)` as the caller compiled it.
   */
  uint32_t struct_size;
  /**
   * `KVEXACT_OPTION_NO_CACHE`: no prefix-chain cache (then `prefix_cache_entries` is 0 and
   * `share_cache_with` NULL). Other bits are `KVEXACT_ERR_INVALID_ARGUMENT`.
   */
  uint32_t flags;
  /**
   * Capacity of the hasher's prefix-chain cache in blocks: the digests of prefixes already
   * hashed, so that a request extending an earlier one (the next turn of a conversation)
   * hashes only its new blocks. 0 = the default, `KVEXACT_PREFIX_CACHE_DEFAULT_ENTRIES`
   * (16,384); at most `KVEXACT_PREFIX_CACHE_MAX_ENTRIES`. Memory: at most about
   * `entries × (2 × 240 + 4 × block_size + 48)` bytes (block entries in 16 sharded tables,
   * plus up to `entries` blocks of the 128 most recent requests kept whole), about 7 MiB
   * at the default and block size 16; `kvexact_hasher_cache_stats` reports what is held.
   * Only vLLM chains (without look-ahead) are cached; SGLang and TensorRT-LLM blocks are
   * hashed on every call (counted as misses). Must be 0 with `share_cache_with`.
   */
  uint64_t prefix_cache_entries;
  /**
   * Another hasher whose prefix-chain cache this one shares (NULL: a cache of its own). The
   * cache then holds both hashers' blocks within its one capacity; entries are keyed by the
   * whole hashing configuration (engine, release rules, algorithm, block size, NONE_HASH,
   * extra keys) and verified token for token, so hashers of different configurations
   * never see each other's entries. Sharing one cache between every hasher of a registry
   * generation bounds the memory of all of them by one capacity. The other hasher must
   * have a cache; it may be freed afterwards (the cache lives as long as a hasher uses it).
   */
  const kvexact_hasher *share_cache_with;
} kvexact_hasher_options;

/**
 * A request's keys beyond its token ids, for `kvexact_block_hashes_keyed`. Zero-initialise it
 * and set `struct_size` to `sizeof(kvexact_request_keys)`; the struct only ever grows at its
 * end.
 */
typedef struct {
  /**
   * `sizeof(kvexact_request_keys)` as the caller compiled it.
   */
  uint32_t struct_size;
  /**
   * 1: the request has a `cache_salt` (`cache_salt` / `cache_salt_len`, UTF-8, may be
   * empty); 0: none.
   */
  uint32_t has_cache_salt;
  /**
   * The salt's bytes (borrowed for the call).
   */
  const uint8_t *cache_salt;
  /**
   * Length of `cache_salt` in bytes.
   */
  size_t cache_salt_len;
  /**
   * The adapter the request names (its name as the deployment declares it, UTF-8,
   * borrowed for the call); NULL for the base model.
   */
  const uint8_t *adapter;
  /**
   * Length of `adapter` in bytes.
   */
  size_t adapter_len;
} kvexact_request_keys;

/**
 * The kind of a KV-cache group (`kvexact_index_group.kind`): `KVEXACT_GROUP_FULL_ATTENTION`
 * or `KVEXACT_GROUP_SLIDING_WINDOW`.
 */
typedef uint32_t kvexact_group_kind;

/**
 * One KV-cache group of the served model, in the engine's order (vLLM `group_idx`).
 */
typedef struct {
  /**
   * `KVEXACT_GROUP_FULL_ATTENTION` or `KVEXACT_GROUP_SLIDING_WINDOW`.
   */
  kvexact_group_kind kind;
  /**
   * Tokens per block of this group (the replays prove only the hash block size).
   */
  uint32_t block_size;
  /**
   * Sliding-window groups: the window in tokens (vLLM `sliding_window`, >= 1); 0 for
   * full attention.
   */
  uint32_t sliding_window;
} kvexact_index_group;

/**
 * Options of `kvexact_index_new`. Zero-initialise it and set `struct_size` to
 * `sizeof(kvexact_index_options)`: every zero field is the default, and NULL instead of the
 * struct means all defaults. The struct only ever grows at its end.
 */
typedef struct {
  /**
   * `sizeof(kvexact_index_options)` as the caller compiled it.
   */
  uint32_t struct_size;
  /**
   * The most endpoint × rank slots the index holds (a hard bound on its bookkeeping);
   * 0 = `KVEXACT_INDEX_DEFAULT_MAX_SLOTS`, at most `KVEXACT_INDEX_MAX_SLOTS`.
   */
  uint32_t max_slots;
  /**
   * The served model's KV-cache groups, group 0 first (borrowed for the call); NULL with
   * `n_groups` 0 = one full-attention group of the index's block size.
   */
  const kvexact_index_group *groups;
  /**
   * Number of `groups` (at most 8).
   */
  size_t n_groups;
} kvexact_index_options;

/**
 * Which engine hash chain a hasher computes (`KVEXACT_SHA256_CBOR` …). Values 0–3 are
 * §6.4's; 4 and 5 add vLLM's pickle-serialised variants; `KVEXACT_HASH_ALGO_CONTRACT_DEFAULT`
 * (only for `kvexact_hasher_new_for_contract`) asks for the contract's default.
 */
typedef uint32_t kvexact_hash_algo;

/**
 * One request of `kvexact_route_keys_batch`: a chat body (`len` bytes, borrowed for the
 * call) and the instant to render it at.
 */
typedef struct {
  /**
   * The raw chat request body (NULL only with `len` 0).
   */
  const uint8_t *body;
  /**
   * Its length in bytes.
   */
  size_t len;
  /**
   * The render instant, Unix milliseconds (UTC), as `kvexact_route_keys`' `now_unix_ms`.
   */
  int64_t now_unix_ms;
} kvexact_route_request;

/**
 * The outcome of one request of `kvexact_route_keys_batch`.
 */
typedef struct {
  /**
   * What `kvexact_route_keys` returns for this request (`KVEXACT_OK` or a negative status;
   * `KVEXACT_ERR_PANIC` if this request hit an internal error, which affects no other).
   */
  kvexact_status status;
  /**
   * The refusal, as `kvexact_route_keys` writes it (`KVEXACT_REFUSAL_NONE` unless the
   * status is `KVEXACT_ERR_UNSUPPORTED`).
   */
  kvexact_refusal refusal;
  /**
   * Ids written at the start of this request's id slot (0 unless the status is OK).
   */
  size_t n_ids;
  /**
   * Hashes written at the start of this request's hash slot (0 unless the status is OK).
   */
  size_t n_blocks;
} kvexact_route_result;

/**
 * Counters of one cache (`kvexact_encoder_cache_stats`: the encoder's segment and prompt
 * caches, summed;
 * `kvexact_hasher_cache_stats`: the hasher's prefix-chain cache). Set `struct_size` to
 * `sizeof(kvexact_cache_stats)` before the call; the struct only ever grows at its end.
 * Counters count from the cache's creation (`*_cache_clear` keeps them).
 */
typedef struct {
  /**
   * `sizeof(kvexact_cache_stats)` as the caller compiled it (kept as is).
   */
  uint32_t struct_size;
  /**
   * 1 when the handle has a cache, 0 when it has none (every other field is then 0).
   */
  uint32_t enabled;
  /**
   * Encoder: segments (text between added tokens) whose ids were found — in the segment
   * cache (segments of at least 64 bytes) or taken over with a recent prompt's ids (every
   * segment before the cut). Prefix cache: blocks whose hash was reused.
   */
  uint64_t hits;
  /**
   * Segment cache: segments encoded and inserted. Prefix cache: blocks hashed (SGLang and
   * TensorRT-LLM blocks, which are never cached, count here too).
   */
  uint64_t misses;
  /**
   * Entries dropped to stay within capacity (segment cache: a full shard is emptied;
   * prompt cache: the oldest prompts of a set; prefix cache: CLOCK eviction of one block
   * entry).
   */
  uint64_t evictions;
  /**
   * Bytes held now (encoder: text, ids and bookkeeping of both caches, as their capacities
   * count them; prefix cache: an estimate of the tables' and recent requests' heap bytes).
   */
  uint64_t bytes;
  /**
   * Entries held now (segments and prompts; block entries).
   */
  uint64_t entries;
  /**
   * The capacity: bytes (the encoder's two caches together: `segment_cache_bytes`, half
   * each) or block entries (prefix cache).
   */
  uint64_t capacity;
} kvexact_cache_stats;

/**
 * One endpoint (an engine replica) for `kvexact_index_add_endpoint`. Zero-initialise it and
 * set `struct_size` to `sizeof(kvexact_index_endpoint)`; the struct only ever grows at its
 * end.
 */
typedef struct {
  /**
   * `sizeof(kvexact_index_endpoint)` as the caller compiled it.
   */
  uint32_t struct_size;
  /**
   * Data-parallel ranks, 1..=1024: each rank is its own cache and its own event stream.
   */
  uint32_t dp_ranks;
  /**
   * The name the gateway knows it by (UTF-8, unique in the index; borrowed for the call).
   */
  const uint8_t *name;
  /**
   * Length of `name` in bytes.
   */
  size_t name_len;
  /**
   * Per-rank blocks of the engine's GPU pool (vLLM `num_gpu_blocks - 1`, SGLang
   * `max_total_num_tokens / page_size`, TensorRT-LLM's primary blocks), 1..=4294967295: a
   * stream that stores more has lost removals and is `unknown` until its cache is known
   * again.
   */
  uint64_t gpu_blocks;
  /**
   * Per-rank blocks in every other medium together (CPU offloading, HiCache),
   * 0..=4294967295.
   */
  uint64_t other_blocks;
  /**
   * 1: LoRA adapters are loaded on the endpoint (under a release whose events do not show
   * the adapter, its predictions are then `unknown`, reason
   * `KVEXACT_UNKNOWN_LORA_NOT_IN_EVENTS`). 0 or 1.
   */
  uint8_t lora_adapters;
  /**
   * 1: the engine keeps a replay buffer the caller can ask after a gap (vLLM / SGLang
   * `replay_endpoint`): a gap is then `KVEXACT_APPLIED_REPLAY_FROM`, else
   * `KVEXACT_APPLIED_LOST`. 0 or 1.
   */
  uint8_t replay;
  /**
   * 1: the engine starts now with an empty cache (just launched or reset): the first
   * batch of any sequence number starts the stream. 0: the stream must show its start
   * (sequence 0, `AllBlocksCleared`, TensorRT-LLM `created`) before the endpoint is
   * predicted. 0 or 1.
   */
  uint8_t starts_empty;
} kvexact_index_endpoint;

/**
 * What became of one fed batch (`kvexact_index_applied.outcome`).
 */
typedef uint32_t kvexact_applied_outcome;

/**
 * The outcome of a feed call. Set `struct_size` to `sizeof(kvexact_index_applied)` before
 * the call; written only on success; the struct only ever grows at its end.
 */
typedef struct {
  /**
   * `sizeof(kvexact_index_applied)` as the caller compiled it (kept as is).
   */
  uint32_t struct_size;
  /**
   * `KVEXACT_APPLIED`, `KVEXACT_APPLIED_DUPLICATE`, `KVEXACT_APPLIED_REPLAY_FROM`,
   * `KVEXACT_APPLIED_LOST` or `KVEXACT_APPLIED_REPLAY_PENDING`.
   */
  kvexact_applied_outcome outcome;
  /**
   * `KVEXACT_APPLIED`: block copies stored; else 0.
   */
  uint64_t stored;
  /**
   * `KVEXACT_APPLIED`: block copies removed; else 0.
   */
  uint64_t removed;
  /**
   * `KVEXACT_APPLIED_REPLAY_FROM` and `_REPLAY_PENDING`: the first missing sequence
   * number; else 0.
   */
  uint64_t replay_from;
} kvexact_index_applied;

/**
 * What a prediction says (`kvexact_index_prediction.status`).
 */
typedef uint32_t kvexact_prediction_status;

/**
 * Why a prediction is unknown (`kvexact_index_prediction.unknown_reason`).
 */
typedef uint32_t kvexact_unknown_reason;

/**
 * One endpoint rank's prediction for a request. A fixed layout (an array element: it has no
 * `struct_size` and never changes).
 */
typedef struct {
  /**
   * The endpoint's id.
   */
  uint32_t endpoint;
  /**
   * The data-parallel rank.
   */
  uint32_t rank;
  /**
   * `KVEXACT_PREDICTION_CACHED` or `KVEXACT_PREDICTION_UNKNOWN`.
   */
  kvexact_prediction_status status;
  /**
   * `KVEXACT_UNKNOWN_NONE` when cached, else why it is unknown (`KVEXACT_UNKNOWN_*`).
   */
  kvexact_unknown_reason unknown_reason;
  /**
   * Cached: 1 when a cache-hit replay of the release proves its rule, 0 when the rule is
   * predicted unproven. 0 when unknown.
   */
  uint32_t proven;
  /**
   * Always 0.
   */
  uint32_t reserved;
  /**
   * Cached: the cached tokens the engine will report (its GPU prefix-cache hit); 0 when
   * unknown.
   */
  uint64_t tokens;
  /**
   * Cached: further prompt tokens held in other media (CPU offloading, HiCache) right after
   * the GPU hit, never part of `tokens`; -1 where the rule does not say (several KV-cache
   * groups) or the prediction is unknown.
   */
  int64_t other_media_tokens;
} kvexact_index_prediction;

/**
 * How the engine's reported count compared with the prediction (`kvexact_index_observe`).
 */
typedef uint32_t kvexact_observation;

/**
 * Where a rank's event stream stands (`kvexact_index_rank_status.stream`).
 */
typedef uint32_t kvexact_stream_state;

/**
 * One rank's inventory and counters (`kvexact_index_status`). A fixed layout (an array
 * element: no `struct_size`). Counters count from the endpoint's addition.
 */
typedef struct {
  /**
   * The endpoint's id (`KVEXACT_INDEX_NO_ENDPOINT` if it was removed meanwhile).
   */
  uint32_t endpoint;
  /**
   * The data-parallel rank.
   */
  uint32_t rank;
  /**
   * `KVEXACT_STREAM_IN_STEP`, `_UNSYNCED`, `_REPLAYING`, `_OUT_OF_STEP` or `_LOST`.
   */
  kvexact_stream_state stream;
  /**
   * 1 when the stream stored more than the engine's pool (removals lost), else 0.
   */
  uint32_t overflow;
  /**
   * Block copies held on the GPU.
   */
  uint64_t held_gpu;
  /**
   * Block copies held in every other medium together.
   */
  uint64_t held_other;
  /**
   * Event batches seen.
   */
  uint64_t batches;
  /**
   * Block copies stored.
   */
  uint64_t stored;
  /**
   * Block copies removed.
   */
  uint64_t removed;
  /**
   * Removals of blocks the rank did not hold.
   */
  uint64_t removed_unknown;
  /**
   * Stores whose parent block the rank did not hold (kept: the engine holds them).
   */
  uint64_t stored_orphan;
  /**
   * Sequence gaps found.
   */
  uint64_t gaps;
  /**
   * Batches refused (not decodable, or not for this geometry).
   */
  uint64_t rejected;
  /**
   * Times the stream stored more than the pool holds.
   */
  uint64_t overflows;
  /**
   * Engine restarts seen (sequence back at 0).
   */
  uint64_t restarts;
  /**
   * Observations judged exact.
   */
  uint64_t observed_exact;
  /**
   * Observations where the index predicted more than the engine had.
   */
  uint64_t observed_over;
  /**
   * Observations where the index predicted less than the engine had.
   */
  uint64_t observed_under;
  /**
   * Observations of unknown predictions.
   */
  uint64_t observed_unjudged;
} kvexact_index_rank_status;

/**
 * Options of `kvexact_subscriber_new`. Zero-initialise it and set `struct_size` to
 * `sizeof(kvexact_subscriber_options)`; the struct only ever grows at its end.
 */
typedef struct {
  /**
   * `sizeof(kvexact_subscriber_options)` as the caller compiled it.
   */
  uint32_t struct_size;
  /**
   * The endpoint's id in the index (`kvexact_index_add_endpoint`).
   */
  uint32_t endpoint;
  /**
   * Per data-parallel rank, rank 0 first: the engine's ZMQ PUB address `host:port`
   * (NUL-terminated; vLLM `--kv-events-config` endpoint, SGLang's per rank). For a
   * TensorRT-LLM index (whose release drains `/kv_cache_events`): one address, that of
   * the gateway replica republishing the drain (`kvexact watch`, `kvprobe`'s
   * `DrainRepublisher`), whose bodies carry every rank. Borrowed for the call.
   */
  const char *const *publishers;
  /**
   * NULL, or per rank NULL or the engine's replay endpoint `host:port` (vLLM / SGLang
   * `replay_endpoint`): asked after each gap. Borrowed for the call.
   */
  const char *const *replays;
  /**
   * Entries of `publishers` (and of `replays` when given): the endpoint's `dp_ranks`
   * (1 for a TensorRT-LLM drain).
   */
  size_t n_ranks;
  /**
   * The topic prefix to subscribe to, NUL-terminated; NULL = every message.
   */
  const char *topic;
  /**
   * Messages the queue between the sockets and the index holds; 0 =
   * `KVEXACT_SUBSCRIBER_DEFAULT_QUEUE`, at most `KVEXACT_SUBSCRIBER_MAX_QUEUE`. A message
   * that does not fit is dropped and its rank marked lost (`KVEXACT_UNKNOWN_STREAM_LOST`).
   */
  uint32_t queue;
  /**
   * Bound on one replay request in milliseconds; 0 = 5,000.
   */
  uint32_t replay_timeout_ms;
} kvexact_subscriber_options;

/**
 * The subscriber's counters (`kvexact_subscriber_get_counters`). Set `struct_size` to
 * `sizeof(kvexact_subscriber_counters)` before the call; the struct only ever grows.
 */
typedef struct {
  /**
   * `sizeof(kvexact_subscriber_counters)` as the caller compiled it (kept as is).
   */
  uint32_t struct_size;
  /**
   * 1 while started, else 0.
   */
  uint32_t running;
  /**
   * Messages received from the sockets.
   */
  uint64_t received;
  /**
   * Messages fed to the index.
   */
  uint64_t delivered;
  /**
   * Messages the index refused (did not decode, or for no rank).
   */
  uint64_t refused;
  /**
   * Messages dropped because the queue was full (each marks its rank lost).
   */
  uint64_t dropped;
  /**
   * Connections lost or not made (each marks its rank lost).
   */
  uint64_t disconnects;
  /**
   * Times a rank was marked lost.
   */
  uint64_t lost;
  /**
   * Replays asked for after a gap.
   */
  uint64_t replays;
  /**
   * Batches the replays brought.
   */
  uint64_t replayed;
  /**
   * Replays that could not be had (`kvexact_index_replay_failed` called).
   */
  uint64_t replay_failures;
} kvexact_subscriber_counters;

/**
 * What a decoded event reports (`kvexact_event.kind`): `KVEXACT_EVENT_STORED`,
 * `KVEXACT_EVENT_REMOVED`, `KVEXACT_EVENT_ALL_CLEARED`, `KVEXACT_EVENT_CREATED`,
 * `KVEXACT_EVENT_UPDATED`. One byte, so that `kvexact_event` keeps its layout.
 */
typedef uint8_t kvexact_event_kind;

/**
 * One decoded event. Every pointer points into the decoder and stays valid until the next
 * `kvexact_event_decode` on it or `kvexact_event_decoder_free`.
 *
 * Fields marked "stored only" are 0 / NULL for other kinds.
 */
typedef struct {
  /**
   * `KVEXACT_EVENT_STORED`, `KVEXACT_EVENT_REMOVED`, `KVEXACT_EVENT_ALL_CLEARED`, or
   * (TensorRT-LLM schemas only) `KVEXACT_EVENT_CREATED` / `KVEXACT_EVENT_UPDATED`.
   */
  kvexact_event_kind kind;
  /**
   * The block hashes in the u64 form the gateway indexes (vLLM ints as sent; vLLM digest
   * bytes → last 8 bytes big-endian; SGLang int64 → its two's-complement bits;
   * TensorRT-LLM u64 as sent). TensorRT-LLM stored: exactly one hash, the block's — the
   * re-derived one when the decoder re-hashes (see `rehash_mismatch`). Updated: the one
   * updated block. Created, all cleared: none.
   */
  const uint64_t *hashes;
  /**
   * Number of `hashes`.
   */
  size_t n_hashes;
  /**
   * Stored only: the blocks' token ids, in order (TensorRT-LLM: the one block's tokens,
   * int32 ids as their unsigned 32 bits); may be empty (0).
   */
  const uint32_t *token_ids;
  /**
   * Number of `token_ids`.
   */
  size_t n_tokens;
  /**
   * Stored only: tokens per block (TensorRT-LLM: the block's token count, fewer than the
   * configured block size for a partial tail block); 0 when absent.
   */
  uint32_t block_size;
  /**
   * Stored only: 1 when the event names a LoRA adapter (vLLM/SGLang id or name;
   * TensorRT-LLM `lora_id`, which V1 JSON does not serialise).
   */
  uint8_t has_lora;
  /**
   * Stored only: 1 when the block(s) carry extra keys: vLLM/SGLang non-empty `extra_keys`
   * or a `cache_salt`; TensorRT-LLM a `cache_salt`, `mm_keys`, or a non-zero
   * `token_extra_id`.
   */
  uint8_t has_extra_keys;
  /**
   * Stored only, an addition to §6.6: 1 when the block(s) hang off a parent block rather
   * than the root. vLLM/SGLang: the event names its parent. TensorRT-LLM: the event's
   * `parent_hash` for its first block, the previous block of the same event otherwise.
   */
  uint8_t has_parent;
  /**
   * The parent block's hash (u64 form) when `has_parent` is 1, else 0 (for TensorRT-LLM also
   * the root's hash). TensorRT-LLM: the published hash of the parent, which is what the
   * re-hash chains on.
   */
  uint64_t parent_hash;
  /**
   * TensorRT-LLM stored only, an addition to §6.6 (appended last so that earlier fields
   * keep their offsets): 1 when the decoder was given a `rehash` hasher and the hash it
   * re-derived from the block's tokens and `parent_hash` differs from the published one.
   * `hashes[0]` then holds the re-derived hash, not the published one (the challenge
   * judge's view: a block whose hash cannot be reproduced from its tokens — salted, LoRA,
   * extra ids, multimodal, or a different hash algorithm — must never match a plain
   * request's hash). 0 everywhere else.
   */
  uint8_t rehash_mismatch;
  /**
   * Addition to §6.6: the DP rank the event came from, -1 when the stream carries none.
   * vLLM/SGLang: the batch's rank (as `kvexact_event_decode`'s `dp_rank`); TensorRT-LLM:
   * the event's own `attention_dp_rank` (one drained body mixes ranks under attention DP).
   */
  int64_t dp_rank;
  /**
   * Addition to §6.6: TensorRT-LLM's per-manager `event_id` (a jump means events were
   * lost: readiness reason `drain_sequence_gap`); -1 for vLLM/SGLang. Every event made from
   * one TensorRT-LLM event (one per stored block) carries its id.
   */
  int64_t event_id;
} kvexact_event;

/**
 * One probe/challenge outcome.
 */
typedef struct {
  /**
   * 1 when the judged thing passed, else 0.
   */
  int32_t ok;
  /**
   * 1 when the pass was earned through TensorRT-LLM's approved oracle (the rung then reads
   * `TOKEN_PARITY_NOT_AVAILABLE_WITH_APPROVED_ORACLE`), else 0.
   */
  int32_t oracle;
  /**
   * The reason code when `ok` is 0 (`"token_mismatch"`, `"identity_mismatch"`, … — the
   * §8.4 vocabulary), a static NUL-terminated string never to be freed; NULL when `ok` is 1.
   */
  const char *reason;
  /**
   * What was seen, NUL-terminated UTF-8 (cut at a character boundary to fit).
   */
  char detail[256];
} kvexact_finding;

/**
 * What `kvexact_fixture_describe` tells about one fixture. Pointers stay valid while the fixture
 * set lives.
 */
typedef struct {
  /**
   * The fixture's name (its file stem), NUL-terminated.
   */
  const char *name;
  /**
   * The surface it probes: `KVEXACT_API_COMPLETIONS` (1) or `KVEXACT_API_CHAT` (2).
   */
  kvexact_api_mode api;
  /**
   * 1 for a clock fixture (`oracleNow`): its ids are re-derived at the answer's time.
   */
  uint8_t clock;
} kvexact_fixture_info;

/**
 * What a challenge needs from the rule besides the encoder and hasher.
 */
typedef struct {
  /**
   * The served model name put in the request body (UTF-8, `model_len` bytes).
   */
  const uint8_t *model;
  /**
   * Length of `model`.
   */
  size_t model_len;
  /**
   * Declared DP ranks (SGLang `kvDpRankCount`; 0 or 1 for one rank). An echo from a rank at
   * or above this fails the challenge.
   */
  uint32_t dp_ranks;
} kvexact_challenge_opts;

/**
 * One LoRA adapter a vLLM ≥ 0.31 engine serves: its name (as the events carry it) and the
 * path the server registered it with (`/v1/models` `root`), which vLLM hashes into every
 * block of the adapter. Both UTF-8, `(ptr, len)`, no NUL needed.
 */
typedef struct {
  /**
   * The adapter name.
   */
  const uint8_t *name;
  /**
   * Length of `name`.
   */
  size_t name_len;
  /**
   * The registered path.
   */
  const uint8_t *path;
  /**
   * Length of `path`.
   */
  size_t path_len;
} kvexact_drift_lora;

/**
 * How `kvexact_drift_verifier_new` verifies one endpoint's stream: the rule's hashing settings
 * and the verifier's bounds.
 *
 * Versioned by `struct_size`: set it to `sizeof(kvexact_drift_options)`. Fields are only ever
 * appended; a later field's 0 will mean its default, so a caller built against this header
 * keeps working with a newer library. A `struct_size` larger than this library's struct is
 * accepted when every byte past it is 0 (a newer caller that asked for nothing this library
 * does not know), else refused; so is one above 4096.
 */
typedef struct {
  /**
   * `sizeof(kvexact_drift_options)`.
   */
  size_t struct_size;
  /**
   * The rule's hash algorithm (a `kvexact_hash_algo` of the release's engine), or
   * `KVEXACT_HASH_ALGO_CONTRACT_DEFAULT`.
   */
  kvexact_hash_algo algo;
  /**
   * The rule's `kvBlockSize` (>= 1).
   */
  uint32_t block_size;
  /**
   * vLLM's `PYTHONHASHSEED`, with `kvexact_hasher_new`'s convention: `(NULL, 0)` unset, a
   * non-NULL pointer with length 0 the empty string, else `seed_len` bytes of UTF-8. An
   * unset seed under which vLLM draws a random NONE_HASH makes root blocks unverifiable
   * (`none_hash_unknown`), never a guess. SGLang and TensorRT-LLM take `(NULL, 0)`.
   */
  const uint8_t *seed;
  /**
   * Length of `seed`.
   */
  size_t seed_len;
  /**
   * vLLM: the LoRA adapters the rule declares (`n_loras` entries; NULL with 0 for none),
   * with the paths the server registered them with (hashed by ≥ 0.31). Ignored for SGLang
   * and TensorRT-LLM. A block keyed with an adapter not listed is drift (`keys`, the
   * keys as evidence).
   */
  const kvexact_drift_lora *loras;
  /**
   * Number of `loras`.
   */
  size_t n_loras;
  /**
   * Entries of the hash → digest map, 0 for 65 536 (88 bytes each on 64-bit targets;
   * at most `KVEXACT_DRIFT_MAX_CAPACITY`). The map is allocated once, here.
   */
  size_t map_capacity;
  /**
   * Stored blocks the mismatches are counted over, 0 for 4096.
   */
  uint64_t window_blocks;
  /**
   * Chained mismatched blocks within `window_blocks` that make the verdict `drift`, 0 for
   * 3 (one root, block-size or keys mismatch is `drift` at once).
   */
  uint32_t mismatches;
  /**
   * Reserved, must be 0.
   */
  uint32_t reserved;
  /**
   * Prediction tracking (`kvexact_drift_predict`): a predicted hash stored later than this
   * many milliseconds after its prediction counts as expired. 0: no tracking.
   */
  uint64_t predict_within_ms;
  /**
   * Most predictions pending at once, 0 for 65 536 (at most `KVEXACT_DRIFT_MAX_CAPACITY`).
   */
  size_t predict_capacity;
} kvexact_drift_options;

/**
 * What a verifier has seen, as `kvexact_drift_get_counters` writes it.
 *
 * Versioned by `struct_size` and append-only: set `struct_size` to
 * `sizeof(kvexact_drift_counters)` before the call; the library writes the first
 * `min(struct_size, its own size)` bytes and stores that count in `struct_size`. Per stored
 * block exactly one of `matched`, `mismatched`, `consequences` and `unverifiable` grows
 * (`consequences` and `verdict` were appended in 0.2: a caller built against the first
 * layout gets its fields, and blocks chained on a mismatch then show in no field).
 */
typedef struct {
  /**
   * In: the caller's `sizeof(kvexact_drift_counters)`; out: the bytes written.
   */
  size_t struct_size;
  /**
   * Batches fed (ZMQ messages or TensorRT-LLM bodies that decoded).
   */
  uint64_t batches;
  /**
   * Inputs that did not decode under the release's schema (not fed).
   */
  uint64_t undecodable;
  /**
   * Events fed, every kind.
   */
  uint64_t events;
  /**
   * `BlockStored` / `stored` events.
   */
  uint64_t stored_events;
  /**
   * `BlockRemoved` / `removed` events.
   */
  uint64_t removed_events;
  /**
   * `AllBlocksCleared` events.
   */
  uint64_t cleared_events;
  /**
   * TensorRT-LLM `created` / `updated` events.
   */
  uint64_t other_events;
  /**
   * Stored blocks (one per published hash).
   */
  uint64_t blocks_seen;
  /**
   * Blocks whose hash was re-derived and compared (matched + root and chained mismatches).
   */
  uint64_t rederived;
  /**
   * Re-derived and equal to the published hash.
   */
  uint64_t matched;
  /**
   * Evidence of drift, all kinds (the four below).
   */
  uint64_t mismatched;
  /**
   * Root blocks re-derived to another hash.
   */
  uint64_t mismatched_root;
  /**
   * Chained blocks re-derived to another hash.
   */
  uint64_t mismatched_chained;
  /**
   * Blocks of an event whose block size the rule does not allow.
   */
  uint64_t mismatched_block_size;
  /**
   * Blocks with published keys the release cannot produce.
   */
  uint64_t mismatched_keys;
  /**
   * Blocks that could not be re-derived (never a guess).
   */
  uint64_t unverifiable;
  /**
   * `unverifiable` by reason; slot `i` is named by `kvexact_drift_unverifiable_name(i)`
   * (unused slots are 0).
   */
  uint64_t unverifiable_by_reason[KVEXACT_DRIFT_UNVERIFIABLE_SLOTS];
  /**
   * 1 when the verdict is `drift`, else 0.
   */
  uint64_t drift;
  /**
   * Map: most entries.
   */
  uint64_t map_capacity;
  /**
   * Map: entries now.
   */
  uint64_t map_entries;
  /**
   * Map: entries evicted so far.
   */
  uint64_t map_evictions;
  /**
   * Map: bytes it takes (fixed at construction).
   */
  uint64_t map_bytes;
  /**
   * 1 when predictions are tracked (`predict_within_ms` > 0); the six below are 0 otherwise.
   */
  uint64_t predictions;
  /**
   * Hashes predicted (a hash already pending counts once).
   */
  uint64_t predicted;
  /**
   * Predicted hashes the endpoint had already published when predicted.
   */
  uint64_t predicted_already_stored;
  /**
   * Predicted hashes stored within the deadline.
   */
  uint64_t predicted_stored_within;
  /**
   * Predicted hashes not stored within the deadline.
   */
  uint64_t predicted_expired;
  /**
   * Predictions pushed out of a full tracker before they resolved.
   */
  uint64_t predicted_dropped;
  /**
   * Predictions still pending.
   */
  uint64_t predicted_pending;
  /**
   * Blocks chained on a mismatched block whose full digest the wire does not give: the
   * mismatch's consequences, not re-derivable and not counted in `unverifiable`.
   */
  uint64_t consequences;
  /**
   * The verdict: `KVEXACT_DRIFT_VERDICT_CLEAN`, `_DRIFT` or `_UNVERIFIABLE`.
   */
  uint64_t verdict;
} kvexact_drift_counters;

/**
 * One Prometheus label, `(ptr, len)` UTF-8 strings. `name` matches `[a-zA-Z_][a-zA-Z0-9_]*`,
 * does not start with `__`, and is none of the labels the exposition sets itself
 * (`release`, `kind`, `reason`, `outcome`); `value` is any UTF-8 (escaped as the text format
 * requires).
 */
typedef struct {
  /**
   * Label name.
   */
  const uint8_t *name;
  /**
   * Length of `name`.
   */
  size_t name_len;
  /**
   * Label value.
   */
  const uint8_t *value;
  /**
   * Length of `value`.
   */
  size_t value_len;
} kvexact_drift_label;

/**
 * One verifier in a Prometheus exposition, with the labels that tell its series apart
 * (e.g. `endpoint="10.0.0.7:8000"`, `rule="…"`).
 */
typedef struct {
  /**
   * The verifier (borrowed for the call).
   */
  const kvexact_drift_verifier *verifier;
  /**
   * Its labels (`n_labels` entries; NULL with 0 for none).
   */
  const kvexact_drift_label *labels;
  /**
   * Number of `labels`.
   */
  size_t n_labels;
} kvexact_drift_series;

/**
 * A full-attention KV-cache group (a hit is a chained prefix of cached blocks).
 */
#define KVEXACT_GROUP_FULL_ATTENTION 0

/**
 * A sliding-window KV-cache group (`kvexact_index_group.sliding_window` tokens); only
 * releases whose catalog rule states such groups accept it.
 */
#define KVEXACT_GROUP_SLIDING_WINDOW 1

/**
 * Applied: the rank is in step (or still catching up on a replay).
 */
#define KVEXACT_APPLIED 0

/**
 * Already applied (a replay overlapping the live stream): ignored.
 */
#define KVEXACT_APPLIED_DUPLICATE 1

/**
 * A gap before this batch: ask the engine's replay endpoint for every batch from
 * `kvexact_index_applied.replay_from` on and feed them; the rank is `unknown` until they are
 * in (or `kvexact_index_replay_failed`). Once per gap: later batches past the same gap while
 * its replay is pending are `KVEXACT_APPLIED_REPLAY_PENDING` (ask nothing more).
 */
#define KVEXACT_APPLIED_REPLAY_FROM 2

/**
 * Batches were lost and cannot be replayed: the rank is `unknown` until the engine's cache
 * is known again (`AllBlocksCleared`, a restart).
 */
#define KVEXACT_APPLIED_LOST 3

/**
 * A later batch past a gap whose replay is pending (`replay_from` says from where): dropped,
 * as the replay brings it; ask for nothing more. One gap gives one
 * `KVEXACT_APPLIED_REPLAY_FROM` — the first batch past it — and every later batch until
 * the replay's batches are in gives `KVEXACT_APPLIED_REPLAY_PENDING`. If the replay cannot
 * be had, call `kvexact_index_replay_failed`: the rank is then `unknown` until its cache is
 * known again, and later batches are `KVEXACT_APPLIED_LOST`.
 */
#define KVEXACT_APPLIED_REPLAY_PENDING 4

/**
 * The engine will report `tokens` cached tokens.
 */
#define KVEXACT_PREDICTION_CACHED 0

/**
 * The index cannot know: see `unknown_reason`. Never route on it as a hit.
 */
#define KVEXACT_PREDICTION_UNKNOWN 1

/**
 * Not unknown (the prediction is `KVEXACT_PREDICTION_CACHED`).
 */
#define KVEXACT_UNKNOWN_NONE 0

/**
 * The stream has not shown a point where the engine's cache was known (joined midway).
 */
#define KVEXACT_UNKNOWN_UNSYNCED 1

/**
 * Batches were lost; a replay was asked for and has not caught up yet.
 */
#define KVEXACT_UNKNOWN_REPLAYING 2

/**
 * Batches were lost and cannot be replayed (no replay buffer, or a rejected batch).
 */
#define KVEXACT_UNKNOWN_OUT_OF_STEP 3

/**
 * The stream stored more than the engine's pool holds: removals were lost.
 */
#define KVEXACT_UNKNOWN_OVERFLOW 4

/**
 * Adapters are loaded and the release's events do not tell adapter blocks from base blocks
 * (the catalog's `loraInHashes: false`, e.g. SGLang 0.5.19): explained by the catalog.
 */
#define KVEXACT_UNKNOWN_LORA_NOT_IN_EVENTS 5

/**
 * The caller said the rank's stream was lost (`kvexact_index_mark_lost`, or kvexact's
 * subscriber after a dropped queue or a dead connection): unknown until the next batch's
 * sequence number shows what was lost.
 */
#define KVEXACT_UNKNOWN_STREAM_LOST 6

/**
 * Predicted = reported.
 */
#define KVEXACT_OBSERVATION_EXACT 0

/**
 * The index predicted more than the engine had.
 */
#define KVEXACT_OBSERVATION_OVER 1

/**
 * The index predicted less than the engine had.
 */
#define KVEXACT_OBSERVATION_UNDER 2

/**
 * The prediction was unknown: nothing to judge.
 */
#define KVEXACT_OBSERVATION_UNJUDGED 3

/**
 * Every batch since a point where the engine's cache was known has been applied.
 */
#define KVEXACT_STREAM_IN_STEP 0

/**
 * No point where the engine's cache was known has been seen yet.
 */
#define KVEXACT_STREAM_UNSYNCED 1

/**
 * Batches were lost and have been asked for again (replay).
 */
#define KVEXACT_STREAM_REPLAYING 2

/**
 * Batches were lost and cannot be replayed (or batch 2^64 - 1 was applied: no later batch
 * can follow it in order).
 */
#define KVEXACT_STREAM_OUT_OF_STEP 3

/**
 * The caller marked the stream lost (`kvexact_index_mark_lost`): unknown until the next
 * batch's sequence number shows what was lost.
 */
#define KVEXACT_STREAM_LOST 4

/**
 * `kvexact_event.kind` of a stored-blocks event: vLLM/SGLang `BlockStored` (one event for the
 * whole chain) or one block of a TensorRT-LLM `stored` event (one event per block).
 */
#define KVEXACT_EVENT_STORED 0

/**
 * `kvexact_event.kind` of a `BlockRemoved` event (TensorRT-LLM `removed`).
 */
#define KVEXACT_EVENT_REMOVED 1

/**
 * `kvexact_event.kind` of an `AllBlocksCleared` event (vLLM, SGLang).
 */
#define KVEXACT_EVENT_ALL_CLEARED 2

/**
 * `kvexact_event.kind` of a TensorRT-LLM `created` event (an addition to §6.6): a fresh cache
 * pool for one attention window, at the head of a new stream. No hashes. A caller that keeps
 * per-endpoint state may treat it as "forget every block of this endpoint"; others skip it.
 */
#define KVEXACT_EVENT_CREATED 3

/**
 * `kvexact_event.kind` of a TensorRT-LLM `updated` event (an addition to §6.6): the block in
 * `hashes[0]` moved between cache levels (GPU ↔ host) or was reprioritised; it is still
 * cached and reusable, so a prefix index may skip it.
 */
#define KVEXACT_EVENT_UPDATED 4

/**
 * Success.
 */
#define KVEXACT_OK 0

/**
 * The request is malformed (bad JSON, empty prompt, wrong field types). Same value as the
 * gateway's `LLB_KV_TOK_ERR_REQUEST`.
 */
#define KVEXACT_ERR_REQUEST (-1)

/**
 * A strict-rule refusal; the reason is the `kvexact_refusal` out-value. Same value as the
 * gateway's `LLB_KV_TOK_ERR_UNSUPPORTED`.
 */
#define KVEXACT_ERR_UNSUPPORTED (-2)

/**
 * The profile cannot serve this request (missing renderer/surface, contract mismatch). Same
 * value as the gateway's `LLB_KV_TOK_ERR_PROFILE`.
 */
#define KVEXACT_ERR_PROFILE (-3)

/**
 * The chat template failed to render. Same value as `LLB_KV_TOK_ERR_RENDERER`.
 */
#define KVEXACT_ERR_RENDERER (-4)

/**
 * The tokenizer failed or is missing. Same value as `LLB_KV_TOK_ERR_TOKENIZER`.
 */
#define KVEXACT_ERR_TOKENIZER (-5)

/**
 * Any other encode-path failure. Same value as `LLB_KV_TOK_ERR_UNKNOWN`.
 */
#define KVEXACT_ERR_UNKNOWN (-6)

/**
 * Reserved for the caller's readiness fence; libkvexact never returns it. Same value as
 * `LLB_KV_TOK_ERR_NOT_READY`.
 */
#define KVEXACT_ERR_NOT_READY (-7)

/**
 * A panic was caught at the ABI boundary (a bug in libkvexact; the call had no effect).
 */
#define KVEXACT_ERR_PANIC (-100)

/**
 * A required pointer argument was NULL.
 */
#define KVEXACT_ERR_NULL_ARGUMENT (-101)

/**
 * An argument is out of range (unknown enum value, block size 0, invalid UTF-8 …).
 */
#define KVEXACT_ERR_INVALID_ARGUMENT (-102)

/**
 * The caller's output buffer is too small; the needed length was written to the length
 * out-parameter and nothing else was written.
 */
#define KVEXACT_ERR_BUFFER_TOO_SMALL (-103)

/**
 * The engine defines no hash for what was asked (e.g. a trailing partial block under vLLM,
 * which never hashes partial blocks). libkvexact refuses rather than invent a value.
 */
#define KVEXACT_ERR_HASH_UNDEFINED (-104)

/**
 * A result does not fit the return type (e.g. more than `INT32_MAX` blocks).
 */
#define KVEXACT_ERR_OVERFLOW (-105)

/**
 * vLLM's NONE_HASH (the root of every block-hash chain) is random in the engine for this
 * configuration, so no hash kvexact computes could match: `PYTHONHASHSEED` unset with an
 * xxhash algorithm, or with any algorithm under a release of NONE_HASH rule A (vLLM
 * 0.17–0.28). Set `PYTHONHASHSEED` on the engine and pass it as the hasher's seed. Returned
 * by the hasher constructors (`kvexact_hasher_new*`), error code `"none_hash_unreproducible"`.
 */
#define KVEXACT_ERR_NONE_HASH_UNREPRODUCIBLE (-106)

/**
 * A vLLM pickle-serialised block (`KVEXACT_SHA256_PICKLE`, `KVEXACT_XXHASH_PICKLE`) does not
 * fit one CPython pickle frame (65,535 bytes: a very large block size), whose splitting rules
 * kvexact does not reproduce. Returned by the hashing calls, which then write nothing.
 */
#define KVEXACT_ERR_PICKLE_TOO_LARGE (-107)

/**
 * A hashing option the engine release's rules do not have (e.g. look-ahead hashing before
 * vLLM 0.33); error code `"hash_rule_unsupported"`.
 */
#define KVEXACT_ERR_HASH_RULE_UNSUPPORTED (-108)

/**
 * Loading or checking the registry failed; the error object names the code and the file.
 */
#define KVEXACT_ERR_REGISTRY (-110)

/**
 * No profile matches the model name or id; also an engine contract or release id that the
 * contract catalog does not have (error code `"UNKNOWN_NAME"`).
 */
#define KVEXACT_ERR_NOT_FOUND (-111)

/**
 * An event payload does not follow the decoder's wire schema (`schema_mismatch`).
 */
#define KVEXACT_ERR_EVENT_SCHEMA (-120)

/**
 * An event payload is not decodable at all (`decode_error`).
 */
#define KVEXACT_ERR_EVENT_DECODE (-121)

/**
 * A hash challenge could not be armed (the readiness reason is `challenge_failed`).
 */
#define KVEXACT_ERR_CHALLENGE (-130)

/**
 * The engine version is not one the contract catalog has a release for (error code
 * `"UNKNOWN_ENGINE_VERSION"`, its message naming the nearest known releases). libkvexact
 * never falls back to a family default or to the newest rules: the caller must not hash or
 * decode for that engine until kvexact knows its release.
 */
#define KVEXACT_ERR_UNKNOWN_ENGINE_VERSION (-140)

/**
 * The engine version is a known release, but of another contract than the one named (error
 * code `"CONTRACT_MISMATCH"`): the rule's contract id does not fit the engine it points at.
 */
#define KVEXACT_ERR_CONTRACT_MISMATCH (-141)

/**
 * A refusal code asked to be lifted (`kvexact_encoder_options.lifted`) where the engine
 * release's contract does not define the engine's behaviour for it (error code
 * `"LIFT_NOT_ALLOWED"`, its message naming the code, the release and why): refused when the
 * encoder is built, never at request time.
 */
#define KVEXACT_ERR_LIFT_NOT_ALLOWED (-142)

/**
 * A deployment option the engine release cannot be keyed under (error code
 * `"DEPLOYMENT_UNSUPPORTED"`, its message naming the option and why: no vectors prove the
 * release's keys or hits under it, or the release has no such option): refused when the
 * deployment is resolved (`kvexact_deployment_new`), never at request time.
 */
#define KVEXACT_ERR_DEPLOYMENT_UNSUPPORTED (-143)

/**
 * The live engine shows a deployment option otherwise than declared (error code
 * `"DEPLOYMENT_MISMATCH"`, its path the option — `blockSize`, `speculative`,
 * `loraAdapters` — and its message every mismatch): `kvexact_deployment_check`. The
 * endpoint is not keyed as declared: never route it on the declared keys.
 */
#define KVEXACT_ERR_DEPLOYMENT_MISMATCH (-144)

/**
 * The engine release has no prefix-hit rule in the contract catalog, or the index's KV-cache
 * groups are outside what its rule states (error code `"PREFIX_HIT_RULE"`): the prefix
 * index refuses rather than guess the engine's hit rule (`kvexact_index_new`).
 */
#define KVEXACT_ERR_PREFIX_HIT_RULE (-160)

/**
 * No endpoint with this id in the prefix index (never added, or removed); error code
 * `"UNKNOWN_ENDPOINT"`.
 */
#define KVEXACT_ERR_UNKNOWN_ENDPOINT (-161)

/**
 * An endpoint of this name is already in the prefix index (`kvexact_index_add_endpoint`);
 * error code `"DUPLICATE_ENDPOINT"`.
 */
#define KVEXACT_ERR_DUPLICATE_ENDPOINT (-162)

/**
 * No refusal (the call succeeded, or failed for another reason). Name: `"none"`.
 */
#define KVEXACT_REFUSAL_NONE 0

/**
 * The body, `messages` or a message is not the expected shape (docs/contracts/registry.md §9.2 order 0). Name: `"unparseable"`.
 */
#define KVEXACT_REFUSAL_UNPARSEABLE 1

/**
 * `tools` or `tool_choice` present. Name: `"tools"`.
 */
#define KVEXACT_REFUSAL_TOOLS 2

/**
 * `cache_salt` present. Name: `"cache_salt"`.
 */
#define KVEXACT_REFUSAL_CACHE_SALT 3

/**
 * `prompt_embeds` present. Name: `"prompt_embeds"`.
 */
#define KVEXACT_REFUSAL_PROMPT_EMBEDS 4

/**
 * `chat_template_kwargs` present. Name: `"template_kwargs"`.
 */
#define KVEXACT_REFUSAL_TEMPLATE_KWARGS 5

/**
 * `add_generation_prompt` differs from the profile's value. Name: `"add_generation_prompt"`.
 */
#define KVEXACT_REFUSAL_ADD_GENERATION_PROMPT 6

/**
 * `continue_final_message` differs from false. Name: `"continue_final_message"`.
 */
#define KVEXACT_REFUSAL_CONTINUE_FINAL_MESSAGE 7

/**
 * `add_special_tokens` differs from false. Name: `"add_special_tokens"`.
 */
#define KVEXACT_REFUSAL_ADD_SPECIAL_TOKENS 8

/**
 * `documents` present. Name: `"documents"`.
 */
#define KVEXACT_REFUSAL_DOCUMENTS 9

/**
 * `reasoning_effort` present. Name: `"reasoning_effort"`.
 */
#define KVEXACT_REFUSAL_REASONING_EFFORT 10

/**
 * `chat_template` present. Name: `"chat_template"`.
 */
#define KVEXACT_REFUSAL_CHAT_TEMPLATE 11

/**
 * `truncate_prompt_tokens` present. Name: `"truncate_prompt_tokens"`.
 */
#define KVEXACT_REFUSAL_TRUNCATE_PROMPT_TOKENS 12

/**
 * `prompt_token_ids` or `prompt_token_ids_b64` present. Name: `"prompt_token_ids"`.
 */
#define KVEXACT_REFUSAL_PROMPT_TOKEN_IDS 13

/**
 * A content part whose `type` is not `text`. Name: `"multimodal"`.
 */
#define KVEXACT_REFUSAL_MULTIMODAL 14

/**
 * A content array with more than one `text` part. Name: `"multi_text_part"`.
 */
#define KVEXACT_REFUSAL_MULTI_TEXT_PART 15

/**
 * The last message's role is `assistant`. Name: `"trailing_assistant"`.
 */
#define KVEXACT_REFUSAL_TRAILING_ASSISTANT 16

/**
 * A message with role `developer`. Name: `"developer_role"`.
 */
#define KVEXACT_REFUSAL_DEVELOPER_ROLE 17

/**
 * A message with non-null `tools`. Name: `"message_tools"`.
 */
#define KVEXACT_REFUSAL_MESSAGE_TOOLS 18

/**
 * A message with another non-null key the template mentions. Name: `"message_field"`.
 */
#define KVEXACT_REFUSAL_MESSAGE_FIELD 19

/**
 * Null/absent content on a template that tests content with `is none`/`is defined`. Name: `"null_content"`.
 */
#define KVEXACT_REFUSAL_NULL_CONTENT 20

/**
 * The template raised, refused the messages, or rendered empty. Name: `"template_raised"`.
 */
#define KVEXACT_REFUSAL_TEMPLATE_RAISED 21

/**
 * The render depends on the content shape engines may use (string vs list). Name: `"content_shape"`.
 */
#define KVEXACT_REFUSAL_CONTENT_SHAPE 22

/**
 * A NUL byte in the input text or the rendered prompt. Name: `"nul_byte"`.
 */
#define KVEXACT_REFUSAL_NUL_BYTE 23

/**
 * Over one of the encoder's input bounds (body bytes, messages, rendered bytes, one
 * pre-token's bytes, text on the tokenizer's fallback path), checked before the work it
 * bounds. Name: `"input_too_large"`; the error's message names the bound
 * (`"input_too_large: N bytes, over max_body_bytes = M"`). Never liftable.
 */
#define KVEXACT_REFUSAL_INPUT_TOO_LARGE 24

/**
 * The text to tokenize holds an added token the engine's tokenizer loader may or may not keep:
 * the profile pins no `tokenizer_config.json` and the engine release's loader takes its added
 * tokens from it (docs/contracts/registry.md §9.2). Name: `"ambiguous_added_token"`; the
 * error's message names the token and the remedy (pin `tokenizerConfigArtifact`). Never
 * liftable: lifting it would give ids kvexact cannot know.
 */
#define KVEXACT_REFUSAL_AMBIGUOUS_ADDED_TOKEN 25

/* ==== Part C. Enumeration values ==================================================== */

/**
 * vLLM.
 */
#define KVEXACT_VLLM 0

/**
 * SGLang.
 */
#define KVEXACT_SGLANG 1

/**
 * TensorRT-LLM.
 */
#define KVEXACT_TRTLLM 2

/**
 * The rule serves chat and completions (0).
 */
#define KVEXACT_API_BOTH 0

/**
 * Completions only (1).
 */
#define KVEXACT_API_COMPLETIONS 1

/**
 * Chat only (2).
 */
#define KVEXACT_API_CHAT 2

/**
 * vLLM `sha256_cbor` (the contract's default): SHA-256 over canonical CBOR
 * `[parent, [ids], extra]`; u64 form = last 8 digest bytes, big-endian.
 */
#define KVEXACT_SHA256_CBOR 0

/**
 * vLLM `xxhash_cbor`: XXH3-128 over the same CBOR; u64 form = last 8 digest bytes, big-endian.
 */
#define KVEXACT_XXHASH_CBOR 1

/**
 * SGLang page hash: SHA-256(parent32 ‖ ids as u32 LE); u64 form = first 8 bytes, big-endian.
 */
#define KVEXACT_SHA256_SGLANG 2

/**
 * TensorRT-LLM V1 block key hash (64-bit, parent-chained; partial tail blocks defined).
 */
#define KVEXACT_BLOCKHASH_TRTLLM 3

/**
 * vLLM `sha256` (pickle serialisation); u64 form = last 8 digest bytes, big-endian.
 */
#define KVEXACT_SHA256_PICKLE 4

/**
 * vLLM `xxhash` (pickle serialisation); u64 form = last 8 digest bytes, big-endian.
 */
#define KVEXACT_XXHASH_PICKLE 5

/**
 * Only for `kvexact_hasher_new_for_contract`: the contract's default algorithm (the first of
 * its gateway `hashAlgorithms`: `sha256_cbor` for vLLM; SGLang's and TensorRT-LLM's only
 * one). Not the engine's own default (vLLM's is `sha256`, the release's `default_algorithm`
 * in `kvexact_contracts_json`). `kvexact_hasher_new` refuses it.
 */
#define KVEXACT_HASH_ALGO_CONTRACT_DEFAULT 4294967295

/* ==== Part D. Functions ============================================================= */

#ifdef __cplusplus
extern "C" {
#endif // __cplusplus

/* ==== 1. Library version ============================================================ */

/**
 * The library version, a static NUL-terminated string such as `"0.1.0"`.
 *
 * Ownership: the string is static; never free it.
 */
const char *kvexact_version(void);

/* ==== 2. Registry and profiles ====================================================== */

/**
 * Loads the registry at `root` (a path as bytes, no NUL needed) as generation
 * `generation_number` (assigned by the caller, process-monotonic). All or nothing: trust
 * policy, strict parsing, artifact digests, template compilation and tokenizer loading must
 * all pass, else nothing is returned and the caller keeps serving its previous handle.
 *
 * Files checked at load: every `*.yaml` of the root (a profile; one that is a symlink,
 * directory, FIFO or device is refused with `SYMLINK` / `NOT_REGULAR_FILE` naming it — the
 * gateway's own loader skips such an entry instead), each profile's pinned tokenizer and
 * template artifacts (read and digest-verified), and the *type* of every staged
 * `manifests/<id>.yaml` and `probefixtures/<id>/[sglang/|trtllm/]*.json` (must be regular
 * files). Their *contents* are read later, by `kvexact_manifest_load` and
 * `kvexact_fixtures_load` (`kvexact registry verify` reads them at load).
 *
 * `opts` may be NULL: trust uid 0 and this process's effective uid, default size caps.
 *
 * Returns `KVEXACT_OK` and a new reference in `*out`; or `KVEXACT_ERR_NULL_ARGUMENT`,
 * `KVEXACT_ERR_INVALID_ARGUMENT`, or `KVEXACT_ERR_REGISTRY` with an error object whose code
 * is the registry's (e.g. `"INSECURE_MODE"`, `"TOKENIZER_SHA_MISMATCH"`) and whose path names
 * the offending file relative to `root`.
 *
 * Ownership: the caller owns `*out` (free with `kvexact_registry_free`) and `*err` (free with
 * `kvexact_error_free`); `root` and `opts` are only read during the call.
 *
 * # Safety
 * `root` is valid for `root_len` bytes; `opts` is NULL or valid; `out` and `err` are NULL or
 * valid for one write.
 */
kvexact_status kvexact_registry_load(const uint8_t *root,
                                     size_t root_len,
                                     const kvexact_registry_opts *opts,
                                     uint64_t generation_number,
                                     kvexact_registry **out,
                                     kvexact_error **err);

/**
 * Takes another reference to `registry` and returns it (NULL when `registry` is NULL).
 *
 * Ownership: the caller owns the returned reference (free with `kvexact_registry_free`).
 *
 * # Safety
 * `registry` is NULL or a live registry handle.
 */
kvexact_registry *kvexact_registry_retain(kvexact_registry *registry);

/**
 * Releases one reference to a registry generation. NULL is accepted and ignored. Profiles and
 * encoders obtained from it stay valid (they hold their own references).
 *
 * # Safety
 * `registry` is NULL or a reference not released before.
 */
void kvexact_registry_free(kvexact_registry *registry);

/**
 * The generation number given to `kvexact_registry_load` (0 when `registry` is NULL).
 *
 * # Safety
 * `registry` is NULL or a live registry handle.
 */
uint64_t kvexact_registry_generation(const kvexact_registry *registry);

/**
 * Writes the generation's `setDigest` (docs/contracts/registry.md §7) as 64 lowercase hex characters and
 * a NUL into `out_hex`, which must hold 65 bytes. Returns `KVEXACT_OK` or
 * `KVEXACT_ERR_NULL_ARGUMENT`; `out_hex` is written only on success.
 *
 * # Safety
 * `registry` is NULL or a live registry handle; `out_hex` is NULL or valid for 65 bytes.
 */
kvexact_status kvexact_registry_set_digest(const kvexact_registry *registry,
                                           char *out_hex);

/**
 * Looks up the profile serving a request's `model` name (compared by slug: the base model or
 * an allowed alias).
 *
 * Returns `KVEXACT_OK` and a new profile reference in `*out`; `KVEXACT_ERR_NOT_FOUND` when no
 * profile serves the model; `KVEXACT_ERR_NULL_ARGUMENT` / `KVEXACT_ERR_INVALID_ARGUMENT`
 * (`model` not UTF-8).
 *
 * Improvement on §6.2 (which calls the result a borrowed view): `*out` is an owned reference
 * that keeps its generation alive, so it stays valid whatever order the caller (e.g. Go
 * finalizers) releases handles in. Free it with `kvexact_profile_free`.
 *
 * # Safety
 * `registry` is NULL or a live registry handle; `model` is valid for `n` bytes; `out` is NULL
 * or valid for one write.
 */
kvexact_status kvexact_profile_by_model(const kvexact_registry *registry,
                                        const uint8_t *model,
                                        size_t n,
                                        const kvexact_profile **out);

/**
 * Looks up a profile by its `profileId`. Returns and owns as `kvexact_profile_by_model`.
 *
 * # Safety
 * As `kvexact_profile_by_model`.
 */
kvexact_status kvexact_profile_by_id(const kvexact_registry *registry,
                                     const uint8_t *id,
                                     size_t n,
                                     const kvexact_profile **out);

/**
 * The profile's `profileId` (NUL-terminated), or `""` when `profile` is NULL.
 *
 * Ownership: the string belongs to `profile` and lives as long as it.
 *
 * # Safety
 * `profile` is NULL or a live profile handle.
 */
const char *kvexact_profile_id(const kvexact_profile *profile);

/**
 * The number of the generation the profile belongs to (0 when `profile` is NULL).
 *
 * # Safety
 * `profile` is NULL or a live profile handle.
 */
uint64_t kvexact_profile_generation(const kvexact_profile *profile);

/**
 * Releases one profile reference. NULL is accepted and ignored.
 *
 * # Safety
 * `profile` is NULL or a reference not released before.
 */
void kvexact_profile_free(const kvexact_profile *profile);

/**
 * Writes the generation's discovery document (docs/contracts/registry.md §7, what
 * `GET /config/ai/model-profiles` serves) as compact UTF-8 JSON, no NUL:
 * `{"registryGeneration":…,"setDigest":"…","profiles":[{"profileId":…,"gen":…,"baseModel":…,
 * "aliasPolicy":…,"allowedAliases":[…],"supportedApis":[…],…}]}`, profiles sorted by id; no
 * locator, path or root appears in it.
 *
 * Size query: whenever the call returns `KVEXACT_OK` or `KVEXACT_ERR_BUFFER_TOO_SMALL`,
 * `*len` holds the document's length. When `cap` is smaller, returns
 * `KVEXACT_ERR_BUFFER_TOO_SMALL` and writes nothing else; `buf` may be NULL with `cap` 0 to
 * ask for the size. Otherwise copies the document into `buf` and returns `KVEXACT_OK`.
 * `KVEXACT_ERR_NULL_ARGUMENT` for a NULL `registry` or `len` (or a NULL `buf` with `cap` > 0).
 * The document is the same for every call on one handle.
 *
 * Ownership: `buf` stays the caller's; nothing is allocated for the caller.
 *
 * # Safety
 * `registry` is NULL or a live registry handle; `buf` is NULL or valid for `cap` writes; `len`
 * is NULL or valid for one write.
 */
kvexact_status kvexact_registry_discovery_json(const kvexact_registry *registry,
                                               uint8_t *buf,
                                               size_t cap,
                                               size_t *len);

/**
 * Drift check (docs/contracts/registry.md §7) of one profile: re-reads its document and every artifact
 * it was published with beneath the generation's root, under the same trust policy, and
 * compares each sha256 with the load-time receipt.
 *
 * Returns `KVEXACT_OK` when nothing changed; `KVEXACT_ERR_REGISTRY` with an error object whose
 * code is `"PROFILE_DRIFT"` (bytes changed) or a trust-policy code (`"INSECURE_MODE"`,
 * `"MISSING"`, `"SYMLINK"` …) and whose path names the file relative to the root (e.g.
 * `"artifacts/sha256/<hex>"`); `KVEXACT_ERR_NOT_FOUND` when the generation has no profile
 * `profile_id` (improvement on §6.2: the same status as `kvexact_profile_by_id`, not a
 * registry failure); `KVEXACT_ERR_NULL_ARGUMENT`, `KVEXACT_ERR_INVALID_ARGUMENT` (`profile_id`
 * not UTF-8).
 *
 * This reads files (a tokenizer may be megabytes): run it from the control plane, not per
 * request. The generation itself never changes; drift only tells the caller to reload.
 *
 * Ownership: the caller owns `*err` (free with `kvexact_error_free`); `profile_id` is only
 * read during the call.
 *
 * # Safety
 * `registry` is NULL or a live registry handle; `profile_id` is valid for `n` bytes; `err` is
 * NULL or valid for one write.
 */
kvexact_status kvexact_registry_verify_disk(const kvexact_registry *registry,
                                            const uint8_t *profile_id,
                                            size_t n,
                                            kvexact_error **err);

/**
 * Writes the profile document as compact UTF-8 JSON, no NUL: the parsed and validated
 * `<profile-id>.yaml` (docs/contracts/registry.md §2) serialized again, with the same camelCase keys
 * (`profileId`, `baseModel`, `engineQuirks`, `renderPolicy` …) and optional keys the document
 * leaves out omitted. It is not the file's bytes (comments, key order and YAML formatting
 * are gone) and adds nothing resolved at load (no artifact bytes, paths or BOS id).
 *
 * Size query and statuses as `kvexact_registry_discovery_json` (NULL `profile` →
 * `KVEXACT_ERR_NULL_ARGUMENT`).
 *
 * # Safety
 * `profile` is NULL or a live profile handle; `buf` is NULL or valid for `cap` writes; `len`
 * is NULL or valid for one write.
 */
kvexact_status kvexact_profile_json(const kvexact_profile *profile,
                                    uint8_t *buf,
                                    size_t cap,
                                    size_t *len);

/**
 * Rule admission (docs/contracts/registry.md §9.4, §2 `modelType`): may a strict rule that serves
 * `model` (the rule's `model_name`, `model_len` bytes of UTF-8, no NUL needed) through
 * `api_mode` (`KVEXACT_API_BOTH` 0, `KVEXACT_API_COMPLETIONS` 1, `KVEXACT_API_CHAT` 2) on the
 * engine contract `contract_id` (NUL-terminated, e.g. `"vllm-kv-map-v2"`,
 * `"sglang-kv-rank-v1"`, `"trtllm-kv-http-v1"`) bind this profile?
 *
 * Returns `KVEXACT_OK`, or `KVEXACT_ERR_PROFILE` with an error object whose code is the rule
 * that refused and whose message starts with it (`"<rule>: <detail>"`); first hit wins:
 * `"model_name_empty"`, `"model_not_served"` (not `baseModel` nor, with `aliasPolicy: list`,
 * an allowed alias; compared by slug like `kvexact_profile_by_model`),
 * `"contracts_unavailable"`, `"unknown_contract"`, `"contract_no_kv_plane"` (llama.cpp),
 * `"surface_not_supported"` (a served surface not in `supportedApis`), `"renderer_missing"`
 * (chat without a compilable template), `"engine_renderer"` (chat for `gpt_oss` on vLLM or
 * TensorRT-LLM, `mistral3` on vLLM or SGLang), `"quirk_incompatible"`,
 * `"tokenizer_unloadable"`, `"encoder_unbuildable"`. Also `KVEXACT_ERR_NULL_ARGUMENT` and
 * `KVEXACT_ERR_INVALID_ARGUMENT` (`api_mode` out of range, `model` or `contract_id` not
 * UTF-8).
 *
 * Improvement on §6.2: the refusal status is the gateway's `KVEXACT_ERR_PROFILE` (-3) for
 * every rule, and the rule is the machine-readable error code instead of being only inside
 * the message text. Rule-level checks that need the rule itself (`kvExactMode`, P/D, the vLLM
 * none-hash seed) stay with the caller.
 *
 * Builds the encoder `kvexact_encoder_new` would build, then drops it: milliseconds to a
 * second; call it at rule create/replace, not per request.
 *
 * Ownership: the caller owns `*err` (free with `kvexact_error_free`); `model` and
 * `contract_id` are only read during the call.
 *
 * # Safety
 * `profile` is NULL or a live profile handle; `model` is valid for `model_len` bytes;
 * `contract_id` is NULL or NUL-terminated; `err` is NULL or valid for one write.
 */
kvexact_status kvexact_profile_admit(const kvexact_profile *profile,
                                     const uint8_t *model,
                                     size_t model_len,
                                     const char *contract_id,
                                     kvexact_api_mode api_mode,
                                     kvexact_error **err);

/* ==== 3. Encoder ==================================================================== */

/**
 * Builds the encoder of `profile` for the engine contract `contract_id` (NUL-terminated; its
 * first `-` segment names the engine: `vllm`, `sglang`, `trtllm`). Compiles the template; the
 * tokenizer parsed when the registry was loaded is shared, not parsed again (milliseconds:
 * still do it at publish time, not per request). The defaults of
 * `kvexact_encoder_new_with_options` (NULL options): strict rules, a segment cache of
 * `KVEXACT_SEGMENT_CACHE_DEFAULT_BYTES`.
 *
 * Returns `KVEXACT_OK` and a new reference in `*out`, or a negative status with an error
 * object: `KVEXACT_ERR_PROFILE` (unknown contract, quirk not valid for it),
 * `KVEXACT_ERR_RENDERER` (template does not compile), `KVEXACT_ERR_TOKENIZER` (tokenizer does
 * not load), `KVEXACT_ERR_NULL_ARGUMENT`, `KVEXACT_ERR_INVALID_ARGUMENT`.
 *
 * Ownership: the caller owns `*out` (free with `kvexact_encoder_free`) and `*err`.
 *
 * # Safety
 * `profile` is NULL or a live profile; `contract_id` is NULL or a NUL-terminated string;
 * `out` and `err` are NULL or valid for one write.
 */
kvexact_status kvexact_encoder_new(const kvexact_profile *profile,
                                   const char *contract_id,
                                   kvexact_encoder **out,
                                   kvexact_error **err);

/**
 * `kvexact_encoder_new` with options (`options` NULL: its defaults): the engine release
 * (`engine_version`), the refusal codes to lift (`lifted`), the segment cache (capacity, or
 * none). See `kvexact_encoder_options`.
 *
 * The segment cache belongs to this encoder handle (and to every reference to it: share one
 * encoder between all worker threads); it is sharded (16 locks, no global lock) and bounded
 * by its capacity. Its entries are keyed by the parsed tokenizer (which fixes the vocabulary,
 * merges, normalizer, pre-tokenizer and added-token set) and the exact segment bytes; a
 * segment's ids depend on nothing else (the engine contract only changes what is rendered,
 * and the special tokens added around the segments). Counters: `kvexact_encoder_cache_stats`.
 *
 * Returns `KVEXACT_OK` and a new reference in `*out`; otherwise the statuses of
 * `kvexact_encoder_new`, and (with an error object, code in parentheses)
 * `KVEXACT_ERR_LIFT_NOT_ALLOWED` (`"LIFT_NOT_ALLOWED"`: a lifted code the release's
 * contract does not define, or lifts without one release; the message names the code, the
 * release and why), `KVEXACT_ERR_UNKNOWN_ENGINE_VERSION`, `KVEXACT_ERR_CONTRACT_MISMATCH`,
 * `KVEXACT_ERR_NOT_FOUND` (`"UNKNOWN_NAME"`), `KVEXACT_ERR_INVALID_ARGUMENT` (a bad
 * `struct_size`, unknown flag or lift bit, a capacity above the bound, `"CONFIG"`: a
 * contract id spanning releases that differ). Nothing is written to `*out` on failure.
 *
 * Ownership: the caller owns `*out` (free with `kvexact_encoder_free`) and `*err`;
 * `options` and the strings are only read during the call.
 *
 * # Safety
 * `profile` is NULL or a live profile; `contract_id` is NULL or NUL-terminated; `options` is
 * NULL or valid for its `struct_size` bytes with `engine_version` NULL or NUL-terminated;
 * `out` and `err` are NULL or valid for one write.
 */
kvexact_status kvexact_encoder_new_with_options(const kvexact_profile *profile,
                                                const char *contract_id,
                                                const kvexact_encoder_options *options,
                                                kvexact_encoder **out,
                                                kvexact_error **err);

/**
 * Takes another reference to `encoder` and returns it (NULL when `encoder` is NULL).
 *
 * # Safety
 * `encoder` is NULL or a live encoder.
 */
const kvexact_encoder *kvexact_encoder_retain(const kvexact_encoder *encoder);

/**
 * Releases one encoder reference. NULL is accepted and ignored.
 *
 * # Safety
 * `encoder` is NULL or a reference not released before.
 */
void kvexact_encoder_free(kvexact_encoder *encoder);

/**
 * Encodes a text completions prompt (`text`, `len` bytes of UTF-8, no NUL needed) into the ids
 * the engine caches, using the contract's completions encoding (tokenizer with special tokens;
 * SGLang `completionsBos`: BOS + ids without specials, the BOS counting against `max_ids`).
 *
 * Writes at most `max_ids` ids (the rest is cut, as the gateway's 4096-id cap does) and
 * returns how many, or a negative status: `KVEXACT_ERR_REQUEST` (empty text, not UTF-8),
 * `KVEXACT_ERR_UNSUPPORTED` (refused: a NUL byte in the text, the text over an input bound,
 * an added token the engine's loader may or may not keep, a completions path no vectors
 * prove; `kvexact_encode_completions_with_refusal` says which), `KVEXACT_ERR_TOKENIZER`
 * (no tokenizer, or it failed), `KVEXACT_ERR_PROFILE` (the encoder cannot serve
 * completions), `KVEXACT_ERR_NULL_ARGUMENT`. `out_ids` is written only on success.
 *
 * # Safety
 * `encoder` is NULL or a live encoder; `text` is valid for `len` bytes; `out_ids` is valid for
 * `max_ids` writes.
 */
int32_t kvexact_encode_completions(const kvexact_encoder *encoder,
                                   const uint8_t *text,
                                   size_t len,
                                   uint32_t *out_ids,
                                   uint32_t max_ids);

/**
 * `kvexact_encode_completions` with the refusal typed, as `kvexact_encode_chat` gives it.
 *
 * Writes at most `max_ids` ids and returns how many, or a negative status:
 * `KVEXACT_ERR_UNSUPPORTED` (refused; the reason in `*refusal_out`:
 * `KVEXACT_REFUSAL_NUL_BYTE`, `KVEXACT_REFUSAL_INPUT_TOO_LARGE` (the error's message names
 * the bound), `KVEXACT_REFUSAL_AMBIGUOUS_ADDED_TOKEN` (the message names the token and the
 * remedy), or `KVEXACT_REFUSAL_TEMPLATE_RAISED` where the engine release's completions
 * path is one no vectors prove (a Mistral encoder without a proven renderer)),
 * `KVEXACT_ERR_REQUEST` (empty text, not UTF-8), `KVEXACT_ERR_TOKENIZER` (no tokenizer, or
 * it failed), `KVEXACT_ERR_PROFILE` (the encoder cannot serve completions),
 * `KVEXACT_ERR_NULL_ARGUMENT`. `out_ids` is written only on success.
 *
 * `refusal_out` may be NULL; when not NULL it is always written: the refusal for
 * `KVEXACT_ERR_UNSUPPORTED`, `KVEXACT_REFUSAL_NONE` otherwise.
 *
 * # Safety
 * `encoder` is NULL or a live encoder; `text` is valid for `len` bytes; `out_ids` is valid for
 * `max_ids` writes; `refusal_out` is NULL or valid for one write.
 */
int32_t kvexact_encode_completions_with_refusal(const kvexact_encoder *encoder,
                                                const uint8_t *text,
                                                size_t len,
                                                uint32_t *out_ids,
                                                uint32_t max_ids,
                                                kvexact_refusal *refusal_out);

/**
 * The gateway's chat call: strict refusal scan of the raw request `body` (JSON, exact keys),
 * render of the profile's template at `now_unix_ms` (UTC; one instant per request), encoding
 * without special tokens.
 *
 * Writes at most `max_ids` ids and returns how many, or a negative status:
 * `KVEXACT_ERR_UNSUPPORTED` (a strict-rule refusal; its reason in `*refusal_out`),
 * `KVEXACT_ERR_REQUEST` (e.g. clock out of range), `KVEXACT_ERR_RENDERER` (no template),
 * `KVEXACT_ERR_TOKENIZER` (no tokenizer, or it failed), `KVEXACT_ERR_PROFILE` (the encoder
 * cannot serve this chat path, e.g. an engine without one), `KVEXACT_ERR_NULL_ARGUMENT`.
 * `out_ids` is written only on success.
 *
 * `refusal_out` may be NULL; when not NULL it is always written: the refusal for
 * `KVEXACT_ERR_UNSUPPORTED`, `KVEXACT_REFUSAL_NONE` otherwise.
 *
 * # Safety
 * `encoder` is NULL or a live encoder; `body` is valid for `len` bytes; `out_ids` is valid for
 * `max_ids` writes; `refusal_out` is NULL or valid for one write.
 */
int32_t kvexact_encode_chat(const kvexact_encoder *encoder,
                            const uint8_t *body,
                            size_t len,
                            int64_t now_unix_ms,
                            uint32_t *out_ids,
                            uint32_t max_ids,
                            kvexact_refusal *refusal_out);

/**
 * Debug/oracle: the prompt `kvexact_encode_chat` would tokenize, as UTF-8 bytes (no NUL).
 *
 * Writes the needed length to `*len_out`; when `cap` is smaller, returns
 * `KVEXACT_ERR_BUFFER_TOO_SMALL` and writes nothing else (`buf` may be NULL with `cap` 0 to
 * ask for the size). Otherwise copies the prompt into `buf` and returns `KVEXACT_OK`. The
 * other statuses as for `kvexact_encode_chat`: `KVEXACT_ERR_UNSUPPORTED` (its reason in
 * `*refusal_out`), `KVEXACT_ERR_REQUEST`, `KVEXACT_ERR_RENDERER`, `KVEXACT_ERR_TOKENIZER`,
 * `KVEXACT_ERR_PROFILE`, `KVEXACT_ERR_NULL_ARGUMENT`; `refusal_out` as there.
 *
 * # Safety
 * As `kvexact_encode_chat`; `buf` is NULL or valid for `cap` writes; `len_out` is NULL or
 * valid for one write.
 */
kvexact_status kvexact_render_chat(const kvexact_encoder *encoder,
                                   const uint8_t *body,
                                   size_t len,
                                   int64_t now_unix_ms,
                                   uint8_t *buf,
                                   size_t cap,
                                   size_t *len_out,
                                   kvexact_refusal *refusal_out);

/**
 * Resolves a deployment document against the release of `engine` at `engine_version`
 * (NUL-terminated, as the engine reports it). `doc` / `doc_len`: the deployment as JSON or
 * YAML (the engine manifest's `deployment` object, docs/contracts/gateway-integration.md §9):
 * `blockSize`, `hashAlgorithm`, `hashSeed`, `speculative` (`method`,
 * `numSpeculativeTokens`, `mtpModules`, `disableEagleBlockDrop`,
 * `disableLookaheadBlockHashes`), `loraAdapters` (`name`, `path`), `kvEventsFormat`; an
 * empty document (`{}`) is the release's defaults.
 *
 * Returns `KVEXACT_OK` and a new reference in `*out`; otherwise, with an error object:
 * `KVEXACT_ERR_DEPLOYMENT_UNSUPPORTED` (code `"DEPLOYMENT_UNSUPPORTED"`, the message naming
 * the option and why: e.g. a speculative method no vectors prove for the release, no block
 * size where the release states no default), `KVEXACT_ERR_INVALID_ARGUMENT` (an unknown field
 * or a wrong type: code `"DEPLOYMENT_SCHEMA"`; a value out of range or an adapter declared
 * twice: `"DEPLOYMENT_INVALID"`; `engine` not a KV engine; a hasher the release cannot build,
 * e.g. an unset seed under NONE_HASH rule A), `KVEXACT_ERR_UNKNOWN_ENGINE_VERSION`,
 * `KVEXACT_ERR_NONE_HASH_UNREPRODUCIBLE`, `KVEXACT_ERR_NULL_ARGUMENT`. `*out` is not written
 * on failure.
 *
 * Ownership: the caller owns `*out` (free with `kvexact_deployment_free`) and `*err`; the
 * arguments are only read during the call.
 *
 * # Safety
 * `engine_version` is NULL or NUL-terminated; `doc` is valid for `doc_len` bytes; `out` and
 * `err` are NULL or valid for one write.
 */
kvexact_status kvexact_deployment_new(kvexact_engine engine,
                                      const char *engine_version,
                                      const uint8_t *doc,
                                      size_t doc_len,
                                      kvexact_deployment **out,
                                      kvexact_error **err);

/**
 * The deployment an engine manifest declares (`deployment:`; absent: the release's
 * defaults), resolved against the release of `engine` at the manifest's `engineVersion`.
 * Statuses as `kvexact_deployment_new`; the error's path is the manifest's.
 *
 * # Safety
 * `manifest` is NULL or live; `out` and `err` are NULL or valid for one write.
 */
kvexact_status kvexact_deployment_from_manifest(const kvexact_manifest *manifest,
                                                kvexact_engine engine,
                                                kvexact_deployment **out,
                                                kvexact_error **err);

/**
 * Takes another reference to `deployment` and returns it (NULL when `deployment` is NULL).
 *
 * Ownership: the caller owns the returned reference and frees it with
 * `kvexact_deployment_free`.
 *
 * # Safety
 * `deployment` is NULL or live.
 */
const kvexact_deployment *kvexact_deployment_retain(const kvexact_deployment *deployment);

/**
 * Releases one reference to a deployment. NULL is accepted and ignored.
 *
 * # Safety
 * `deployment` is NULL or a reference from `kvexact_deployment_new*` or
 * `kvexact_deployment_retain` not released before.
 */
void kvexact_deployment_free(const kvexact_deployment *deployment);

/**
 * The resolved deployment as JSON (UTF-8, not NUL-terminated): `{"release", "engine",
 * "blockSize", "hashAlgorithm", "hashSeed", "keyForm" ("plain", "lookahead-L", "bigram"),
 * "hitOffset", "keyFormVectors", "adapters": [{"name", "path"}], "adaptersInKeys",
 * "cacheSalt"}` — what the hasher and the index are built from, for logs and operators.
 * Size query and statuses as `kvexact_contracts_json`.
 *
 * # Safety
 * `deployment` is NULL or live; `buf` is NULL or valid for `cap` writes; `len` is NULL or
 * valid for one write.
 */
kvexact_status kvexact_deployment_json(const kvexact_deployment *deployment,
                                       uint8_t *buf,
                                       size_t cap,
                                       size_t *len);

/**
 * A hasher of the deployment: its release's rules, block size, algorithm, seed and key form
 * (vLLM look-ahead, SGLang bigram pages). It hashes plain requests (no salt, the base model)
 * through every hash call; `kvexact_block_hashes_keyed` hashes a request with a salt or an
 * adapter; and `kvexact_route_keys` / `kvexact_index_route_predict` given this hasher key
 * each request's `cache_salt` and adapter from its body (an encoder must lift `cache_salt`,
 * `kvexact_encoder_options.lifted`, for salted requests to reach the hasher). `options`:
 * NULL or a `kvexact_hasher_options` (the prefix-chain cache), as
 * `kvexact_hasher_new_with_options`.
 *
 * Returns `KVEXACT_OK` and a new reference in `*out`; `KVEXACT_ERR_INVALID_ARGUMENT` (bad
 * options), `KVEXACT_ERR_NULL_ARGUMENT`, with an error object. `*out` is not written on
 * failure.
 *
 * # Safety
 * `deployment` is NULL or live; `options` is NULL or valid for its `struct_size` bytes;
 * `out` and `err` are NULL or valid for one write.
 */
kvexact_status kvexact_hasher_new_for_deployment(const kvexact_deployment *deployment,
                                                 const kvexact_hasher_options *options,
                                                 kvexact_hasher **out,
                                                 kvexact_error **err);

/**
 * Hashes `ids` (`n` token ids) as the deployment of `hasher` keys a request with `keys`
 * (NULL: a plain request): the salt as the release keys it (after the engine's own checks of
 * the value: vLLM refuses an empty salt, one over 128 characters or with `@`, `/`, `\` or
 * NUL), the adapter as the release keys it (vLLM's LoRA extra key; SGLang 0.5.23's default
 * event format and the `dynamo` format of 0.5.22/0.5.23: the page hashes published under
 * the namespace of the adapter's id, `uuid5(name, path)`, and the salt where the format
 * takes it; SGLang 0.5.19–0.5.22's default format and TensorRT-LLM publish no adapter in
 * their keys: the hashes are the base model's, and the index answers `unknown` for
 * endpoints serving adapters). Full blocks only; writes at most `max_blocks`
 * hashes and their count to `*n_out`.
 *
 * Returns `KVEXACT_OK`; `KVEXACT_ERR_REQUEST` (code `"SALT_REJECTED"`: the engine answers such
 * a request with HTTP 400, so it has no keys), `KVEXACT_ERR_UNSUPPORTED` (`"SALT_UNKNOWN"`:
 * the release's salt handling is not catalog data, or the value is one no vector shows;
 * `"UNKNOWN_ADAPTER"`: the deployment serves no such adapter), `KVEXACT_ERR_INVALID_ARGUMENT`
 * (`hasher` not built by `kvexact_hasher_new_for_deployment`; a salt or adapter not UTF-8),
 * `KVEXACT_ERR_NULL_ARGUMENT`, or the hashing statuses of `kvexact_block_hashes_u64`, with an
 * error object. `hashes_out` and `*n_out` are written only on success.
 *
 * # Safety
 * `hasher` is NULL or live; `keys` is NULL or valid for its `struct_size` bytes with its
 * pointers valid for their lengths; `ids` is valid for `n` reads; `hashes_out` for
 * `max_blocks` writes; `n_out` and `err` are NULL or valid for one write.
 */
kvexact_status kvexact_block_hashes_keyed(const kvexact_hasher *hasher,
                                          const kvexact_request_keys *keys,
                                          const uint32_t *ids,
                                          size_t n,
                                          uint64_t *hashes_out,
                                          size_t max_blocks,
                                          size_t *n_out,
                                          kvexact_error **err);

/**
 * A prefix index for the endpoints of one deployment: the release's prefix-hit rule under
 * the deployment's key form (look-ahead keys hit at most ⌊(n − L)/B⌋ blocks, bigram pages
 * ⌊(n − 2)/P⌋), its block size and event schema, exactly as `kvexact_index_new` builds one
 * from a release; feed it the deployment's endpoints and predict with keys from the
 * deployment's hasher. Endpoints serving adapters (`kvexact_index_endpoint.lora_adapters`)
 * predict `unknown` where the release's events do not show adapters (SGLang 0.5.19,
 * TensorRT-LLM). `options`: NULL or a `kvexact_index_options` (KV-cache groups, max slots).
 *
 * Returns `KVEXACT_OK` and a new reference in `*out`; otherwise, with an error object,
 * `KVEXACT_ERR_PREFIX_HIT_RULE` (the release has no prefix-hit rule, or the groups are
 * outside what it states: look-ahead keys over several groups are not proven),
 * `KVEXACT_ERR_INVALID_ARGUMENT` (bad options), `KVEXACT_ERR_NULL_ARGUMENT`. `*out` is not
 * written on failure.
 *
 * # Safety
 * `deployment` is NULL or live; `options` is NULL or valid for its `struct_size` bytes with
 * `groups` valid for `n_groups` reads; `out` and `err` are NULL or valid for one write.
 */
kvexact_status kvexact_index_new_for_deployment(const kvexact_deployment *deployment,
                                                const kvexact_index_options *options,
                                                kvexact_index **out,
                                                kvexact_error **err);

/**
 * Checks the deployment against what the live engine shows of it (docs/contracts/
 * gateway-integration.md §9), for attestation and while serving: `evidence` names what
 * `bytes` / `len` hold (`KVEXACT_DEPLOYMENT_EVIDENCE_EVENTS`: a KV-event payload, decoded with
 * the release's schema — the block size of every stored block, vLLM's
 * `lookahead_token_ids` (one list of `L` tokens per block under look-ahead keys, none
 * otherwise), SGLang's bigram pairs (EAGLE) or flat ids, the adapters the blocks name;
 * `_SGLANG_SERVER_INFO`: `page_size`, `speculative_algorithm`, `lora_paths`;
 * `_VLLM_MODELS`: each declared adapter listed with its path as `root`, no other adapter;
 * `_VLLM_METRICS`: the block size and hash algorithm of `vllm:cache_config_info`).
 * What the engine does not show is not judged.
 *
 * Returns `KVEXACT_OK` when nothing disagrees; `KVEXACT_ERR_DEPLOYMENT_MISMATCH` (code
 * `"DEPLOYMENT_MISMATCH"`, path the first option that disagrees, the message every
 * mismatch: "speculative: declared lookahead-1, the engine shows blocks without
 * lookahead_token_ids") — a gateway must not route the endpoint on the declared keys
 * then; `KVEXACT_ERR_EVENT_DECODE` / `KVEXACT_ERR_INVALID_ARGUMENT` for bytes that are not
 * the named evidence, an unknown `evidence`, or evidence of another engine;
 * `KVEXACT_ERR_NULL_ARGUMENT`; with an error object.
 *
 * # Safety
 * `deployment` is NULL or live; `bytes` is valid for `len` bytes; `err` is NULL or valid for
 * one write.
 */
kvexact_status kvexact_deployment_check(const kvexact_deployment *deployment,
                                        uint32_t evidence,
                                        const uint8_t *bytes,
                                        size_t len,
                                        kvexact_error **err);

/* ==== 4. Hasher ===================================================================== */

/**
 * Creates a hasher for `algo` with `block_size` tokens per block, under the reference rules of
 * its engine (those of vLLM 0.31: NONE_HASH rule B, extra-key form K3, no look-ahead; SGLang
 * 0.5.19's: no wide pages; TensorRT-LLM's V1 block key), whatever release the engine runs.
 * To hash with the rules of the release an engine actually runs (vLLM 0.17–0.28 derive
 * NONE_HASH differently, for instance), use `kvexact_hasher_new_for_contract`.
 *
 * `seed` is vLLM's `PYTHONHASHSEED` as bytes (UTF-8, no NUL needed), from which NONE_HASH is
 * derived: `(NULL, 0)` means *unset* (SHA-256 algorithms then use vLLM's fixed
 * `"vllm-none-hash"`; xxhash algorithms are refused because vLLM draws a random seed), while
 * a non-NULL pointer with `seed_len = 0` is the empty string (a set but empty variable). The
 * gateway's `LLB_KV_NONE_HASH_SEED=0` is `seed = "0", seed_len = 1`. SGLang and TensorRT-LLM
 * take no seed: pass `(NULL, 0)`.
 *
 * Returns `KVEXACT_OK` and stores a new reference in `*out`; or `KVEXACT_ERR_NULL_ARGUMENT`
 * (`out` NULL, or `seed` NULL with `seed_len > 0`), `KVEXACT_ERR_INVALID_ARGUMENT` (unknown
 * algorithm or `KVEXACT_HASH_ALGO_CONTRACT_DEFAULT`, block size 0, seed not UTF-8, seed
 * given to a non-vLLM algorithm), `KVEXACT_ERR_NONE_HASH_UNREPRODUCIBLE` (unset seed with an
 * xxhash algorithm), with an error object in `*err` when `err` is not NULL. `*out` is not
 * written on failure.
 *
 * The hasher has a prefix-chain cache of `KVEXACT_PREFIX_CACHE_DEFAULT_ENTRIES` blocks (the
 * defaults of `kvexact_hasher_new_with_options`; same hashes as without it).
 *
 * Ownership: the caller owns `*out` (free with `kvexact_hasher_free`) and `*err` (free with
 * `kvexact_error_free`); `seed` is only read during the call.
 *
 * # Safety
 * `seed` is NULL or valid for `seed_len` bytes; `out` and `err` are NULL or valid for one
 * write.
 */
kvexact_status kvexact_hasher_new(kvexact_hash_algo algo,
                                  uint32_t block_size,
                                  const uint8_t *seed,
                                  size_t seed_len,
                                  kvexact_hasher **out,
                                  kvexact_error **err);

/**
 * `kvexact_hasher_new` with options (`options` NULL: the defaults `kvexact_hasher_new`
 * uses, a prefix-chain cache of `KVEXACT_PREFIX_CACHE_DEFAULT_ENTRIES`): the prefix-chain
 * cache's capacity, none, or another hasher's cache to share (see `kvexact_hasher_options`).
 * Hashes are identical with or without the cache; `kvexact_block_hashes_u64` (full blocks),
 * `kvexact_block_hashes_strided` and `kvexact_route_keys` go through it.
 *
 * Returns `KVEXACT_OK` and a new reference in `*out`, or the statuses of
 * `kvexact_hasher_new` (and `KVEXACT_ERR_INVALID_ARGUMENT` for bad options), with an error
 * object in `*err` when `err` is not NULL. Nothing is written to `*out` on failure.
 *
 * Ownership: the caller owns `*out` (free with `kvexact_hasher_free`) and `*err`; `seed`
 * and `options` are only read during the call.
 *
 * # Safety
 * As `kvexact_hasher_new`; `options` is NULL or valid for its `struct_size` bytes, with
 * `share_cache_with` NULL or a live hasher; `err` is NULL or valid for one write.
 */
kvexact_status kvexact_hasher_new_with_options(kvexact_hash_algo algo,
                                               uint32_t block_size,
                                               const uint8_t *seed,
                                               size_t seed_len,
                                               const kvexact_hasher_options *options,
                                               kvexact_hasher **out,
                                               kvexact_error **err);

/**
 * Creates a hasher with the hashing rules of one engine release (`kvprobe::bridge::hasher`):
 * vLLM's NONE_HASH rule, extra-key form and look-ahead ability, SGLang's id rules,
 * TensorRT-LLM's V1 block key. The release is named by `contract_id` (NUL-terminated) and
 * `engine_version`:
 *
 * * `engine_version` NULL: `contract_id` is a release id (`"vllm-kv-map-v2-r0.24"`), or a
 *   contract id whose releases all share the rules (`"sglang-kv-rank-v1"`); a contract id
 *   whose releases differ is `KVEXACT_ERR_INVALID_ARGUMENT` (code `"CONFIG"`, the message
 *   naming them): give the version.
 * * `engine_version` not NULL (NUL-terminated, as the engine reports it): it is resolved as by
 *   `kvexact_contract_resolve`, and the release it names must be `contract_id` or refine the
 *   contract `contract_id`, else `KVEXACT_ERR_CONTRACT_MISMATCH`.
 *
 * `algo`: a `kvexact_hash_algo` of the release's engine, or
 * `KVEXACT_HASH_ALGO_CONTRACT_DEFAULT` (`sha256_cbor` for vLLM). `block_size` >= 1. `seed` /
 * `seed_len`: vLLM's `PYTHONHASHSEED`, with `kvexact_hasher_new`'s convention (`(NULL, 0)`
 * unset, non-NULL with length 0 the empty string, UTF-8); under NONE_HASH rule A (vLLM
 * 0.17–0.28) an unset seed is refused for every algorithm, under rule B for the xxhash ones,
 * because the engine then draws a random NONE_HASH. SGLang and TensorRT-LLM take no seed.
 *
 * Returns `KVEXACT_OK` and a new reference in `*out`; otherwise a negative status with an
 * error object (code in parentheses): `KVEXACT_ERR_UNKNOWN_ENGINE_VERSION`
 * (`"UNKNOWN_ENGINE_VERSION"`), `KVEXACT_ERR_CONTRACT_MISMATCH` (`"CONTRACT_MISMATCH"`),
 * `KVEXACT_ERR_NOT_FOUND` (`"UNKNOWN_NAME"`: no such contract or release id),
 * `KVEXACT_ERR_NONE_HASH_UNREPRODUCIBLE` (`"none_hash_unreproducible"`: the unset seed above),
 * `KVEXACT_ERR_HASH_RULE_UNSUPPORTED` (`"hash_rule_unsupported"`: another refusal of the
 * release's hashing rules), `KVEXACT_ERR_INVALID_ARGUMENT` (`"CONFIG"`: algorithm of another
 * engine, ambiguous contract id, a release without KV plane; `"invalid_argument"`: unknown
 * `algo` value, seed not UTF-8 or given to a non-vLLM release, block size 0),
 * `KVEXACT_ERR_NULL_ARGUMENT`.
 * `*out` is not written on failure.
 *
 * The hasher is used exactly like one from `kvexact_hasher_new` (which keeps the reference
 * rules, vLLM 0.31's, whatever the engine runs), with the same default prefix-chain cache
 * (`kvexact_hasher_new_for_contract_with_options` sets it).
 *
 * Ownership: the caller owns `*out` (free with `kvexact_hasher_free`) and `*err` (free with
 * `kvexact_error_free`); the strings and `seed` are only read during the call.
 *
 * # Safety
 * `contract_id` and `engine_version` are NULL or NUL-terminated; `seed` is NULL or valid for
 * `seed_len` bytes; `out` and `err` are NULL or valid for one write.
 */
kvexact_status kvexact_hasher_new_for_contract(const char *contract_id,
                                               const char *engine_version,
                                               kvexact_hash_algo algo,
                                               uint32_t block_size,
                                               const uint8_t *seed,
                                               size_t seed_len,
                                               kvexact_hasher **out,
                                               kvexact_error **err);

/**
 * `kvexact_hasher_new_for_contract` with options (`options` NULL: its defaults, a
 * prefix-chain cache of `KVEXACT_PREFIX_CACHE_DEFAULT_ENTRIES`): the prefix-chain cache's
 * capacity, none, or another hasher's cache to share (see `kvexact_hasher_options`).
 * Statuses as `kvexact_hasher_new_for_contract`, and `KVEXACT_ERR_INVALID_ARGUMENT` for bad
 * options.
 *
 * # Safety
 * As `kvexact_hasher_new_for_contract`; `options` is NULL or valid for its `struct_size`
 * bytes, with `share_cache_with` NULL or a live hasher.
 */
kvexact_status kvexact_hasher_new_for_contract_with_options(const char *contract_id,
                                                            const char *engine_version,
                                                            kvexact_hash_algo algo,
                                                            uint32_t block_size,
                                                            const uint8_t *seed,
                                                            size_t seed_len,
                                                            const kvexact_hasher_options *options,
                                                            kvexact_hasher **out,
                                                            kvexact_error **err);

/**
 * Takes another reference to `hasher` and returns it (NULL when `hasher` is NULL).
 *
 * Ownership: the caller owns the returned reference and frees it with `kvexact_hasher_free`.
 *
 * # Safety
 * `hasher` is NULL or a live hasher.
 */
const kvexact_hasher *kvexact_hasher_retain(const kvexact_hasher *hasher);

/**
 * Releases one reference to a hasher. NULL is accepted and ignored.
 *
 * # Safety
 * `hasher` is NULL or a reference from `kvexact_hasher_new`/`kvexact_hasher_retain` not
 * released before.
 */
void kvexact_hasher_free(const kvexact_hasher *hasher);

/**
 * The number of hashes `n` token ids give (the size `out` needs for
 * `kvexact_block_hashes_u64` to write them all): `n / block_size` full blocks, plus one
 * for a trailing partial block when `full_blocks_only` is 0. Returns a count `>= 0` or a
 * negative status (`KVEXACT_ERR_HASH_UNDEFINED` as for `kvexact_block_hashes_u64`).
 *
 * # Safety
 * `hasher` is NULL or a live hasher.
 */
int32_t kvexact_hasher_block_count(const kvexact_hasher *hasher, size_t n, int full_blocks_only);

/**
 * Hashes `n` token ids block by block and writes one u64 per block to `out`, in the form the
 * engine publishes in its KV events (vLLM: last 8 digest bytes big-endian; SGLang: first 8
 * digest bytes big-endian, the bits of its signed int64; TensorRT-LLM: the 64-bit key).
 *
 * `full_blocks_only`: 1 hashes only full blocks (what engines publish and what a challenge
 * expects). 0 also hashes a trailing partial block where the engine defines that hash:
 * SGLang's digest of the partial page (computed, never published) and TensorRT-LLM's partial
 * block key (published when a request ends). vLLM defines no partial-block hash, so for a
 * vLLM hasher `full_blocks_only = 0` with `n % block_size != 0` returns
 * `KVEXACT_ERR_HASH_UNDEFINED` rather than an invented value; pass 1 for scoring, since a
 * partial block can never match a vLLM inventory anyway.
 *
 * At most `max_blocks` hashes are written (a prefix of the chain: the gateway caps requests at
 * 256 blocks). Returns the number written, `min(total, max_blocks)` where the total is
 * `kvexact_hasher_block_count`, or a negative status: `KVEXACT_ERR_NULL_ARGUMENT`
 * (`hasher` NULL, `ids` NULL with `n > 0`, `out` NULL with `max_blocks > 0`),
 * `KVEXACT_ERR_HASH_UNDEFINED`, `KVEXACT_ERR_PICKLE_TOO_LARGE` (pickle variants: a block
 * larger than one pickle frame). `out` is written only on success.
 *
 * Full blocks go through the hasher's prefix-chain cache when it has one (vLLM: only the
 * blocks after the longest cached prefix are hashed; same hashes). Without a cache, no
 * allocation for the CBOR/SGLang/TensorRT-LLM algorithms. Safe to call concurrently on one
 * hasher.
 *
 * Ownership: `ids` and `out` are borrowed for the call.
 *
 * # Safety
 * `ids` is NULL or valid for `n` reads; `out` is NULL or valid for `max_blocks` writes.
 */
int32_t kvexact_block_hashes_u64(const kvexact_hasher *hasher,
                                 const uint32_t *ids,
                                 size_t n,
                                 int full_blocks_only,
                                 uint64_t *out,
                                 size_t max_blocks);

/**
 * Migration helper: the legacy strided slot layout of the gateway's
 * `kv_compute_block_hashes`, consumed by its current Go scorer. For each full block, one slot
 * of `stride` bytes (`stride >= 8`; the gateway uses 32 for SHA-256 and 16 for xxhash) whose
 * first 8 bytes are the block's u64 form (as `kvexact_block_hashes_u64`) in big-endian byte
 * order and whose remaining bytes are zero.
 *
 * Improvement on §6.4: only full blocks are written. The legacy C code also hashed a trailing
 * partial block; no engine publishes a partial-block hash that a later request could match
 * (vLLM and SGLang never publish one; TensorRT-LLM's differs from every full block's), so
 * scores are unchanged.
 *
 * Returns the number of slots written (at most `max_blocks`), or a negative status as for
 * `kvexact_block_hashes_u64`; `KVEXACT_ERR_INVALID_ARGUMENT` when `stride < 8` or
 * `stride * max_blocks` overflows. `out` is written only on success.
 *
 * # Safety
 * `ids` is NULL or valid for `n` reads; `out` is NULL or valid for `stride * max_blocks`
 * byte writes.
 */
int32_t kvexact_block_hashes_strided(const kvexact_hasher *hasher,
                                     const uint32_t *ids,
                                     size_t n,
                                     uint8_t *out,
                                     size_t stride,
                                     size_t max_blocks);

/* ==== 5. Route keys and cache counters ============================================== */

/**
 * The gateway's hot path in one call: the strict refusal scan of the raw chat request
 * `body` (or the lifted path, for an encoder with lifted codes), the render at `now_unix_ms`
 * (UTC), tokenization into `ids_out` (at most `max_ids` ids, the rest cut as
 * `kvexact_encode_chat` cuts them), then the block hashes of the ids written into
 * `hashes_out` (full blocks only, at most `max_blocks`: the routing keys an engine can
 * hold). Neither the body nor the ids are copied on the way: the body is parsed in place,
 * the ids are written once into `ids_out` and hashed from there. With the encoder's segment
 * cache, the segments of earlier turns are found instead of re-encoded; with the hasher's
 * prefix-chain cache, the chain resumes after the longest prefix already hashed.
 *
 * Exactly what `kvexact_encode_chat(encoder, body, len, now_unix_ms, ids_out, max_ids,
 * refusal_out)` followed by `kvexact_block_hashes_u64(hasher, ids_out, n, 1, hashes_out,
 * max_blocks)` give, id for id and hash for hash, whatever the caches hold.
 *
 * On success returns `KVEXACT_OK`, with the counts in `*n_ids` and `*n_blocks`. Otherwise a
 * negative status as `kvexact_encode_chat` (`KVEXACT_ERR_UNSUPPORTED` with the refusal in
 * `*refusal_out`, `KVEXACT_ERR_REQUEST`, `KVEXACT_ERR_RENDERER`, `KVEXACT_ERR_TOKENIZER`)
 * or `kvexact_block_hashes_u64` (`KVEXACT_ERR_INVALID_ARGUMENT` for a pickle-serialised
 * block that does not fit a frame), `KVEXACT_ERR_NULL_ARGUMENT` (`encoder`, `hasher`,
 * `n_ids` or `n_blocks` NULL, a NULL buffer with a non-zero capacity), with an error object
 * in `*err` when `err` is not NULL. `*n_ids` and `*n_blocks` are written only on success;
 * `hashes_out` too, and `ids_out` too except after a hashing failure (which only the pickle
 * algorithms can have, once the ids are known: then `ids_out` holds them).
 *
 * `refusal_out` may be NULL; when not NULL it is always written, as by
 * `kvexact_encode_chat`.
 *
 * Request fields that key the engine's cache are read before anything is written: with a
 * deployment's hasher (`kvexact_hasher_new_for_deployment`) the body's `cache_salt` and
 * adapter are keyed (`kvexact_block_hashes_keyed`'s failures otherwise); with any other
 * hasher a lifted `cache_salt` is `KVEXACT_ERR_UNSUPPORTED` (refusal `cache_salt`), and for
 * SGLang a non-null `extra_key` or `lora_path` is `KVEXACT_ERR_UNSUPPORTED` (code
 * `"ENGINE_CACHE_KEY"`, refusal none): SGLang keys its radix cache by them, so hashing the
 * prompt alone would predict hits the engine does not have.
 *
 * Thread safety: any number of threads may call it at once on one encoder and one hasher.
 *
 * Ownership: every buffer is borrowed for the call; the caller owns `*err`.
 *
 * # Safety
 * `encoder` and `hasher` are NULL or live handles; `body` is valid for `len` bytes;
 * `ids_out` for `max_ids` writes and `hashes_out` for `max_blocks` writes (not aliasing each
 * other); `n_ids`, `n_blocks`, `refusal_out` and `err` are NULL or valid for one write.
 */
kvexact_status kvexact_route_keys(const kvexact_encoder *encoder,
                                  const kvexact_hasher *hasher,
                                  const uint8_t *body,
                                  size_t len,
                                  int64_t now_unix_ms,
                                  uint32_t *ids_out,
                                  size_t max_ids,
                                  uint64_t *hashes_out,
                                  size_t max_blocks,
                                  size_t *n_ids,
                                  size_t *n_blocks,
                                  kvexact_refusal *refusal_out,
                                  kvexact_error **err);

/**
 * `kvexact_route_keys` for `n` requests in one call (a burst), one after the other on the
 * calling thread, with caller-owned buffers in fixed slots:
 *
 * * request `i`'s ids go to `ids_out + i * max_ids` (at most `max_ids` of them), its hashes
 *   to `hashes_out + i * max_blocks` (at most `max_blocks`), so `ids_out` holds
 *   `n * max_ids` ids and `hashes_out` `n * max_blocks` hashes;
 * * `results[i]` receives request `i`'s status, refusal and counts; a request's result is
 *   exactly what `kvexact_route_keys` with the same arguments gives (one request's failure
 *   affects no other), and the slots of a request that failed hold unspecified values.
 *
 * Returns `KVEXACT_OK` when the arguments are valid (whatever each request's outcome: read
 * `results`), or, with nothing written anywhere, `KVEXACT_ERR_NULL_ARGUMENT` (a NULL handle,
 * `requests` or `results` NULL with `n > 0`, a NULL buffer with a non-zero size) or
 * `KVEXACT_ERR_INVALID_ARGUMENT` (`n * max_ids` or `n * max_blocks` overflows), with an error
 * object in `*err` when `err` is not NULL.
 *
 * Ownership: `requests`, their bodies and every buffer are borrowed for the call; the caller
 * owns `*err`.
 *
 * # Safety
 * `encoder` and `hasher` are NULL or live handles; `requests` is NULL or valid for `n` reads,
 * each body valid for its `len` bytes; `results` is NULL or valid for `n` writes; `ids_out`
 * is NULL or valid for `n * max_ids` writes and `hashes_out` for `n * max_blocks` writes;
 * `err` is NULL or valid for one write.
 */
kvexact_status kvexact_route_keys_batch(const kvexact_encoder *encoder,
                                        const kvexact_hasher *hasher,
                                        const kvexact_route_request *requests,
                                        size_t n,
                                        uint32_t *ids_out,
                                        size_t max_ids,
                                        uint64_t *hashes_out,
                                        size_t max_blocks,
                                        kvexact_route_result *results,
                                        kvexact_error **err);

/**
 * The counters of `encoder`'s segment, prompt and render caches, summed (the render cache's
 * hits are renders that reused a conversation's earlier render; zero with `enabled = 0`
 * when it has none, e.g. built with `KVEXACT_OPTION_NO_CACHE`) written to `*stats`, whose
 * `struct_size` the caller sets. Returns `KVEXACT_OK`, `KVEXACT_ERR_NULL_ARGUMENT` or
 * `KVEXACT_ERR_INVALID_ARGUMENT` (`struct_size` too small); `*stats` is written only on
 * success. Locks each of the caches' 16 shards and 16 sets (and the render cache) in turn: for
 * metrics, not for every request.
 *
 * # Safety
 * `encoder` is NULL or a live encoder; `stats` is NULL or valid for its `struct_size` bytes.
 */
kvexact_status kvexact_encoder_cache_stats(const kvexact_encoder *encoder,
                                           kvexact_cache_stats *stats);

/**
 * The counters of `hasher`'s prefix-chain cache (shared with every hasher made with
 * `share_cache_with` pointing at it, or at a hasher sharing it), as
 * `kvexact_encoder_cache_stats`.
 *
 * # Safety
 * `hasher` is NULL or a live hasher; `stats` is NULL or valid for its `struct_size` bytes.
 */
kvexact_status kvexact_hasher_cache_stats(const kvexact_hasher *hasher, kvexact_cache_stats *stats);

/**
 * Empties `encoder`'s segment, prompt and render caches (the counters are kept; nothing changes in
 * any result). A no-op for an encoder without them. Returns `KVEXACT_OK` or `KVEXACT_ERR_NULL_ARGUMENT`.
 *
 * # Safety
 * `encoder` is NULL or a live encoder.
 */
kvexact_status kvexact_encoder_cache_clear(const kvexact_encoder *encoder);

/**
 * Empties `hasher`'s prefix-chain cache — for every hasher sharing it — keeping the
 * counters. A no-op for a hasher without one. Returns `KVEXACT_OK` or
 * `KVEXACT_ERR_NULL_ARGUMENT`.
 *
 * # Safety
 * `hasher` is NULL or a live hasher.
 */
kvexact_status kvexact_hasher_cache_clear(const kvexact_hasher *hasher);

/* ==== 6. Prefix index =============================================================== */

/**
 * Creates a prefix index for the endpoints of one model pool under one engine release. The
 * release is named by `contract_id` and `engine_version` exactly as for
 * `kvexact_hasher_new_for_contract` (a release id with `engine_version` NULL, or a contract
 * id with the version the engine reports); the index decodes events with the release's exact
 * schema and predicts with the release's prefix-hit rule from the contract catalog
 * (`prefixHit`: the longest chained prefix, the last prompt token never a hit, block/page
 * alignment, hybrid groups combined as the engine combines them). A release whose rule no
 * cache-hit replay proves predicts with `proven = 0`.
 *
 * `block_size`: tokens per hashed block (vLLM `--block-size`, SGLang page size, TensorRT-LLM
 * tokens per block), >= 1, the block size of the request keys. `options`: NULL or a
 * `kvexact_index_options` (KV-cache groups, max slots).
 *
 * Returns `KVEXACT_OK` and a new reference in `*out`; otherwise, with an error object: the
 * release statuses of `kvexact_hasher_new_for_contract` (`KVEXACT_ERR_UNKNOWN_ENGINE_VERSION`,
 * `KVEXACT_ERR_CONTRACT_MISMATCH`, `KVEXACT_ERR_NOT_FOUND`), `KVEXACT_ERR_PREFIX_HIT_RULE`
 * (the release has no prefix-hit rule, or the groups are outside what it states),
 * `KVEXACT_ERR_INVALID_ARGUMENT` (block size 0, bad options, a release without KV events),
 * `KVEXACT_ERR_NULL_ARGUMENT`. `*out` is not written on failure.
 *
 * Ownership: the caller owns `*out` (free with `kvexact_index_free`) and `*err`; the strings
 * and options are only read during the call.
 *
 * # Safety
 * `contract_id` and `engine_version` are NULL or NUL-terminated; `options` is NULL or valid
 * for its `struct_size` bytes with `groups` valid for `n_groups` reads; `out` and `err` are
 * NULL or valid for one write.
 */
kvexact_status kvexact_index_new(const char *contract_id,
                                 const char *engine_version,
                                 uint32_t block_size,
                                 const kvexact_index_options *options,
                                 kvexact_index **out,
                                 kvexact_error **err);

/**
 * Takes another reference to `index` (each freed once with `kvexact_index_free`); returns
 * `index`, or NULL when `index` is NULL.
 *
 * # Safety
 * `index` is NULL or a live index.
 */
const kvexact_index *kvexact_index_retain(const kvexact_index *index);

/**
 * Releases one reference to `index`; the last one frees it. NULL is ignored.
 *
 * # Safety
 * `index` is NULL or a live reference, not released before.
 */
void kvexact_index_free(const kvexact_index *index);

/**
 * Adds an endpoint (one slot per data-parallel rank) and writes its id to `*id`.
 *
 * Returns `KVEXACT_OK`, or with an error object: `KVEXACT_ERR_DUPLICATE_ENDPOINT` (the name
 * is taken), `KVEXACT_ERR_INVALID_ARGUMENT` (`dp_ranks` outside 1..=1024, `gpu_blocks` 0,
 * `gpu_blocks` or `other_blocks` above 4294967295,
 * a flag other than 0/1, the name not UTF-8, `struct_size` too small, no free slots left
 * under `max_slots`: code `"INVALID_OPTIONS"`), `KVEXACT_ERR_NULL_ARGUMENT`. `*id` is written
 * only on success.
 *
 * # Safety
 * `index` is NULL or a live index; `endpoint` is NULL or valid for its `struct_size` bytes
 * with `name` valid for `name_len` bytes; `id` and `err` are NULL or valid for one write.
 */
kvexact_status kvexact_index_add_endpoint(const kvexact_index *index,
                                          const kvexact_index_endpoint *endpoint,
                                          uint32_t *id,
                                          kvexact_error **err);

/**
 * Removes endpoint `id` and everything it held. Returns `KVEXACT_OK`,
 * `KVEXACT_ERR_UNKNOWN_ENDPOINT` or `KVEXACT_ERR_NULL_ARGUMENT` (with an error object).
 *
 * # Safety
 * `index` is NULL or a live index; `err` is NULL or valid for one write.
 */
kvexact_status kvexact_index_remove_endpoint(const kvexact_index *index,
                                             uint32_t id,
                                             kvexact_error **err);

/**
 * Endpoint `id` restarted (a new identity, an empty cache): drops what it held and starts
 * each rank's stream afresh, in step from its next batch. Statuses as
 * `kvexact_index_remove_endpoint`.
 *
 * # Safety
 * As `kvexact_index_remove_endpoint`.
 */
kvexact_status kvexact_index_reset_endpoint(const kvexact_index *index,
                                            uint32_t id,
                                            kvexact_error **err);

/**
 * The caller could not get the replay `KVEXACT_APPLIED_REPLAY_FROM` asked for (the
 * engine's buffer no longer reaches back): rank `rank` of endpoint `id` stays `unknown`
 * until its cache is known again. Returns `KVEXACT_OK`, `KVEXACT_ERR_UNKNOWN_ENDPOINT`,
 * `KVEXACT_ERR_INVALID_ARGUMENT` (code `"UNKNOWN_RANK"`) or `KVEXACT_ERR_NULL_ARGUMENT`.
 *
 * # Safety
 * As `kvexact_index_remove_endpoint`.
 */
kvexact_status kvexact_index_replay_failed(const kvexact_index *index,
                                           uint32_t id,
                                           uint32_t rank,
                                           kvexact_error **err);

/**
 * The caller says the event stream of rank `rank` of endpoint `id` (every rank:
 * `KVEXACT_INDEX_ALL_RANKS`) was lost — its subscription died or reconnected, its queue
 * dropped batches — so batches may have gone by unseen. Its predictions are `unknown`
 * (`KVEXACT_UNKNOWN_STREAM_LOST`) from this call on, not from a later batch; the next batch
 * fed decides by its sequence number: the next one (nothing lost: in step again), a gap
 * (`KVEXACT_APPLIED_REPLAY_FROM`, or `KVEXACT_APPLIED_LOST` without replay) or a restart.
 * A rank that has seen no batch yet waits for the engine's start (sequence 0, an emptied
 * cache). A TensorRT-LLM endpoint is decided by its next drained event id. Returns
 * `KVEXACT_OK`, `KVEXACT_ERR_UNKNOWN_ENDPOINT`, `KVEXACT_ERR_INVALID_ARGUMENT` (code
 * `"UNKNOWN_RANK"`) or `KVEXACT_ERR_NULL_ARGUMENT`, with an error object.
 *
 * # Safety
 * As `kvexact_index_remove_endpoint`.
 */
kvexact_status kvexact_index_mark_lost(const kvexact_index *index,
                                       uint32_t id,
                                       uint32_t rank,
                                       kvexact_error **err);

/**
 * Checks endpoint `id`'s declared capacity (`kvexact_index_endpoint.gpu_blocks`,
 * `.other_blocks`) against what its engine states, per rank in the index's blocks: vLLM's
 * `num_gpu_blocks` less its null block (`vllm:cache_config_info`), SGLang's
 * `max_total_num_tokens / page_size` (server info), TensorRT-LLM's
 * `num_blocks_per_cache_level` (its `created` event). `other_blocks`
 * `KVEXACT_CAPACITY_NOT_STATED` is not compared. Writes to `*mismatch` 0 when they agree,
 * else the `KVEXACT_CAPACITY_*_DIFFERS` bits that differ (the `capacity_mismatch`
 * finding): the declared figure stays the bound — re-add the endpoint with the engine's
 * figure. Returns `KVEXACT_OK`, `KVEXACT_ERR_UNKNOWN_ENDPOINT` or
 * `KVEXACT_ERR_NULL_ARGUMENT` (with an error object); `*mismatch` is written only on
 * success.
 *
 * # Safety
 * `index` is NULL or a live index; `mismatch` and `err` are NULL or valid for one write.
 */
kvexact_status kvexact_index_check_capacity(const kvexact_index *index,
                                            uint32_t id,
                                            uint64_t gpu_blocks,
                                            uint64_t other_blocks,
                                            uint32_t *mismatch,
                                            kvexact_error **err);

/**
 * The id of the endpoint named `name` (UTF-8, `len` bytes) in `*id`. Returns `KVEXACT_OK`,
 * `KVEXACT_ERR_NOT_FOUND` (no such endpoint), `KVEXACT_ERR_INVALID_ARGUMENT` (not UTF-8) or
 * `KVEXACT_ERR_NULL_ARGUMENT`; `*id` is written only on success.
 *
 * # Safety
 * `index` is NULL or a live index; `name` is NULL or valid for `len` bytes; `id` is NULL or
 * valid for one write.
 */
kvexact_status kvexact_index_endpoint_id(const kvexact_index *index,
                                         const uint8_t *name,
                                         size_t len,
                                         uint32_t *id);

/**
 * Feeds one ZMQ multipart message of endpoint `id`'s rank `rank` — the three frames
 * `[topic, seq, payload]` as received (vLLM / SGLang publishers) — decoded with the index
 * release's exact event schema and applied whole, with the engine's semantics (duplicate
 * stores counted per copy, `AllBlocksCleared`, stores with an unknown parent, removals of
 * unknown blocks) and stream health (sequence gaps, replays, restarts). The outcome goes to
 * `*applied` (`struct_size` set by the caller).
 *
 * Returns `KVEXACT_OK`; otherwise, with an error object: `KVEXACT_ERR_EVENT_SCHEMA` /
 * `KVEXACT_ERR_EVENT_DECODE` (the frames do not decode: the batch is lost, and the rank is
 * `unknown` until its cache is known again — a rejected batch is counted), code
 * `"EVENT_REJECTED"` under `KVEXACT_ERR_EVENT_SCHEMA` (a KV-cache group or medium the index
 * was not configured for), `KVEXACT_ERR_UNKNOWN_ENDPOINT`, `KVEXACT_ERR_INVALID_ARGUMENT`
 * (`"UNKNOWN_RANK"`; `applied.struct_size` too small), `KVEXACT_ERR_NULL_ARGUMENT`.
 * `*applied` is written only on success.
 *
 * # Safety
 * `index` is NULL or a live index; each frame pointer is NULL or valid for its length;
 * `applied` is NULL or valid for its `struct_size` bytes; `err` is NULL or valid for one
 * write.
 */
kvexact_status kvexact_index_feed_frames(const kvexact_index *index,
                                         uint32_t id,
                                         uint32_t rank,
                                         const uint8_t *topic,
                                         size_t topic_len,
                                         const uint8_t *seq,
                                         size_t seq_len,
                                         const uint8_t *payload,
                                         size_t payload_len,
                                         kvexact_index_applied *applied,
                                         kvexact_error **err);

/**
 * `kvexact_index_feed_frames` for a payload whose sequence number is given apart (a replay
 * reply's `(seq, payload)`, or a subscriber that split the frames itself). Statuses as
 * `kvexact_index_feed_frames`.
 *
 * # Safety
 * As `kvexact_index_feed_frames`.
 */
kvexact_status kvexact_index_feed_payload(const kvexact_index *index,
                                          uint32_t id,
                                          uint32_t rank,
                                          uint64_t seq,
                                          const uint8_t *payload,
                                          size_t payload_len,
                                          kvexact_index_applied *applied,
                                          kvexact_error **err);

/**
 * Feeds one drained TensorRT-LLM `/kv_cache_events` body (JSON, `len` bytes) of endpoint
 * `id`: each event goes to the rank its `attention_dp_rank` names (0 when absent); event ids
 * must follow each other (a gap — another reader drained them — leaves every rank `unknown`
 * until the engine's next `created`: `KVEXACT_APPLIED_LOST`). Statuses as
 * `kvexact_index_feed_frames`.
 *
 * # Safety
 * As `kvexact_index_feed_frames`.
 */
kvexact_status kvexact_index_feed_json(const kvexact_index *index,
                                       uint32_t id,
                                       const uint8_t *body,
                                       size_t len,
                                       kvexact_index_applied *applied,
                                       kvexact_error **err);

/**
 * Predicts, for a request's block keys, the cached tokens every endpoint rank of the index
 * will report, by the release's hit rule (one entry per endpoint and rank, endpoints in the
 * order they were added, ranks in order).
 *
 * `hashes` / `n_hashes`: the request's full-block chain hashes at the index's block size, in
 * the engine's event integer form, as `kvexact_block_hashes_u64` (full blocks only) of a
 * hasher of the same release writes them; at least `(prompt_tokens - 1) / block_size` of
 * them (the blocks a hit may reach) and at most `prompt_tokens / block_size`.
 * `prompt_tokens`: the prompt's token count, at most 2^32 - 1 (`KVEXACT_ERR_INVALID_ARGUMENT`
 * past it). `flags`: 0 or any of
 * `KVEXACT_PREDICT_SKIP_PREFIX_CACHE` and `KVEXACT_PREDICT_SPARSE` (only the ranks whose
 * prediction is not "cached, 0 tokens", in the same order; `*count` and the buffer size
 * then count those).
 *
 * On success returns `KVEXACT_OK`, writes `*count` predictions to `out` (capacity `cap`)
 * and the count to `*count`. `KVEXACT_ERR_BUFFER_TOO_SMALL`: `cap` is below the number of
 * endpoint ranks, which is written to `*count` (nothing else is written; `(NULL, 0)` asks
 * for it). Otherwise, with an error object: `KVEXACT_ERR_INVALID_ARGUMENT` (code
 * `"INVALID_REQUEST"`: a hash count outside the range above; unknown flag bits),
 * `KVEXACT_ERR_NULL_ARGUMENT`.
 *
 * Thread safety: any number of threads may predict while others feed; each rank's answer
 * reflects whole batches only. Nothing is allocated per block or per call once a thread's
 * scratch has grown to the endpoint count.
 *
 * # Safety
 * `index` is NULL or a live index; `hashes` is NULL or valid for `n_hashes` reads; `out` is
 * NULL or valid for `cap` writes; `count` and `err` are NULL or valid for one write.
 */
kvexact_status kvexact_index_predict(const kvexact_index *index,
                                     const uint64_t *hashes,
                                     size_t n_hashes,
                                     size_t prompt_tokens,
                                     uint32_t flags,
                                     kvexact_index_prediction *out,
                                     size_t cap,
                                     size_t *count,
                                     kvexact_error **err);

/**
 * The gateway's hot path in one call, without entering any other runtime: exactly
 * `kvexact_route_keys(encoder, hasher, body, len, now_unix_ms, ids_out, max_ids, hashes_out,
 * max_blocks, n_ids, n_blocks, refusal_out, err)` — the refusal scan, render, tokenization
 * and full-block hashes of the chat request — then `kvexact_index_predict(index, hashes_out,
 * *n_blocks, *n_ids, flags, out, cap, count, err)` on the keys just written.
 *
 * `hasher` must be of the index's release and block size (a block size other than the
 * index's is `KVEXACT_ERR_INVALID_ARGUMENT`); `max_blocks` must reach the blocks a hit may
 * reach (`(n_ids - 1) / block_size`), else the prediction is refused as
 * `kvexact_index_predict` refuses it. A prompt with more ids than `max_ids` (which
 * `kvexact_route_keys` cuts) is `KVEXACT_ERR_INVALID_ARGUMENT`: its length, and so the
 * engine's hit, is not known.
 *
 * Returns `KVEXACT_OK` with `*n_ids`, `*n_blocks`, `*count` and the predictions written.
 * Otherwise the statuses of `kvexact_route_keys` (then nothing of the prediction is written)
 * or of `kvexact_index_predict` (then `ids_out` and `hashes_out` hold the request's keys but
 * `*n_ids` and `*n_blocks` are not written; `KVEXACT_ERR_BUFFER_TOO_SMALL` writes the needed
 * prediction count to `*count`), with an error object in `*err` when `err` is not NULL.
 * `refusal_out` may be NULL; when not NULL it is always written, as by `kvexact_route_keys`.
 *
 * Thread safety: any number of threads at once on the same handles.
 *
 * # Safety
 * `index`, `encoder` and `hasher` are NULL or live handles; `body` is valid for `len` bytes;
 * `ids_out` for `max_ids` writes, `hashes_out` for `max_blocks` writes and `out` for `cap`
 * writes (none aliasing another); `n_ids`, `n_blocks`, `count`, `refusal_out` and `err` are
 * NULL or valid for one write.
 */
kvexact_status kvexact_index_route_predict(const kvexact_index *index,
                                           const kvexact_encoder *encoder,
                                           const kvexact_hasher *hasher,
                                           const uint8_t *body,
                                           size_t len,
                                           int64_t now_unix_ms,
                                           uint32_t flags,
                                           uint32_t *ids_out,
                                           size_t max_ids,
                                           uint64_t *hashes_out,
                                           size_t max_blocks,
                                           size_t *n_ids,
                                           size_t *n_blocks,
                                           kvexact_index_prediction *out,
                                           size_t cap,
                                           size_t *count,
                                           kvexact_refusal *refusal_out,
                                           kvexact_error **err);

/**
 * Records the engine's reported cached tokens for a request routed to `prediction`'s
 * endpoint and rank (what the engine puts in its response:
 * `usage.prompt_tokens_details.cached_tokens` on the OpenAI routes where enabled, SGLang's
 * `meta_info.cached_tokens` on its native route) against `prediction`, the entry
 * `kvexact_index_predict` wrote for it when it was routed. `request` / `request_len`: the
 * caller's label of the request (UTF-8; its first 256 characters are kept), named by the
 * `prediction_drift` finding when this is the first wrong prediction.
 *
 * Writes `KVEXACT_OBSERVATION_EXACT`, `_OVER`, `_UNDER` or `_UNJUDGED` (an unknown
 * prediction) to `*observation` and counts it per rank. Returns `KVEXACT_OK`; otherwise,
 * with an error object: `KVEXACT_ERR_UNKNOWN_ENDPOINT`, `KVEXACT_ERR_INVALID_ARGUMENT`
 * (`"UNKNOWN_RANK"`; a status or reason code libkvexact does not define; a token count in
 * `prediction` past 2^32 - 1, which no prediction has; the label not UTF-8),
 * `KVEXACT_ERR_NULL_ARGUMENT`. `*observation` is written only on success.
 *
 * # Safety
 * `index` is NULL or a live index; `prediction` is NULL or valid for one read; `request` is
 * NULL or valid for `request_len` bytes; `observation` and `err` are NULL or valid for one
 * write.
 */
kvexact_status kvexact_index_observe(const kvexact_index *index,
                                     const kvexact_index_prediction *prediction,
                                     const uint8_t *request,
                                     size_t request_len,
                                     uint64_t reported_tokens,
                                     kvexact_observation *observation,
                                     kvexact_error **err);

/**
 * Every rank's inventory and counters, endpoints in the order they were added: writes
 * `*count` entries to `out` (capacity `cap`) and returns `KVEXACT_OK`.
 * `KVEXACT_ERR_BUFFER_TOO_SMALL`: `cap` is below the number of ranks, written to `*count`
 * with nothing else (`(NULL, 0)` asks for it); `KVEXACT_ERR_NULL_ARGUMENT`.
 *
 * # Safety
 * `index` is NULL or a live index; `out` is NULL or valid for `cap` writes; `count` is NULL
 * or valid for one write.
 */
kvexact_status kvexact_index_status(const kvexact_index *index,
                                    kvexact_index_rank_status *out,
                                    size_t cap,
                                    size_t *count);

/**
 * The first prediction the engine contradicted (`kvexact_index_observe` judged it over or
 * under), as compact UTF-8 JSON, no NUL: `{"finding":"prediction_drift","endpoint":…,
 * "rank":…,"request":…,"predicted":…,"reported":…,"release":…,"message":…}`. When no
 * prediction was contradicted, `*len` is 0 and nothing is written (`KVEXACT_OK`).
 *
 * Size query and statuses as `kvexact_contracts_json`: `KVEXACT_OK` or
 * `KVEXACT_ERR_BUFFER_TOO_SMALL` with `*len` the document's length (`(NULL, 0)` asks for
 * it), `KVEXACT_ERR_NULL_ARGUMENT`.
 *
 * # Safety
 * `index` is NULL or a live index; `buf` is NULL or valid for `cap` writes; `len` is NULL or
 * valid for one write.
 */
kvexact_status kvexact_index_prediction_drift(const kvexact_index *index,
                                              uint8_t *buf,
                                              size_t cap,
                                              size_t *len);

/**
 * The Prometheus text exposition of every rank's gauges and counters
 * (`kvexact_index_blocks_held`, `kvexact_index_in_step`, `kvexact_index_*_total`,
 * `kvexact_index_observed_total`, `kvexact_index_table_bytes`,
 * `kvexact_index_prediction_drift`), UTF-8, no NUL. Size query and statuses as
 * `kvexact_index_prediction_drift` (the text can grow between a size query and the call:
 * retry on `KVEXACT_ERR_BUFFER_TOO_SMALL`).
 *
 * # Safety
 * As `kvexact_index_prediction_drift`.
 */
kvexact_status kvexact_index_prometheus(const kvexact_index *index,
                                        uint8_t *buf,
                                        size_t cap,
                                        size_t *len);

/**
 * Makes a subscriber for endpoint `options->endpoint` of `index` (not started: see
 * `kvexact_subscriber_start`). Source `i` of `options->publishers` is the endpoint's rank
 * `i`; its events are decoded with the index's release schema and applied as
 * `kvexact_index_feed_frames` applies them. A TensorRT-LLM index subscribes to the one
 * republished drain (`n_ranks` 1), whose bodies are applied as `kvexact_index_feed_json`.
 *
 * The stream-health rule it follows (the caller-fed path's, done for the caller): the first
 * batch past a gap (`KVEXACT_APPLIED_REPLAY_FROM`) is followed by one request to that rank's
 * replay endpoint, whose batches are fed in order (a replay that cannot be had:
 * `kvexact_index_replay_failed`); a connection lost or not made, or a message dropped from
 * the full queue, marks the rank lost at once (`kvexact_index_mark_lost`), so predictions
 * say `unknown`, never a stale count. Sockets reconnect by themselves.
 *
 * Returns `KVEXACT_OK` and a new subscriber in `*out`; otherwise, with an error object:
 * `KVEXACT_ERR_UNKNOWN_ENDPOINT`, `KVEXACT_ERR_INVALID_ARGUMENT` (`n_ranks` not the
 * endpoint's ranks (1 for a drain), an address empty or over 255 bytes, a queue over
 * `KVEXACT_SUBSCRIBER_MAX_QUEUE`, `struct_size` too small), `KVEXACT_ERR_NULL_ARGUMENT`.
 *
 * # Safety
 * `index` is NULL or a live index; `options` is NULL or valid for its `struct_size` bytes,
 * its arrays valid for `n_ranks` reads and its strings NUL-terminated; `out` and `err` are
 * NULL or valid for one write.
 */
kvexact_status kvexact_subscriber_new(const kvexact_index *index,
                                      const kvexact_subscriber_options *options,
                                      kvexact_subscriber **out,
                                      kvexact_error **err);

/**
 * Starts subscribing (a thread of the subscriber's own; a publisher not reachable yet is
 * tried again until it answers, its rank marked lost meanwhile). Starting a started
 * subscriber does nothing. Returns `KVEXACT_OK`, `KVEXACT_ERR_INVALID_ARGUMENT` (the
 * runtime could not start) or `KVEXACT_ERR_NULL_ARGUMENT`, with an error object.
 *
 * # Safety
 * `sub` is NULL or a live subscriber; `err` is NULL or valid for one write.
 */
kvexact_status kvexact_subscriber_start(const kvexact_subscriber *sub, kvexact_error **err);

/**
 * Stops subscribing: closes the sockets and joins the thread (within about 100 ms, plus a
 * replay under way, bounded by `replay_timeout_ms`). The endpoint's ranks are marked lost
 * (nothing follows their streams any more). Stopping a stopped subscriber does nothing; it
 * may be started again. Returns `KVEXACT_OK` or `KVEXACT_ERR_NULL_ARGUMENT`.
 *
 * # Safety
 * `sub` is NULL or a live subscriber.
 */
kvexact_status kvexact_subscriber_stop(const kvexact_subscriber *sub);

/**
 * Stops (as `kvexact_subscriber_stop`) and frees a subscriber, releasing its reference to
 * the index. NULL is ignored.
 *
 * # Safety
 * `sub` is NULL or a live subscriber, not freed before and not in use by another thread.
 */
void kvexact_subscriber_free(kvexact_subscriber *sub);

/**
 * The subscriber's counters into `*out` (`struct_size` set by the caller). Returns
 * `KVEXACT_OK`, `KVEXACT_ERR_INVALID_ARGUMENT` (`struct_size` too small) or
 * `KVEXACT_ERR_NULL_ARGUMENT`.
 *
 * # Safety
 * `sub` is NULL or a live subscriber; `out` is NULL or valid for its `struct_size` bytes.
 */
kvexact_status kvexact_subscriber_get_counters(const kvexact_subscriber *sub,
                                               kvexact_subscriber_counters *out);

/**
 * The Prometheus text exposition of the subscriber's counters
 * (`kvexact_subscriber_*_total{subscriber="<endpoint name>"}`), UTF-8, no NUL: written to
 * `buf` (capacity `cap`) with its length in `*len`; `KVEXACT_ERR_BUFFER_TOO_SMALL` writes
 * only the length needed (`(NULL, 0)` asks for it). Counters since the last start.
 *
 * # Safety
 * `sub` is NULL or a live subscriber; `buf` is NULL or valid for `cap` writes; `len` is NULL
 * or valid for one write.
 */
kvexact_status kvexact_subscriber_prometheus(const kvexact_subscriber *sub,
                                             uint8_t *buf,
                                             size_t cap,
                                             size_t *len);

/* ==== 7. KV events ================================================================== */

/**
 * Creates a decoder for the wire schema `wire_schema_id` (NUL-terminated): the ZMQ/msgpack
 * schemas `"vllm-kv-array-v1"`, `"vllm-kv-map-v2"`, `"vllm-kv-map-v3"`,
 * `"sglang-kv-rank-v1"`, `"sglang-kv-map-v2"`, or TensorRT-LLM's HTTP/JSON schemas
 * `"trtllm-kv-http-v1"` (1.2.x) and `"trtllm-kv-http-preview-v1"` (1.3.0rc, adds per-block
 * `cache_salt` and `mm_keys`).
 *
 * The decoder uses the wire family's union schema: every field any release of the family
 * writes is accepted (optional where some release leaves it out) and unknown map keys are
 * skipped, so one decoder reads every release of the family. To hold an engine to the exact
 * fields of the release it runs (a field that release never writes is then
 * `KVEXACT_ERR_EVENT_SCHEMA`), use `kvexact_event_decoder_new_for_contract`.
 *
 * `rehash`: for a TensorRT-LLM schema, NULL (hashes are passed on as published) or a
 * TensorRT-LLM hasher (`KVEXACT_BLOCKHASH_TRTLLM`; its block size does not matter) with which
 * every stored block's hash is re-derived from its tokens (see
 * `kvexact_event.rehash_mismatch`). For a ZMQ schema it must be NULL.
 *
 * Returns `KVEXACT_OK` and the decoder in `*out`, or `KVEXACT_ERR_NULL_ARGUMENT` /
 * `KVEXACT_ERR_INVALID_ARGUMENT` (unknown schema id; `rehash` not NULL for a ZMQ schema;
 * `rehash` not a TensorRT-LLM hasher) with an error object in `*err` when `err` is not NULL;
 * `*out` is not written on failure.
 *
 * Ownership: the caller owns `*out` (free with `kvexact_event_decoder_free`) and `*err` (free
 * with `kvexact_error_free`). The decoder keeps its own copy of `rehash`'s configuration:
 * the caller still owns `rehash` and may free it right after this call.
 *
 * # Safety
 * `wire_schema_id` is NULL or NUL-terminated; `rehash` is NULL or a live hasher; `out` and
 * `err` are NULL or valid for one write.
 */
kvexact_status kvexact_event_decoder_new(const char *wire_schema_id,
                                         const kvexact_hasher *rehash,
                                         kvexact_event_decoder **out,
                                         kvexact_error **err);

/**
 * Creates an event decoder with the exact KV-event schema of one engine release (the
 * release named by `contract_id` and `engine_version` as for
 * `kvexact_hasher_new_for_contract`): the fields, in wire order, that this release writes,
 * and no others. A payload carrying a field the release never writes (a map key, or an
 * array of another length) is `KVEXACT_ERR_EVENT_SCHEMA` (`"schema_mismatch"`): the engine
 * runs another release than its contract says. `kvexact_event_decoder_new` instead takes a
 * wire schema id and accepts every release of that family. For TensorRT-LLM the release's
 * schema is its JSON format's (the same as `kvexact_event_decoder_new`'s).
 *
 * `rehash`: as for `kvexact_event_decoder_new` (NULL, or a TensorRT-LLM hasher for a
 * TensorRT-LLM release; NULL for vLLM and SGLang).
 *
 * Returns `KVEXACT_OK` and the decoder in `*out`; otherwise the statuses of
 * `kvexact_hasher_new_for_contract` for the id and version (`KVEXACT_ERR_UNKNOWN_ENGINE_VERSION`,
 * `KVEXACT_ERR_CONTRACT_MISMATCH`, `KVEXACT_ERR_NOT_FOUND`, `KVEXACT_ERR_INVALID_ARGUMENT`
 * with `"CONFIG"` for an ambiguous contract id), `KVEXACT_ERR_INVALID_ARGUMENT` (a release
 * without KV events; `rehash` not allowed or not a TensorRT-LLM hasher),
 * `KVEXACT_ERR_NULL_ARGUMENT`, with an error object. `*out` is not written on failure.
 *
 * Ownership: the caller owns `*out` (free with `kvexact_event_decoder_free`) and `*err`; the
 * decoder copies `rehash`'s configuration (the caller may free `rehash` right after).
 *
 * # Safety
 * `contract_id` and `engine_version` are NULL or NUL-terminated; `rehash` is NULL or a live
 * hasher; `out` and `err` are NULL or valid for one write.
 */
kvexact_status kvexact_event_decoder_new_for_contract(const char *contract_id,
                                                      const char *engine_version,
                                                      const kvexact_hasher *rehash,
                                                      kvexact_event_decoder **out,
                                                      kvexact_error **err);

/**
 * Decodes one payload: for a ZMQ schema the msgpack frame 2 of a ZMQ message, for a
 * TensorRT-LLM schema the JSON body of a `POST /kv_cache_events` response (a TensorRT-LLM
 * `stored` event becomes one `KVEXACT_EVENT_STORED` event per block, in order; `created` and
 * `updated` become `KVEXACT_EVENT_CREATED` / `KVEXACT_EVENT_UPDATED`, which callers that only
 * index blocks skip). On success writes the events to `*events` / `*n_events` (valid until
 * the next call on this decoder) and the batch's DP rank to `*dp_rank` (-1 when absent;
 * always -1 for TensorRT-LLM, whose `attention_dp_rank` is per event: see
 * `kvexact_event.dp_rank`).
 *
 * All or nothing: a bad event fails the whole payload with `KVEXACT_ERR_EVENT_SCHEMA` (code
 * `"schema_mismatch"`: well-formed msgpack/JSON that is not this schema's events, e.g. for
 * a decoder from `kvexact_event_decoder_new_for_contract` a field or array length the
 * engine release never writes) or
 * `KVEXACT_ERR_EVENT_DECODE` (code `"decode_error"`: bytes that are not msgpack/JSON, a
 * truncated payload, an integer out of range such as a token id above 2^32-1, a limit
 * exceeded), and no output is written; `*err` (when `err` is not NULL) gets a new error
 * object the caller frees with `kvexact_error_free`. NULL arguments are
 * `KVEXACT_ERR_NULL_ARGUMENT`.
 *
 * # Safety
 * `decoder` is NULL or a live decoder not used concurrently; `payload` is valid for `len`
 * bytes; `events`, `n_events`, `dp_rank` and `err` are NULL or valid for one write.
 */
kvexact_status kvexact_event_decode(kvexact_event_decoder *decoder,
                                    const uint8_t *payload,
                                    size_t len,
                                    const kvexact_event **events,
                                    size_t *n_events,
                                    int64_t *dp_rank,
                                    kvexact_error **err);

/**
 * Frees a decoder (and the events it last returned). NULL is accepted and ignored.
 *
 * # Safety
 * `decoder` is NULL or a live decoder not freed before.
 */
void kvexact_event_decoder_free(kvexact_event_decoder *decoder);

/* ==== 8. Probes and readiness ======================================================= */

/**
 * Reads the manifest of `profile_id` beneath the root `registry` was loaded from, under the
 * same trust policy (a fresh read: manifests are read on demand, not at publish).
 *
 * Returns `KVEXACT_OK` and a new reference in `*out`; `KVEXACT_ERR_NOT_FOUND` (code
 * `"MANIFEST_MISSING"`, path `manifests/<id>.yaml`) when the profile has no manifest;
 * `KVEXACT_ERR_REGISTRY` with the registry's code and path when it is untrusted, unparseable,
 * names another profile, or the profile is unknown; `KVEXACT_ERR_NULL_ARGUMENT` /
 * `KVEXACT_ERR_INVALID_ARGUMENT`.
 *
 * Ownership: the caller owns `*out` (free with `kvexact_manifest_free`) and `*err`.
 *
 * # Safety
 * `registry` is NULL or live; `profile_id` is valid for `n` bytes; `out` and `err` are NULL or
 * valid for one write.
 */
kvexact_status kvexact_manifest_load(const kvexact_registry *registry,
                                     const uint8_t *profile_id,
                                     size_t n,
                                     kvexact_manifest **out,
                                     kvexact_error **err);

/**
 * The manifest file's sha256 (64 lowercase hex digits, NUL-terminated), for receipts; NULL
 * when `manifest` is NULL. Valid while the manifest lives; never free it.
 *
 * # Safety
 * `manifest` is NULL or live.
 */
const char *kvexact_manifest_digest(const kvexact_manifest *manifest);

/**
 * The engine version the manifest pins (NUL-terminated); NULL when `manifest` is NULL. Valid
 * while the manifest lives; never free it.
 *
 * # Safety
 * `manifest` is NULL or live.
 */
const char *kvexact_manifest_engine_version(const kvexact_manifest *manifest);

/**
 * Releases a manifest reference. NULL is accepted and ignored.
 *
 * # Safety
 * `manifest` is NULL or a live reference not released before.
 */
void kvexact_manifest_free(kvexact_manifest *manifest);

/**
 * Reads `engine`'s fixture set for `profile_id` beneath the root `registry` was loaded from,
 * under the same trust policy, and checks it against the profile (model names, clock
 * pairing).
 *
 * Returns `KVEXACT_OK` and a new reference in `*out`, or `KVEXACT_ERR_REGISTRY` with the
 * registry's code and the offending file (the readiness reason is then
 * `probe_fixtures_missing`), `KVEXACT_ERR_NULL_ARGUMENT`, `KVEXACT_ERR_INVALID_ARGUMENT`.
 *
 * Ownership: the caller owns `*out` (free with `kvexact_fixtures_free`) and `*err`.
 *
 * # Safety
 * `registry` is NULL or live; `profile_id` is valid for `n` bytes; `out` and `err` are NULL or
 * valid for one write.
 */
kvexact_status kvexact_fixtures_load(const kvexact_registry *registry,
                                     const uint8_t *profile_id,
                                     size_t n,
                                     kvexact_engine engine,
                                     kvexact_fixtures **out,
                                     kvexact_error **err);

/**
 * Set-level checks before any probe (docs/contracts/registry.md §5.2): a fixture for every surface the
 * rule serves (`api_mode` 0 both, 1 completions, 2 chat) and clock pairing against the profile.
 * Writes the finding (`probe_fixtures_missing` on failure) to `*out`.
 *
 * Returns `KVEXACT_OK`, or `KVEXACT_ERR_NULL_ARGUMENT` / `KVEXACT_ERR_INVALID_ARGUMENT`
 * (nothing written).
 *
 * # Safety
 * `fixtures` and `profile` are NULL or live; `out` is NULL or valid for one write.
 */
kvexact_status kvexact_fixtures_check(const kvexact_fixtures *fixtures,
                                      const kvexact_profile *profile,
                                      kvexact_api_mode api_mode,
                                      kvexact_finding *out);

/**
 * Number of fixtures in the set (0 when `fixtures` is NULL).
 *
 * # Safety
 * `fixtures` is NULL or live.
 */
size_t kvexact_fixtures_count(const kvexact_fixtures *fixtures);

/**
 * The request body of fixture `i`, to POST verbatim to the engine's tokenize route
 * (`kvexact_tokenize_path`). `*bytes` points into the set (valid while it lives; not
 * NUL-terminated); `*len` is its length.
 *
 * Returns `KVEXACT_OK`, or `KVEXACT_ERR_INVALID_ARGUMENT` (index out of range) /
 * `KVEXACT_ERR_NULL_ARGUMENT`.
 *
 * # Safety
 * `fixtures` is NULL or live; `bytes` and `len` are NULL or valid for one write.
 */
kvexact_status kvexact_fixture_request(const kvexact_fixtures *fixtures,
                                       size_t i,
                                       const uint8_t **bytes,
                                       size_t *len);

/**
 * Name, surface and clock flag of fixture `i` (addition to §6.5: the gateway probes only the
 * fixtures of the surfaces a rule serves, §5.2.4, and needs the surface to filter).
 *
 * Returns `KVEXACT_OK`, or `KVEXACT_ERR_INVALID_ARGUMENT` (index out of range) /
 * `KVEXACT_ERR_NULL_ARGUMENT`.
 *
 * # Safety
 * `fixtures` is NULL or live; `out` is NULL or valid for one write.
 */
kvexact_status kvexact_fixture_describe(const kvexact_fixtures *fixtures,
                                        size_t i,
                                        kvexact_fixture_info *out);

/**
 * Releases a fixture-set reference. NULL is accepted and ignored.
 *
 * # Safety
 * `fixtures` is NULL or a live reference not released before.
 */
void kvexact_fixtures_free(kvexact_fixtures *fixtures);

/**
 * The identity route of an engine: `"/version"` (vLLM), `"/get_server_info"` (SGLang),
 * `"/server_info"` (TensorRT-LLM); NULL for an unknown engine. Static; never free it.
 */
const char *kvexact_identity_path(kvexact_engine engine);

/**
 * The tokenize route fixtures are POSTed to: `"/tokenize"` (vLLM), `"/v1/tokenize"` (SGLang);
 * NULL for TensorRT-LLM, which has none (use `kvexact_judge_oracle`) and for an unknown
 * engine. Static; never free it.
 */
const char *kvexact_tokenize_path(kvexact_engine engine);

/**
 * The served-model route: `"/get_model_info"` (SGLang), else `"/v1/models"`; NULL for an
 * unknown engine. Static; never free it.
 */
const char *kvexact_served_model_path(kvexact_engine engine);

/**
 * Judges an engine's tokenize response to fixture `i` (docs/contracts/registry.md §5.3): a 200 JSON body
 * with integer `count`, integer-array `tokens`, integer `max_model_len` and `count ==
 * len(tokens)` (else `probe_schema_mismatch`), whose tokens equal the expected ids exactly
 * (else `token_mismatch` naming the first differing index). A clock fixture's ids are
 * re-derived by `encoder` at `now_unix_ms` (the answer's time, Unix ms UTC), once more a minute
 * earlier when the UTC date rolled over in between. A chat fixture whose requests the
 * tokenize route renders another way under `encoder` (harmony on vLLM: probe it with
 * `kvexact_fixture_probe` / `kvexact_judge_probe`) fails `profile_resolution_fault`.
 *
 * Writes the finding to `*out` and returns `KVEXACT_OK`; `KVEXACT_ERR_NULL_ARGUMENT` /
 * `KVEXACT_ERR_INVALID_ARGUMENT` (index out of range, status outside 0..=65535) write nothing.
 *
 * # Safety
 * `encoder` and `fixtures` are NULL or live; `body` is valid for `len` bytes; `out` is NULL or
 * valid for one write.
 */
kvexact_status kvexact_judge_tokenize(const kvexact_encoder *encoder,
                                      const kvexact_fixtures *fixtures,
                                      size_t i,
                                      int32_t http_status,
                                      const uint8_t *body,
                                      size_t len,
                                      int64_t now_unix_ms,
                                      kvexact_finding *out);

/**
 * TensorRT-LLM's approved oracle (no tokenize route): re-derives every fixture of the surfaces
 * `api_mode` serves through `encoder` and compares with the banked ids; a fixture naming
 * another model than `model` or lacking prompt/messages is `probe_schema_mismatch`. A pass has
 * `oracle` = 1. `now_unix_ms` is used for clock fixtures without `oracleNow`.
 *
 * Improvement on §6.5: the rule's `model` and `api_mode` are parameters, since the oracle
 * checks the fixtures against the rule and probes only the surfaces it serves.
 *
 * Returns `KVEXACT_OK` with `*out` written, or `KVEXACT_ERR_NULL_ARGUMENT` /
 * `KVEXACT_ERR_INVALID_ARGUMENT`.
 *
 * # Safety
 * `encoder` and `fixtures` are NULL or live; `model` is valid for `model_len` bytes; `out` is
 * NULL or valid for one write.
 */
kvexact_status kvexact_judge_oracle(const kvexact_encoder *encoder,
                                    const kvexact_fixtures *fixtures,
                                    const uint8_t *model,
                                    size_t model_len,
                                    kvexact_api_mode api_mode,
                                    int64_t now_unix_ms,
                                    kvexact_finding *out);

/**
 * Judges an identity response (the body of `kvexact_identity_path(engine)`) against the
 * manifest: vLLM/SGLang `version` must equal the pinned engine version (SGLang: and
 * `revision` the pinned model revision); TensorRT-LLM must describe its KV contract
 * (`kv_cache_hash_algo` `"v1_block_key"`, integer `tokens_per_block`). Failures are
 * `identity_mismatch`, or `probe_schema_mismatch` for a non-200 / non-JSON / oversized body.
 *
 * Returns `KVEXACT_OK` with `*out` written, or `KVEXACT_ERR_NULL_ARGUMENT` /
 * `KVEXACT_ERR_INVALID_ARGUMENT`.
 *
 * # Safety
 * `manifest` is NULL or live; `body` is valid for `len` bytes; `out` is NULL or valid for one
 * write.
 */
kvexact_status kvexact_judge_identity(kvexact_engine engine,
                                      const kvexact_manifest *manifest,
                                      int32_t http_status,
                                      const uint8_t *body,
                                      size_t len,
                                      kvexact_finding *out);

/**
 * Challenge preflight: the rule's KV geometry against the engine's server info — SGLang
 * `/get_server_info` (`page_size`, `kv_events.endpoint_port_base`, `kv_events.dp_size`),
 * TensorRT-LLM `/server_info` (`tokens_per_block`, hash mode); vLLM publishes none and always
 * passes. Failures are `engine_geometry_mismatch`.
 *
 * Improvement on §6.5: `http_status` is passed too (a non-200 answer is
 * `probe_schema_mismatch`, not a geometry verdict).
 *
 * Returns `KVEXACT_OK` with `*out` written, or `KVEXACT_ERR_NULL_ARGUMENT` /
 * `KVEXACT_ERR_INVALID_ARGUMENT`.
 *
 * # Safety
 * `server_info` is valid for `len` bytes; `out` is NULL or valid for one write.
 */
kvexact_status kvexact_judge_geometry(kvexact_engine engine,
                                      int32_t http_status,
                                      const uint8_t *server_info,
                                      size_t len,
                                      uint32_t block_size,
                                      uint16_t zmq_port,
                                      uint16_t dp_ranks,
                                      kvexact_finding *out);

/**
 * Served-model preflight (addition to §6.5): the body of `kvexact_served_model_path(engine)`
 * must list `model` (SGLang `/get_model_info` `served_model_name` or `model_path`, else
 * `/v1/models` `data[].id`); else `identity_mismatch` (`probe_schema_mismatch` for a body
 * that is not the route's JSON).
 *
 * Returns `KVEXACT_OK` with `*out` written, or `KVEXACT_ERR_NULL_ARGUMENT` /
 * `KVEXACT_ERR_INVALID_ARGUMENT`.
 *
 * # Safety
 * `body` is valid for `len` bytes; `model` for `model_len` bytes; `out` is NULL or valid for
 * one write.
 */
kvexact_status kvexact_judge_served_model(kvexact_engine engine,
                                          int32_t http_status,
                                          const uint8_t *body,
                                          size_t len,
                                          const uint8_t *model,
                                          size_t model_len,
                                          kvexact_finding *out);

/**
 * Where and what to POST to probe fixture `i` under `encoder`: `*path` gets the route
 * (static, never free it): the tokenize route (`"/tokenize"`, `"/v1/tokenize"`) for
 * completions fixtures and for chat under the Jinja template, `"/v1/chat/completions"` for
 * chat under a renderer the tokenize route does not take (harmony on vLLM 0.31/0.33, catalog
 * `chat.probeRoutes`); the body goes to `body` under the size-query convention (`*len` holds
 * its length whenever the call returns `KVEXACT_OK` or `KVEXACT_ERR_BUFFER_TOO_SMALL`; `body`
 * may be NULL with `cap` 0): the fixture's request verbatim on the tokenize route, with
 * `max_tokens` 1, `return_token_ids` and no streaming on the chat route. Judge the answer
 * with `kvexact_judge_probe`.
 *
 * `KVEXACT_ERR_UNSUPPORTED` (nothing written): no route shows the ids chat requests get
 * (the encoder's chat renderer is unknown), or the engine has no tokenize route
 * (TensorRT-LLM: `kvexact_judge_oracle`). `KVEXACT_ERR_NULL_ARGUMENT` /
 * `KVEXACT_ERR_INVALID_ARGUMENT` (index out of range).
 *
 * # Safety
 * `encoder` and `fixtures` are NULL or live; `path` and `len` are NULL or valid for one
 * write; `body` is NULL or valid for `cap` writes.
 */
kvexact_status kvexact_fixture_probe(const kvexact_encoder *encoder,
                                     const kvexact_fixtures *fixtures,
                                     size_t i,
                                     const char **path,
                                     uint8_t *body,
                                     size_t cap,
                                     size_t *len);

/**
 * Judges the engine's answer to the probe `kvexact_fixture_probe` gave for fixture `i`: on
 * the tokenize route as `kvexact_judge_tokenize`; on the chat route a 200 JSON object whose
 * `prompt_token_ids` (an engine that ignores `return_token_ids` has none:
 * `probe_schema_mismatch`) equal the expected ids exactly (else `token_mismatch` naming the
 * first differing index). A clock fixture's ids are re-derived at `now_unix_ms` (once more a
 * minute earlier across a UTC midnight). Where no route shows the chat path's ids the finding
 * fails (`profile_resolution_fault`): a probe of another path proves nothing.
 *
 * Writes the finding to `*out` and returns `KVEXACT_OK`; `KVEXACT_ERR_NULL_ARGUMENT` /
 * `KVEXACT_ERR_INVALID_ARGUMENT` write nothing.
 *
 * # Safety
 * `encoder` and `fixtures` are NULL or live; `body` is valid for `len` bytes; `out` is NULL or
 * valid for one write.
 */
kvexact_status kvexact_judge_probe(const kvexact_encoder *encoder,
                                   const kvexact_fixtures *fixtures,
                                   size_t i,
                                   int32_t http_status,
                                   const uint8_t *body,
                                   size_t len,
                                   int64_t now_unix_ms,
                                   kvexact_finding *out);

/**
 * Arms a challenge: grows the nonce prompt through `encoder`'s completions encoding (the
 * engine's, with its contract quirks `cacheChunk` and `challengeLastBlock`) until it is long
 * enough, and computes the expected tokens and block hashes with `hasher` (the rule's).
 *
 * `nonce` is 16 bytes, or NULL to draw them from the OS (`/dev/urandom`).
 *
 * Improvement on §6.5: `opts` carries the served model name and declared DP ranks, which the
 * request body and the judging need and the encoder does not know.
 *
 * Returns `KVEXACT_OK` and the challenge in `*out`; `KVEXACT_ERR_CHALLENGE` with code
 * `"challenge_failed"` (the readiness reason) when it cannot be built (prompt never long
 * enough, fewer than 2 expected blocks, `cacheChunk` not a multiple of the block size, nonce
 * unavailable); `KVEXACT_ERR_NULL_ARGUMENT` / `KVEXACT_ERR_INVALID_ARGUMENT`.
 *
 * Ownership: the caller owns `*out` (free with `kvexact_challenge_free`) and `*err`; the
 * challenge keeps no reference to `encoder` or `hasher`.
 *
 * # Safety
 * `encoder`, `hasher` are NULL or live; `nonce` is NULL or valid for 16 bytes; `opts` is NULL
 * or valid (and its `model` valid for `model_len` bytes); `out` and `err` are NULL or valid for
 * one write.
 */
kvexact_status kvexact_challenge_new(const kvexact_encoder *encoder,
                                     const kvexact_hasher *hasher,
                                     const uint8_t *nonce,
                                     const kvexact_challenge_opts *opts,
                                     kvexact_challenge **out,
                                     kvexact_error **err);

/**
 * The `/v1/completions` body to POST for the challenge:
 * `{"model":…,"prompt":…,"max_tokens":1,"temperature":0}`; with `bootstrap_host` non-NULL
 * (SGLang P/D rules) also `"bootstrap_host":…,"bootstrap_port":…,"bootstrap_room":…`.
 * `bootstrap_room` must be non-negative (a random 63-bit value).
 *
 * Writes the needed length to `*len`; when `cap` is smaller returns
 * `KVEXACT_ERR_BUFFER_TOO_SMALL` and writes nothing else (`buf` may be NULL with `cap` 0 to ask
 * for the size); else copies the body (no NUL) and returns `KVEXACT_OK`.
 *
 * # Safety
 * `challenge` is NULL or live; `bootstrap_host` is NULL or NUL-terminated; `buf` is NULL or
 * valid for `cap` bytes; `len` is NULL or valid for one write.
 */
kvexact_status kvexact_challenge_request_body(const kvexact_challenge *challenge,
                                              const char *bootstrap_host,
                                              uint16_t bootstrap_port,
                                              int64_t bootstrap_room,
                                              uint8_t *buf,
                                              size_t cap,
                                              size_t *len);

/**
 * The challenge's expected block hashes and tokens (for logs and receipts). The pointers point
 * into the challenge (valid while it lives).
 *
 * Returns `KVEXACT_OK`, or `KVEXACT_ERR_NULL_ARGUMENT`.
 *
 * # Safety
 * `challenge` is NULL or live; the four out-parameters are NULL or valid for one write.
 */
kvexact_status kvexact_challenge_expected(const kvexact_challenge *challenge,
                                          const uint64_t **hashes,
                                          size_t *n_hashes,
                                          const uint32_t **tokens,
                                          size_t *n_tokens);

/**
 * Feeds one decoded event from the challenged endpoint's stream (as `kvexact_event_decode`
 * returned it; only stored events count). `dp_rank` is the batch's DP rank, or -1 when the
 * stream carries none. Returns 1 once the challenge is decided (passed or failed), 0 while it
 * still waits, or a negative status (`KVEXACT_ERR_NULL_ARGUMENT`,
 * `KVEXACT_ERR_INVALID_ARGUMENT`) when the arguments are unusable.
 *
 * # Safety
 * `challenge` is NULL or live and not used concurrently; `ev` is NULL or a valid event whose
 * pointers are valid for their counts.
 */
int32_t kvexact_challenge_observe(kvexact_challenge *challenge,
                                  int64_t dp_rank,
                                  const kvexact_event *ev);

/**
 * The challenge's outcome: a pass once every expected hash (or, quirk `challengeLastBlock`,
 * the last one) was echoed with matching tokens; `challenge_failed` for a wrong echo (LoRA or
 * extra keys, different tokens, an undeclared rank, a TensorRT-LLM hash its tokens do not
 * give); `challenge_timeout` when undecided (`timed_out` non-zero says the caller's wait —
 * 15 s by default — ended).
 *
 * Returns `KVEXACT_OK` with `*out` written, or `KVEXACT_ERR_NULL_ARGUMENT`.
 *
 * # Safety
 * `challenge` is NULL or live; `out` is NULL or valid for one write.
 */
kvexact_status kvexact_challenge_result(const kvexact_challenge *challenge,
                                        int32_t timed_out,
                                        kvexact_finding *out);

/**
 * Frees a challenge. NULL is accepted and ignored.
 *
 * # Safety
 * `challenge` is NULL or live and not freed before.
 */
void kvexact_challenge_free(kvexact_challenge *challenge);

/**
 * Starts rank coverage for `declared` DP ranks (0 counts as 1). Returns `KVEXACT_OK` and the
 * tracker in `*out` (free with `kvexact_rank_coverage_free`), or `KVEXACT_ERR_NULL_ARGUMENT`
 * (`out` NULL) with an error object in `*err` when `err` is not NULL.
 *
 * Ownership: the caller owns `*out` and `*err` (free with `kvexact_error_free`).
 *
 * # Safety
 * `out` and `err` are NULL or valid for one write.
 */
kvexact_status kvexact_rank_coverage_new(uint32_t declared,
                                         kvexact_rank_coverage **out,
                                         kvexact_error **err);

/**
 * Records a challenge that passed (`kvexact_challenge_result` ok) by the ranks that echoed it
 * (a stream without ranks counts as rank 0), then says what to do next: 1 = run another
 * challenge with a fresh nonce, 0 = decided (read `kvexact_rank_coverage_result`), or a
 * negative status (`KVEXACT_ERR_NULL_ARGUMENT`; `KVEXACT_ERR_INVALID_ARGUMENT` when the
 * challenge has not passed — a failed challenge fails the rung by itself).
 *
 * # Safety
 * `coverage` is NULL or live and not used concurrently; `challenge` is NULL or live.
 */
int32_t kvexact_rank_coverage_record(kvexact_rank_coverage *coverage,
                                     const kvexact_challenge *challenge);

/**
 * The coverage verdict: a pass once every declared rank echoed, else `challenge_failed`
 * naming the ranks that never did. Returns `KVEXACT_OK` with `*out` written, or
 * `KVEXACT_ERR_NULL_ARGUMENT`.
 *
 * # Safety
 * `coverage` is NULL or live; `out` is NULL or valid for one write.
 */
kvexact_status kvexact_rank_coverage_result(const kvexact_rank_coverage *coverage,
                                            kvexact_finding *out);

/**
 * Frees a rank-coverage tracker. NULL is accepted and ignored.
 *
 * # Safety
 * `coverage` is NULL or live and not freed before.
 */
void kvexact_rank_coverage_free(kvexact_rank_coverage *coverage);

/**
 * One pass of the readiness ladder (docs/contracts/registry.md §8.3) over the evidence the gateway
 * gathered, as JSON in and JSON out (addition to §6.5: the ladder's inputs are a tree of
 * optional findings per endpoint, which JSON carries to Go without a dozen C structs).
 *
 * `evidence_json` is kvprobe's `Evidence` in camelCase JSON; every key is optional (defaults:
 * profile bound, fence and eligible acknowledged, adapter available, manifest missing,
 * nothing probed), an unknown key is refused. Findings are
 * `{"ok":…,"oracle":…,"reason":"token_mismatch"|null,"detail":"…"}`, observations
 * `{"finding":{…},"timeUnixMs":…}`, the manifest `{"kind":"present","digest":"…"}` or
 * `{"kind":"missing","detail":"…"}`. The verdict written to `buf` is
 * `{"enforcedState":"READY",…,"reasonCodes":[…],"detail":"…","receipts":[…]}`.
 *
 * Writes the verdict's length to `*len`; when `cap` is smaller returns
 * `KVEXACT_ERR_BUFFER_TOO_SMALL` and writes nothing else; else copies it (no NUL) and returns
 * `KVEXACT_OK`. Evidence that is not valid JSON of that shape is
 * `KVEXACT_ERR_INVALID_ARGUMENT` with an error object naming the problem.
 *
 * # Safety
 * `evidence_json` is valid for `evidence_len` bytes; `buf` is NULL or valid for `cap` bytes;
 * `len` and `err` are NULL or valid for one write.
 */
kvexact_status kvexact_readiness_evaluate(const uint8_t *evidence_json,
                                          size_t evidence_len,
                                          uint8_t *buf,
                                          size_t cap,
                                          size_t *len,
                                          kvexact_error **err);

/* ==== 9. Drift ====================================================================== */

/**
 * Creates a drift verifier for one endpoint running the engine release named by
 * `contract_id` and `engine_version` (as for `kvexact_hasher_new_for_contract`: a release id
 * such as `"vllm-kv-map-v2-r0.24"` with `engine_version` NULL, or a contract id with the
 * version the engine reports), under the rule's settings in `opts`.
 *
 * Returns `KVEXACT_OK` and the verifier in `*out`; otherwise a negative status with an error
 * object: the contract statuses of `kvexact_hasher_new_for_contract`
 * (`KVEXACT_ERR_UNKNOWN_ENGINE_VERSION`, `KVEXACT_ERR_CONTRACT_MISMATCH`,
 * `KVEXACT_ERR_NOT_FOUND`, `KVEXACT_ERR_INVALID_ARGUMENT` with code `"CONFIG"` for an
 * ambiguous contract id, a release without a KV plane or an algorithm of another engine),
 * `KVEXACT_ERR_INVALID_ARGUMENT` (`opts.struct_size` too small, above 4096 or with unknown
 * options set, block size 0, unknown `algo`, a seed for a non-vLLM release or not UTF-8, a
 * LoRA entry not UTF-8 or listed twice, a capacity above `KVEXACT_DRIFT_MAX_CAPACITY`,
 * `reserved` not 0),
 * `KVEXACT_ERR_NULL_ARGUMENT`. `*out` is not written on failure.
 *
 * Memory: the map (`map_capacity` × 88 bytes) and the prediction tracker are allocated here
 * and never grow; token buffers grow to the largest event seen.
 *
 * Ownership: the caller owns `*out` (free with `kvexact_drift_verifier_free`) and `*err`
 * (free with `kvexact_error_free`); the strings, `opts` and everything it points to are only
 * read during the call (copied).
 *
 * # Safety
 * `contract_id` and `engine_version` are NULL or NUL-terminated; `opts` is NULL or valid for
 * `opts->struct_size` bytes, its pointers valid for their lengths; `out` and `err` are NULL or
 * valid for one write.
 */
kvexact_status kvexact_drift_verifier_new(const char *contract_id,
                                          const char *engine_version,
                                          const kvexact_drift_options *opts,
                                          kvexact_drift_verifier **out,
                                          kvexact_error **err);

/**
 * Creates a drift verifier for one endpoint of a deployment (`kvexact_deployment_new`): the
 * deployment's release, block size, algorithm, seed and adapters (so LoRA blocks re-derive
 * with the paths it declares), and its key form (SGLang EAGLE bigram pages re-derive page by
 * page; vLLM look-ahead blocks re-derive from the `lookahead_token_ids` of each event). `opts`:
 * NULL for the defaults, or a `kvexact_drift_options` for the map, policy and prediction
 * settings, whose `algo`, `block_size`, `seed` and `loras` must be left zero (the
 * deployment's are used).
 *
 * Returns `KVEXACT_OK` and the verifier in `*out`; `KVEXACT_ERR_INVALID_ARGUMENT` (a rule
 * setting in `opts`, or the statuses of `kvexact_drift_verifier_new` for the rest of
 * `opts`), `KVEXACT_ERR_NULL_ARGUMENT`, with an error object. `*out` is not written on
 * failure.
 *
 * # Safety
 * `deployment` is NULL or live; `opts` is NULL or valid for `opts->struct_size` bytes; `out`
 * and `err` are NULL or valid for one write.
 */
kvexact_status kvexact_drift_verifier_new_for_deployment(const kvexact_deployment *deployment,
                                                         const kvexact_drift_options *opts,
                                                         kvexact_drift_verifier **out,
                                                         kvexact_error **err);

/**
 * Frees a verifier. NULL is accepted and ignored.
 *
 * # Safety
 * `verifier` is NULL or a live verifier, not freed before, with no call on it in flight.
 */
void kvexact_drift_verifier_free(kvexact_drift_verifier *verifier);

/**
 * Feeds one raw input of the endpoint's stream: for a vLLM or SGLang release the msgpack
 * payload of a ZMQ message (frame 2), for a TensorRT-LLM release the JSON body of one
 * `POST /kv_cache_events` response (the drain is destructive: the gateway must be its only
 * reader, and feed here the same body it indexes). Decoded with the release's exact schema,
 * then every stored block is re-derived. Evidence of a msgpack input gives the byte offset
 * of the event's token ids in `payload`.
 *
 * Raw bytes, not the `kvexact_event`s of a `kvexact_event_decoder` (a departure from
 * "feed already-decoded events"): a `kvexact_event` keeps hashes in their 64-bit form and
 * only flags extra keys and LoRA, while re-deriving needs their values (extra keys, LoRA
 * names, salts, look-ahead tokens, vLLM's full digests, TensorRT-LLM's published hash where a
 * re-hashing decoder replaced it). A gateway that indexes the events passes the same bytes to
 * both; decoding is cheap next to re-hashing. `kvexact_drift_feed_frames` takes the ZMQ
 * message as received.
 *
 * Returns `KVEXACT_OK` (0) while the verdict is clean, `KVEXACT_DRIFT_DETECTED` (1) once it is
 * `drift`, or a negative status: `KVEXACT_ERR_EVENT_SCHEMA` (code `"schema_mismatch"`: the
 * bytes are events, but not this release's — a field it never writes), `KVEXACT_ERR_EVENT_DECODE`
 * (`"decode_error"`), both counted in `undecodable` with nothing fed;
 * `KVEXACT_ERR_NULL_ARGUMENT`; `KVEXACT_ERR_PANIC` when an earlier call panicked inside the
 * verifier.
 *
 * Ownership: `payload` is only read during the call; the caller owns `*err`.
 *
 * # Safety
 * `verifier` is NULL or live; `payload` is NULL or valid for `len` bytes; `err` is NULL or
 * valid for one write.
 */
int32_t kvexact_drift_feed(const kvexact_drift_verifier *verifier,
                           const uint8_t *payload,
                           size_t len,
                           kvexact_error **err);

/**
 * Feeds one ZMQ message of a vLLM or SGLang endpoint as its three frames: the topic (UTF-8,
 * may be empty), the 8-byte big-endian sequence number (named in the evidence as
 * `batch_seq`) and the msgpack payload. Otherwise as `kvexact_drift_feed`; a TensorRT-LLM
 * verifier refuses it (`KVEXACT_ERR_INVALID_ARGUMENT`: use `kvexact_drift_feed`), a sequence
 * frame of another length is `KVEXACT_ERR_EVENT_DECODE`.
 *
 * # Safety
 * `verifier` is NULL or live; each frame pointer is NULL or valid for its length; `err` is
 * NULL or valid for one write.
 */
int32_t kvexact_drift_feed_frames(const kvexact_drift_verifier *verifier,
                                  const uint8_t *topic,
                                  size_t topic_len,
                                  const uint8_t *seq,
                                  size_t seq_len,
                                  const uint8_t *payload,
                                  size_t payload_len,
                                  kvexact_error **err);

/**
 * Records the block hashes (u64 form, as `kvexact_block_hashes_u64` gives them) kvexact
 * predicted for one request routed to this endpoint, now: each is counted as already stored,
 * stored within `predict_within_ms`, expired, or dropped (`kvexact_drift_get_counters`).
 *
 * Returns `KVEXACT_OK`, `KVEXACT_ERR_INVALID_ARGUMENT` when the verifier was made without
 * prediction tracking (`opts.predict_within_ms` 0), `KVEXACT_ERR_NULL_ARGUMENT`,
 * `KVEXACT_ERR_PANIC` (poisoned verifier). No allocation.
 *
 * Ownership: `hashes` is only read during the call.
 *
 * # Safety
 * `verifier` is NULL or live; `hashes` is NULL or valid for `n` reads.
 */
kvexact_status kvexact_drift_predict(const kvexact_drift_verifier *verifier,
                                     const uint64_t *hashes,
                                     size_t n);

/**
 * Writes the verifier's counters to `*out`: set `out->struct_size` to
 * `sizeof(kvexact_drift_counters)` first; the first `min(out->struct_size, this library's
 * size)` bytes are written and `out->struct_size` is set to that count.
 *
 * Returns `KVEXACT_OK`, `KVEXACT_ERR_INVALID_ARGUMENT` (`struct_size` below the first
 * version's size, nothing written), `KVEXACT_ERR_NULL_ARGUMENT`, `KVEXACT_ERR_PANIC`
 * (poisoned verifier).
 *
 * # Safety
 * `verifier` is NULL or live; `out` is NULL or valid for `out->struct_size` bytes.
 */
kvexact_status kvexact_drift_get_counters(const kvexact_drift_verifier *verifier,
                                          kvexact_drift_counters *out);

/**
 * The name of slot `index` of `kvexact_drift_counters.unverifiable_by_reason`
 * (`"parent_never_seen"`, `"parent_evicted"`, …, the reason codes of the report JSON), or
 * NULL for an unused slot. Static; never free it.
 */
const char *kvexact_drift_unverifiable_name(uint32_t index);

/**
 * The verifier's verdict (docs/contracts/drift.md §2): `KVEXACT_DRIFT_VERDICT_CLEAN` (0),
 * `KVEXACT_DRIFT_VERDICT_DRIFT` (1) or `KVEXACT_DRIFT_VERDICT_UNVERIFIABLE` (2: no stored block
 * seen, or fewer than half of them re-derived — never clean); or a negative status:
 * `KVEXACT_ERR_NULL_ARGUMENT`, `KVEXACT_ERR_PANIC` (poisoned verifier).
 *
 * # Safety
 * `verifier` is NULL or live.
 */
int32_t kvexact_drift_verdict(const kvexact_drift_verifier *verifier);

/**
 * Writes the verifier's verdict as the readiness ladder's `hash_drift` observation (the
 * `drift` finding of an endpoint's evidence for `kvexact_readiness_evaluate`): `ok` 1 with a
 * summary while clean; once drifted `ok` 0, reason `"hash_drift"`, and the first offending
 * block in `detail`.
 *
 * Returns `KVEXACT_OK`, `KVEXACT_ERR_NULL_ARGUMENT`, `KVEXACT_ERR_PANIC` (poisoned verifier).
 *
 * # Safety
 * `verifier` is NULL or live; `out` is NULL or valid for one write.
 */
kvexact_status kvexact_drift_finding(const kvexact_drift_verifier *verifier, kvexact_finding *out);

/**
 * Clears the verdict and the mismatch window (after the rule re-attested); the counters and
 * the map stay.
 *
 * Returns `KVEXACT_OK`, `KVEXACT_ERR_NULL_ARGUMENT`, `KVEXACT_ERR_PANIC` (poisoned verifier).
 *
 * # Safety
 * `verifier` is NULL or live.
 */
kvexact_status kvexact_drift_reset_verdict(const kvexact_drift_verifier *verifier);

/**
 * Writes the verifier's report as compact UTF-8 JSON, no NUL (what `kvexact watch --json`
 * reports for the verifier): `{"engine":…,"release_id":…,"contract_id":…,
 * "engine_version":…,"block_size":…,"verdict":"clean"|"drift"|"unverifiable","summary":…,
 * "counters":{…,
 * "unverifiable_by_reason":{"parent_never_seen":…}},"rederived_fraction":…,
 * "predictions":{…}|null,"map":{"capacity":…,"entries":…,"evictions":…,"bytes":…},
 * "evidence":{…}|null,"undecodable":…,"finding":{"ok":…,"reason":…,"detail":…}}`. The
 * evidence of a `drift` verdict names the first offending block: `kind` (`"root"`,
 * `"chained"`, `"block_size"`, `"keys"`), `detail`, `batch_index`, `batch_seq`, `event_id`,
 * `event_index`, `block_index`, `token_ids_offset` (bytes into the msgpack payload),
 * `tokens`, `event_block_size`, `rule_block_size`, `parent`, `published`, `published_hex`,
 * `expected`, `expected_digest`, `mismatches_in_window` and the release used. `finding` is
 * `kvexact_drift_finding`'s, in the ladder's JSON form.
 *
 * Size query as `kvexact_contracts_json`: whenever the call returns `KVEXACT_OK` or
 * `KVEXACT_ERR_BUFFER_TOO_SMALL`, `*len` holds the document's length; `buf` may be NULL with
 * `cap` 0 to ask for it. The counters move with every fed batch, so the document may have
 * grown by the next call: call again with the new length (or leave some room).
 * `KVEXACT_ERR_NULL_ARGUMENT` for a NULL `verifier` or `len` (or a NULL `buf` with `cap` > 0),
 * `KVEXACT_ERR_PANIC` (poisoned verifier).
 *
 * Ownership: `buf` stays the caller's; nothing is allocated for the caller.
 *
 * # Safety
 * `verifier` is NULL or live; `buf` is NULL or valid for `cap` writes; `len` is NULL or valid
 * for one write.
 */
kvexact_status kvexact_drift_report_json(const kvexact_drift_verifier *verifier,
                                         uint8_t *buf,
                                         size_t cap,
                                         size_t *len);

/**
 * Writes the Prometheus text exposition (format 0.0.4, `text/plain; version=0.0.4`) of the
 * counters of `n_series` verifiers, one series set per verifier, grouped by metric family
 * (each with its `# HELP` and `# TYPE` once), so that the verifiers of every endpoint go into
 * one scrape:
 *
 * * counters `kvexact_drift_batches_total`, `kvexact_drift_undecodable_total`,
 *   `kvexact_drift_events_total{kind="stored"|"removed"|"cleared"|"other"}`,
 *   `kvexact_drift_blocks_total`, `kvexact_drift_blocks_rederived_total`,
 *   `kvexact_drift_blocks_matched_total`,
 *   `kvexact_drift_blocks_mismatched_total{kind="root"|"chained"|"block_size"|"keys"}`,
 *   `kvexact_drift_blocks_unverifiable_total{reason=…}` (every reason, 0 included),
 *   `kvexact_drift_map_evictions_total`;
 * * gauges `kvexact_drift_detected` (1 drift, 0 clean), `kvexact_drift_map_entries`,
 *   `kvexact_drift_map_capacity`;
 * * for verifiers with prediction tracking: `kvexact_drift_predicted_hashes_total`,
 *   `kvexact_drift_predictions_resolved_total{outcome="already_stored"|"stored_within"|
 *   "expired"|"dropped"}`, gauge `kvexact_drift_predictions_pending`.
 *
 * Every sample carries the series' labels (in the order given) and `release="<release id>"`
 * (the verifier's engine release). A label name that is not a Prometheus name, starts with
 * `__`, is reserved (`release`, `kind`, `reason`, `outcome`) or repeats within a series, and
 * two series with the same labels, are `KVEXACT_ERR_INVALID_ARGUMENT`.
 *
 * Size query as `kvexact_drift_report_json` (the text may grow between two calls); like every
 * failure, `KVEXACT_ERR_BUFFER_TOO_SMALL` also writes an error object when `err` is not NULL
 * (pass NULL for the size query). `KVEXACT_ERR_NULL_ARGUMENT` for a NULL `len`, `series` with `n_series` > 0, verifier or
 * label pointer; `KVEXACT_ERR_PANIC` (a poisoned verifier).
 *
 * Each verifier is locked only while its counters are copied, one after the other.
 *
 * Ownership: everything passed is only read during the call; `buf` stays the caller's; the
 * caller owns `*err`.
 *
 * # Safety
 * `series` is NULL or valid for `n_series` reads, each with a NULL or live verifier and labels
 * valid as documented; `buf` is NULL or valid for `cap` writes; `len` and `err` are NULL or
 * valid for one write.
 */
kvexact_status kvexact_drift_prometheus(const kvexact_drift_series *series,
                                        size_t n_series,
                                        uint8_t *buf,
                                        size_t cap,
                                        size_t *len,
                                        kvexact_error **err);

/**
 * Bytes the map of a verifier with `capacity` entries takes (`kvprobe::drift::map_bytes`).
 */
size_t kvexact_drift_map_bytes(size_t capacity);

/* ==== 10. Engine contracts ========================================================== */

/**
 * Resolves the version an engine reports (`version`, NUL-terminated, e.g. vLLM's
 * `/version` `"0.24.0"`; a leading `v` and a `+local` build label are ignored) to exactly one
 * release of the built-in contract catalog. Never a family default, never the newest rules.
 *
 * On success writes the release id (e.g. `"vllm-kv-map-v2-r0.24"`) to `*release_id` and the
 * contract (gateway) id it refines (e.g. `"vllm-kv-map-v2"`, the key of profile quirks and
 * rules) to `*contract_id`, and returns `KVEXACT_OK`. Otherwise returns
 * `KVEXACT_ERR_UNKNOWN_ENGINE_VERSION` (error code `"UNKNOWN_ENGINE_VERSION"`, the message
 * naming the nearest known releases), `KVEXACT_ERR_INVALID_ARGUMENT` (`engine` not
 * `KVEXACT_VLLM`, `KVEXACT_SGLANG` or `KVEXACT_TRTLLM`; `version` not UTF-8) or
 * `KVEXACT_ERR_NULL_ARGUMENT`, and writes neither output.
 *
 * Ownership: both strings are static (they live for the process); never free them. The
 * caller owns `*err` (free with `kvexact_error_free`); `version` is only read during the call.
 *
 * # Safety
 * `version` is NULL or NUL-terminated; `release_id`, `contract_id` and `err` are NULL or valid
 * for one write.
 */
kvexact_status kvexact_contract_resolve(kvexact_engine engine,
                                        const char *version,
                                        const char **release_id,
                                        const char **contract_id,
                                        kvexact_error **err);

/**
 * Writes the built-in contract catalog as compact UTF-8 JSON, no NUL (the document
 * `kvexact contracts --json` prints, without its indentation):
 * `{"schema":"kvexact-contracts/v1","generation":…,"releases":[{"release":…,"contract":…,
 * "engine":…,"versions":[…],"range":…,"hash":{…},"events":{…},"chat":{…},"evidence":{…}}]}`,
 * one entry per release in catalog order.
 *
 * Size query and statuses as `kvexact_registry_discovery_json`: whenever the call returns
 * `KVEXACT_OK` or `KVEXACT_ERR_BUFFER_TOO_SMALL`, `*len` holds the document's length; `buf`
 * may be NULL with `cap` 0 to ask for it. `KVEXACT_ERR_NULL_ARGUMENT` for a NULL `len` (or a
 * NULL `buf` with `cap` > 0). The document is the same for every call in one process.
 *
 * Ownership: `buf` stays the caller's; nothing is allocated for the caller.
 *
 * # Safety
 * `buf` is NULL or valid for `cap` writes; `len` is NULL or valid for one write.
 */
kvexact_status kvexact_contracts_json(uint8_t *buf,
                                      size_t cap,
                                      size_t *len);

/* ==== 11. Errors, statuses and refusals ============================================= */

/**
 * The status the failing call returned, or `KVEXACT_ERR_NULL_ARGUMENT` when `err` is NULL.
 *
 * Ownership: `err` is borrowed.
 *
 * # Safety
 * `err` is NULL or a live error object from libkvexact.
 */
kvexact_status kvexact_error_status(const kvexact_error *err);

/**
 * The machine code of the error, a stable identifier: the status's lower-case name
 * (`kvexact_status_name`: `"null_argument"`, `"schema_mismatch"` …) unless a finer code
 * exists, which keeps its vocabulary's spelling: the registry's upper-case codes
 * (`"INSECURE_MODE"`, `"TOKENIZER_SHA_MISMATCH"`, `"MANIFEST_MISSING"`), the contract
 * catalog's (`"UNKNOWN_ENGINE_VERSION"`, `"CONTRACT_MISMATCH"`, `"UNKNOWN_NAME"`, `"CONFIG"`,
 * `"LIFT_NOT_ALLOWED"`), lower-case refusal feature codes (`"tools"`), admission rules
 * (`"model_not_served"`) and readiness reasons (`"challenge_failed"`). Returns `""` when
 * `err` is NULL.
 *
 * Ownership: the string belongs to `err` and lives until `kvexact_error_free(err)`.
 *
 * # Safety
 * `err` is NULL or a live error object from libkvexact.
 */
const char *kvexact_error_code(const kvexact_error *err);

/**
 * The human-readable message (UTF-8, NUL-terminated). Returns `""` when `err` is NULL.
 *
 * Ownership: the string belongs to `err` and lives until `kvexact_error_free(err)`.
 *
 * # Safety
 * `err` is NULL or a live error object from libkvexact.
 */
const char *kvexact_error_message(const kvexact_error *err);

/**
 * The file the error is about, relative to the registry root (e.g.
 * `"profiles/qwen25-7b-instruct-v1.yaml"`), or NULL when the error concerns no file (or
 * `err` is NULL).
 *
 * Ownership: the string belongs to `err` and lives until `kvexact_error_free(err)`.
 *
 * # Safety
 * `err` is NULL or a live error object from libkvexact.
 */
const char *kvexact_error_path(const kvexact_error *err);

/**
 * Frees an error object. NULL is accepted and ignored.
 *
 * Ownership: takes `err`; every string obtained from it becomes invalid.
 *
 * # Safety
 * `err` is NULL or a live error object from libkvexact, not freed before.
 */
void kvexact_error_free(kvexact_error *err);

/**
 * The stable lower-case name of a status (`"ok"`, `"request"`, `"null_argument"` …), or
 * `"unrecognized_status"` for a value libkvexact does not define.
 *
 * Ownership: the string is static; never free it.
 */
const char *kvexact_status_name(kvexact_status status);

/**
 * The lift bit of any refusal code: `1 << refusal` for a code libkvexact defines
 * (`KVEXACT_REFUSAL_UNPARSEABLE` … `KVEXACT_REFUSAL_AMBIGUOUS_ADDED_TOKEN`), 0 for
 * `KVEXACT_REFUSAL_NONE` and for a value it does not define. The `KVEXACT_REFUSAL_BIT_*`
 * constants are the bits of the codes kvexact can lift at all; which of them an engine release
 * lifts is its contract's (`chat.liftable` in `kvexact_contracts_json`), checked when the
 * encoder is built.
 */
uint32_t kvexact_refusal_bit(kvexact_refusal refusal);

/**
 * Parses comma-separated refusal names as `kvexact encode --allow` takes them
 * (`"tools,message_field"`; spaces around names and empty items are ignored, so `""` is 0)
 * into a lift mask for `kvexact_encoder_options.lifted`.
 *
 * Returns `KVEXACT_OK` and the mask in `*bits`, or `KVEXACT_ERR_INVALID_ARGUMENT` (error code
 * `"invalid_argument"`, the message naming the first unknown name) /
 * `KVEXACT_ERR_NULL_ARGUMENT`; `*bits` is written only on success.
 *
 * Ownership: `names` is only read during the call; the caller owns `*err`.
 *
 * # Safety
 * `names` is NULL or valid for `len` bytes; `bits` and `err` are NULL or valid for one write.
 */
kvexact_status kvexact_refusal_bits_parse(const uint8_t *names,
                                          size_t len,
                                          uint32_t *bits,
                                          kvexact_error **err);

/**
 * The stable feature code of a refusal (`"tools"`, `"multi_text_part"` …, `"none"` for
 * `KVEXACT_REFUSAL_NONE`), or `"unrecognized_refusal"` for a value libkvexact does not define.
 *
 * Ownership: the string is static; never free it.
 */
const char *kvexact_refusal_name(kvexact_refusal refusal);

#ifdef __cplusplus
}  // extern "C"
#endif  // __cplusplus

#endif  /* KVEXACT_H */
