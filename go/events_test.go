package kvexact

import (
	"encoding/hex"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

func readVector(t *testing.T, rel string) map[string]any {
	b, err := os.ReadFile(filepath.Join(root(), "testdata", "vectors", rel))
	if err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	return doc
}

// vLLM payloads as the subscriber receives them (frame 2), checked against the vector's own
// decode: event count, kinds and the batch rank.
func TestDecodeVLLMEvents(t *testing.T) {
	doc := readVector(t, "vllm/kv_events.json")
	dec, err := NewEventDecoder("vllm-kv-map-v3", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer dec.Close()
	kinds := map[string]uint8{"BlockStored": EventStored, "BlockRemoved": EventRemoved, "AllBlocksCleared": EventAllCleared}
	checked := 0
	for _, c := range doc["cases"].([]any) {
		c := c.(map[string]any)
		ph, ok := c["payload_hex"].(string)
		decoded, ok2 := c["decoded"].(map[string]any)
		if !ok || !ok2 {
			continue
		}
		payload, _ := hex.DecodeString(ph)
		evs, rank, err := dec.Decode(payload)
		if err != nil {
			t.Fatalf("%v: %v", c["name"], err)
		}
		want := decoded["events"].([]any)
		if len(evs) != len(want) {
			t.Fatalf("%v: %d events, want %d", c["name"], len(evs), len(want))
		}
		wantRank := int64(-1)
		if r, ok := decoded["data_parallel_rank"].(float64); ok {
			wantRank = int64(r)
		}
		if rank != wantRank {
			t.Fatalf("%v: rank %d, want %d", c["name"], rank, wantRank)
		}
		for i, w := range want {
			if k := kinds[w.(map[string]any)["type"].(string)]; evs[i].Kind != k || evs[i].DPRank != rank {
				t.Fatalf("%v: event %d kind %d rank %d", c["name"], i, evs[i].Kind, evs[i].DPRank)
			}
		}
		checked++
	}
	if checked == 0 {
		t.Fatal("no vLLM payload checked")
	}
	if _, _, err := dec.Decode([]byte{0xc1}); err == nil {
		t.Fatal("garbage decoded")
	} else if e, ok := err.(*Error); !ok || (e.Code != "decode_error" && e.Code != "schema_mismatch") {
		t.Fatalf("garbage: %#v", err)
	}
}

// TensorRT-LLM drained bodies with re-hash: stored blocks carry the vector's tokens and ids,
// event ids and attention-DP ranks come through, and plain blocks re-hash to what was published.
func TestDecodeTRTEvents(t *testing.T) {
	doc := readVector(t, "trtllm/kv_events.json")
	h, err := NewHasher(BlockHashTRT, 32, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	dec, err := NewEventDecoder("trtllm-kv-http-preview-v1", h)
	if err != nil {
		t.Fatal(err)
	}
	defer dec.Close()
	var e *Error
	if _, err := NewEventDecoder("vllm-kv-map-v3", h); !errors.Is(err, ErrInvalidArgument) || !errors.As(err, &e) || !strings.Contains(e.Message, "rehash") {
		t.Fatalf("rehash on a ZMQ schema: %v", err)
	}
	stored, ranked := 0, 0
	for _, c := range doc["cases"].([]any) {
		c := c.(map[string]any)
		decoded, ok := c["decoded"].([]any)
		if !ok {
			continue
		}
		body := c["response_body"].(string)
		var raw []map[string]any
		if err := json.Unmarshal([]byte(body), &raw); err != nil {
			t.Fatal(err)
		}
		evs, rank, err := dec.Decode([]byte(body))
		if err != nil || rank != -1 {
			t.Fatalf("%v: %v rank %d", c["name"], err, rank)
		}
		k := 0
		for i, d := range decoded {
			d := d.(map[string]any)
			id := int64(raw[i]["event_id"].(float64))
			dp := int64(-1)
			if r, ok := raw[i]["attention_dp_rank"].(float64); ok {
				dp = int64(r)
				ranked++
			}
			n := 1
			if d["type"] == "stored" {
				n = len(d["blocks"].([]any))
			}
			for j := 0; j < n; j++ {
				ev := evs[k]
				k++
				if ev.EventID != id || ev.DPRank != dp {
					t.Fatalf("%v: event %d id %d rank %d, want %d %d", c["name"], i, ev.EventID, ev.DPRank, id, dp)
				}
				if d["type"] != "stored" {
					continue
				}
				b := d["blocks"].([]any)[j].(map[string]any)
				ids := b["hash_inputs"].(map[string]any)["token_ids_u32"].([]any)
				if len(ev.TokenIDs) != len(ids) || ev.Kind != EventStored {
					t.Fatalf("%v: block %d: %d tokens, want %d", c["name"], j, len(ev.TokenIDs), len(ids))
				}
				for x := range ids {
					if uint32(ids[x].(float64)) != ev.TokenIDs[x] {
						t.Fatalf("%v: block %d token %d", c["name"], j, x)
					}
				}
				published, _ := strconv.ParseUint(b["block_hash_str"].(string), 10, 64)
				if !ev.RehashMismatch && ev.Hashes[0] != published {
					t.Fatalf("%v: block %d hash %d, published %d", c["name"], j, ev.Hashes[0], published)
				}
				stored++
			}
		}
		if k != len(evs) {
			t.Fatalf("%v: %d C events, %d accounted for", c["name"], len(evs), k)
		}
	}
	if stored < 10 || ranked == 0 {
		t.Fatalf("only %d stored blocks, %d ranked events checked", stored, ranked)
	}
}
