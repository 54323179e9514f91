// Package kvexact is the Go binding of libkvexact (the C ABI in include/kvexact.h): the exact
// token ids and KV-cache block hashes that vLLM, SGLang and TensorRT-LLM compute for a
// request, computed in the gateway's process, plus the KV-event decoders, probe judges, hash
// challenge, readiness ladder and drift verifiers a cache-aware router needs.
//
// # Building
//
// The package links libkvexact through cgo and finds it with pkg-config (`#cgo pkg-config:
// kvexact`). Install the library, header and kvexact.pc with
//
//	scripts/ffi-install.sh /usr/local
//
// and build with PKG_CONFIG_PATH=/usr/local/lib/pkgconfig (at run time the shared library,
// libkvexact.so.0 after its ABI major, must be found, e.g. LD_LIBRARY_PATH=/usr/local/lib). scripts/ffi-go-test.sh instead writes
// a kvexact.pc that points at the repository's include/ and a directory holding only
// libkvexact.a, so that the tests link libkvexact statically, and runs go vet and go test.
// Needs Go 1.19 or later and no module downloads.
//
// # The gateway's path
//
// [ResolveContract] maps the version an engine reports to its release in the built-in
// catalog. A [Registry] is one immutable generation of model profiles ([LoadRegistry]); a
// [Profile] is looked up by the request's model name ([Registry.ProfileByModel]); an
// [Encoder] renders and tokenizes requests for one profile on one engine release
// ([NewEncoderWithOptions] with EncoderOptions.EngineVersion, [Encoder.EncodeChat]); a
// [Hasher] turns the ids into the block hashes the engine publishes in its KV events
// ([NewHasherForContract], [NewHasher], [Hasher.BlockHashes]).
// [Encoder.RouteKeys] does all of it in one call. [EventDecoder] decodes the engines' KV
// events ([NewEventDecoder]), [DriftVerifier] re-derives their hashes, and the probe types
// ([Fixtures], [Manifest], [Challenge], [RankCoverage]) and [EvaluateReadiness] drive readiness.
// An [Index] turns the engines' KV events into the routing decision: fed each endpoint's
// frames ([Index.FeedFrames]), it predicts the cached tokens each engine replica will report
// for a request's keys ([Index.Predict]), or routes and predicts in one call
// ([Index.RoutePredict]), and checks its predictions against the engines' reports
// ([Index.Observe], [Index.PredictionDrift]).
//
// # Handles, memory and concurrency
//
// Every handle is a Go value owning one C reference, released by its Close method
// (idempotent; a finalizer is only a safety net). Go memory is passed to C for the duration
// of one call and never kept. Registry, Profile, Encoder, Hasher, Manifest and Fixtures are
// immutable and safe for concurrent use; an EventDecoder, Challenge or RankCoverage has one
// user at a time; a DriftVerifier serialises concurrent calls itself; an Index is safe for
// concurrent use (predictions while events are fed).
//
// # Errors
//
// A failing call returns a [Status] (a negative libkvexact status code, which is an error)
// or, for the calls that take a C error object, an [*Error] carrying the status, a machine
// code, a message and, for registry files, the path. errors.Is(err, ErrNotFound) matches
// either by status; a strict-rule refusal is a [*RefusedError] (errors.Is(err,
// ErrUnsupported)). There is no thread-local "last error": a goroutine may change OS thread
// between two calls.
package kvexact
