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

// Prefix-index statuses (kvexact.h).
const (
	// ErrPrefixHitRule: the release has no prefix-hit rule in the contract catalog, or the
	// KV-cache groups are outside what it states (code "PREFIX_HIT_RULE").
	ErrPrefixHitRule Status = C.KVEXACT_ERR_PREFIX_HIT_RULE
	// ErrUnknownEndpoint: no endpoint with this id in the index (code "UNKNOWN_ENDPOINT").
	ErrUnknownEndpoint Status = C.KVEXACT_ERR_UNKNOWN_ENDPOINT
	// ErrDuplicateEndpoint: an endpoint of this name is already in the index.
	ErrDuplicateEndpoint Status = C.KVEXACT_ERR_DUPLICATE_ENDPOINT
)

// GroupKind is the kind of a KV-cache group.
type GroupKind uint32

// KV-cache group kinds (kvexact_group_kind).
const (
	GroupFullAttention GroupKind = C.KVEXACT_GROUP_FULL_ATTENTION
	GroupSlidingWindow GroupKind = C.KVEXACT_GROUP_SLIDING_WINDOW
)

// Group is one KV-cache group of the served model (kvexact_index_group).
type Group struct {
	Kind          GroupKind
	BlockSize     uint32
	SlidingWindow uint32 // tokens, sliding-window groups only
}

// IndexOptions are the index's bounds and geometry (kvexact_index_options); zero values are
// the defaults: one full-attention group of the block size, 1024 slots.
type IndexOptions struct {
	MaxSlots uint32
	Groups   []Group
}

// EndpointConfig is one engine replica (kvexact_index_endpoint).
type EndpointConfig struct {
	Name        string
	DPRanks     uint32 // data-parallel ranks (each its own cache and stream), >= 1
	GPUBlocks   uint64 // per-rank GPU pool (vLLM num_gpu_blocks-1, ...), 1..=4294967295
	OtherBlocks uint64 // per-rank blocks in other media together, <= 4294967295
	// LoRAAdapters: adapters are loaded (unknown predictions under a release whose events do
	// not show the adapter).
	LoRAAdapters bool
	Replay       bool // the engine keeps a replay buffer
	StartsEmpty  bool // the engine starts now with an empty cache
}

// AppliedOutcome is what became of one fed batch.
type AppliedOutcome uint32

// Feed outcomes (kvexact_applied_outcome).
const (
	Applied          AppliedOutcome = C.KVEXACT_APPLIED
	AppliedDuplicate AppliedOutcome = C.KVEXACT_APPLIED_DUPLICATE
	// AppliedReplayFrom: ask the engine's replay endpoint for every batch from ReplayFrom on.
	// Once per gap: the first batch past it.
	AppliedReplayFrom AppliedOutcome = C.KVEXACT_APPLIED_REPLAY_FROM
	AppliedLost       AppliedOutcome = C.KVEXACT_APPLIED_LOST
	// AppliedReplayPending: a later batch past a gap whose replay is pending (dropped; ask
	// nothing more). ReplayFailed if the replay cannot be had.
	AppliedReplayPending AppliedOutcome = C.KVEXACT_APPLIED_REPLAY_PENDING
)

// AllRanks is MarkLost's rank for every rank of the endpoint.
const AllRanks uint32 = C.KVEXACT_INDEX_ALL_RANKS

// CapacityNotStated is CheckCapacity's otherBlocks when the engine states none.
const CapacityNotStated uint64 = C.KVEXACT_CAPACITY_NOT_STATED

// CheckCapacity's mismatch bits (the capacity_mismatch finding).
const (
	CapacityGPUDiffers   uint32 = C.KVEXACT_CAPACITY_GPU_DIFFERS
	CapacityOtherDiffers uint32 = C.KVEXACT_CAPACITY_OTHER_DIFFERS
)

// FeedResult is a fed batch's outcome (kvexact_index_applied).
type FeedResult struct {
	Outcome    AppliedOutcome
	Stored     uint64
	Removed    uint64
	ReplayFrom uint64
}

// PredictionStatus says whether a prediction is a count.
type PredictionStatus uint32

// Prediction statuses.
const (
	PredictionCached  PredictionStatus = C.KVEXACT_PREDICTION_CACHED
	PredictionUnknown PredictionStatus = C.KVEXACT_PREDICTION_UNKNOWN
)

