package kvexact

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// The gateway's path: registry → profile → encoder → ids (checked against every vLLM probe
// fixture of the Qwen2.5 profile, engine truth) → hashes.
func TestRegistryEncodeFixtures(t *testing.T) {
	reg, err := LoadRegistry(filepath.Join(root(), "testdata", "registry"), uint32(os.Geteuid()), 3)
	if err != nil {
		t.Fatal(err)
	}
	defer reg.Close()
	if reg.Generation() != 3 {
		t.Fatal("generation")
	}
	if d, err := reg.SetDigest(); err != nil || len(d) != 64 {
		t.Fatalf("set digest %q %v", d, err)
	}
	if _, err := reg.ProfileByModel("no/such"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("unknown model: %v", err)
	}
	prof, err := reg.ProfileByModel("qwen2.5-7b-instruct")
	if err != nil {
		t.Fatal(err)
	}
	if prof.ID() != "qwen25-7b-instruct-v1" {
		t.Fatal(prof.ID())
	}
	if _, err := NewEncoder(prof, "llamacpp-x-v1"); err == nil {
		t.Fatal("unknown contract accepted")
	} else if e, ok := err.(*Error); !ok || e.Status != ErrProfile {
		t.Fatalf("unknown contract: %#v", err)
	}
	enc, err := NewEncoder(prof, "vllm-kv-map-v2")
	if err != nil {
		t.Fatal(err)
	}
	defer enc.Close()
	prof.Close()
	reg.Close() // the encoder keeps the generation alive

	seed := "0"
	h, _ := NewHasher(SHA256CBOR, 16, &seed)
	defer h.Close()
	dir := filepath.Join(root(), "testdata", "registry", "probefixtures", "qwen25-7b-instruct-v1")
	reqs, _ := filepath.Glob(filepath.Join(dir, "*.request.json"))
	checked := 0
	for _, rq := range reqs {
		name := strings.TrimSuffix(filepath.Base(rq), ".request.json")
		body, _ := os.ReadFile(rq)
		eb, _ := os.ReadFile(filepath.Join(dir, name+".expect.json"))
		var exp struct {
			IDs []uint32 `json:"expectedTokenIds"`
			API string   `json:"api"`
		}
		if err := json.Unmarshal(eb, &exp); err != nil {
			t.Fatal(err)
		}
		out := make([]uint32, 4096)
		var n int
		if exp.API == "chat" {
			n, err = enc.EncodeChat(body, 1772694489000, out)
			if name == "chat-assistant-last" { // strict rules refuse a trailing assistant turn
				var ref *RefusedError
				if !errors.As(err, &ref) || ref.Reason.Name() != "trailing_assistant" {
					t.Fatalf("%s: %v", name, err)
				}
				continue
			}
		} else {
			var req struct {
				Prompt string `json:"prompt"`
			}
			_ = json.Unmarshal(body, &req)
			n, err = enc.EncodeCompletions(req.Prompt, out)
		}
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if n != len(exp.IDs) {
			t.Fatalf("%s: %d ids, want %d", name, n, len(exp.IDs))
		}
		for i := range exp.IDs {
			if out[i] != exp.IDs[i] {
				t.Fatalf("%s: id %d = %d, want %d", name, i, out[i], exp.IDs[i])
			}
		}
		a, err1 := h.BlockHashes(out[:n], true, 256)
		b, err2 := h.BlockHashes(exp.IDs, true, 256)
		if err1 != nil || err2 != nil || len(a) != len(b) {
			t.Fatalf("%s: hashes", name)
		}
		checked++
	}
	if checked < 6 {
		t.Fatalf("only %d fixtures checked", checked)
	}
	t.Logf("%d fixtures encoded exactly", checked)

	// Many goroutines share the encoder.
	body := []byte(`{"messages":[{"role":"user","content":"What is 2+2?"}]}`)
	want := make([]uint32, 64)
	wn, err := enc.EncodeChat(body, 0, want)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	fail := make(chan string, 8)
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			out := make([]uint32, 64)
			for i := 0; i < 50; i++ {
				n, err := enc.EncodeChat(body, 0, out)
				if err != nil || n != wn || out[n-1] != want[wn-1] {
					fail <- "mismatch"
					return
				}
			}
		}()
	}
	wg.Wait()
	close(fail)
	for f := range fail {
		t.Fatal(f)
	}
	if _, err := enc.EncodeChat([]byte(`{"messages":[{"role":"user","content":"x"}],"tools":[]}`), 0, want); !errors.Is(err, ErrUnsupported) {
		t.Fatalf("tools: %v", err)
	}
}
