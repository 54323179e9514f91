package kvexact_test

import (
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"

	kvexact "github.com/kvexact/kvexact/go"
)

// The prefix index fed the KV events three vLLM 0.31.0 replicas published, in order, then asked
// for the cached tokens each replica reports for two prompts. The replay is
// testdata/vectors/cachehit/vllm-0.31.0-shared-prefix.json (steps 0-24); the printed counts are
// that file's expected_cached_tokens for queries 6 and 7, which vLLM's own KVCacheManager
// computed.
func ExampleIndex_Predict() {
	b, err := os.ReadFile(filepath.Join(repo(), "testdata", "vectors", "cachehit", "vllm-0.31.0-shared-prefix.json"))
	if err != nil {
		fmt.Println(err)
		return
	}
	var doc struct {
		Endpoints []string `json:"endpoints"`
		Steps     []struct {
			Kind     string   `json:"kind"`
			ID       int      `json:"id"`
			Endpoint string   `json:"endpoint"`
			SeqHex   string   `json:"seq_frame_hex"`
			Payload  string   `json:"payload_hex"`
			Tokens   []uint32 `json:"token_ids"`
		} `json:"steps"`
	}
	if err := json.Unmarshal(b, &doc); err != nil {
		fmt.Println(err)
		return
	}
	release, _, err := kvexact.ResolveContract(kvexact.VLLM, "0.31.0")
	if err != nil {
		fmt.Println(err)
		return
	}
	seed := "0" // the replicas' PYTHONHASHSEED
	h, err := kvexact.NewHasherForContract(release, "", kvexact.SHA256CBOR, 16, &seed)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer h.Close()
	index, err := kvexact.NewIndex(release, "", 16, kvexact.IndexOptions{})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer index.Close()
	ids := map[string]uint32{}
	for _, name := range doc.Endpoints {
		ids[name], err = index.AddEndpoint(kvexact.EndpointConfig{Name: name, DPRanks: 1, GPUBlocks: 4095, StartsEmpty: true})
		if err != nil {
			fmt.Println(err)
			return
		}
	}
	for _, s := range doc.Steps[:25] {
		switch s.Kind {
		case "events":
			seq, _ := hex.DecodeString(s.SeqHex)
			payload, _ := hex.DecodeString(s.Payload)
			if _, err := index.FeedFrames(ids[s.Endpoint], 0, nil, seq, payload); err != nil {
				fmt.Println(err)
				return
			}
		case "query":
			if s.ID < 6 {
				continue
			}
			hashes, err := h.BlockHashes(s.Tokens, true, len(s.Tokens))
			if err != nil {
				fmt.Println(err)
				return
			}
			preds, err := index.Predict(hashes, len(s.Tokens), 0)
			if err != nil {
				fmt.Println(err)
				return
			}
			for _, p := range preds {
				fmt.Printf("query %d, %d prompt tokens: %s caches %d\n", s.ID, len(s.Tokens), doc.Endpoints[p.Endpoint], p.Tokens)
			}
		}
	}
	// Output:
	// query 6, 422 prompt tokens: vllm-0 caches 0
	// query 6, 422 prompt tokens: vllm-1 caches 368
	// query 6, 422 prompt tokens: vllm-2 caches 320
	// query 7, 97 prompt tokens: vllm-0 caches 96
	// query 7, 97 prompt tokens: vllm-1 caches 0
	// query 7, 97 prompt tokens: vllm-2 caches 0
}
