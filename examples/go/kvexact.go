// Package kvexact is a cgo binding of libkvexact (include/kvexact.h), written the way the
// gateway links it: handles are owned by Go values with an explicit Close (and a finalizer as
// a safety net), errors come back as *Error values built from the per-call kvexact_error
// object (never a thread-local "last error": a goroutine may change OS thread between calls),
// and Go memory is passed to C only for the duration of one call.
//
// Build: CGO_CFLAGS=-I<repo>/include CGO_LDFLAGS=-L<dir with libkvexact.a or .so>
// (scripts/ffi-go-test.sh does this), or install with scripts/ffi-install.sh.
package kvexact

/*
#cgo LDFLAGS: -lkvexact -lpthread -ldl -lm
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
	OK               Status = C.KVEXACT_OK
	ErrRequest       Status = C.KVEXACT_ERR_REQUEST
	ErrUnsupported   Status = C.KVEXACT_ERR_UNSUPPORTED
	ErrProfile       Status = C.KVEXACT_ERR_PROFILE
	ErrRenderer      Status = C.KVEXACT_ERR_RENDERER
	ErrTokenizer     Status = C.KVEXACT_ERR_TOKENIZER
	ErrUnknown       Status = C.KVEXACT_ERR_UNKNOWN
	ErrNotReady      Status = C.KVEXACT_ERR_NOT_READY
	ErrPanic         Status = C.KVEXACT_ERR_PANIC
	ErrNullArgument  Status = C.KVEXACT_ERR_NULL_ARGUMENT
	ErrInvalidArg    Status = C.KVEXACT_ERR_INVALID_ARGUMENT
	ErrBufferSmall   Status = C.KVEXACT_ERR_BUFFER_TOO_SMALL
	ErrHashUndefined Status = C.KVEXACT_ERR_HASH_UNDEFINED
	ErrOverflow      Status = C.KVEXACT_ERR_OVERFLOW
	ErrRegistry      Status = C.KVEXACT_ERR_REGISTRY
	ErrNotFound      Status = C.KVEXACT_ERR_NOT_FOUND
)

// Name is the stable lower-case name of the status ("null_argument", …).
func (s Status) Name() string { return C.GoString(C.kvexact_status_name(C.kvexact_status(s))) }

// Error implements error for calls that return only a status.
func (s Status) Error() string { return fmt.Sprintf("kvexact: %s (%d)", s.Name(), int32(s)) }

// Error is a failure reported through a kvexact_error object.
type Error struct {
	Status  Status
	Code    string // machine code, e.g. "insecure_file"
	Message string
	Path    string // registry-relative file, "" when none
}

func (e *Error) Error() string {
	if e.Path != "" {
		return fmt.Sprintf("kvexact: %s: %s (%s)", e.Code, e.Message, e.Path)
	}
	return fmt.Sprintf("kvexact: %s: %s", e.Code, e.Message)
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
	if st := C.kvexact_hasher_new(C.kvexact_hash_algo(algo), C.uint32_t(blockSize), sp, sl, &h); st != C.KVEXACT_OK {
		return nil, Status(st)
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
