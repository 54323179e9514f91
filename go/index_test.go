package kvexact

import (
	"encoding/hex"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// cacheHitDoc is the part of a kvexact-cachehit-v1 replay (testdata/vectors/cachehit) the
// index needs.
type cacheHitDoc struct {
	Engine        string  `json:"engine"`
	EngineVersion string  `json:"engine_version"`
	BlockSize     uint32  `json:"block_size"`
	HashAlgo      string  `json:"hash_algo"`
	HashSeed      *string `json:"hash_seed"`
	UsableBlocks  uint64  `json:"usable_blocks"`
	CapacityPages uint64  `json:"kv_capacity_pages"`
	Groups        []struct {
		Kind      string  `json:"kv_cache_spec_kind"`
		Window    *uint32 `json:"kv_cache_spec_sliding_window"`
		BlockSize uint32  `json:"block_size"`
	} `json:"kv_cache_groups"`
	Endpoints []string `json:"endpoints"`
	// The engine's own deployment object (speculative decoding), when the replay has one.
	Deployment *struct {
		Speculative *struct {
			Method        string  `json:"method"`
			NumSpec       uint32  `json:"num_speculative_tokens"`
			MTPLayers     *uint32 `json:"num_nextn_predict_layers"`
			SglangAlgo    string  `json:"speculative_algorithm"`
			SglangDrafted uint32  `json:"speculative_num_draft_tokens"`
		} `json:"speculative"`
	} `json:"deployment"`
	Steps []struct {
		Kind     string            `json:"kind"`
		ID       uint64            `json:"id"`
		Query    uint64            `json:"query"`
		Endpoint string            `json:"endpoint"`
		DPRank   uint32            `json:"dp_rank"`
		Topic    string            `json:"topic"`
		SeqHex   string            `json:"seq_frame_hex"`
		Payload  string            `json:"payload_hex"`
		Tokens   []uint32          `json:"token_ids"`
		LoRA     *string           `json:"lora_name"`
		Salt     *string           `json:"cache_salt"`
		Expected map[string]uint64 `json:"expected_cached_tokens"`
		Cached   uint64            `json:"cached_tokens"`
	} `json:"steps"`
}

func loadCacheHit(path string) (*cacheHitDoc, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var d cacheHitDoc
	return &d, json.Unmarshal(b, &d)
}

// cacheHitIndex builds the index, hasher and endpoint ids a replay describes.
func cacheHitIndex(d *cacheHitDoc) (*Index, *Hasher, map[string]uint32, error) {
	engine := map[string]Engine{"vllm": VLLM, "sglang": SGLang}[d.Engine]
	release, _, err := ResolveContract(engine, d.EngineVersion)
	if err != nil {
		return nil, nil, nil, err
	}
	// The replay's deployment (block size, algorithm, seed, speculative decoding), through
	// NewDeployment: the hasher and the index are built from the one value.
	dep := map[string]any{"blockSize": d.BlockSize}
	if d.HashAlgo == "sha256_cbor" {
		dep["hashAlgorithm"] = "sha256_cbor"
	}
	if d.HashSeed != nil {
		dep["hashSeed"] = *d.HashSeed
	}
	if d.Deployment != nil && d.Deployment.Speculative != nil {
		sp := d.Deployment.Speculative
		if d.Engine == "vllm" {
			spec := map[string]any{"method": sp.Method, "numSpeculativeTokens": sp.NumSpec}
			if sp.MTPLayers != nil {
				spec["mtpModules"] = *sp.MTPLayers
			}
			dep["speculative"] = spec
		} else {
			dep["speculative"] = map[string]any{"method": sp.SglangAlgo, "numSpeculativeTokens": sp.SglangDrafted}
		}
	}
	doc, _ := json.Marshal(dep)
	dp, err := NewDeployment(engine, d.EngineVersion, doc)
	if err != nil {
		return nil, nil, nil, err
	}
	defer dp.Close()
	h, err := NewHasherForDeployment(dp, HasherOptions{})
	if err != nil {
		return nil, nil, nil, err
	}
	var o IndexOptions
	o.MaxSlots = 64
	for _, g := range d.Groups {
		gr := Group{Kind: GroupFullAttention, BlockSize: g.BlockSize}
		if g.Kind == "sliding_window" {
			gr.Kind, gr.SlidingWindow = GroupSlidingWindow, *g.Window
		}
		o.Groups = append(o.Groups, gr)
	}
	_ = release
	x, err := NewIndexForDeployment(dp, o)
	if err != nil {
		h.Close()
		return nil, nil, nil, err
	}
	capacity := d.UsableBlocks
	if capacity == 0 {
		capacity = d.CapacityPages
	}
	ids := map[string]uint32{}
	for _, name := range d.Endpoints {
		id, err := x.AddEndpoint(EndpointConfig{Name: name, DPRanks: 1, GPUBlocks: capacity, OtherBlocks: capacity, StartsEmpty: true})
		if err != nil {
			x.Close()
			h.Close()
			return nil, nil, nil, err
		}
		ids[name] = id
	}
	return x, h, ids, nil
}

// Every cache-hit replay without LoRA or cache_salt traffic (speculative decoding included:
// each replay's deployment builds its hasher and index), replayed whole through the Go
// binding: every prediction equals the engine's own count, every run's report is exact.
func TestIndexReplaysCacheHitVectors(t *testing.T) {
	files, err := filepath.Glob(filepath.Join(root(), "testdata", "vectors", "cachehit", "*.json"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no cache-hit replays: %v", err)
	}
	replayed := 0
	for _, f := range files {
		if strings.Contains(f, "lora-salt") {
			continue // per-request adapters and salts: covered by kvexact parity
		}
		d, err := loadCacheHit(f)
		if err != nil {
			t.Fatal(err)
		}
		x, h, ids, err := cacheHitIndex(d)
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		atQuery := map[uint64][]Prediction{}
		judged, exact := 0, 0
		for i, s := range d.Steps {
			switch s.Kind {
			case "events":
				seq, _ := hex.DecodeString(s.SeqHex)
				payload, _ := hex.DecodeString(s.Payload)
				r, err := x.FeedFrames(ids[s.Endpoint], s.DPRank, []byte(s.Topic), seq, payload)
				if err != nil || r.Outcome != Applied {
					t.Fatalf("%s step %d: %v %+v", f, i, err, r)
				}
			case "query":
				if s.LoRA != nil || s.Salt != nil {
					t.Fatalf("%s step %d: LoRA or salt", f, i)
				}
				hashes, err := h.BlockHashes(s.Tokens, true, len(s.Tokens))
				if err != nil {
					t.Fatal(err)
				}
				preds, err := x.Predict(hashes, len(s.Tokens), 0)
				if err != nil {
					t.Fatalf("%s query %d: %v", f, s.ID, err)
				}
				for _, p := range preds {
					name := d.Endpoints[p.Endpoint]
					if p.Status != PredictionCached || p.Tokens != s.Expected[name] {
						t.Fatalf("%s query %d %s: %+v, the engine had %d", f, s.ID, name, p, s.Expected[name])
					}
					judged++
				}
				// The sparse answer: the same entries, without those cached with 0 tokens.
				sparse, err := x.Predict(hashes, len(s.Tokens), PredictSparse)
				if err != nil {
					t.Fatalf("%s query %d (sparse): %v", f, s.ID, err)
				}
				var listed []Prediction
				for _, p := range preds {
					if p.Tokens > 0 {
						listed = append(listed, p)
					}
				}
				if len(sparse) != len(listed) {
					t.Fatalf("%s query %d: sparse %+v, want %+v", f, s.ID, sparse, listed)
				}
				for i := range listed {
					if sparse[i] != listed[i] {
						t.Fatalf("%s query %d: sparse %+v, want %+v", f, s.ID, sparse, listed)
					}
				}
				atQuery[s.ID] = preds
			case "run":
				p := atQuery[s.Query][ids[s.Endpoint]]
				obs, err := x.Observe(p, "q", s.Cached)
				if err != nil || obs != ObservationExact {
					t.Fatalf("%s run of %d: %v %v", f, s.Query, obs, err)
				}
				exact++
			}
		}
		if drift, err := x.PredictionDrift(); err != nil || drift != nil {
			t.Fatalf("%s: drift %s %v", f, drift, err)
		}
		st, err := x.Status()
		if err != nil || len(st) != len(d.Endpoints) {
			t.Fatalf("%s: status %v %v", f, st, err)
		}
		var observed uint64
		for _, r := range st {
			observed += r.ObservedExact
		}
		if observed != uint64(exact) || judged == 0 {
			t.Fatalf("%s: %d exact observations counted, %d made; %d judged", f, observed, exact, judged)
		}
		x.Close()
		h.Close()
		replayed++
		t.Logf("%s: %d predictions and %d reports exact", filepath.Base(f), judged, exact)
	}
	if replayed < 8 {
		t.Fatalf("only %d replays", replayed)
	}
}

func TestIndexErrors(t *testing.T) {
	if _, err := NewIndex("vllm-kv-map-v3-r0.31", "", 0, IndexOptions{}); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("block size 0: %v", err)
	}
	_, err := NewIndex("vllm-kv-map-v3-r0.31", "", 16, IndexOptions{Groups: []Group{{Kind: GroupSlidingWindow, BlockSize: 16}}})
	if !errors.Is(err, ErrPrefixHitRule) {
		t.Fatalf("sliding window without full attention: %v", err)
	}
	x, err := NewIndex("vllm-kv-map-v3-r0.31", "", 16, IndexOptions{MaxSlots: 4})
	if err != nil {
		t.Fatal(err)
	}
	defer x.Close()
	id, err := x.AddEndpoint(EndpointConfig{Name: "a", DPRanks: 2, GPUBlocks: 10, StartsEmpty: true})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := x.AddEndpoint(EndpointConfig{Name: "a", DPRanks: 1, GPUBlocks: 10}); !errors.Is(err, ErrDuplicateEndpoint) {
		t.Fatalf("duplicate: %v", err)
	}
	if _, err := x.AddEndpoint(EndpointConfig{Name: "b", DPRanks: 3, GPUBlocks: 10}); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("over max slots: %v", err)
	}
	b, err := x.AddEndpoint(EndpointConfig{Name: "b", DPRanks: 1, GPUBlocks: 10})
	if err != nil {
		t.Fatal(err)
	}
	preds, err := x.Predict([]uint64{1, 2}, 40, 0)
	if err != nil || len(preds) != 3 {
		t.Fatalf("%v %v", preds, err)
	}
	// "b" has not shown its stream's start: unknown, never a hit.
	if preds[2].Endpoint != b || preds[2].Status != PredictionUnknown || preds[2].UnknownReason != UnknownUnsynced {
		t.Fatalf("%+v", preds[2])
	}
	if preds[0].Endpoint != id || preds[0].Status != PredictionCached || preds[0].Tokens != 0 || !preds[0].Proven() {
		t.Fatalf("%+v", preds[0])
	}
	small := make([]Prediction, 1)
	if n, err := x.PredictInto([]uint64{1, 2}, 40, 0, small); n != 3 || !errors.Is(err, ErrBufferTooSmall) {
		t.Fatalf("%d %v", n, err)
	}
	if _, err := x.FeedFrames(id, 5, nil, make([]byte, 8), []byte{0x90}); err == nil {
		t.Fatal("rank 5 accepted")
	}
	if _, err := x.FeedFrames(id, 0, nil, make([]byte, 8), []byte{0xc1}); !errors.Is(err, ErrEventDecode) && !errors.Is(err, ErrEventSchema) {
		t.Fatalf("junk: %v", err)
	}
	if err := x.RemoveEndpoint(99); !errors.Is(err, ErrUnknownEndpoint) {
		t.Fatalf("remove 99: %v", err)
	}
	if got, err := x.EndpointID("b"); err != nil || got != b {
		t.Fatalf("%d %v", got, err)
	}
	text, err := x.Prometheus()
	if err != nil || !strings.Contains(string(text), `kvexact_index_rejected_total{endpoint="a",rank="0"} 1`) {
		t.Fatalf("%s %v", text, err)
	}
}

