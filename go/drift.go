package kvexact

/*
#include <stdlib.h>
#include "kvexact.h"
*/
import "C"

import (
	"fmt"
	"runtime"
	"time"
	"unsafe"
)

// DriftOptions are the rule's hashing settings and the drift verifier's bounds
// (kvexact_drift_options). Zero values mean the library's defaults where one exists.
type DriftOptions struct {
	Algo      HashAlgo // a HashAlgo of the release's engine, or HashAlgoContractDefault
	BlockSize uint32   // the rule's kvBlockSize (required)
	// Seed is vLLM's PYTHONHASHSEED (nil = unset: roots under a random NONE_HASH are then
	// unverifiable, never guessed); nil for SGLang and TensorRT-LLM.
	Seed *string
	// LoRA maps the adapters the rule declares to the paths the vLLM server registered them
	// with (/v1/models "root", hashed by >= 0.31); blocks keyed with an adapter not listed are
	// drift (keys). Ignored for SGLang and TensorRT-LLM.
	LoRA            map[string]string
	MapCapacity     int           // hash -> digest map entries (0: 65536; 88 bytes each)
	Mismatches      uint32        // chained mismatches that make the verdict drift (0: 3; a root, block-size or keys mismatch is drift at once)
	WindowBlocks    uint64        // ... within this many stored blocks (0: 4096)
	PredictWithin   time.Duration // prediction tracking deadline T (0: no tracking)
	PredictCapacity int           // most pending predictions (0: 65536)
}

// DriftVerifier re-derives every block hash one endpoint publishes in its KV events
// (kvexact_drift_verifier). Safe for concurrent use (calls are serialised inside the
// library): feed one endpoint's stream, in order, from one goroutine, and scrape or predict
// from others. Close it after every other use has returned.
type DriftVerifier struct{ p *C.kvexact_drift_verifier }

// NewDriftVerifier creates a verifier for the engine release named by contractID and
// engineVersion (as for NewHasherForContract: a release id with "" as the version, or a
// contract id with the version the engine reports).
func NewDriftVerifier(contractID, engineVersion string, o DriftOptions) (*DriftVerifier, error) {
	cid := C.CString(contractID)
	defer C.free(unsafe.Pointer(cid))
	cver := cStringOrNil(engineVersion)
	if cver != nil {
		defer C.free(unsafe.Pointer(cver))
	}
	var opts C.kvexact_drift_options
	opts.struct_size = C.size_t(unsafe.Sizeof(opts))
	opts.algo = C.kvexact_hash_algo(o.Algo)
	opts.block_size = C.uint32_t(o.BlockSize)
	if o.Seed != nil {
		cs := C.CString(*o.Seed) // non-NULL even for "", which means "set but empty"
		defer C.free(unsafe.Pointer(cs))
		opts.seed, opts.seed_len = (*C.uint8_t)(unsafe.Pointer(cs)), C.size_t(len(*o.Seed))
	}
	if n := len(o.LoRA); n > 0 {
		// C memory: the array holds pointers, which Go memory passed to C may not.
		arr := (*C.kvexact_drift_lora)(C.malloc(C.size_t(n) * C.size_t(unsafe.Sizeof(C.kvexact_drift_lora{}))))
		defer C.free(unsafe.Pointer(arr))
		entries := unsafe.Slice(arr, n)
		i := 0
		for name, path := range o.LoRA {
			cn, cp := C.CString(name), C.CString(path)
			defer C.free(unsafe.Pointer(cn))
			defer C.free(unsafe.Pointer(cp))
			entries[i] = C.kvexact_drift_lora{
				name: (*C.uint8_t)(unsafe.Pointer(cn)), name_len: C.size_t(len(name)),
				path: (*C.uint8_t)(unsafe.Pointer(cp)), path_len: C.size_t(len(path)),
			}
			i++
		}
		opts.loras, opts.n_loras = arr, C.size_t(n)
	}
	opts.map_capacity = C.size_t(o.MapCapacity)
	opts.window_blocks = C.uint64_t(o.WindowBlocks)
	opts.mismatches = C.uint32_t(o.Mismatches)
	if o.PredictWithin > 0 {
		ms := o.PredictWithin.Milliseconds()
		if ms == 0 {
			ms = 1
		}
		opts.predict_within_ms = C.uint64_t(ms)
	}
	opts.predict_capacity = C.size_t(o.PredictCapacity)
	var v *C.kvexact_drift_verifier
	var cerr *C.kvexact_error
	st := C.kvexact_drift_verifier_new(cid, cver, &opts, &v, &cerr)
	if st != C.KVEXACT_OK {
		return nil, takeError(st, cerr)
	}
	out := &DriftVerifier{p: v}
	runtime.SetFinalizer(out, (*DriftVerifier).Close)
	return out, nil
}

