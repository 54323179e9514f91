package kvexact

/*
#include <stdlib.h>
#include "kvexact.h"
*/
import "C"

import (
	"runtime"
	"unsafe"
)

// Engine is an engine family for the judges.
type Engine uint32

// Engines (kvexact_engine).
const (
	VLLM   Engine = C.KVEXACT_VLLM
	SGLang Engine = C.KVEXACT_SGLANG
	TRTLLM Engine = C.KVEXACT_TRTLLM
)

// APIMode is the surfaces a rule serves (the data-plane word's apiMode).
type APIMode uint32

// API modes.
const (
	APIBoth        APIMode = C.KVEXACT_API_BOTH
	APICompletions APIMode = C.KVEXACT_API_COMPLETIONS
	APIChat        APIMode = C.KVEXACT_API_CHAT
)

// Finding is the outcome of one probe, check or challenge.
type Finding struct {
	OK     bool
	Oracle bool   // earned through TensorRT-LLM's approved oracle
	Reason string // readiness reason code ("token_mismatch", …) when !OK
	Detail string
}

func goFinding(f *C.kvexact_finding) Finding {
	out := Finding{OK: f.ok == 1, Oracle: f.oracle == 1, Detail: C.GoString(&f.detail[0])}
	if f.reason != nil {
		out.Reason = C.GoString(f.reason)
	}
	return out
}

func cPath(p *C.char) string {
	if p == nil {
		return ""
	}
	return C.GoString(p)
}

// TokenizePath is the engine's tokenize route ("" for TensorRT-LLM: use the oracle).
func TokenizePath(e Engine) string { return cPath(C.kvexact_tokenize_path(C.kvexact_engine(e))) }

// IdentityPath is the engine's identity route.
func IdentityPath(e Engine) string { return cPath(C.kvexact_identity_path(C.kvexact_engine(e))) }

// Manifest is a profile's engine manifest (identity trust root).
type Manifest struct{ p *C.kvexact_manifest }

// LoadManifest reads manifests/<profileID>.yaml beneath the registry's root.
func (r *Registry) LoadManifest(profileID string) (*Manifest, error) {
	b := []byte(profileID)
	var m *C.kvexact_manifest
	var cerr *C.kvexact_error
	st := C.kvexact_manifest_load(r.p, bytesPtr(b), C.size_t(len(b)), &m, &cerr)
	runtime.KeepAlive(r)
	if st != C.KVEXACT_OK {
		return nil, takeError(st, cerr)
	}
	out := &Manifest{p: m}
	runtime.SetFinalizer(out, (*Manifest).Close)
	return out, nil
}

// Digest is the manifest file's sha256 (hex).
func (m *Manifest) Digest() string {
	s := cPath(C.kvexact_manifest_digest(m.p))
	runtime.KeepAlive(m)
	return s
}

// Close releases the manifest. Idempotent.
func (m *Manifest) Close() {
	if m.p != nil {
		C.kvexact_manifest_free(m.p)
		m.p = nil
		runtime.SetFinalizer(m, nil)
	}
}

// JudgeIdentity judges the body of IdentityPath(e) against the manifest.
func (m *Manifest) JudgeIdentity(e Engine, httpStatus int, body []byte) (Finding, error) {
	var f C.kvexact_finding
	st := C.kvexact_judge_identity(C.kvexact_engine(e), m.p, C.int32_t(httpStatus), bytesPtr(body), C.size_t(len(body)), &f)
	runtime.KeepAlive(m)
	runtime.KeepAlive(body)
	if st != C.KVEXACT_OK {
		return Finding{}, Status(st)
	}
	return goFinding(&f), nil
}

// Fixtures is one engine's probe-fixture set for a profile.
type Fixtures struct{ p *C.kvexact_fixtures }

// FixtureInfo describes one fixture.
type FixtureInfo struct {
	Name  string
	API   APIMode // APICompletions or APIChat
	Clock bool
}

// LoadFixtures reads and checks e's fixture set for profileID.
func (r *Registry) LoadFixtures(profileID string, e Engine) (*Fixtures, error) {
	b := []byte(profileID)
	var fx *C.kvexact_fixtures
	var cerr *C.kvexact_error
	st := C.kvexact_fixtures_load(r.p, bytesPtr(b), C.size_t(len(b)), C.kvexact_engine(e), &fx, &cerr)
	runtime.KeepAlive(r)
	if st != C.KVEXACT_OK {
		return nil, takeError(st, cerr)
	}
	out := &Fixtures{p: fx}
	runtime.SetFinalizer(out, (*Fixtures).Close)
	return out, nil
}