// TestIndexStreamHealth: a stream marked lost is unknown at once and in step at the next
// sequence number; one gap gives one AppliedReplayFrom, later batches AppliedReplayPending;
// the declared capacity is checked against the engine's.
func TestIndexStreamHealth(t *testing.T) {
	x, err := NewIndex("vllm-kv-map-v3-r0.31", "", 16, IndexOptions{MaxSlots: 4})
	if err != nil {
		t.Fatal(err)
	}
	defer x.Close()
	id, err := x.AddEndpoint(EndpointConfig{Name: "a", DPRanks: 1, GPUBlocks: 10, Replay: true, StartsEmpty: true})
	if err != nil {
		t.Fatal(err)
	}
	// An empty vLLM 0.31 batch: [ts, [], dp_rank].
	empty, _ := hex.DecodeString("93cb3ff00000000000009000")
	feed := func(seq uint64) FeedResult {
		t.Helper()
		r, err := x.FeedPayload(id, 0, seq, empty)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	reason := func() UnknownReason {
		t.Helper()
		p, err := x.Predict([]uint64{1}, 17, 0)
		if err != nil {
			t.Fatal(err)
		}
		return p[0].UnknownReason
	}
	feed(0)
	if err := x.MarkLost(id, AllRanks); err != nil {
		t.Fatal(err)
	}
	if r := reason(); r != UnknownStreamLost {
		t.Fatalf("marked lost: %v", r)
	}
	feed(1)
	if r := reason(); r != UnknownNone {
		t.Fatalf("the next number: %v", r)
	}
	if r := feed(5); r.Outcome != AppliedReplayFrom || r.ReplayFrom != 2 {
		t.Fatalf("%+v", r)
	}
	for seq := uint64(6); seq < 14; seq++ {
		if r := feed(seq); r.Outcome != AppliedReplayPending || r.ReplayFrom != 2 {
			t.Fatalf("batch %d: %+v", seq, r)
		}
	}
	if err := x.MarkLost(id, 3); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("rank 3: %v", err)
	}
	if m, err := x.CheckCapacity(id, 10, CapacityNotStated); err != nil || m != 0 {
		t.Fatalf("%d %v", m, err)
	}
	if m, err := x.CheckCapacity(id, 4095, 0); err != nil || m != CapacityGPUDiffers {
		t.Fatalf("%d %v", m, err)
	}
	if _, err := x.CheckCapacity(99, 1, 0); !errors.Is(err, ErrUnknownEndpoint) {
		t.Fatalf("99: %v", err)
	}
}