// Close frees the verifier. Idempotent; not concurrently with other calls on it.
func (v *DriftVerifier) Close() {
	if v.p != nil {
		C.kvexact_drift_verifier_free(v.p)
		v.p = nil
		runtime.SetFinalizer(v, nil)
	}
}

func feedResult(r C.int32_t, cerr *C.kvexact_error) (bool, error) {
	if r < 0 {
		return false, takeError(C.kvexact_status(r), cerr)
	}
	return r == C.KVEXACT_DRIFT_DETECTED, nil
}

// Feed verifies one raw input: a vLLM/SGLang ZMQ message's msgpack payload (frame 2), or a
// TensorRT-LLM drained JSON body. It returns true once the verdict is drift (sticky until
// ResetVerdict). An input that does not decode under the release's schema is an *Error with
// code "schema_mismatch" or "decode_error" (counted as undecodable, not verified).
func (v *DriftVerifier) Feed(payload []byte) (bool, error) {
	var cerr *C.kvexact_error
	r := C.kvexact_drift_feed(v.p, bytesPtr(payload), C.size_t(len(payload)), &cerr)
	runtime.KeepAlive(payload)
	runtime.KeepAlive(v)
	return feedResult(r, cerr)
}

// FeedFrames verifies one vLLM/SGLang ZMQ message given as its three frames (topic, 8-byte
// sequence number, payload); the sequence number then appears in the evidence.
func (v *DriftVerifier) FeedFrames(topic, seq, payload []byte) (bool, error) {
	var cerr *C.kvexact_error
	r := C.kvexact_drift_feed_frames(v.p, bytesPtr(topic), C.size_t(len(topic)), bytesPtr(seq),
		C.size_t(len(seq)), bytesPtr(payload), C.size_t(len(payload)), &cerr)
	runtime.KeepAlive(topic)
	runtime.KeepAlive(seq)
	runtime.KeepAlive(payload)
	runtime.KeepAlive(v)
	return feedResult(r, cerr)
}

// Predict records the block hashes (u64 form) predicted for one request routed to this
// endpoint, now. ErrInvalidArgument when the verifier was made without PredictWithin.
func (v *DriftVerifier) Predict(hashes []uint64) error {
	var hp *C.uint64_t
	if len(hashes) > 0 {
		hp = (*C.uint64_t)(unsafe.Pointer(&hashes[0]))
	}
	st := C.kvexact_drift_predict(v.p, hp, C.size_t(len(hashes)))
	runtime.KeepAlive(hashes)
	runtime.KeepAlive(v)
	if st != C.KVEXACT_OK {
		return Status(st)
	}
	return nil
}

// DriftCounters is a Go copy of kvexact_drift_counters.
type DriftCounters struct {
	Batches, Undecodable                                            uint64
	Events, StoredEvents, RemovedEvents, ClearedEvents, OtherEvents uint64
	BlocksSeen, Rederived, Matched                                  uint64
	Mismatched, MismatchedRoot, MismatchedChained                   uint64
	MismatchedBlockSize, MismatchedKeys                             uint64
	Consequences                                                    uint64 // chained on a mismatched block
	Unverifiable                                                    uint64
	UnverifiableByReason                                            map[string]uint64 // non-zero reasons only
	Drift                                                           bool
	Verdict                                                         DriftVerdict
	MapCapacity, MapEntries, MapEvictions, MapBytes                 uint64
	Predictions                                                     bool // tracked
	Predicted, PredictedAlreadyStored, PredictedStoredWithin        uint64
	PredictedExpired, PredictedDropped, PredictedPending            uint64
}

