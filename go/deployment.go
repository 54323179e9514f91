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

// Deployment is how one engine was launched, as far as it changes the block keys or the
// prefix hits (kvexact_deployment): block size, hash algorithm and seed, speculative
// decoding, the LoRA adapters it serves, SGLang's event format — resolved against one engine
// release. Build the hasher (NewHasherForDeployment) and the index
// (NewIndexForDeployment) of a deployment from the same value, so the two agree. Safe for
// concurrent use.
type Deployment struct{ p *C.kvexact_deployment }

// NewDeployment resolves a deployment document (JSON or YAML: blockSize, hashAlgorithm,
// hashSeed, speculative {method, numSpeculativeTokens, mtpModules, ...}, loraAdapters [{name,
// path}], kvEventsFormat; "{}" for the release's defaults) against the release of engine at
// engineVersion (kvexact_deployment_new). An option the release cannot honour is an *Error
// with Status ErrDeploymentUnsupported naming the option.
func NewDeployment(engine Engine, engineVersion string, doc []byte) (*Deployment, error) {
	cv := C.CString(engineVersion)
	defer C.free(unsafe.Pointer(cv))
	var dp *C.uint8_t
	if len(doc) > 0 {
		dp = (*C.uint8_t)(unsafe.Pointer(&doc[0]))
	}
	var d *C.kvexact_deployment
	var cerr *C.kvexact_error
	st := C.kvexact_deployment_new(C.kvexact_engine(engine), cv, dp, C.size_t(len(doc)), &d, &cerr)
	runtime.KeepAlive(doc)
	if st != C.KVEXACT_OK {
		return nil, takeError(st, cerr)
	}
	out := &Deployment{p: d}
	runtime.SetFinalizer(out, (*Deployment).Close)
	return out, nil
}

// DeploymentFromManifest is the deployment an engine manifest declares (its deployment:
// object; absent: the release's defaults), for engine at the manifest's engineVersion
// (kvexact_deployment_from_manifest).
func DeploymentFromManifest(m *Manifest, engine Engine) (*Deployment, error) {
	var d *C.kvexact_deployment
	var cerr *C.kvexact_error
	st := C.kvexact_deployment_from_manifest(m.p, C.kvexact_engine(engine), &d, &cerr)
	runtime.KeepAlive(m)
	if st != C.KVEXACT_OK {
		return nil, takeError(st, cerr)
	}
	out := &Deployment{p: d}
	runtime.SetFinalizer(out, (*Deployment).Close)
	return out, nil
}

// Close frees the deployment. Idempotent; not concurrently with other calls on it.
func (d *Deployment) Close() {
	if d.p != nil {
		C.kvexact_deployment_free(d.p)
		d.p = nil
		runtime.SetFinalizer(d, nil)
	}
}

// JSON is the resolved deployment as JSON (kvexact_deployment_json): release, blockSize,
// hashAlgorithm, keyForm ("plain", "lookahead-L", "bigram"), hitOffset, adapters, ...
func (d *Deployment) JSON() (string, error) {
	var n C.size_t
	st := C.kvexact_deployment_json(d.p, nil, 0, &n)
	if st != C.KVEXACT_OK && st != C.KVEXACT_ERR_BUFFER_TOO_SMALL {
		runtime.KeepAlive(d)
		return "", Status(st)
	}
	buf := make([]byte, int(n))
	var bp *C.uint8_t
	if len(buf) > 0 {
		bp = (*C.uint8_t)(unsafe.Pointer(&buf[0]))
	}
	st = C.kvexact_deployment_json(d.p, bp, C.size_t(len(buf)), &n)
	runtime.KeepAlive(d)
	if st != C.KVEXACT_OK {
		return "", Status(st)
	}
	return string(buf[:int(n)]), nil
}

// NewHasherForDeployment is the hasher of d (kvexact_hasher_new_for_deployment): it hashes
// plain requests through every hash call, keys a request's salt and adapter in
// BlockHashesKeyed, and — given to RouteKeys or Index.RoutePredict — keys each chat body's
// cache_salt and adapter itself (the encoder must lift cache_salt for salted bodies).
func NewHasherForDeployment(d *Deployment, o HasherOptions) (*Hasher, error) {
	var opts C.kvexact_hasher_options
	opts.struct_size = C.uint32_t(unsafe.Sizeof(opts))
	opts.prefix_cache_entries = C.uint64_t(o.PrefixCacheEntries)
	if o.NoCache {
		opts.flags = C.KVEXACT_OPTION_NO_CACHE
	}
	if o.ShareCacheWith != nil {
		opts.share_cache_with = o.ShareCacheWith.p
	}
	var h *C.kvexact_hasher
	var cerr *C.kvexact_error
	st := C.kvexact_hasher_new_for_deployment(d.p, &opts, &h, &cerr)
	runtime.KeepAlive(d)
	runtime.KeepAlive(o.ShareCacheWith)
	if st != C.KVEXACT_OK {
		return nil, takeError(st, cerr)
	}
	out := &Hasher{p: h}
	runtime.SetFinalizer(out, (*Hasher).Close)
	return out, nil
}

// RequestKeys are a request's keys beyond its token ids (kvexact_request_keys): its
// cache_salt (nil: none) and the adapter it names ("" = the base model).
type RequestKeys struct {
	CacheSalt *string
	Adapter   string
}