// Close releases the set. Idempotent.
func (fx *Fixtures) Close() {
	if fx.p != nil {
		C.kvexact_fixtures_free(fx.p)
		fx.p = nil
		runtime.SetFinalizer(fx, nil)
	}
}

// Count is the number of fixtures.
func (fx *Fixtures) Count() int {
	n := int(C.kvexact_fixtures_count(fx.p))
	runtime.KeepAlive(fx)
	return n
}

// Check runs the set-level checks for a rule serving mode.
func (fx *Fixtures) Check(p *Profile, mode APIMode) (Finding, error) {
	var f C.kvexact_finding
	st := C.kvexact_fixtures_check(fx.p, p.p, C.kvexact_api_mode(mode), &f)
	runtime.KeepAlive(fx)
	runtime.KeepAlive(p)
	if st != C.KVEXACT_OK {
		return Finding{}, Status(st)
	}
	return goFinding(&f), nil
}

// Info describes fixture i.
func (fx *Fixtures) Info(i int) (FixtureInfo, error) {
	var info C.kvexact_fixture_info
	st := C.kvexact_fixture_describe(fx.p, C.size_t(i), &info)
	if st != C.KVEXACT_OK {
		return FixtureInfo{}, Status(st)
	}
	out := FixtureInfo{Name: C.GoString(info.name), API: APIMode(info.api), Clock: info.clock != 0}
	runtime.KeepAlive(fx)
	return out, nil
}

// Request is fixture i's request body (a copy), to POST verbatim to TokenizePath.
func (fx *Fixtures) Request(i int) ([]byte, error) {
	var p *C.uint8_t
	var n C.size_t
	st := C.kvexact_fixture_request(fx.p, C.size_t(i), &p, &n)
	if st != C.KVEXACT_OK {
		return nil, Status(st)
	}
	out := C.GoBytes(unsafe.Pointer(p), C.int(n))
	runtime.KeepAlive(fx)
	return out, nil
}

// JudgeTokenize judges an engine's tokenize response to fixture i, answered at nowUnixMs.
func (e *Encoder) JudgeTokenize(fx *Fixtures, i int, httpStatus int, body []byte, nowUnixMs int64) (Finding, error) {
	var f C.kvexact_finding
	st := C.kvexact_judge_tokenize(e.p, fx.p, C.size_t(i), C.int32_t(httpStatus), bytesPtr(body), C.size_t(len(body)), C.int64_t(nowUnixMs), &f)
	runtime.KeepAlive(e)
	runtime.KeepAlive(fx)
	runtime.KeepAlive(body)
	if st != C.KVEXACT_OK {
		return Finding{}, Status(st)
	}
	return goFinding(&f), nil
}

// FixtureProbe is where and what to POST to probe fixture i under this encoder: the
// tokenize route with the fixture's request verbatim, or, for chat under a renderer the
// tokenize route does not take (harmony on vLLM), "/v1/chat/completions" with one generated
// token and return_token_ids (docs/contracts/templates.md §13.12). Judge the answer with
// JudgeProbe.
func (e *Encoder) FixtureProbe(fx *Fixtures, i int) (path string, body []byte, err error) {
	var p *C.char
	var n C.size_t
	st := C.kvexact_fixture_probe(e.p, fx.p, C.size_t(i), &p, nil, 0, &n)
	if st != C.KVEXACT_OK && st != C.KVEXACT_ERR_BUFFER_TOO_SMALL {
		return "", nil, Status(st)
	}
	buf := make([]byte, int(n)+1)
	st = C.kvexact_fixture_probe(e.p, fx.p, C.size_t(i), &p, (*C.uint8_t)(unsafe.Pointer(&buf[0])), C.size_t(len(buf)), &n)
	runtime.KeepAlive(e)
	runtime.KeepAlive(fx)
	if st != C.KVEXACT_OK {
		return "", nil, Status(st)
	}
	return C.GoString(p), buf[:int(n)], nil
}

