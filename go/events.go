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

// Event kinds (kvexact_event.kind).
const (
	EventStored     = C.KVEXACT_EVENT_STORED
	EventRemoved    = C.KVEXACT_EVENT_REMOVED
	EventAllCleared = C.KVEXACT_EVENT_ALL_CLEARED
	EventCreated    = C.KVEXACT_EVENT_CREATED
	EventUpdated    = C.KVEXACT_EVENT_UPDATED
)

// Event is a Go copy of one decoded kvexact_event.
type Event struct {
	Kind           uint8
	Hashes         []uint64
	TokenIDs       []uint32
	BlockSize      uint32
	HasLoRA        bool
	HasExtraKeys   bool
	ParentHash     *uint64 // nil when the event names no parent
	RehashMismatch bool    // TensorRT-LLM: the published hash does not follow from the tokens
	DPRank         int64   // -1 when absent
	EventID        int64   // TensorRT-LLM event_id, -1 otherwise
}

// EventDecoder decodes one wire schema's payloads; not for concurrent use.
type EventDecoder struct{ p *C.kvexact_event_decoder }

// NewEventDecoder creates a decoder for schema (e.g. "vllm-kv-map-v3",
// "trtllm-kv-http-preview-v1"); rehash is a TensorRT-LLM hasher (nil: no re-hash; must be nil
// for the ZMQ schemas).
func NewEventDecoder(schema string, rehash *Hasher) (*EventDecoder, error) {
	cs := C.CString(schema)
	defer C.free(unsafe.Pointer(cs))
	var hp *C.kvexact_hasher
	if rehash != nil {
		hp = rehash.p
	}
	var d *C.kvexact_event_decoder
	var cerr *C.kvexact_error
	st := C.kvexact_event_decoder_new(cs, hp, &d, &cerr)
	runtime.KeepAlive(rehash)
	if st != C.KVEXACT_OK {
		return nil, takeError(st, cerr)
	}
	out := &EventDecoder{p: d}
	runtime.SetFinalizer(out, (*EventDecoder).Close)
	return out, nil
}

// Close frees the decoder. Idempotent.
func (d *EventDecoder) Close() {
	if d.p != nil {
		C.kvexact_event_decoder_free(d.p)
		d.p = nil
		runtime.SetFinalizer(d, nil)
	}
}

// Decode decodes one payload (all or nothing) and returns Go copies of its events and the
// batch's DP rank (-1 when absent).
func (d *EventDecoder) Decode(payload []byte) ([]Event, int64, error) {
	var evs *C.kvexact_event
	var n C.size_t
	var rank C.int64_t
	var cerr *C.kvexact_error
	st := C.kvexact_event_decode(d.p, bytesPtr(payload), C.size_t(len(payload)), &evs, &n, &rank, &cerr)
	runtime.KeepAlive(payload)
	if st != C.KVEXACT_OK {
		return nil, 0, takeError(st, cerr)
	}
	out := make([]Event, 0, int(n))
	for _, e := range unsafe.Slice(evs, int(n)) {
		ev := Event{
			Kind:           uint8(e.kind),
			BlockSize:      uint32(e.block_size),
			HasLoRA:        e.has_lora != 0,
			HasExtraKeys:   e.has_extra_keys != 0,
			RehashMismatch: e.rehash_mismatch != 0,
			DPRank:         int64(e.dp_rank),
			EventID:        int64(e.event_id),
		}
		if e.n_hashes > 0 {
			ev.Hashes = append([]uint64(nil), unsafe.Slice((*uint64)(unsafe.Pointer(e.hashes)), int(e.n_hashes))...)
		}
		if e.n_tokens > 0 {
			ev.TokenIDs = append([]uint32(nil), unsafe.Slice((*uint32)(unsafe.Pointer(e.token_ids)), int(e.n_tokens))...)
		}
		if e.has_parent != 0 {
			p := uint64(e.parent_hash)
			ev.ParentHash = &p
		}
		out = append(out, ev)
	}
	runtime.KeepAlive(d)
	return out, int64(rank), nil
}
