package kvexact

/*
#cgo pkg-config: kvexact
#include <stdlib.h>
#include "kvexact.h"
*/
import "C"

import (
	"fmt"
	"runtime"
	"unsafe"
)

// Status is a libkvexact status code (0 = OK, negative = failure).
type Status int32

// Status codes (see kvexact.h). -1 … -7 equal the gateway's LLB_KV_TOK_ERR_* values.
const (
	OK                 Status = C.KVEXACT_OK
	ErrRequest         Status = C.KVEXACT_ERR_REQUEST
	ErrUnsupported     Status = C.KVEXACT_ERR_UNSUPPORTED
	ErrProfile         Status = C.KVEXACT_ERR_PROFILE
	ErrRenderer        Status = C.KVEXACT_ERR_RENDERER
	ErrTokenizer       Status = C.KVEXACT_ERR_TOKENIZER
	ErrUnknown         Status = C.KVEXACT_ERR_UNKNOWN
	ErrNotReady        Status = C.KVEXACT_ERR_NOT_READY
	ErrPanic           Status = C.KVEXACT_ERR_PANIC
	ErrNullArgument    Status = C.KVEXACT_ERR_NULL_ARGUMENT
	ErrInvalidArgument Status = C.KVEXACT_ERR_INVALID_ARGUMENT
	ErrBufferTooSmall  Status = C.KVEXACT_ERR_BUFFER_TOO_SMALL
	ErrHashUndefined   Status = C.KVEXACT_ERR_HASH_UNDEFINED
	ErrOverflow        Status = C.KVEXACT_ERR_OVERFLOW
	// ErrNoneHashUnreproducible: vLLM draws a random NONE_HASH for this configuration
	// (PYTHONHASHSEED unset with xxhash, or under NONE_HASH rule A); set the seed.
	ErrNoneHashUnreproducible Status = C.KVEXACT_ERR_NONE_HASH_UNREPRODUCIBLE
	// ErrPickleTooLarge: a pickle-serialised block does not fit one pickle frame.
	ErrPickleTooLarge Status = C.KVEXACT_ERR_PICKLE_TOO_LARGE
	// ErrHashRuleUnsupported: a hashing option the engine release's rules do not have.
	ErrHashRuleUnsupported Status = C.KVEXACT_ERR_HASH_RULE_UNSUPPORTED
	ErrRegistry            Status = C.KVEXACT_ERR_REGISTRY
	ErrNotFound            Status = C.KVEXACT_ERR_NOT_FOUND
	ErrEventSchema         Status = C.KVEXACT_ERR_EVENT_SCHEMA
	ErrEventDecode         Status = C.KVEXACT_ERR_EVENT_DECODE
	// ErrUnknownEngineVersion: no release of the contract catalog covers the engine version
	// (error code "UNKNOWN_ENGINE_VERSION").
	ErrUnknownEngineVersion Status = C.KVEXACT_ERR_UNKNOWN_ENGINE_VERSION
	// ErrContractMismatch: the engine version is a release of another contract than the one
	// named (error code "CONTRACT_MISMATCH").
	ErrContractMismatch Status = C.KVEXACT_ERR_CONTRACT_MISMATCH
	// ErrChallenge: a hash challenge could not be armed (readiness reason "challenge_failed").
	ErrChallenge Status = C.KVEXACT_ERR_CHALLENGE
	// ErrLiftNotAllowed: a refusal code asked to be lifted where the engine release's contract
	// does not define the engine's behaviour for it (error code "LIFT_NOT_ALLOWED"), refused
	// when the encoder is built.
	ErrLiftNotAllowed Status = C.KVEXACT_ERR_LIFT_NOT_ALLOWED
	// ErrDeploymentUnsupported: a deployment option the engine release cannot be keyed under
	// (error code "DEPLOYMENT_UNSUPPORTED", the message naming the option), refused when the
	// deployment is resolved.
	ErrDeploymentUnsupported Status = C.KVEXACT_ERR_DEPLOYMENT_UNSUPPORTED
)

// Former names of two statuses, kept for existing callers.
const (
	// Deprecated: use ErrInvalidArgument.
	ErrInvalidArg = ErrInvalidArgument
	// Deprecated: use ErrBufferTooSmall.
	ErrBufferSmall = ErrBufferTooSmall
)

