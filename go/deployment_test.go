package kvexact

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// vllm033Case is one case of vLLM 0.33.0's own block hashes
// (testdata/vectors/versions/vllm-0.33.0/block_hashes.json).
func vllm033Case(t *testing.T, name string) ([]uint32, []uint64) {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(root(), "testdata", "vectors", "versions", "vllm-0.33.0", "block_hashes.json"))
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Cases []struct {
			Name   string `json:"name"`
			Inputs struct {
				TokenIDs []uint64 `json:"token_ids"` // some cases hold ids past 2^32
			} `json:"inputs"`
			Expected struct {
				Hashes []uint64 `json:"block_hashes_int"`
			} `json:"expected"`
		} `json:"cases"`
	}
	if err := json.Unmarshal(raw, &doc); err != nil {
		t.Fatal(err)
	}
	for _, c := range doc.Cases {
		if c.Name == name {
			ids := make([]uint32, len(c.Inputs.TokenIDs))
			for i, t := range c.Inputs.TokenIDs {
				ids[i] = uint32(t)
			}
			return ids, c.Expected.Hashes
		}
	}
	t.Fatalf("no case %s", name)
	return nil, nil
}

func TestDeploymentKeysEqualTheEngines(t *testing.T) {
	// EAGLE on vLLM 0.33.0: look-ahead keys.
	d, err := NewDeployment(VLLM, "0.33.0", []byte(`{"hashSeed": "0", "hashAlgorithm": "sha256_cbor", "speculative": {"method": "eagle", "numSpeculativeTokens": 2}}`))
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	js, err := d.JSON()
	if err != nil || !strings.Contains(js, `"keyForm":"lookahead-1"`) {
		t.Fatalf("%v %s", err, js)
	}
	h, err := NewHasherForDeployment(d, HasherOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	ids, want := vllm033Case(t, "lookahead1_len49")
	out := make([]uint64, 8)
	n, err := h.BlockHashesKeyed(RequestKeys{}, ids, out)
	if err != nil || n != len(want) {
		t.Fatalf("%v %d", err, n)
	}
	for i := range want {
		if out[i] != want[i] {
			t.Fatalf("block %d: %d, want %d", i, out[i], want[i])
		}
	}
	ix, err := NewIndexForDeployment(d, IndexOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ix.Close()

	// An adapter and a tenant's salt, keyed as vLLM 0.33.0 keys them.
	d2, err := NewDeployment(VLLM, "0.33.0", []byte("hashSeed: '0'\nhashAlgorithm: sha256_cbor\nloraAdapters: [{name: sql-lora-2, path: /adapters/sql-lora-2}]\n"))
	if err != nil {
		t.Fatal(err)
	}
	defer d2.Close()
	h2, err := NewHasherForDeployment(d2, HasherOptions{NoCache: true})
	if err != nil {
		t.Fatal(err)
	}
	defer h2.Close()
	ids, want = vllm033Case(t, "lora_and_cache_salt_len64")
	salt := "tenant-a-2"
	n, err = h2.BlockHashesKeyed(RequestKeys{CacheSalt: &salt, Adapter: "sql-lora-2"}, ids, out)
	if err != nil || n != len(want) {
		t.Fatalf("%v %d", err, n)
	}
	for i := range want {
		if out[i] != want[i] {
			t.Fatalf("block %d: %d, want %d", i, out[i], want[i])
		}
	}
	bad := "a/b"
	var e *Error
	if _, err := h2.BlockHashesKeyed(RequestKeys{CacheSalt: &bad}, ids, out); !errors.As(err, &e) || e.Code != "SALT_REJECTED" {
		t.Fatalf("%v", err)
	}
}

func TestDeploymentRefusalsNameTheOption(t *testing.T) {
	_, err := NewDeployment(VLLM, "0.31.0", []byte(`{"blockSize": 16, "speculative": {"method": "eagle", "numSpeculativeTokens": 1}}`))
	var e *Error
	if !errors.As(err, &e) || e.Status != ErrDeploymentUnsupported || !strings.Contains(e.Message, "speculative.method") {
		t.Fatalf("%v", err)
	}
	_, err = NewDeployment(SGLang, "0.5.19", []byte(`{"blockSize": 16, "pageSize": 16}`))
	if !errors.As(err, &e) || e.Code != "DEPLOYMENT_SCHEMA" {
		t.Fatalf("%v", err)
	}
}

func TestDeploymentCheckReadsVLLMMetrics(t *testing.T) {
	d, err := NewDeployment(VLLM, "0.34.0", []byte(`{"hashSeed": "0"}`))
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	metrics := func(bs int, algo string) []byte {
		return []byte(fmt.Sprintf("# TYPE vllm:cache_config_info gauge\nvllm:cache_config_info{block_size=\"%d\",num_gpu_blocks=\"2048\",prefix_caching_hash_algo=\"%s\"} 1.0\n", bs, algo))
	}
	// vLLM 0.34 without --block-size: 64-token blocks, its default sha256.
	if err := d.Check(EvidenceVLLMMetrics, metrics(64, "sha256")); err != nil {
		t.Fatal(err)
	}
	var e *Error
	err = d.Check(EvidenceVLLMMetrics, metrics(16, "sha256"))
	if !errors.As(err, &e) || e.Status != ErrDeploymentMismatch || e.Path != "blockSize" {
		t.Fatalf("%v", err)
	}
}
