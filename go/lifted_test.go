package kvexact

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A lifted tool request gives each engine release's own ids (the template vectors'
// engine_token_ids); the strict encoder refuses it; a code a release does not define is
// refused when the encoder is built.
func TestLiftedToolRequestsGiveTheEnginesIDs(t *testing.T) {
	reg, err := LoadRegistry(filepath.Join(root(), "testdata", "registry"), uint32(os.Geteuid()), 21)
	if err != nil {
		t.Fatal(err)
	}
	defer reg.Close()
	p, err := reg.ProfileByModel("qwen2.5-7b-instruct")
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	engines := []struct{ key, contract, version string }{
		{"vllm", "vllm-kv-map-v3", "0.31.0"},
		{"sglang", "sglang-kv-rank-v2", "0.5.19"},
		{"trtllm", "trtllm-kv-http-v2", "1.3.0rc29"},
	}
	tried := 0
	for _, c := range loadCases(t, "templates/qwen25-7b-instruct-v1.json") {
		var id, kind string
		_ = json.Unmarshal(c["id"], &id)
		_ = json.Unmarshal(c["kind"], &kind)
		if kind != "chat" || c["tools"] == nil || string(c["tools"]) == "null" {
			continue
		}
		// Only requests whose sole departure from the strict rules is `tools`.
		var msgs []map[string]json.RawMessage
		if err := json.Unmarshal(c["messages"], &msgs); err != nil {
			t.Fatal(err)
		}
		plain := c["add_generation_prompt"] == nil || string(c["add_generation_prompt"]) == "true"
		for _, m := range msgs {
			if len(m) != 2 || m["role"] == nil || m["content"] == nil {
				plain = false
			}
		}
		if !plain {
			continue
		}
		var truth map[string][]uint32
		if err := json.Unmarshal(c["engine_token_ids"], &truth); err != nil {
			continue // an engine rejects it (null): covered by the Rust lifted parity
		}
		body, err := json.Marshal(map[string]json.RawMessage{"model": json.RawMessage(`"m"`), "messages": c["messages"], "tools": c["tools"]})
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range engines {
			want, ok := truth[e.key]
			if !ok || want == nil {
				continue
			}
			enc, err := NewEncoderWithOptions(p, e.contract, EncoderOptions{EngineVersion: e.version, Lifted: RefusalBitTools})
			if err != nil {
				t.Fatalf("%s %s: %v", id, e.key, err)
			}
			out := make([]uint32, 4096)
			n, err := enc.EncodeChat(body, 0, out)
			if err != nil {
				t.Fatalf("%s %s: %v", id, e.key, err)
			}
			if !equalIDs(out[:n], want) {
				t.Fatalf("%s %s: %d ids, want the engine's %d", id, e.key, n, len(want))
			}
			enc.Close()
			strict, err := NewEncoderWithOptions(p, e.contract, EncoderOptions{EngineVersion: e.version})
			if err != nil {
				t.Fatal(err)
			}
			var ref *RefusedError
			if _, err := strict.EncodeChat(body, 0, out); !errors.As(err, &ref) || ref.Reason.Name() != "tools" {
				t.Fatalf("%s %s strict: %v", id, e.key, err)
			}
			strict.Close()
			tried++
		}
	}
	if tried < 3 {
		t.Fatalf("only %d lifted tool cases", tried)
	}
	t.Logf("%d lifted tool requests gave the engines' ids", tried)
	_, err = NewEncoderWithOptions(p, "trtllm-kv-http-v2", EncoderOptions{EngineVersion: "1.3.0rc29", Lifted: RefusalBit(RefusalContinueFinalMessage)})
	var kerr *Error
	if !errors.As(err, &kerr) || kerr.Code != "LIFT_NOT_ALLOWED" {
		t.Fatalf("continue_final_message on TRT-LLM: %v", err)
	}
}

// Over an encoder's bound a request is refused input_too_large, the bound named.
func TestInputBoundsRefuseBeforeTheWork(t *testing.T) {
	reg, err := LoadRegistry(filepath.Join(root(), "testdata", "registry"), uint32(os.Geteuid()), 22)
	if err != nil {
		t.Fatal(err)
	}
	defer reg.Close()
	p, err := reg.ProfileByModel("qwen2.5-7b-instruct")
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	enc, err := NewEncoderWithOptions(p, "vllm-kv-map-v2", EncoderOptions{MaxBodyBytes: 1024})
	if err != nil {
		t.Fatal(err)
	}
	defer enc.Close()
	body := []byte(`{"messages":[{"role":"user","content":"` + strings.Repeat("a ", 1024) + `"}]}`)
	out := make([]uint32, 64)
	var ref *RefusedError
	if _, err := enc.EncodeChat(body, 0, out); !errors.As(err, &ref) || ref.Reason.Name() != "input_too_large" {
		t.Fatalf("over max_body_bytes: %v", err)
	}
	if _, err := enc.EncodeChat([]byte(`{"messages":[{"role":"user","content":"hi"}]}`), 0, out); err != nil {
		t.Fatal(err)
	}
	// Completions refusals are typed too (kvexact_encode_completions_with_refusal).
	if _, err := enc.EncodeCompletions("a\x00b", out); !errors.As(err, &ref) || ref.Reason != RefusalNulByte {
		t.Fatalf("NUL in a completions prompt: %v", err)
	}
	if _, err := enc.EncodeCompletions("", out); err != ErrRequest {
		t.Fatalf("empty completions prompt: %v", err)
	}
}

func equalIDs(a, b []uint32) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestRefusalBitsParse(t *testing.T) {
	bits, err := ParseRefusalBits("tools, message_field")
	if err != nil {
		t.Fatal(err)
	}
	if bits != RefusalBit(RefusalTools)|RefusalBit(RefusalMessageField) || RefusalBit(RefusalTools) != RefusalBitTools {
		t.Fatalf("bits %#x", bits)
	}
	if _, err := ParseRefusalBits("tool"); err == nil {
		t.Fatal("an unknown name parsed")
	}
	if RefusalInputTooLarge.Name() != "input_too_large" {
		t.Fatal(RefusalInputTooLarge.Name())
	}
	// The loader-ambiguity refusal: named, and a code libkvexact defines (never liftable:
	// the release contracts never list it).
	if RefusalAmbiguousAddedToken.Name() != "ambiguous_added_token" || RefusalBit(RefusalAmbiguousAddedToken) != 1<<25 {
		t.Fatal(RefusalAmbiguousAddedToken.Name())
	}
}