// Name is the stable lower-case name of the status ("null_argument", …).
func (s Status) Name() string { return C.GoString(C.kvexact_status_name(C.kvexact_status(s))) }

// Error implements error for calls that return only a status.
func (s Status) Error() string { return fmt.Sprintf("kvexact: %s (%d)", s.Name(), int32(s)) }

// Error is a failure reported through a kvexact_error object.
type Error struct {
	Status  Status
	Code    string // machine code: the status name ("null_argument") or a finer one ("INSECURE_MODE")
	Message string
	Path    string // registry-relative file, "" when none
}

func (e *Error) Error() string {
	if e.Path != "" {
		return fmt.Sprintf("kvexact: %s: %s (%s)", e.Code, e.Message, e.Path)
	}
	return fmt.Sprintf("kvexact: %s: %s", e.Code, e.Message)
}

// Is lets errors.Is(err, ErrUnknownEngineVersion) (any Status) match an error object by its
// status.
func (e *Error) Is(target error) bool {
	s, ok := target.(Status)
	return ok && s == e.Status
}

// takeError converts (and frees) a C error object; status is used when err is NULL.
func takeError(status C.kvexact_status, err *C.kvexact_error) error {
	if err == nil {
		return Status(status)
	}
	defer C.kvexact_error_free(err)
	e := &Error{
		Status:  Status(C.kvexact_error_status(err)),
		Code:    C.GoString(C.kvexact_error_code(err)),
		Message: C.GoString(C.kvexact_error_message(err)),
	}
	if p := C.kvexact_error_path(err); p != nil {
		e.Path = C.GoString(p)
	}
	return e
}

// Version is libkvexact's version string.
func Version() string { return C.GoString(C.kvexact_version()) }

// RefusalName is the stable feature code of a refusal value ("tools", …).
func RefusalName(r uint32) string { return C.GoString(C.kvexact_refusal_name(C.kvexact_refusal(r))) }

// HashAlgo selects an engine's block-hash chain.
type HashAlgo uint32

// Hash algorithms (kvexact_hash_algo).
const (
	SHA256CBOR   HashAlgo = C.KVEXACT_SHA256_CBOR
	XXHashCBOR   HashAlgo = C.KVEXACT_XXHASH_CBOR
	SHA256SGLang HashAlgo = C.KVEXACT_SHA256_SGLANG
	BlockHashTRT HashAlgo = C.KVEXACT_BLOCKHASH_TRTLLM
	SHA256Pickle HashAlgo = C.KVEXACT_SHA256_PICKLE
	XXHashPickle HashAlgo = C.KVEXACT_XXHASH_PICKLE
)

// Hasher is a shared, immutable block hasher; safe for concurrent use.
type Hasher struct {
	p *C.kvexact_hasher
}

// NewHasher creates a hasher. seed is vLLM's PYTHONHASHSEED (nil = unset); SGLang and
// TensorRT-LLM take nil.
func NewHasher(algo HashAlgo, blockSize uint32, seed *string) (*Hasher, error) {
	var sp *C.uint8_t
	var sl C.size_t
	if seed != nil {
		cs := C.CString(*seed) // non-NULL even for "", which means "set but empty"
		defer C.free(unsafe.Pointer(cs))
		sp, sl = (*C.uint8_t)(unsafe.Pointer(cs)), C.size_t(len(*seed))
	}
	var h *C.kvexact_hasher
	var cerr *C.kvexact_error
	if st := C.kvexact_hasher_new(C.kvexact_hash_algo(algo), C.uint32_t(blockSize), sp, sl, &h, &cerr); st != C.KVEXACT_OK {
		return nil, takeError(st, cerr)
	}
	out := &Hasher{p: h}
	runtime.SetFinalizer(out, (*Hasher).Close)
	return out, nil
}

// Close releases the hasher; further calls report ErrNullArgument. Idempotent.
func (h *Hasher) Close() {
	if h.p != nil {
		C.kvexact_hasher_free(h.p)
		h.p = nil
		runtime.SetFinalizer(h, nil)
	}
}