// BlockHashesKeyed hashes ids (full blocks only, at most len(out)) as the deployment of h
// keys a request with k (kvexact_block_hashes_keyed); h must come from
// NewHasherForDeployment. A salt the engine rejects is an *Error with Status ErrRequest
// (code "SALT_REJECTED"); one kvexact cannot key, or an adapter the deployment does not
// serve, Status ErrUnsupported ("SALT_UNKNOWN", "UNKNOWN_ADAPTER").
func (h *Hasher) BlockHashesKeyed(k RequestKeys, ids []uint32, out []uint64) (int, error) {
	var keys C.kvexact_request_keys
	keys.struct_size = C.uint32_t(unsafe.Sizeof(keys))
	var pinned []*C.char
	defer func() {
		for _, p := range pinned {
			C.free(unsafe.Pointer(p))
		}
	}()
	if k.CacheSalt != nil {
		cs := C.CString(*k.CacheSalt)
		pinned = append(pinned, cs)
		keys.has_cache_salt = 1
		keys.cache_salt = (*C.uint8_t)(unsafe.Pointer(cs))
		keys.cache_salt_len = C.size_t(len(*k.CacheSalt))
	}
	if k.Adapter != "" {
		ca := C.CString(k.Adapter)
		pinned = append(pinned, ca)
		keys.adapter = (*C.uint8_t)(unsafe.Pointer(ca))
		keys.adapter_len = C.size_t(len(k.Adapter))
	}
	var ip *C.uint32_t
	if len(ids) > 0 {
		ip = (*C.uint32_t)(unsafe.Pointer(&ids[0]))
	}
	var op *C.uint64_t
	if len(out) > 0 {
		op = (*C.uint64_t)(unsafe.Pointer(&out[0]))
	}
	var n C.size_t
	var cerr *C.kvexact_error
	st := C.kvexact_block_hashes_keyed(h.p, &keys, ip, C.size_t(len(ids)), op, C.size_t(len(out)), &n, &cerr)
	runtime.KeepAlive(h)
	runtime.KeepAlive(ids)
	runtime.KeepAlive(out)
	if st != C.KVEXACT_OK {
		return 0, takeError(st, cerr)
	}
	return int(n), nil
}

// NewIndexForDeployment creates the prefix index of d's endpoints
// (kvexact_index_new_for_deployment): the release's hit rule under d's key form, its block
// size and event schema.
func NewIndexForDeployment(d *Deployment, o IndexOptions) (*Index, error) {
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
	st := C.kvexact_index_new_for_deployment(d.p, &opts, &ix, &cerr)
	runtime.KeepAlive(d)
	if st != C.KVEXACT_OK {
		return nil, takeError(st, cerr)
	}
	out := &Index{p: ix}
	runtime.SetFinalizer(out, (*Index).Close)
	return out, nil
}

// NewDriftVerifierForDeployment creates a drift verifier for one endpoint of d
// (kvexact_drift_verifier_new_for_deployment): d's release, block size, algorithm, seed,
// adapters and key form (SGLang EAGLE bigram pages re-derive). Only o's map, policy and
// prediction settings are used; its Algo, BlockSize, Seed and LoRA must be left zero.
func NewDriftVerifierForDeployment(d *Deployment, o DriftOptions) (*DriftVerifier, error) {
	if o.Algo != 0 || o.BlockSize != 0 || o.Seed != nil || len(o.LoRA) != 0 {
		return nil, &Error{Status: ErrInvalidArgument, Code: "invalid_argument", Message: "Algo, BlockSize, Seed and LoRA come from the deployment"}
	}
	var opts C.kvexact_drift_options
	opts.struct_size = C.size_t(unsafe.Sizeof(opts))
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
	st := C.kvexact_drift_verifier_new_for_deployment(d.p, &opts, &v, &cerr)
	runtime.KeepAlive(d)
	if st != C.KVEXACT_OK {
		return nil, takeError(st, cerr)
	}
	out := &DriftVerifier{p: v}
	runtime.SetFinalizer(out, (*DriftVerifier).Close)
	return out, nil
}

// Evidence names what Deployment.Check is given.
type Evidence uint32

// The evidence kinds of Deployment.Check (KVEXACT_DEPLOYMENT_EVIDENCE_*).
const (
	EvidenceEvents           Evidence = C.KVEXACT_DEPLOYMENT_EVIDENCE_EVENTS
	EvidenceSGLangServerInfo Evidence = C.KVEXACT_DEPLOYMENT_EVIDENCE_SGLANG_SERVER_INFO
	EvidenceVLLMModels       Evidence = C.KVEXACT_DEPLOYMENT_EVIDENCE_VLLM_MODELS
	EvidenceVLLMMetrics      Evidence = C.KVEXACT_DEPLOYMENT_EVIDENCE_VLLM_METRICS
)

// ErrDeploymentMismatch: the live engine shows a deployment option otherwise than declared
// (error code "DEPLOYMENT_MISMATCH", Path the option).
const ErrDeploymentMismatch Status = C.KVEXACT_ERR_DEPLOYMENT_MISMATCH

// Check checks d against what the live engine shows (kvexact_deployment_check): a KV-event
// payload, SGLang's /get_server_info, vLLM's /v1/models or /metrics body. nil when nothing disagrees;
// an *Error with Status ErrDeploymentMismatch naming the option otherwise.
func (d *Deployment) Check(kind Evidence, b []byte) error {
	var bp *C.uint8_t
	if len(b) > 0 {
		bp = (*C.uint8_t)(unsafe.Pointer(&b[0]))
	}
	var cerr *C.kvexact_error
	st := C.kvexact_deployment_check(d.p, C.uint32_t(kind), bp, C.size_t(len(b)), &cerr)
	runtime.KeepAlive(d)
	runtime.KeepAlive(b)
	if st != C.KVEXACT_OK {
		return takeError(st, cerr)
	}
	return nil
}
