package kvexact

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// root is the repository root (KVEXACT_ROOT, else the parent of go/).
func root() string {
	if r := os.Getenv("KVEXACT_ROOT"); r != "" {
		return r
	}
	return ".."
}

func loadCases(t *testing.T, rel string) []map[string]json.RawMessage {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root(), "testdata", "vectors", rel))
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Cases []map[string]json.RawMessage `json:"cases"`
	}
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	return doc.Cases
}

func u64s(t *testing.T, raw json.RawMessage) []uint64 {
	t.Helper()
	var ss []string
	if err := json.Unmarshal(raw, &ss); err != nil {
		t.Fatal(err)
	}
	out := make([]uint64, len(ss))
	for i, s := range ss {
		v, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatal(err)
		}
		out[i] = v
	}
	return out
}

// plainIDs returns the case's ids when they all fit u32 (the ABI's token type).
func plainIDs(ids []json.Number) ([]uint32, bool) {
	out := make([]uint32, len(ids))
	for i, n := range ids {
		v, err := strconv.ParseUint(n.String(), 10, 32)
		if err != nil {
			return nil, false
		}
		out[i] = uint32(v)
	}
	return out, true
}

type blockHasher interface {
	BlockHashes(ids []uint32, fullBlocksOnly bool, maxBlocks int) ([]uint64, error)
}

func checkHashes(t *testing.T, name string, h blockHasher, ids []uint32, want []uint64) {
	t.Helper()
	got, err := h.BlockHashes(ids, true, 512)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	if len(got) != len(want) {
		t.Fatalf("%s: %d hashes, want %d", name, len(got), len(want))
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("%s: block %d = %d, want %d", name, i, got[i], want[i])
		}
	}
}

// Every plain-text vLLM case (no LoRA, salt, multimodal or embeddings) of all four algorithms.
func TestVLLMVectors(t *testing.T) {
	files := map[string]HashAlgo{
		"vllm/block_hashes.json":             SHA256CBOR,
		"vllm/block_hashes_xxhash_cbor.json": XXHashCBOR,
		"vllm/block_hashes_sha256.json":      SHA256Pickle,
		"vllm/block_hashes_xxhash.json":      XXHashPickle,
	}
	n := 0
	for file, algo := range files {
		for _, c := range loadCases(t, file) {
			var name string
			_ = json.Unmarshal(c["name"], &name)
			var in struct {
				Seed      *string           `json:"python_hash_seed"`
				BlockSize uint32            `json:"block_size"`
				IDs       []json.Number     `json:"token_ids"`
				Lora      json.RawMessage   `json:"lora"`
				Salt      json.RawMessage   `json:"cache_salt"`
				MM        []json.RawMessage `json:"mm_features"`
				Embeds    json.RawMessage   `json:"prompt_embeds"`
			}
			if err := json.Unmarshal(c["inputs"], &in); err != nil {
				t.Fatal(err)
			}
			if string(in.Lora) != "null" || string(in.Salt) != "null" || len(in.MM) > 0 || len(in.Embeds) > 0 && string(in.Embeds) != "null" {
				continue
			}
			ids, ok := plainIDs(in.IDs)
			if !ok {
				continue
			}
			var exp struct {
				Hashes json.RawMessage `json:"block_hashes_int_str"`
			}
			_ = json.Unmarshal(c["expected"], &exp)
			h, err := NewHasher(algo, in.BlockSize, in.Seed)
			if err != nil {
				t.Fatalf("%s:%s: %v", file, name, err)
			}
			checkHashes(t, file+":"+name, h, ids, u64s(t, exp.Hashes))
			if len(ids)%int(in.BlockSize) != 0 {
				if _, err := h.BlockHashes(ids, false, 512); !errors.Is(err, ErrHashUndefined) {
					t.Fatalf("%s: partial block under vLLM: %v, want ErrHashUndefined", name, err)
				}
			}
			h.Close()
			n++
		}
	}
	if n < 60 {
		t.Fatalf("only %d vLLM cases checked", n)
	}
	t.Logf("%d vLLM cases", n)
}

func TestSGLangVectors(t *testing.T) {
	n := 0
	for _, c := range loadCases(t, "sglang/block_hashes.json") {
		var name string
		_ = json.Unmarshal(c["name"], &name)
		var in struct {
			PageSize uint32          `json:"page_size"`
			IDs      []json.Number   `json:"token_ids"`
			Salt     json.RawMessage `json:"cache_salt"`
			Mode     string          `json:"mode"`
		}
		_ = json.Unmarshal(c["inputs"], &in)
		ids, ok := plainIDs(in.IDs)
		if !ok || in.Mode != "plain" || string(in.Salt) != "null" {
			continue
		}
		var exp struct {
			Pages []struct {
				U64 string `json:"block_hash_u64_str"`
			} `json:"pages"`
			Tail *struct {
				U64 string `json:"would_be_block_hash_u64_str"`
			} `json:"partial_tail"`
		}
		_ = json.Unmarshal(c["expected"], &exp)
		want := []uint64{}
		for _, p := range exp.Pages {
			v, _ := strconv.ParseUint(p.U64, 10, 64)
			want = append(want, v)
		}
		h, err := NewHasher(SHA256SGLang, in.PageSize, nil)
		if err != nil {
			t.Fatal(err)
		}
		checkHashes(t, name, h, ids, want)
		if exp.Tail != nil {
			tail, _ := strconv.ParseUint(exp.Tail.U64, 10, 64)
			checkHashes(t, name+" (with partial tail)", hWithPartial{h}, ids, append(want, tail))
		}
		h.Close()
		n++
	}
	if n < 25 {
		t.Fatalf("only %d SGLang cases checked", n)
	}
	t.Logf("%d SGLang cases", n)
}