// BlockCount is the number of hashes n ids give (see kvexact_hasher_block_count).
func (h *Hasher) BlockCount(n int, fullBlocksOnly bool) (int, error) {
	r := C.kvexact_hasher_block_count(h.p, C.size_t(n), cBool(fullBlocksOnly))
	runtime.KeepAlive(h)
	if r < 0 {
		return 0, Status(r)
	}
	return int(r), nil
}

// BlockHashes hashes ids into at most maxBlocks u64 hashes (engine KV-event form).
func (h *Hasher) BlockHashes(ids []uint32, fullBlocksOnly bool, maxBlocks int) ([]uint64, error) {
	out := make([]uint64, maxBlocks)
	n, err := h.BlockHashesInto(ids, fullBlocksOnly, out)
	if err != nil {
		return nil, err
	}
	return out[:n], nil
}

// BlockHashesInto is BlockHashes writing into the caller's buffer (no allocation).
func (h *Hasher) BlockHashesInto(ids []uint32, fullBlocksOnly bool, out []uint64) (int, error) {
	var ip *C.uint32_t
	if len(ids) > 0 {
		ip = (*C.uint32_t)(unsafe.Pointer(&ids[0]))
	}
	var op *C.uint64_t
	if len(out) > 0 {
		op = (*C.uint64_t)(unsafe.Pointer(&out[0]))
	}
	r := C.kvexact_block_hashes_u64(h.p, ip, C.size_t(len(ids)), cBool(fullBlocksOnly), op, C.size_t(len(out)))
	runtime.KeepAlive(h)
	if r < 0 {
		return 0, Status(r)
	}
	return int(r), nil
}

func cBool(b bool) C.int {
	if b {
		return 1
	}
	return 0
}

// Refusal is a strict-rule refusal reason (kvexact_refusal).
type Refusal uint32

// Name is the refusal's feature code ("tools", "trailing_assistant", …).
func (r Refusal) Name() string { return RefusalName(uint32(r)) }

// RefusedError is returned by EncodeChat/EncodeCompletions for a strict-rule refusal.
type RefusedError struct{ Reason Refusal }

func (e *RefusedError) Error() string { return "kvexact: refused: " + e.Reason.Name() }

// Is lets errors.Is(err, ErrUnsupported) match refusals.
func (e *RefusedError) Is(target error) bool { return target == ErrUnsupported }

// Registry is one immutable registry generation.
type Registry struct{ p *C.kvexact_registry }

// LoadRegistry loads root as generation number gen, trusting uid (besides 0).
func LoadRegistry(root string, trustedUID uint32, gen uint64) (*Registry, error) {
	croot := C.CString(root)
	defer C.free(unsafe.Pointer(croot))
	opts := C.kvexact_registry_opts{trusted_uid: C.uint32_t(trustedUID)}
	var r *C.kvexact_registry
	var cerr *C.kvexact_error
	st := C.kvexact_registry_load((*C.uint8_t)(unsafe.Pointer(croot)), C.size_t(len(root)), &opts, C.uint64_t(gen), &r, &cerr)
	if st != C.KVEXACT_OK {
		return nil, takeError(st, cerr)
	}
	out := &Registry{p: r}
	runtime.SetFinalizer(out, (*Registry).Close)
	return out, nil
}

// Close releases this reference. Idempotent.
func (r *Registry) Close() {
	if r.p != nil {
		C.kvexact_registry_free(r.p)
		r.p = nil
		runtime.SetFinalizer(r, nil)
	}
}

// Generation is the generation number given at load.
func (r *Registry) Generation() uint64 {
	g := uint64(C.kvexact_registry_generation(r.p))
	runtime.KeepAlive(r)
	return g
}

// SetDigest is the generation's setDigest (64 hex chars).
func (r *Registry) SetDigest() (string, error) {
	var buf [65]C.char
	st := C.kvexact_registry_set_digest(r.p, &buf[0])
	runtime.KeepAlive(r)
	if st != C.KVEXACT_OK {
		return "", Status(st)
	}
	return C.GoString(&buf[0]), nil
}

// Profile is a published profile; it keeps its generation alive.
type Profile struct{ p *C.kvexact_profile }