// JudgeProbe judges the engine's answer to FixtureProbe's request for fixture i, answered
// at nowUnixMs.
func (e *Encoder) JudgeProbe(fx *Fixtures, i int, httpStatus int, body []byte, nowUnixMs int64) (Finding, error) {
	var f C.kvexact_finding
	st := C.kvexact_judge_probe(e.p, fx.p, C.size_t(i), C.int32_t(httpStatus), bytesPtr(body), C.size_t(len(body)), C.int64_t(nowUnixMs), &f)
	runtime.KeepAlive(e)
	runtime.KeepAlive(fx)
	runtime.KeepAlive(body)
	if st != C.KVEXACT_OK {
		return Finding{}, Status(st)
	}
	return goFinding(&f), nil
}

// JudgeOracle is TensorRT-LLM's approved oracle over the fixtures of mode's surfaces.
func (e *Encoder) JudgeOracle(fx *Fixtures, model string, mode APIMode, nowUnixMs int64) (Finding, error) {
	b := []byte(model)
	var f C.kvexact_finding
	st := C.kvexact_judge_oracle(e.p, fx.p, bytesPtr(b), C.size_t(len(b)), C.kvexact_api_mode(mode), C.int64_t(nowUnixMs), &f)
	runtime.KeepAlive(e)
	runtime.KeepAlive(fx)
	if st != C.KVEXACT_OK {
		return Finding{}, Status(st)
	}
	return goFinding(&f), nil
}

// Challenge is one armed hash challenge; not for concurrent use.
type Challenge struct{ p *C.kvexact_challenge }

// NewChallenge arms a challenge (nonce nil = drawn from the OS).
func NewChallenge(e *Encoder, h *Hasher, nonce *[16]byte, model string, dpRanks uint32) (*Challenge, error) {
	mb := []byte(model)
	// The options struct holds a pointer, so it lives in C memory for the call.
	mp := C.CBytes(mb)
	defer C.free(mp)
	opts := (*C.kvexact_challenge_opts)(C.malloc(C.size_t(unsafe.Sizeof(C.kvexact_challenge_opts{}))))
	defer C.free(unsafe.Pointer(opts))
	opts.model = (*C.uint8_t)(mp)
	opts.model_len = C.size_t(len(mb))
	opts.dp_ranks = C.uint32_t(dpRanks)
	var np *C.uint8_t
	if nonce != nil {
		np = (*C.uint8_t)(unsafe.Pointer(&nonce[0]))
	}
	var c *C.kvexact_challenge
	var cerr *C.kvexact_error
	st := C.kvexact_challenge_new(e.p, h.p, np, opts, &c, &cerr)
	runtime.KeepAlive(e)
	runtime.KeepAlive(h)
	runtime.KeepAlive(nonce)
	if st != C.KVEXACT_OK {
		return nil, takeError(st, cerr)
	}
	out := &Challenge{p: c}
	runtime.SetFinalizer(out, (*Challenge).Close)
	return out, nil
}

// Close frees the challenge. Idempotent.
func (c *Challenge) Close() {
	if c.p != nil {
		C.kvexact_challenge_free(c.p)
		c.p = nil
		runtime.SetFinalizer(c, nil)
	}
}

// RequestBody is the /v1/completions body to POST.
func (c *Challenge) RequestBody() ([]byte, error) {
	var n C.size_t
	st := C.kvexact_challenge_request_body(c.p, nil, 0, 0, nil, 0, &n)
	if st != C.KVEXACT_ERR_BUFFER_TOO_SMALL && st != C.KVEXACT_OK {
		return nil, Status(st)
	}
	buf := make([]byte, int(n))
	st = C.kvexact_challenge_request_body(c.p, nil, 0, 0, bytesPtr(buf), C.size_t(len(buf)), &n)
	runtime.KeepAlive(c)
	if st != C.KVEXACT_OK {
		return nil, Status(st)
	}
	return buf[:n], nil
}

// Expected is the challenge's expected block hashes and tokens (copies).
func (c *Challenge) Expected() ([]uint64, []uint32, error) {
	var hp *C.uint64_t
	var tp *C.uint32_t
	var nh, nt C.size_t
	if st := C.kvexact_challenge_expected(c.p, &hp, &nh, &tp, &nt); st != C.KVEXACT_OK {
		return nil, nil, Status(st)
	}
	hs := append([]uint64(nil), unsafe.Slice((*uint64)(unsafe.Pointer(hp)), int(nh))...)
	ts := append([]uint32(nil), unsafe.Slice((*uint32)(unsafe.Pointer(tp)), int(nt))...)
	runtime.KeepAlive(c)
	return hs, ts, nil
}

