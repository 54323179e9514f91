package kvexact

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"sync"
	"testing"
)

const routeNow = int64(1_721_997_296_000)

// routeHandles: the Qwen2.5 profile's vLLM encoder and a sha256_cbor hasher, with caches
// (the defaults) and without.
type routeHandles struct {
	reg             *Registry
	prof            *Profile
	encOn, encOff   *Encoder
	hashOn, hashOff *Hasher
}

func newRouteHandles(tb testing.TB) *routeHandles {
	tb.Helper()
	reg, err := LoadRegistry(filepath.Join(root(), "testdata", "registry"), uint32(os.Geteuid()), 9)
	if err != nil {
		tb.Fatal(err)
	}
	prof, err := reg.ProfileByModel("qwen2.5-7b-instruct")
	if err != nil {
		tb.Fatal(err)
	}
	h := &routeHandles{reg: reg, prof: prof}
	if h.encOn, err = NewEncoderWithOptions(prof, "vllm-kv-map-v3", EncoderOptions{}); err != nil {
		tb.Fatal(err)
	}
	if h.encOff, err = NewEncoderWithOptions(prof, "vllm-kv-map-v3", EncoderOptions{NoCache: true}); err != nil {
		tb.Fatal(err)
	}
	seed := "0"
	if h.hashOn, err = NewHasherWithOptions(SHA256CBOR, 16, &seed, HasherOptions{}); err != nil {
		tb.Fatal(err)
	}
	if h.hashOff, err = NewHasherWithOptions(SHA256CBOR, 16, &seed, HasherOptions{NoCache: true}); err != nil {
		tb.Fatal(err)
	}
	return h
}

func (h *routeHandles) Close() {
	h.encOn.Close()
	h.encOff.Close()
	h.hashOn.Close()
	h.hashOff.Close()
	h.prof.Close()
	h.reg.Close()
}

func readWorkload(tb testing.TB, name string) []byte {
	tb.Helper()
	b, err := os.ReadFile(filepath.Join(root(), "benches", "workload", name))
	if err != nil {
		tb.Fatal(err)
	}
	return b
}

// agentTurns derives the 40 requests of agent-40turns.json: turn k keeps the messages up to
// the k-th user message (as agent-40turns-prefixes/turn-k.json in the shared workload).
func agentTurns(tb testing.TB) [][]byte {
	tb.Helper()
	var full map[string]json.RawMessage
	if err := json.Unmarshal(readWorkload(tb, "agent-40turns.json"), &full); err != nil {
		tb.Fatal(err)
	}
	var msgs []map[string]json.RawMessage
	if err := json.Unmarshal(full["messages"], &msgs); err != nil {
		tb.Fatal(err)
	}
	var turns [][]byte
	for i, m := range msgs {
		if string(m["role"]) != `"user"` {
			continue
		}
		t := map[string]json.RawMessage{}
		for k, v := range full {
			t[k] = v
		}
		b, err := json.Marshal(msgs[:i+1])
		if err != nil {
			tb.Fatal(err)
		}
		t["messages"] = b
		body, err := json.Marshal(t)
		if err != nil {
			tb.Fatal(err)
		}
		turns = append(turns, body)
	}
	if len(turns) != 40 {
		tb.Fatalf("%d turns", len(turns))
	}
	return turns
}

// separateKeys is EncodeChat then BlockHashesInto of the ids written.
func separateKeys(t *testing.T, e *Encoder, h *Hasher, body []byte) ([]uint32, []uint64) {
	t.Helper()
	ids := make([]uint32, 1<<16)
	n, err := e.EncodeChat(body, routeNow, ids)
	if err != nil {
		t.Fatal(err)
	}
	hashes := make([]uint64, 4096)
	nb, err := h.BlockHashesInto(ids[:n], true, hashes)
	if err != nil {
		t.Fatal(err)
	}
	return ids[:n], hashes[:nb]
}