// UnknownReason says why a prediction is unknown.
type UnknownReason uint32

// Unknown reasons (kvexact_unknown_reason).
const (
	UnknownNone            UnknownReason = C.KVEXACT_UNKNOWN_NONE
	UnknownUnsynced        UnknownReason = C.KVEXACT_UNKNOWN_UNSYNCED
	UnknownReplaying       UnknownReason = C.KVEXACT_UNKNOWN_REPLAYING
	UnknownOutOfStep       UnknownReason = C.KVEXACT_UNKNOWN_OUT_OF_STEP
	UnknownOverflow        UnknownReason = C.KVEXACT_UNKNOWN_OVERFLOW
	UnknownLoRANotInEvents UnknownReason = C.KVEXACT_UNKNOWN_LORA_NOT_IN_EVENTS
	// UnknownStreamLost: the caller marked the stream lost (MarkLost).
	UnknownStreamLost UnknownReason = C.KVEXACT_UNKNOWN_STREAM_LOST
)

// Request flags of Predict and RoutePredict.
const (
	PredictSkipPrefixCache uint32 = C.KVEXACT_PREDICT_SKIP_PREFIX_CACHE
	// PredictSparse lists only the endpoint ranks that hold some of the request or are
	// unknown (every rank not listed is cached with 0 tokens), in the same order.
	PredictSparse uint32 = C.KVEXACT_PREDICT_SPARSE
)

// Prediction is one endpoint rank's prediction, laid out exactly as kvexact_index_prediction
// so that PredictInto writes the caller's slice in place.
type Prediction struct {
	Endpoint      uint32
	Rank          uint32
	Status        PredictionStatus
	UnknownReason UnknownReason
	proven        uint32
	reserved      uint32
	// Tokens: the cached tokens the engine will report (Status PredictionCached).
	Tokens uint64
	// OtherMediaTokens: further tokens in other media after the GPU hit; -1 when not known.
	OtherMediaTokens int64
}

// Proven reports whether a cache-hit replay of the release proves the rule that predicted it.
func (p *Prediction) Proven() bool { return p.proven != 0 }

// The Go layout must be the C layout (PredictInto passes the slice to C as is).
var _ [unsafe.Sizeof(Prediction{}) - unsafe.Sizeof(C.kvexact_index_prediction{})]byte
var _ [unsafe.Sizeof(C.kvexact_index_prediction{}) - unsafe.Sizeof(Prediction{})]byte

// Observation is how the engine's reported count compared with a prediction.
type Observation uint32

// Observations (kvexact_observation).
const (
	ObservationExact    Observation = C.KVEXACT_OBSERVATION_EXACT
	ObservationOver     Observation = C.KVEXACT_OBSERVATION_OVER
	ObservationUnder    Observation = C.KVEXACT_OBSERVATION_UNDER
	ObservationUnjudged Observation = C.KVEXACT_OBSERVATION_UNJUDGED
)

// RankStatus is one rank's inventory and counters (kvexact_index_rank_status).
type RankStatus struct {
	Endpoint, Rank                                    uint32
	Stream                                            uint32 // 0 in step, 1 unsynced, 2 replaying, 3 out of step, 4 marked lost
	Overflow                                          bool
	HeldGPU, HeldOther                                uint64
	Batches, Stored, Removed, RemovedUnknown          uint64
	StoredOrphan, Gaps, Rejected, Overflows, Restarts uint64
	ObservedExact, ObservedOver, ObservedUnder        uint64
	ObservedUnjudged                                  uint64
}

// Index is the exact prefix index of one model pool under one engine release
// (kvexact_index): safe for concurrent use (predict from request goroutines while others
// feed events). Close it after every other use has returned.
type Index struct{ p *C.kvexact_index }