// ObserveStored feeds one stored event (as a decoder returns it) from rank dpRank (-1 none);
// it reports whether the challenge is decided.
func (c *Challenge) ObserveStored(dpRank int64, hashes []uint64, tokens []uint32, blockSize uint32) (bool, error) {
	ev := (*C.kvexact_event)(C.calloc(1, C.size_t(unsafe.Sizeof(C.kvexact_event{}))))
	defer C.free(unsafe.Pointer(ev))
	hp := C.malloc(C.size_t(8 * (len(hashes) + 1)))
	defer C.free(hp)
	tp := C.malloc(C.size_t(4 * (len(tokens) + 1)))
	defer C.free(tp)
	copy(unsafe.Slice((*uint64)(hp), len(hashes)), hashes)
	copy(unsafe.Slice((*uint32)(tp), len(tokens)), tokens)
	ev.kind = C.KVEXACT_EVENT_STORED
	ev.hashes = (*C.uint64_t)(hp)
	ev.n_hashes = C.size_t(len(hashes))
	ev.token_ids = (*C.uint32_t)(tp)
	ev.n_tokens = C.size_t(len(tokens))
	ev.block_size = C.uint32_t(blockSize)
	r := C.kvexact_challenge_observe(c.p, C.int64_t(dpRank), ev)
	runtime.KeepAlive(c)
	if r < 0 {
		return false, Status(r)
	}
	return r == 1, nil
}

// Result is the challenge's outcome (timedOut: the caller's wait ended).
func (c *Challenge) Result(timedOut bool) (Finding, error) {
	var f C.kvexact_finding
	st := C.kvexact_challenge_result(c.p, C.int32_t(cBool(timedOut)), &f)
	runtime.KeepAlive(c)
	if st != C.KVEXACT_OK {
		return Finding{}, Status(st)
	}
	return goFinding(&f), nil
}

// EvaluateReadiness runs one pass of the readiness ladder over evidence (kvprobe's Evidence as
// JSON) and returns the verdict JSON ({"enforcedState":…,"reasonCodes":[…],…}).
func EvaluateReadiness(evidence []byte) ([]byte, error) {
	var n C.size_t
	var cerr *C.kvexact_error
	st := C.kvexact_readiness_evaluate(bytesPtr(evidence), C.size_t(len(evidence)), nil, 0, &n, &cerr)
	if st != C.KVEXACT_ERR_BUFFER_TOO_SMALL {
		return nil, takeError(st, cerr)
	}
	buf := make([]byte, int(n))
	st = C.kvexact_readiness_evaluate(bytesPtr(evidence), C.size_t(len(evidence)), bytesPtr(buf), C.size_t(len(buf)), &n, &cerr)
	runtime.KeepAlive(evidence)
	if st != C.KVEXACT_OK {
		return nil, takeError(st, cerr)
	}
	return buf[:n], nil
}

// RankCoverage tracks SGLang DP-rank coverage across repeated challenges.
type RankCoverage struct{ p *C.kvexact_rank_coverage }

// NewRankCoverage starts coverage of declared DP ranks.
func NewRankCoverage(declared uint32) (*RankCoverage, error) {
	var p *C.kvexact_rank_coverage
	var cerr *C.kvexact_error
	if st := C.kvexact_rank_coverage_new(C.uint32_t(declared), &p, &cerr); st != C.KVEXACT_OK {
		return nil, takeError(st, cerr)
	}
	out := &RankCoverage{p: p}
	runtime.SetFinalizer(out, (*RankCoverage).Close)
	return out, nil
}

// Record counts a passed challenge; it reports whether another challenge should be run.
func (r *RankCoverage) Record(c *Challenge) (bool, error) {
	n := C.kvexact_rank_coverage_record(r.p, c.p)
	runtime.KeepAlive(r)
	runtime.KeepAlive(c)
	if n < 0 {
		return false, Status(n)
	}
	return n == 1, nil
}

// Result is the coverage verdict.
func (r *RankCoverage) Result() (Finding, error) {
	var f C.kvexact_finding
	st := C.kvexact_rank_coverage_result(r.p, &f)
	runtime.KeepAlive(r)
	if st != C.KVEXACT_OK {
		return Finding{}, Status(st)
	}
	return goFinding(&f), nil
}

// Close frees the tracker. Idempotent.
func (r *RankCoverage) Close() {
	if r.p != nil {
		C.kvexact_rank_coverage_free(r.p)
		r.p = nil
		runtime.SetFinalizer(r, nil)
	}
}
