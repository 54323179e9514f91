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

// HashAlgoContractDefault asks NewHasherForContract for the contract's default algorithm
// (sha256_cbor for vLLM; SGLang's and TensorRT-LLM's only one). NewHasher refuses it.
const HashAlgoContractDefault HashAlgo = C.KVEXACT_HASH_ALGO_CONTRACT_DEFAULT

// cStringOrNil is C.CString(s), or nil for "" (the C functions' "absent").
func cStringOrNil(s string) *C.char {
	if s == "" {
		return nil
	}
	return C.CString(s)
}

// ResolveContract maps the version an engine reports (e.g. vLLM's /version "0.24.0") to
// exactly one release of the built-in contract catalog: its release id
// ("vllm-kv-map-v2-r0.24") and the contract id it refines ("vllm-kv-map-v2"). An unknown
// version is an *Error matching ErrUnknownEngineVersion (code "UNKNOWN_ENGINE_VERSION"), never
// a family default.
func ResolveContract(e Engine, version string) (releaseID, contractID string, err error) {
	cv := C.CString(version)
	defer C.free(unsafe.Pointer(cv))
	var r, c *C.char
	var cerr *C.kvexact_error
	st := C.kvexact_contract_resolve(C.kvexact_engine(e), cv, &r, &c, &cerr)
	if st != C.KVEXACT_OK {
		return "", "", takeError(st, cerr)
	}
	// Static strings: copied, never freed.
	return C.GoString(r), C.GoString(c), nil
}

// ContractResolve is ResolveContract's former name.
//
// Deprecated: use ResolveContract.
func ContractResolve(e Engine, version string) (releaseID, contractID string, err error) {
	return ResolveContract(e, version)
}

// ContractsJSON is the built-in contract catalog as JSON (what `kvexact contracts --json`
// prints, compact).
func ContractsJSON() ([]byte, error) {
	var n C.size_t
	if st := C.kvexact_contracts_json(nil, 0, &n); st != C.KVEXACT_OK && st != C.KVEXACT_ERR_BUFFER_TOO_SMALL {
		return nil, Status(st)
	}
	buf := make([]byte, int(n))
	if st := C.kvexact_contracts_json(bytesPtr(buf), C.size_t(len(buf)), &n); st != C.KVEXACT_OK {
		return nil, Status(st)
	}
	return buf[:int(n)], nil
}

// NewHasherForContract creates a hasher with the hashing rules of one engine release.
// contractID is a release id ("vllm-kv-map-v2-r0.24") or a contract id; engineVersion is the
// version the engine reports ("" = none: then contractID must name one set of rules). With a
// version, the release it resolves to must be contractID or refine it (else
// ErrContractMismatch). algo is a HashAlgo of the release's engine or HashAlgoContractDefault;
// seed is vLLM's PYTHONHASHSEED (nil = unset, refused where the engine would draw a random
// NONE_HASH); SGLang and TensorRT-LLM take nil. NewHasher keeps the reference rules instead.
func NewHasherForContract(contractID, engineVersion string, algo HashAlgo, blockSize uint32, seed *string) (*Hasher, error) {
	cid := C.CString(contractID)
	defer C.free(unsafe.Pointer(cid))
	cver := cStringOrNil(engineVersion)
	if cver != nil {
		defer C.free(unsafe.Pointer(cver))
	}
	var sp *C.uint8_t
	var sl C.size_t
	if seed != nil {
		cs := C.CString(*seed) // non-NULL even for "", which means "set but empty"
		defer C.free(unsafe.Pointer(cs))
		sp, sl = (*C.uint8_t)(unsafe.Pointer(cs)), C.size_t(len(*seed))
	}
	var h *C.kvexact_hasher
	var cerr *C.kvexact_error
	st := C.kvexact_hasher_new_for_contract(cid, cver, C.kvexact_hash_algo(algo), C.uint32_t(blockSize), sp, sl, &h, &cerr)
	if st != C.KVEXACT_OK {
		return nil, takeError(st, cerr)
	}
	out := &Hasher{p: h}
	runtime.SetFinalizer(out, (*Hasher).Close)
	return out, nil
}

// NewEventDecoderForContract creates a decoder holding an engine to the exact KV-event
// schema of its release (contractID and engineVersion as for NewHasherForContract): a field
// the release never writes fails Decode with code "schema_mismatch". NewEventDecoder instead
// takes a wire schema id and accepts every release of the family. rehash as for
// NewEventDecoder (TensorRT-LLM only).
func NewEventDecoderForContract(contractID, engineVersion string, rehash *Hasher) (*EventDecoder, error) {
	cid := C.CString(contractID)
	defer C.free(unsafe.Pointer(cid))
	cver := cStringOrNil(engineVersion)
	if cver != nil {
		defer C.free(unsafe.Pointer(cver))
	}
	var hp *C.kvexact_hasher
	if rehash != nil {
		hp = rehash.p
	}
	var d *C.kvexact_event_decoder
	var cerr *C.kvexact_error
	st := C.kvexact_event_decoder_new_for_contract(cid, cver, hp, &d, &cerr)
	runtime.KeepAlive(rehash)
	if st != C.KVEXACT_OK {
		return nil, takeError(st, cerr)
	}
	out := &EventDecoder{p: d}
	runtime.SetFinalizer(out, (*EventDecoder).Close)
	return out, nil
}