// RouteKeys through the caches equals the separate calls without them, turn by turn over
// the agent conversation and on chat-4k, and the counters show the caches at work.
func TestRouteKeysEqualsSeparateCalls(t *testing.T) {
	h := newRouteHandles(t)
	defer h.Close()
	ids := make([]uint32, 1<<16)
	hashes := make([]uint64, 4096)
	bodies := append(agentTurns(t), readWorkload(t, "chat-4k.json"))
	for i, body := range bodies {
		wantIDs, wantHashes := separateKeys(t, h.encOff, h.hashOff, body)
		for _, pair := range [][2]interface{}{{h.encOn, h.hashOn}, {h.encOff, h.hashOff}} {
			ni, nb, err := pair[0].(*Encoder).RouteKeys(pair[1].(*Hasher), body, routeNow, ids, hashes)
			if err != nil {
				t.Fatalf("body %d: %v", i, err)
			}
			if !reflect.DeepEqual(ids[:ni], wantIDs) || !reflect.DeepEqual(hashes[:nb], wantHashes) {
				t.Fatalf("body %d: route keys differ from the separate calls", i)
			}
		}
	}
	es, err := h.encOn.CacheStats()
	if err != nil || !es.Enabled || es.Hits == 0 || es.Misses == 0 || es.Bytes == 0 || es.Capacity != 8<<20 {
		t.Fatalf("segment cache %+v %v", es, err)
	}
	hs, err := h.hashOn.CacheStats()
	if err != nil || !hs.Enabled || hs.Hits == 0 || hs.Entries == 0 || hs.Capacity < 16384 {
		t.Fatalf("prefix cache %+v %v", hs, err)
	}
	if off, err := h.encOff.CacheStats(); err != nil || off != (CacheStats{}) {
		t.Fatalf("no cache: %+v %v", off, err)
	}
	if off, err := h.hashOff.CacheStats(); err != nil || off != (CacheStats{}) {
		t.Fatalf("no cache: %+v %v", off, err)
	}
	// Clearing keeps the counters and the answers.
	if err := h.encOn.ClearCache(); err != nil {
		t.Fatal(err)
	}
	if err := h.hashOn.ClearCache(); err != nil {
		t.Fatal(err)
	}
	if es2, _ := h.encOn.CacheStats(); es2.Entries != 0 || es2.Hits != es.Hits {
		t.Fatalf("after clear %+v", es2)
	}
	body := bodies[len(bodies)-1]
	wantIDs, wantHashes := separateKeys(t, h.encOff, h.hashOff, body)
	ni, nb, err := h.encOn.RouteKeys(h.hashOn, body, routeNow, ids, hashes)
	if err != nil || !reflect.DeepEqual(ids[:ni], wantIDs) || !reflect.DeepEqual(hashes[:nb], wantHashes) {
		t.Fatalf("after clear: %v", err)
	}
}

func TestRouteKeysRefusalsAndErrors(t *testing.T) {
	h := newRouteHandles(t)
	defer h.Close()
	ids := make([]uint32, 64)
	hashes := make([]uint64, 4)
	tools := []byte(`{"model":"m","messages":[{"role":"user","content":"hi"}],"tools":[{"type":"function","function":{"name":"f"}}]}`)
	_, _, err := h.encOn.RouteKeys(h.hashOn, tools, routeNow, ids, hashes)
	var ref *RefusedError
	if !errors.As(err, &ref) || ref.Reason.Name() != "tools" || !errors.Is(err, ErrUnsupported) {
		t.Fatalf("tools: %v", err)
	}
	// A body that is not JSON is refused as "unparseable" (strict rules: never guessed).
	_, _, err = h.encOn.RouteKeys(h.hashOn, []byte("{not json"), routeNow, ids, hashes)
	if !errors.As(err, &ref) || ref.Reason.Name() != "unparseable" {
		t.Fatalf("bad json: %v", err)
	}
	// Capped outputs: at most len(ids) ids and len(hashes) hashes.
	body := readWorkload(t, "chat-4k.json")
	ni, nb, err := h.encOn.RouteKeys(h.hashOn, body, routeNow, ids, hashes)
	if err != nil || ni != 64 || nb != 4 {
		t.Fatalf("capped: %d %d %v", ni, nb, err)
	}
	// Bad options are typed errors.
	if _, err := NewEncoderWithOptions(h.prof, "vllm-kv-map-v3", EncoderOptions{NoCache: true, SegmentCacheBytes: 1}); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("encoder options: %v", err)
	}
	seed := "0"
	if _, err := NewHasherWithOptions(SHA256CBOR, 16, &seed, HasherOptions{ShareCacheWith: h.hashOff}); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("share a hasher without a cache: %v", err)
	}
	if _, err := NewEncoderWithOptions(h.prof, "vllm-kv-map-v3", EncoderOptions{EngineVersion: "0.1.0"}); !errors.Is(err, ErrUnknownEngineVersion) {
		t.Fatalf("unknown version: %v", err)
	}
}