// NewIndex creates an index for the release named by contractID and engineVersion (as for
// NewHasherForContract), whose request keys have blockSize tokens per block.
func NewIndex(contractID, engineVersion string, blockSize uint32, o IndexOptions) (*Index, error) {
	cid := C.CString(contractID)
	defer C.free(unsafe.Pointer(cid))
	cver := cStringOrNil(engineVersion)
	if cver != nil {
		defer C.free(unsafe.Pointer(cver))
	}
	var opts C.kvexact_index_options
	opts.struct_size = C.uint32_t(unsafe.Sizeof(opts))
	opts.max_slots = C.uint32_t(o.MaxSlots)
	if n := len(o.Groups); n > 0 {
		arr := (*C.kvexact_index_group)(C.malloc(C.size_t(n) * C.size_t(unsafe.Sizeof(C.kvexact_index_group{}))))
		defer C.free(unsafe.Pointer(arr))
		gs := unsafe.Slice(arr, n)
		for i, g := range o.Groups {
			gs[i] = C.kvexact_index_group{kind: C.kvexact_group_kind(g.Kind), block_size: C.uint32_t(g.BlockSize), sliding_window: C.uint32_t(g.SlidingWindow)}
		}
		opts.groups, opts.n_groups = arr, C.size_t(n)
	}
	var ix *C.kvexact_index
	var cerr *C.kvexact_error
	if st := C.kvexact_index_new(cid, cver, C.uint32_t(blockSize), &opts, &ix, &cerr); st != C.KVEXACT_OK {
		return nil, takeError(st, cerr)
	}
	out := &Index{p: ix}
	runtime.SetFinalizer(out, (*Index).Close)
	return out, nil
}

// Close frees the index. Idempotent; not concurrently with other calls on it.
func (x *Index) Close() {
	if x.p != nil {
		C.kvexact_index_free(x.p)
		x.p = nil
		runtime.SetFinalizer(x, nil)
	}
}

// AddEndpoint adds an engine replica and returns its id.
func (x *Index) AddEndpoint(c EndpointConfig) (uint32, error) {
	name := C.CString(c.Name) // C memory: the struct passed to C may not hold Go pointers
	defer C.free(unsafe.Pointer(name))
	var e C.kvexact_index_endpoint
	e.struct_size = C.uint32_t(unsafe.Sizeof(e))
	e.dp_ranks = C.uint32_t(c.DPRanks)
	e.name, e.name_len = (*C.uint8_t)(unsafe.Pointer(name)), C.size_t(len(c.Name))
	e.gpu_blocks, e.other_blocks = C.uint64_t(c.GPUBlocks), C.uint64_t(c.OtherBlocks)
	e.lora_adapters, e.replay, e.starts_empty = cFlag(c.LoRAAdapters), cFlag(c.Replay), cFlag(c.StartsEmpty)
	var id C.uint32_t
	var cerr *C.kvexact_error
	st := C.kvexact_index_add_endpoint(x.p, &e, &id, &cerr)
	runtime.KeepAlive(x)
	if st != C.KVEXACT_OK {
		return 0, takeError(st, cerr)
	}
	return uint32(id), nil
}

func cFlag(b bool) C.uint8_t {
	if b {
		return 1
	}
	return 0
}

// RemoveEndpoint removes an endpoint and everything it held.
func (x *Index) RemoveEndpoint(id uint32) error {
	var cerr *C.kvexact_error
	st := C.kvexact_index_remove_endpoint(x.p, C.uint32_t(id), &cerr)
	runtime.KeepAlive(x)
	if st != C.KVEXACT_OK {
		return takeError(st, cerr)
	}
	return nil
}

// ResetEndpoint: the endpoint restarted with an empty cache.
func (x *Index) ResetEndpoint(id uint32) error {
	var cerr *C.kvexact_error
	st := C.kvexact_index_reset_endpoint(x.p, C.uint32_t(id), &cerr)
	runtime.KeepAlive(x)
	if st != C.KVEXACT_OK {
		return takeError(st, cerr)
	}
	return nil
}

// ReplayFailed: the replay AppliedReplayFrom asked for could not be had.
func (x *Index) ReplayFailed(id, rank uint32) error {
	var cerr *C.kvexact_error
	st := C.kvexact_index_replay_failed(x.p, C.uint32_t(id), C.uint32_t(rank), &cerr)
	runtime.KeepAlive(x)
	if st != C.KVEXACT_OK {
		return takeError(st, cerr)
	}
	return nil
}