// ProfileByModel looks up the profile serving a request's model name.
func (r *Registry) ProfileByModel(model string) (*Profile, error) {
	cm := C.CString(model)
	defer C.free(unsafe.Pointer(cm))
	var p *C.kvexact_profile
	st := C.kvexact_profile_by_model(r.p, (*C.uint8_t)(unsafe.Pointer(cm)), C.size_t(len(model)), &p)
	runtime.KeepAlive(r)
	if st != C.KVEXACT_OK {
		return nil, Status(st)
	}
	out := &Profile{p: p}
	runtime.SetFinalizer(out, (*Profile).Close)
	return out, nil
}

// ID is the profileId.
func (p *Profile) ID() string {
	s := C.GoString(C.kvexact_profile_id(p.p))
	runtime.KeepAlive(p)
	return s
}

// Close releases this reference. Idempotent.
func (p *Profile) Close() {
	if p.p != nil {
		C.kvexact_profile_free(p.p)
		p.p = nil
		runtime.SetFinalizer(p, nil)
	}
}

// Encoder renders and tokenizes requests for one profile × engine contract; safe for
// concurrent use.
type Encoder struct{ p *C.kvexact_encoder }

// NewEncoder builds the encoder of p for contractID (e.g. "vllm-kv-map-v2").
func NewEncoder(p *Profile, contractID string) (*Encoder, error) {
	cc := C.CString(contractID)
	defer C.free(unsafe.Pointer(cc))
	var e *C.kvexact_encoder
	var cerr *C.kvexact_error
	st := C.kvexact_encoder_new(p.p, cc, &e, &cerr)
	runtime.KeepAlive(p)
	if st != C.KVEXACT_OK {
		return nil, takeError(st, cerr)
	}
	out := &Encoder{p: e}
	runtime.SetFinalizer(out, (*Encoder).Close)
	return out, nil
}

// Close releases this reference. Idempotent.
func (e *Encoder) Close() {
	if e.p != nil {
		C.kvexact_encoder_free(e.p)
		e.p = nil
		runtime.SetFinalizer(e, nil)
	}
}

func bytesPtr(b []byte) *C.uint8_t {
	if len(b) == 0 {
		return nil
	}
	return (*C.uint8_t)(unsafe.Pointer(&b[0]))
}

// EncodeChat encodes a raw chat request body at nowUnixMs (UTC) into at most len(out) ids.
func (e *Encoder) EncodeChat(body []byte, nowUnixMs int64, out []uint32) (int, error) {
	var refusal C.kvexact_refusal
	var op *C.uint32_t
	if len(out) > 0 {
		op = (*C.uint32_t)(unsafe.Pointer(&out[0]))
	}
	n := C.kvexact_encode_chat(e.p, bytesPtr(body), C.size_t(len(body)), C.int64_t(nowUnixMs), op, C.uint32_t(len(out)), &refusal)
	runtime.KeepAlive(e)
	runtime.KeepAlive(body)
	if n == C.KVEXACT_ERR_UNSUPPORTED {
		return 0, &RefusedError{Reason: Refusal(refusal)}
	}
	if n < 0 {
		return 0, Status(n)
	}
	return int(n), nil
}

// EncodeCompletions encodes a completions prompt text into at most len(out) ids. A refusal
// is a *RefusedError naming the reason (RefusalNulByte, RefusalInputTooLarge,
// RefusalAmbiguousAddedToken, or RefusalTemplateRaised where the release's completions path
// is not proven); other failures are a Status.
func (e *Encoder) EncodeCompletions(text string, out []uint32) (int, error) {
	b := []byte(text)
	var refusal C.kvexact_refusal
	var op *C.uint32_t
	if len(out) > 0 {
		op = (*C.uint32_t)(unsafe.Pointer(&out[0]))
	}
	n := C.kvexact_encode_completions_with_refusal(e.p, bytesPtr(b), C.size_t(len(b)), op, C.uint32_t(len(out)), &refusal)
	runtime.KeepAlive(e)
	if n == C.KVEXACT_ERR_UNSUPPORTED {
		return 0, &RefusedError{Reason: Refusal(refusal)}
	}
	if n < 0 {
		return 0, Status(n)
	}
	return int(n), nil
}