// Counters copies the verifier's counters.
func (v *DriftVerifier) Counters() (DriftCounters, error) {
	var c C.kvexact_drift_counters
	c.struct_size = C.size_t(unsafe.Sizeof(c))
	st := C.kvexact_drift_get_counters(v.p, &c)
	runtime.KeepAlive(v)
	if st != C.KVEXACT_OK {
		return DriftCounters{}, Status(st)
	}
	out := DriftCounters{
		Batches: uint64(c.batches), Undecodable: uint64(c.undecodable),
		Events: uint64(c.events), StoredEvents: uint64(c.stored_events),
		RemovedEvents: uint64(c.removed_events), ClearedEvents: uint64(c.cleared_events),
		OtherEvents: uint64(c.other_events), BlocksSeen: uint64(c.blocks_seen),
		Rederived: uint64(c.rederived), Matched: uint64(c.matched),
		Mismatched: uint64(c.mismatched), MismatchedRoot: uint64(c.mismatched_root),
		MismatchedChained: uint64(c.mismatched_chained), MismatchedBlockSize: uint64(c.mismatched_block_size),
		MismatchedKeys: uint64(c.mismatched_keys), Unverifiable: uint64(c.unverifiable),
		UnverifiableByReason: map[string]uint64{},
		Drift:                c.drift != 0,
		MapCapacity:          uint64(c.map_capacity), MapEntries: uint64(c.map_entries),
		MapEvictions: uint64(c.map_evictions), MapBytes: uint64(c.map_bytes),
		Predictions: c.predictions != 0, Predicted: uint64(c.predicted),
		PredictedAlreadyStored: uint64(c.predicted_already_stored),
		PredictedStoredWithin:  uint64(c.predicted_stored_within),
		PredictedExpired:       uint64(c.predicted_expired), PredictedDropped: uint64(c.predicted_dropped),
		PredictedPending: uint64(c.predicted_pending),
		Consequences:     uint64(c.consequences), Verdict: DriftVerdict(c.verdict),
	}
	for i, n := range c.unverifiable_by_reason {
		if name := C.kvexact_drift_unverifiable_name(C.uint32_t(i)); name != nil && n != 0 {
			out.UnverifiableByReason[C.GoString(name)] = uint64(n)
		}
	}
	return out, nil
}

// DriftVerdict is a verifier's verdict (kvexact_drift_verdict; docs/contracts/drift.md §2).
type DriftVerdict int

const (
	// DriftClean: most stored blocks re-derived, none the evidence of drift.
	DriftClean DriftVerdict = C.KVEXACT_DRIFT_VERDICT_CLEAN
	// DriftDetected: evidence of drift (in ReportJSON's "evidence").
	DriftDetected DriftVerdict = C.KVEXACT_DRIFT_VERDICT_DRIFT
	// DriftUnverifiable: no stored block seen, or fewer than half re-derived (the reasons are
	// in DriftCounters.UnverifiableByReason). Never clean.
	DriftUnverifiable DriftVerdict = C.KVEXACT_DRIFT_VERDICT_UNVERIFIABLE
)

// String is the verdict's name: "clean", "drift" or "unverifiable".
func (d DriftVerdict) String() string {
	switch d {
	case DriftClean:
		return "clean"
	case DriftDetected:
		return "drift"
	case DriftUnverifiable:
		return "unverifiable"
	}
	return fmt.Sprintf("DriftVerdict(%d)", int(d))
}

// Verdict is the verifier's verdict now.
func (v *DriftVerifier) Verdict() (DriftVerdict, error) {
	r := C.kvexact_drift_verdict(v.p)
	runtime.KeepAlive(v)
	if r < 0 {
		return 0, Status(C.kvexact_status(r))
	}
	return DriftVerdict(r), nil
}

