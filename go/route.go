package kvexact

/*
#include <stdlib.h>
#include <string.h>
#include "kvexact.h"
*/
import "C"

import (
	"runtime"
	"unsafe"
)

// EncoderOptions are the options of NewEncoderWithOptions (kvexact_encoder_options); the
// zero value is NewEncoder's behaviour: strict rules, the contract's release, a segment
// cache of KVEXACT_SEGMENT_CACHE_DEFAULT_BYTES (8 MiB).
type EncoderOptions struct {
	// EngineVersion is the engine release as it reports its version ("" = the release or
	// contract contractID names).
	EngineVersion string
	// Lifted is the mask of strict-rule refusal codes to lift (KVEXACT_REFUSAL_BIT_*).
	Lifted uint32
	// SegmentCacheBytes is the segment cache's capacity (0 = the default).
	SegmentCacheBytes uint64
	// NoCache builds the encoder without a segment cache (SegmentCacheBytes must be 0).
	NoCache bool
	// Limits bound each request's work; a zero field is the default (README "Limits"),
	// math.MaxUint64 / math.MaxUint32 no bound. Over a bound a request is refused
	// input_too_large (a *RefusedError).
	MaxBodyBytes, MaxRenderedBytes, MaxWordBytes, MaxFallbackBytes uint64
	MaxMessages                                                    uint32
}

// NewEncoderWithOptions builds the encoder of p for contractID with o
// (kvexact_encoder_new_with_options).
func NewEncoderWithOptions(p *Profile, contractID string, o EncoderOptions) (*Encoder, error) {
	cc := C.CString(contractID)
	defer C.free(unsafe.Pointer(cc))
	var opts C.kvexact_encoder_options
	opts.struct_size = C.uint32_t(unsafe.Sizeof(opts))
	opts.lifted = C.uint32_t(o.Lifted)
	opts.segment_cache_bytes = C.uint64_t(o.SegmentCacheBytes)
	opts.max_body_bytes = C.uint64_t(o.MaxBodyBytes)
	opts.max_rendered_bytes = C.uint64_t(o.MaxRenderedBytes)
	opts.max_word_bytes = C.uint64_t(o.MaxWordBytes)
	opts.max_fallback_bytes = C.uint64_t(o.MaxFallbackBytes)
	opts.max_messages = C.uint32_t(o.MaxMessages)
	if o.NoCache {
		opts.flags = C.KVEXACT_OPTION_NO_CACHE
	}
	if o.EngineVersion != "" {
		cv := C.CString(o.EngineVersion) // a C pointer: the struct may live in Go memory
		defer C.free(unsafe.Pointer(cv))
		opts.engine_version = cv
	}
	var e *C.kvexact_encoder
	var cerr *C.kvexact_error
	st := C.kvexact_encoder_new_with_options(p.p, cc, &opts, &e, &cerr)
	runtime.KeepAlive(p)
	if st != C.KVEXACT_OK {
		return nil, takeError(st, cerr)
	}
	out := &Encoder{p: e}
	runtime.SetFinalizer(out, (*Encoder).Close)
	return out, nil
}

// HasherOptions are the options of NewHasherWithOptions (kvexact_hasher_options); the zero
// value is NewHasher's behaviour: a prefix-chain cache of KVEXACT_PREFIX_CACHE_DEFAULT_ENTRIES
// (16,384 blocks).
type HasherOptions struct {
	// PrefixCacheEntries is the prefix-chain cache's capacity in blocks (0 = the default;
	// must be 0 with ShareCacheWith).
	PrefixCacheEntries uint64
	// NoCache builds the hasher without a prefix-chain cache.
	NoCache bool
	// ShareCacheWith is another hasher whose cache this one shares (nil = its own).
	ShareCacheWith *Hasher
}