// Hashers sharing one cache keep their own answers; the batch equals one call per body; and
// goroutines may share one encoder and one hasher.
func TestRouteKeysBatchSharedCacheAndGoroutines(t *testing.T) {
	h := newRouteHandles(t)
	defer h.Close()
	seed := "1"
	other, err := NewHasherWithOptions(SHA256CBOR, 16, &seed, HasherOptions{ShareCacheWith: h.hashOn})
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	otherRef, err := NewHasherWithOptions(SHA256CBOR, 16, &seed, HasherOptions{NoCache: true})
	if err != nil {
		t.Fatal(err)
	}
	defer otherRef.Close()
	turns := agentTurns(t)[:8]
	bodies := append(append([][]byte{}, turns...), []byte("{"))
	const maxIDs, maxBlocks = 1 << 13, 512
	ids := make([]uint32, len(bodies)*maxIDs)
	hashes := make([]uint64, len(bodies)*maxBlocks)
	for _, hh := range [][2]*Hasher{{h.hashOn, h.hashOff}, {other, otherRef}} {
		res, err := h.encOn.RouteKeysBatch(hh[0], bodies, routeNow, maxIDs, maxBlocks, ids, hashes)
		if err != nil {
			t.Fatal(err)
		}
		for i, r := range res[:len(turns)] {
			wantIDs, wantHashes := separateKeys(t, h.encOff, hh[1], bodies[i])
			if r.Err != nil || !reflect.DeepEqual(r.IDs, wantIDs) || !reflect.DeepEqual(r.Hashes, wantHashes) {
				t.Fatalf("batch body %d: %v", i, r.Err)
			}
		}
		var ref *RefusedError
		if !errors.As(res[len(turns)].Err, &ref) || ref.Reason.Name() != "unparseable" {
			t.Fatalf("bad body in a batch: %v", res[len(turns)].Err)
		}
	}
	if _, err := h.encOn.RouteKeysBatch(h.hashOn, bodies, routeNow, maxIDs, maxBlocks, ids[:1], hashes); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("short buffer: %v", err)
	}
	wantIDs, wantHashes := separateKeys(t, h.encOff, h.hashOff, turns[7])
	var wg sync.WaitGroup
	errs := make(chan string, 8)
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ids := make([]uint32, 1<<13)
			hashes := make([]uint64, 512)
			for k := 0; k < 5; k++ {
				ni, nb, err := h.encOn.RouteKeys(h.hashOn, turns[7], routeNow, ids, hashes)
				if err != nil || !reflect.DeepEqual(ids[:ni], wantIDs) || !reflect.DeepEqual(hashes[:nb], wantHashes) {
					errs <- "goroutine got other keys"
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Fatal(e)
	}
}

// go test -bench RouteKeys: the cgo cost where the gateway pays it. chat-4k with both caches
// off (one cold request) and on; agent-40 = the 40 requests of the conversation in order,
// with fresh caches per conversation (cached) or none (cold).
func BenchmarkRouteKeysChat4kCold(b *testing.B) { benchChat4k(b, false) }

func BenchmarkRouteKeysChat4kCached(b *testing.B) { benchChat4k(b, true) }

func benchChat4k(b *testing.B, cached bool) {
	h := newRouteHandles(b)
	defer h.Close()
	enc, hs := h.encOff, h.hashOff
	if cached {
		enc, hs = h.encOn, h.hashOn
	}
	body := readWorkload(b, "chat-4k.json")
	ids := make([]uint32, 1<<16)
	hashes := make([]uint64, 4096)
	b.SetBytes(int64(len(body)))
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, _, err := enc.RouteKeys(hs, body, routeNow, ids, hashes); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkRouteKeysAgent40Cold(b *testing.B) { benchAgent40(b, false) }

func BenchmarkRouteKeysAgent40Cached(b *testing.B) { benchAgent40(b, true) }

func benchAgent40(b *testing.B, cached bool) {
	h := newRouteHandles(b)
	defer h.Close()
	enc, hs := h.encOff, h.hashOff
	if cached {
		enc, hs = h.encOn, h.hashOn
	}
	turns := agentTurns(b)
	ids := make([]uint32, 1<<16)
	hashes := make([]uint64, 4096)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if cached {
			// Fresh caches per conversation: only its earlier turns warm them.
			if err := enc.ClearCache(); err != nil {
				b.Fatal(err)
			}
			if err := hs.ClearCache(); err != nil {
				b.Fatal(err)
			}
		}
		for _, t := range turns {
			if _, _, err := enc.RouteKeys(hs, t, routeNow, ids, hashes); err != nil {
				b.Fatal(err)
			}
		}
	}
}