// MarkLost: the stream of the endpoint's rank (AllRanks: every rank) was lost (a dead
// subscription, a dropped queue): its predictions are unknown (UnknownStreamLost) at once,
// until the next batch's sequence number shows what was lost.
func (x *Index) MarkLost(id, rank uint32) error {
	var cerr *C.kvexact_error
	st := C.kvexact_index_mark_lost(x.p, C.uint32_t(id), C.uint32_t(rank), &cerr)
	runtime.KeepAlive(x)
	if st != C.KVEXACT_OK {
		return takeError(st, cerr)
	}
	return nil
}

// CheckCapacity compares the endpoint's declared capacity with the one its engine states
// (per rank, in the index's blocks; otherBlocks CapacityNotStated is not compared): 0 when
// they agree, else the Capacity*Differs bits.
func (x *Index) CheckCapacity(id uint32, gpuBlocks, otherBlocks uint64) (uint32, error) {
	var cerr *C.kvexact_error
	var m C.uint32_t
	st := C.kvexact_index_check_capacity(x.p, C.uint32_t(id), C.uint64_t(gpuBlocks), C.uint64_t(otherBlocks), &m, &cerr)
	runtime.KeepAlive(x)
	if st != C.KVEXACT_OK {
		return 0, takeError(st, cerr)
	}
	return uint32(m), nil
}

// EndpointID is the id of the endpoint named name (ErrNotFound when none).
func (x *Index) EndpointID(name string) (uint32, error) {
	b := []byte(name)
	var id C.uint32_t
	st := C.kvexact_index_endpoint_id(x.p, bytesPtr(b), C.size_t(len(b)), &id)
	runtime.KeepAlive(x)
	runtime.KeepAlive(b)
	if st != C.KVEXACT_OK {
		return 0, Status(st)
	}
	return uint32(id), nil
}

func feedOut(st C.kvexact_status, a *C.kvexact_index_applied, cerr *C.kvexact_error) (FeedResult, error) {
	if st != C.KVEXACT_OK {
		return FeedResult{}, takeError(st, cerr)
	}
	return FeedResult{Outcome: AppliedOutcome(a.outcome), Stored: uint64(a.stored), Removed: uint64(a.removed), ReplayFrom: uint64(a.replay_from)}, nil
}

// FeedFrames feeds one ZMQ message of endpoint id's rank as its three frames (topic, 8-byte
// sequence number, payload), decoded with the release's exact schema. A batch that does not
// decode is an *Error ("schema_mismatch", "decode_error") and leaves the rank out of step.
func (x *Index) FeedFrames(id, rank uint32, topic, seq, payload []byte) (FeedResult, error) {
	var a C.kvexact_index_applied
	a.struct_size = C.uint32_t(unsafe.Sizeof(a))
	var cerr *C.kvexact_error
	st := C.kvexact_index_feed_frames(x.p, C.uint32_t(id), C.uint32_t(rank), bytesPtr(topic), C.size_t(len(topic)),
		bytesPtr(seq), C.size_t(len(seq)), bytesPtr(payload), C.size_t(len(payload)), &a, &cerr)
	runtime.KeepAlive(x)
	runtime.KeepAlive(topic)
	runtime.KeepAlive(seq)
	runtime.KeepAlive(payload)
	return feedOut(st, &a, cerr)
}

// FeedPayload feeds one payload whose sequence number is given apart (a replay reply).
func (x *Index) FeedPayload(id, rank uint32, seq uint64, payload []byte) (FeedResult, error) {
	var a C.kvexact_index_applied
	a.struct_size = C.uint32_t(unsafe.Sizeof(a))
	var cerr *C.kvexact_error
	st := C.kvexact_index_feed_payload(x.p, C.uint32_t(id), C.uint32_t(rank), C.uint64_t(seq), bytesPtr(payload), C.size_t(len(payload)), &a, &cerr)
	runtime.KeepAlive(x)
	runtime.KeepAlive(payload)
	return feedOut(st, &a, cerr)
}

// FeedJSON feeds one drained TensorRT-LLM /kv_cache_events body of endpoint id.
func (x *Index) FeedJSON(id uint32, body []byte) (FeedResult, error) {
	var a C.kvexact_index_applied
	a.struct_size = C.uint32_t(unsafe.Sizeof(a))
	var cerr *C.kvexact_error
	st := C.kvexact_index_feed_json(x.p, C.uint32_t(id), bytesPtr(body), C.size_t(len(body)), &a, &cerr)
	runtime.KeepAlive(x)
	runtime.KeepAlive(body)
	return feedOut(st, &a, cerr)
}