func TestTRTLLMVectors(t *testing.T) {
	n := 0
	for _, c := range loadCases(t, "trtllm/block_hashes.json") {
		var name string
		_ = json.Unmarshal(c["name"], &name)
		var in struct {
			TPB   uint32            `json:"tokens_per_block"`
			IDs   []json.Number     `json:"token_ids"`
			Extra bool              `json:"uses_extra_ids"`
			Lora  json.RawMessage   `json:"lora_task_id"`
			Salt  json.RawMessage   `json:"cache_salt"`
			MM    []json.RawMessage `json:"mm_items"`
		}
		_ = json.Unmarshal(c["inputs"], &in)
		ids, ok := plainIDs(in.IDs)
		if !ok || in.Extra || string(in.Lora) != "null" || string(in.Salt) != "null" || len(in.MM) > 0 {
			continue
		}
		var exp struct {
			Full   json.RawMessage `json:"full_block_hashes_str"`
			Blocks []struct {
				Full bool   `json:"full"`
				Hash string `json:"block_hash_str"`
			} `json:"blocks"`
		}
		_ = json.Unmarshal(c["expected"], &exp)
		h, err := NewHasher(BlockHashTRT, in.TPB, nil)
		if err != nil {
			t.Fatal(err)
		}
		full := u64s(t, exp.Full)
		checkHashes(t, name, h, ids, full)
		all := []uint64{}
		for _, b := range exp.Blocks {
			v, _ := strconv.ParseUint(b.Hash, 10, 64)
			all = append(all, v)
		}
		checkHashes(t, name+" (with partial tail)", hWithPartial{h}, ids, all)
		h.Close()
		n++
	}
	if n < 20 {
		t.Fatalf("only %d TensorRT-LLM cases checked", n)
	}
	t.Logf("%d TensorRT-LLM cases", n)
}

// hWithPartial adapts a Hasher so that checkHashes asks for the partial tail too.
type hWithPartial struct{ *Hasher }

func (h hWithPartial) BlockHashes(ids []uint32, _ bool, max int) ([]uint64, error) {
	return h.Hasher.BlockHashes(ids, false, max)
}

func TestErrorsAreStatuses(t *testing.T) {
	var e *Error
	if _, err := NewHasher(HashAlgo(99), 16, nil); !errors.Is(err, ErrInvalidArgument) || !errors.As(err, &e) || !strings.Contains(e.Message, "algo") {
		t.Fatalf("unknown algo: %v", err)
	}
	// vLLM xxhash with PYTHONHASHSEED unset: its own status, kvhash's message.
	if _, err := NewHasher(XXHashCBOR, 16, nil); !errors.Is(err, ErrNoneHashUnreproducible) || !errors.As(err, &e) || e.Code != "none_hash_unreproducible" || !strings.Contains(e.Message, "PYTHONHASHSEED") {
		t.Fatalf("unset xxhash seed: %v", err)
	}
	if _, err := NewHasher(SHA256CBOR, 0, nil); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("block size 0: %v", err)
	}
	h := &Hasher{} // closed / NULL handle
	if _, err := h.BlockHashes([]uint32{1}, true, 1); !errors.Is(err, ErrNullArgument) {
		t.Fatalf("NULL hasher: %v", err)
	}
	if ErrRequest != -1 || ErrNotReady != -7 {
		t.Fatal("gateway codes changed")
	}
	if RefusalName(15) != "multi_text_part" || Version() == "" {
		t.Fatal("names")
	}
}

// One hasher shared by many goroutines (which cgo runs on many OS threads).
func TestConcurrentHashing(t *testing.T) {
	seed := "0"
	h, err := NewHasher(SHA256CBOR, 16, &seed)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	ids := make([]uint32, 4096)
	for i := range ids {
		ids[i] = uint32(i*7919) % 151000
	}
	want, _ := h.BlockHashes(ids, true, 256)
	var wg sync.WaitGroup
	errs := make(chan string, 16)
	for g := 0; g < 16; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			out := make([]uint64, 256)
			for i := 0; i < 200; i++ {
				n, err := h.BlockHashesInto(ids, true, out)
				if err != nil || n != len(want) || out[n-1] != want[n-1] || out[0] != want[0] {
					errs <- "mismatch"
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