// ReportJSON is the verifier's report: verdict, counters, map, predictions, the evidence of
// a drift verdict, and "finding" (the ladder's hash_drift observation, ready to be put in
// an endpoint's evidence for EvaluateReadiness as {"finding": …, "timeUnixMs": …}).
func (v *DriftVerifier) ReportJSON() ([]byte, error) {
	buf := make([]byte, 4096)
	for {
		var n C.size_t
		st := C.kvexact_drift_report_json(v.p, bytesPtr(buf), C.size_t(len(buf)), &n)
		runtime.KeepAlive(v)
		switch st {
		case C.KVEXACT_OK:
			return buf[:int(n)], nil
		case C.KVEXACT_ERR_BUFFER_TOO_SMALL:
			// The counters move between calls: leave room.
			buf = make([]byte, int(n)+int(n)/8+64)
		default:
			return nil, Status(st)
		}
	}
}

// Finding is the verdict as the readiness ladder's observation: OK while clean; once drifted
// !OK with Reason "hash_drift" and the first offending block in Detail.
func (v *DriftVerifier) Finding() (Finding, error) {
	var f C.kvexact_finding
	st := C.kvexact_drift_finding(v.p, &f)
	runtime.KeepAlive(v)
	if st != C.KVEXACT_OK {
		return Finding{}, Status(st)
	}
	return goFinding(&f), nil
}

// ResetVerdict clears the verdict and the mismatch window (after the rule re-attested).
func (v *DriftVerifier) ResetVerdict() error {
	st := C.kvexact_drift_reset_verdict(v.p)
	runtime.KeepAlive(v)
	if st != C.KVEXACT_OK {
		return Status(st)
	}
	return nil
}

// DriftLabel is one Prometheus label of a series.
type DriftLabel struct{ Name, Value string }

// DriftSeries is one verifier in an exposition, with the labels that tell it apart
// (release="…" is added by the library).
type DriftSeries struct {
	Verifier *DriftVerifier
	Labels   []DriftLabel
}

// DriftPrometheus is the Prometheus text exposition (format 0.0.4) of the counters of every
// series' verifier, grouped by metric family: serve it with
// Content-Type "text/plain; version=0.0.4".
func DriftPrometheus(series []DriftSeries) ([]byte, error) {
	cs := make([]C.kvexact_drift_series, len(series))
	for i, s := range series {
		if s.Verifier == nil {
			return nil, ErrNullArgument
		}
		cs[i].verifier = s.Verifier.p
		if n := len(s.Labels); n > 0 {
			arr := (*C.kvexact_drift_label)(C.malloc(C.size_t(n) * C.size_t(unsafe.Sizeof(C.kvexact_drift_label{}))))
			defer C.free(unsafe.Pointer(arr))
			for j, l := range s.Labels {
				cn, cv := C.CString(l.Name), C.CString(l.Value)
				defer C.free(unsafe.Pointer(cn))
				defer C.free(unsafe.Pointer(cv))
				unsafe.Slice(arr, n)[j] = C.kvexact_drift_label{
					name: (*C.uint8_t)(unsafe.Pointer(cn)), name_len: C.size_t(len(l.Name)),
					value: (*C.uint8_t)(unsafe.Pointer(cv)), value_len: C.size_t(len(l.Value)),
				}
			}
			cs[i].labels, cs[i].n_labels = arr, C.size_t(n)
		}
	}
	var sp *C.kvexact_drift_series
	if len(cs) > 0 {
		sp = &cs[0]
	}
	buf := make([]byte, 16384)
	for {
		var n C.size_t
		var cerr *C.kvexact_error
		st := C.kvexact_drift_prometheus(sp, C.size_t(len(cs)), bytesPtr(buf), C.size_t(len(buf)), &n, &cerr)
		runtime.KeepAlive(series)
		runtime.KeepAlive(cs)
		switch st {
		case C.KVEXACT_OK:
			return buf[:int(n)], nil
		case C.KVEXACT_ERR_BUFFER_TOO_SMALL:
			C.kvexact_error_free(cerr)
			buf = make([]byte, int(n)+int(n)/8+64)
		default:
			return nil, takeError(st, cerr)
		}
	}
}