// NewHasherWithOptions creates a hasher as NewHasher, with o (kvexact_hasher_new_with_options).
func NewHasherWithOptions(algo HashAlgo, blockSize uint32, seed *string, o HasherOptions) (*Hasher, error) {
	var sp *C.uint8_t
	var sl C.size_t
	if seed != nil {
		cs := C.CString(*seed)
		defer C.free(unsafe.Pointer(cs))
		sp, sl = (*C.uint8_t)(unsafe.Pointer(cs)), C.size_t(len(*seed))
	}
	var opts C.kvexact_hasher_options
	opts.struct_size = C.uint32_t(unsafe.Sizeof(opts))
	opts.prefix_cache_entries = C.uint64_t(o.PrefixCacheEntries)
	if o.NoCache {
		opts.flags = C.KVEXACT_OPTION_NO_CACHE
	}
	if o.ShareCacheWith != nil {
		opts.share_cache_with = o.ShareCacheWith.p // a C pointer
	}
	var h *C.kvexact_hasher
	var cerr *C.kvexact_error
	st := C.kvexact_hasher_new_with_options(C.kvexact_hash_algo(algo), C.uint32_t(blockSize), sp, sl, &opts, &h, &cerr)
	runtime.KeepAlive(o.ShareCacheWith)
	if st != C.KVEXACT_OK {
		return nil, takeError(st, cerr)
	}
	out := &Hasher{p: h}
	runtime.SetFinalizer(out, (*Hasher).Close)
	return out, nil
}

// CacheStats are the counters of an encoder's segment cache or a hasher's prefix-chain cache
// (kvexact_cache_stats), counted since the cache was made.
type CacheStats struct {
	// Enabled is false when the handle has no cache (every other field is then 0).
	Enabled bool
	// Hits: segments found (encoder), blocks reused (hasher).
	Hits uint64
	// Misses: segments encoded (encoder), blocks hashed (hasher).
	Misses uint64
	// Evictions: entries dropped to stay within capacity.
	Evictions uint64
	// Bytes held now.
	Bytes uint64
	// Entries held now.
	Entries uint64
	// Capacity: bytes (encoder) or blocks (hasher).
	Capacity uint64
}

func goStats(s *C.kvexact_cache_stats) CacheStats {
	return CacheStats{
		Enabled:   s.enabled != 0,
		Hits:      uint64(s.hits),
		Misses:    uint64(s.misses),
		Evictions: uint64(s.evictions),
		Bytes:     uint64(s.bytes),
		Entries:   uint64(s.entries),
		Capacity:  uint64(s.capacity),
	}
}

// CacheStats reads the encoder's segment-cache counters (kvexact_encoder_cache_stats).
func (e *Encoder) CacheStats() (CacheStats, error) {
	var s C.kvexact_cache_stats
	s.struct_size = C.uint32_t(unsafe.Sizeof(s))
	st := C.kvexact_encoder_cache_stats(e.p, &s)
	runtime.KeepAlive(e)
	if st != C.KVEXACT_OK {
		return CacheStats{}, Status(st)
	}
	return goStats(&s), nil
}

// ClearCache empties the encoder's segment cache, keeping its counters.
func (e *Encoder) ClearCache() error {
	st := C.kvexact_encoder_cache_clear(e.p)
	runtime.KeepAlive(e)
	if st != C.KVEXACT_OK {
		return Status(st)
	}
	return nil
}

// CacheStats reads the hasher's prefix-chain cache counters (kvexact_hasher_cache_stats).
func (h *Hasher) CacheStats() (CacheStats, error) {
	var s C.kvexact_cache_stats
	s.struct_size = C.uint32_t(unsafe.Sizeof(s))
	st := C.kvexact_hasher_cache_stats(h.p, &s)
	runtime.KeepAlive(h)
	if st != C.KVEXACT_OK {
		return CacheStats{}, Status(st)
	}
	return goStats(&s), nil
}

// ClearCache empties the hasher's prefix-chain cache (for every hasher sharing it).
func (h *Hasher) ClearCache() error {
	st := C.kvexact_hasher_cache_clear(h.p)
	runtime.KeepAlive(h)
	if st != C.KVEXACT_OK {
		return Status(st)
	}
	return nil
}

// RouteKeys is the hot path in one cgo call (kvexact_route_keys): refuse, render and
// tokenize the chat body at nowUnixMs (UTC) into ids (at most len(ids)), then hash the ids
// written into hashes (full blocks only, at most len(hashes)). It returns the counts
// written, exactly what EncodeChat followed by BlockHashesInto(ids[:n], true, hashes) give.
// A refusal is a *RefusedError, other failures an *Error. body, ids and hashes are only
// borrowed for the call (no copy is made); no allocation on success.
func (e *Encoder) RouteKeys(h *Hasher, body []byte, nowUnixMs int64, ids []uint32, hashes []uint64) (nIDs, nBlocks int, err error) {
	var ip *C.uint32_t
	if len(ids) > 0 {
		ip = (*C.uint32_t)(unsafe.Pointer(&ids[0]))
	}
	var hp *C.uint64_t
	if len(hashes) > 0 {
		hp = (*C.uint64_t)(unsafe.Pointer(&hashes[0]))
	}
	var ni, nb C.size_t
	var refusal C.kvexact_refusal
	var cerr *C.kvexact_error
	st := C.kvexact_route_keys(e.p, h.p, bytesPtr(body), C.size_t(len(body)), C.int64_t(nowUnixMs),
		ip, C.size_t(len(ids)), hp, C.size_t(len(hashes)), &ni, &nb, &refusal, &cerr)
	runtime.KeepAlive(e)
	runtime.KeepAlive(h)
	runtime.KeepAlive(body)
	if st == C.KVEXACT_ERR_UNSUPPORTED {
		if cerr != nil {
			C.kvexact_error_free(cerr)
		}
		return 0, 0, &RefusedError{Reason: Refusal(refusal)}
	}
	if st != C.KVEXACT_OK {
		return 0, 0, takeError(st, cerr)
	}
	return int(ni), int(nb), nil
}