func predsPtr(out []Prediction) *C.kvexact_index_prediction {
	if len(out) == 0 {
		return nil
	}
	return (*C.kvexact_index_prediction)(unsafe.Pointer(&out[0]))
}

func u64Ptr(s []uint64) *C.uint64_t {
	if len(s) == 0 {
		return nil
	}
	return (*C.uint64_t)(unsafe.Pointer(&s[0]))
}

// PredictInto predicts every endpoint rank's cached tokens for a request's full-block hashes
// (as a hasher of the same release writes them) and prompt length into out, returning the
// count. When out is too small it returns the needed count with ErrBufferTooSmall. flags: 0 or
// any of PredictSkipPrefixCache and PredictSparse. A promptTokens above 4294967295 is refused
// (ErrInvalidArgument). No allocation.
func (x *Index) PredictInto(hashes []uint64, promptTokens int, flags uint32, out []Prediction) (int, error) {
	var n C.size_t
	var cerr *C.kvexact_error
	st := C.kvexact_index_predict(x.p, u64Ptr(hashes), C.size_t(len(hashes)), C.size_t(promptTokens), C.uint32_t(flags),
		predsPtr(out), C.size_t(len(out)), &n, &cerr)
	runtime.KeepAlive(x)
	runtime.KeepAlive(hashes)
	runtime.KeepAlive(out)
	if st != C.KVEXACT_OK {
		return int(n), takeError(st, cerr)
	}
	return int(n), nil
}

// Predict is PredictInto into a new slice, one entry per endpoint rank.
func (x *Index) Predict(hashes []uint64, promptTokens int, flags uint32) ([]Prediction, error) {
	out := make([]Prediction, 8)
	for {
		n, err := x.PredictInto(hashes, promptTokens, flags, out)
		if e, ok := err.(*Error); ok && e.Status == ErrBufferTooSmall {
			out = make([]Prediction, n+8) // endpoints may be added meanwhile
			continue
		}
		if err != nil {
			return nil, err
		}
		return out[:n], nil
	}
}

// RoutePredict is the hot path in one cgo call (kvexact_index_route_predict): RouteKeys of the
// chat body into ids and hashes, then PredictInto out on the keys. It returns the id, block
// and prediction counts. A refusal is a *RefusedError.
func (x *Index) RoutePredict(e *Encoder, h *Hasher, body []byte, nowUnixMs int64, flags uint32, ids []uint32, hashes []uint64, out []Prediction) (nIDs, nBlocks, nPreds int, err error) {
	var ip *C.uint32_t
	if len(ids) > 0 {
		ip = (*C.uint32_t)(unsafe.Pointer(&ids[0]))
	}
	var ni, nb, np C.size_t
	var refusal C.kvexact_refusal
	var cerr *C.kvexact_error
	st := C.kvexact_index_route_predict(x.p, e.p, h.p, bytesPtr(body), C.size_t(len(body)), C.int64_t(nowUnixMs), C.uint32_t(flags),
		ip, C.size_t(len(ids)), u64Ptr(hashes), C.size_t(len(hashes)), &ni, &nb, predsPtr(out), C.size_t(len(out)), &np, &refusal, &cerr)
	runtime.KeepAlive(x)
	runtime.KeepAlive(e)
	runtime.KeepAlive(h)
	runtime.KeepAlive(body)
	runtime.KeepAlive(ids)
	runtime.KeepAlive(hashes)
	runtime.KeepAlive(out)
	if st == C.KVEXACT_ERR_UNSUPPORTED {
		if cerr != nil {
			C.kvexact_error_free(cerr)
		}
		return 0, 0, 0, &RefusedError{Reason: Refusal(refusal)}
	}
	if st != C.KVEXACT_OK {
		return 0, 0, int(np), takeError(st, cerr)
	}
	return int(ni), int(nb), int(np), nil
}