// RouteResult is one request's outcome in RouteKeysBatch: the ids and hashes (slices of the
// caller's buffers) on success, else Err as RouteKeys returns it.
type RouteResult struct {
	IDs    []uint32
	Hashes []uint64
	Err    error
}

// RouteKeysBatch routes many bodies in one cgo call (kvexact_route_keys_batch): request i's
// ids go to ids[i*maxIDs:(i+1)*maxIDs] and its hashes to
// hashes[i*maxBlocks:(i+1)*maxBlocks], so ids needs len(bodies)*maxIDs and hashes
// len(bodies)*maxBlocks entries. Each result equals RouteKeys of that body. Unlike RouteKeys,
// the bodies are copied once into C memory for the call (cgo forbids storing Go pointers in
// the C request array).
func (e *Encoder) RouteKeysBatch(h *Hasher, bodies [][]byte, nowUnixMs int64, maxIDs, maxBlocks int, ids []uint32, hashes []uint64) ([]RouteResult, error) {
	n := len(bodies)
	if maxIDs < 0 || maxBlocks < 0 || len(ids) < n*maxIDs || len(hashes) < n*maxBlocks {
		return nil, ErrInvalidArgument
	}
	if n == 0 {
		return nil, nil
	}
	total := 0
	for _, b := range bodies {
		total += len(b)
	}
	reqSize := C.size_t(unsafe.Sizeof(C.kvexact_route_request{}))
	mem := C.malloc(reqSize*C.size_t(n) + C.size_t(total) + 1)
	if mem == nil {
		return nil, ErrUnknown
	}
	defer C.free(mem)
	reqs := unsafe.Slice((*C.kvexact_route_request)(mem), n)
	data := unsafe.Add(mem, uintptr(reqSize)*uintptr(n))
	off := uintptr(0)
	for i, b := range bodies {
		p := unsafe.Add(data, off)
		if len(b) > 0 {
			C.memcpy(p, unsafe.Pointer(&b[0]), C.size_t(len(b)))
		}
		reqs[i] = C.kvexact_route_request{body: (*C.uint8_t)(p), len: C.size_t(len(b)), now_unix_ms: C.int64_t(nowUnixMs)}
		off += uintptr(len(b))
	}
	results := make([]C.kvexact_route_result, n)
	var ip *C.uint32_t
	if len(ids) > 0 {
		ip = (*C.uint32_t)(unsafe.Pointer(&ids[0]))
	}
	var hp *C.uint64_t
	if len(hashes) > 0 {
		hp = (*C.uint64_t)(unsafe.Pointer(&hashes[0]))
	}
	var cerr *C.kvexact_error
	st := C.kvexact_route_keys_batch(e.p, h.p, &reqs[0], C.size_t(n), ip, C.size_t(maxIDs),
		hp, C.size_t(maxBlocks), &results[0], &cerr)
	runtime.KeepAlive(e)
	runtime.KeepAlive(h)
	if st != C.KVEXACT_OK {
		return nil, takeError(st, cerr)
	}
	out := make([]RouteResult, n)
	for i, r := range results {
		switch {
		case r.status == C.KVEXACT_ERR_UNSUPPORTED:
			out[i].Err = &RefusedError{Reason: Refusal(r.refusal)}
		case r.status != C.KVEXACT_OK:
			out[i].Err = Status(r.status)
		default:
			out[i].IDs = ids[i*maxIDs : i*maxIDs+int(r.n_ids)]
			out[i].Hashes = hashes[i*maxBlocks : i*maxBlocks+int(r.n_blocks)]
		}
	}
	return out, nil
}