// Observe records the engine's reported cached tokens for a request routed to p's endpoint
// and rank, against p (the prediction made when it was routed); request labels it. A p whose
// token counts exceed 4294967295 (no prediction's do) is refused (ErrInvalidArgument).
func (x *Index) Observe(p Prediction, request string, reported uint64) (Observation, error) {
	label := []byte(request)
	var obs C.kvexact_observation
	var cerr *C.kvexact_error
	st := C.kvexact_index_observe(x.p, (*C.kvexact_index_prediction)(unsafe.Pointer(&p)), bytesPtr(label), C.size_t(len(label)),
		C.uint64_t(reported), &obs, &cerr)
	runtime.KeepAlive(x)
	runtime.KeepAlive(label)
	if st != C.KVEXACT_OK {
		return 0, takeError(st, cerr)
	}
	return Observation(obs), nil
}

// sized runs a size-query call until the buffer fits.
func sized(call func(buf []byte, n *C.size_t) C.kvexact_status) ([]byte, error) {
	var n C.size_t
	if st := call(nil, &n); st != C.KVEXACT_OK && st != C.KVEXACT_ERR_BUFFER_TOO_SMALL {
		return nil, Status(st)
	}
	for {
		buf := make([]byte, int(n)+256)
		st := call(buf, &n)
		if st == C.KVEXACT_ERR_BUFFER_TOO_SMALL {
			continue
		}
		if st != C.KVEXACT_OK {
			return nil, Status(st)
		}
		return buf[:int(n)], nil
	}
}

// PredictionDrift is the first prediction the engine contradicted, as JSON
// ({"finding":"prediction_drift","endpoint":…}); nil when none.
func (x *Index) PredictionDrift() ([]byte, error) {
	b, err := sized(func(buf []byte, n *C.size_t) C.kvexact_status {
		return C.kvexact_index_prediction_drift(x.p, bytesPtr(buf), C.size_t(len(buf)), n)
	})
	runtime.KeepAlive(x)
	if len(b) == 0 {
		return nil, err
	}
	return b, err
}

// Prometheus is the index's Prometheus text exposition.
func (x *Index) Prometheus() ([]byte, error) {
	b, err := sized(func(buf []byte, n *C.size_t) C.kvexact_status {
		return C.kvexact_index_prometheus(x.p, bytesPtr(buf), C.size_t(len(buf)), n)
	})
	runtime.KeepAlive(x)
	return b, err
}

// Status is every rank's inventory and counters, endpoints in the order they were added.
func (x *Index) Status() ([]RankStatus, error) {
	var n C.size_t
	if st := C.kvexact_index_status(x.p, nil, 0, &n); st != C.KVEXACT_OK && st != C.KVEXACT_ERR_BUFFER_TOO_SMALL {
		return nil, Status(st)
	}
	for {
		c := int(n) + 8
		arr := (*C.kvexact_index_rank_status)(C.malloc(C.size_t(c) * C.size_t(unsafe.Sizeof(C.kvexact_index_rank_status{}))))
		st := C.kvexact_index_status(x.p, arr, C.size_t(c), &n)
		if st == C.KVEXACT_ERR_BUFFER_TOO_SMALL {
			C.free(unsafe.Pointer(arr))
			continue
		}
		if st != C.KVEXACT_OK {
			C.free(unsafe.Pointer(arr))
			return nil, Status(st)
		}
		out := make([]RankStatus, int(n))
		for i, r := range unsafe.Slice(arr, int(n)) {
			out[i] = RankStatus{
				Endpoint: uint32(r.endpoint), Rank: uint32(r.rank), Stream: uint32(r.stream), Overflow: r.overflow != 0,
				HeldGPU: uint64(r.held_gpu), HeldOther: uint64(r.held_other), Batches: uint64(r.batches),
				Stored: uint64(r.stored), Removed: uint64(r.removed), RemovedUnknown: uint64(r.removed_unknown),
				StoredOrphan: uint64(r.stored_orphan), Gaps: uint64(r.gaps), Rejected: uint64(r.rejected),
				Overflows: uint64(r.overflows), Restarts: uint64(r.restarts), ObservedExact: uint64(r.observed_exact),
				ObservedOver: uint64(r.observed_over), ObservedUnder: uint64(r.observed_under),
				ObservedUnjudged: uint64(r.observed_unjudged),
			}
		}
		C.free(unsafe.Pointer(arr))
		runtime.KeepAlive(x)
		return out, nil
	}
}
