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

// The readiness judgements as the gateway's control plane makes them: fixtures POSTed to the
// tokenize route and the answers judged (the banked ids pass, a changed id fails), identity
// against the manifest, the TensorRT-LLM oracle, and a hash challenge echoed by events.
func TestProbesAndChallenge(t *testing.T) {
	reg, err := LoadRegistry(filepath.Join(root(), "testdata", "registry"), uint32(os.Geteuid()), 1)
	if err != nil {
		t.Fatal(err)
	}
	defer reg.Close()
	prof, err := reg.ProfileByModel("Qwen/Qwen3-0.6B")
	if err != nil {
		t.Fatal(err)
	}
	defer prof.Close()
	enc, err := NewEncoder(prof, "vllm-kv-map-v2")
	if err != nil {
		t.Fatal(err)
	}
	defer enc.Close()
	if TokenizePath(VLLM) != "/tokenize" || TokenizePath(TRTLLM) != "" || IdentityPath(VLLM) != "/version" {
		t.Fatal("paths")
	}

	fx, err := reg.LoadFixtures(prof.ID(), VLLM)
	if err != nil {
		t.Fatal(err)
	}
	defer fx.Close()
	if f, err := fx.Check(prof, APIBoth); err != nil || !f.OK {
		t.Fatalf("check: %+v %v", f, err)
	}
	dir := filepath.Join(root(), "testdata", "registry", "probefixtures", prof.ID())
	for i := 0; i < fx.Count(); i++ {
		info, err := fx.Info(i)
		if err != nil {
			t.Fatal(err)
		}
		req, _ := fx.Request(i)
		onDisk, _ := os.ReadFile(filepath.Join(dir, info.Name+".request.json"))
		if string(req) != string(onDisk) {
			t.Fatalf("%s: request bytes differ from the file", info.Name)
		}
		eb, _ := os.ReadFile(filepath.Join(dir, info.Name+".expect.json"))
		var exp struct {
			IDs []uint32 `json:"expectedTokenIds"`
		}
		if err := json.Unmarshal(eb, &exp); err != nil {
			t.Fatal(err)
		}
		answer := func(ids []uint32) []byte {
			b, _ := json.Marshal(map[string]any{"count": len(ids), "tokens": ids, "max_model_len": 40960})
			return b
		}
		if f, err := enc.JudgeTokenize(fx, i, 200, answer(exp.IDs), 0); err != nil || !f.OK {
			t.Fatalf("%s: %+v %v", info.Name, f, err)
		}
		// A Jinja template's chat path is the tokenize route's: the probe is the request, as is.
		path, body, err := enc.FixtureProbe(fx, i)
		if err != nil || path != "/tokenize" || string(body) != string(req) {
			t.Fatalf("%s: probe %q %q %v", info.Name, path, body, err)
		}
		if f, err := enc.JudgeProbe(fx, i, 200, answer(exp.IDs), 0); err != nil || !f.OK {
			t.Fatalf("%s: probe judged %+v %v", info.Name, f, err)
		}
		bad := append([]uint32(nil), exp.IDs...)
		bad[0]++
		if f, _ := enc.JudgeTokenize(fx, i, 200, answer(bad), 0); f.OK || f.Reason != "token_mismatch" {
			t.Fatalf("%s: changed id judged %+v", info.Name, f)
		}
	}
	if _, err := enc.JudgeTokenize(fx, fx.Count(), 200, nil, 0); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("index out of range: %v", err)
	}

	m, err := reg.LoadManifest(prof.ID())
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	if len(m.Digest()) != 64 {
		t.Fatal("manifest digest")
	}
	if f, _ := m.JudgeIdentity(VLLM, 200, []byte(`{"version":"0.28.0"}`)); !f.OK {
		t.Fatalf("identity: %+v", f)
	}
	if f, _ := m.JudgeIdentity(VLLM, 200, []byte(`{"version":"0.29.0"}`)); f.OK || f.Reason != "identity_mismatch" {
		t.Fatalf("identity mismatch: %+v", f)
	}

	trt, err := NewEncoder(prof, "trtllm-kv-http-preview-v1")
	if err != nil {
		t.Fatal(err)
	}
	defer trt.Close()
	tfx, err := reg.LoadFixtures(prof.ID(), TRTLLM)
	if err != nil {
		t.Fatal(err)
	}
	defer tfx.Close()
	if f, err := trt.JudgeOracle(tfx, "Qwen/Qwen3-0.6B", APIBoth, 0); err != nil || !f.OK || !f.Oracle {
		t.Fatalf("oracle: %+v %v", f, err)
	}

	seed := "0"
	h, _ := NewHasher(SHA256CBOR, 16, &seed)
	defer h.Close()
	nonce := [16]byte{1, 2, 3}
	c, err := NewChallenge(enc, h, &nonce, "Qwen/Qwen3-0.6B", 1)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	body, err := c.RequestBody()
	if err != nil {
		t.Fatal(err)
	}
	var req struct {
		Prompt string `json:"prompt"`
	}
	if err := json.Unmarshal(body, &req); err != nil || !strings.Contains(req.Prompt, fmt.Sprintf("%x", nonce)) {
		t.Fatalf("body %s: %v", body, err)
	}
	hashes, tokens, _ := c.Expected()
	ids := make([]uint32, 4096)
	n, _ := enc.EncodeCompletions(req.Prompt, ids)
	want, _ := h.BlockHashes(ids[:n], true, 256)
	if len(want) != len(hashes) || len(tokens) != 16*len(hashes) || len(hashes) < 2 {
		t.Fatalf("expected %d hashes, %d tokens; hot path gives %d", len(hashes), len(tokens), len(want))
	}
	for i := range want {
		if want[i] != hashes[i] {
			t.Fatalf("hash %d differs from the hot path's", i)
		}
	}
	if f, _ := c.Result(false); f.OK {
		t.Fatal("passed before any echo")
	}
	if done, err := c.ObserveStored(-1, hashes, tokens, 16); err != nil || !done {
		t.Fatalf("echo: %v %v", done, err)
	}
	if f, _ := c.Result(false); !f.OK {
		t.Fatalf("challenge: %+v", f)
	}
	cov, _ := NewRankCoverage(1)
	defer cov.Close()
	if again, err := cov.Record(c); err != nil || again {
		t.Fatalf("coverage: again=%v %v", again, err)
	}
	if f, _ := cov.Result(); !f.OK {
		t.Fatalf("coverage: %+v", f)
	}
	c2, _ := NewChallenge(enc, h, &nonce, "Qwen/Qwen3-0.6B", 1)
	defer c2.Close()
	if _, err := c2.ObserveStored(-1, hashes[:1], tokens[:16], 16); err != nil {
		t.Fatal(err)
	}
	if f, _ := c2.Result(true); f.OK || f.Reason != "challenge_timeout" {
		t.Fatalf("timeout: %+v", f)
	}
	if _, err := cov.Record(c2); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("an undecided challenge counted: %v", err)
	}
}

// The ladder from Go: findings gathered above, marshalled as evidence, give READY; a failed
// challenge stops at TOKEN_PARITY_VERIFIED with challenge_failed.
func TestReadinessLadder(t *testing.T) {
	type finding struct {
		OK     bool    `json:"ok"`
		Reason *string `json:"reason"`
		Detail string  `json:"detail"`
	}
	type obs struct {
		Finding    finding `json:"finding"`
		TimeUnixMs int64   `json:"timeUnixMs"`
	}
	ok := obs{Finding: finding{OK: true, Detail: "ok"}, TimeUnixMs: 1}
	failed := "challenge_failed"
	ev := map[string]any{
		"manifest":  map[string]any{"kind": "present", "digest": "ab"},
		"fixtures":  finding{OK: true},
		"endpoints": []map[string]any{{"endpoint": "10.0.0.1:8000", "identity": ok, "tokenParity": ok, "challenge": ok}},
	}
	verdict := func() map[string]any {
		b, _ := json.Marshal(ev)
		out, err := EvaluateReadiness(b)
		if err != nil {
			t.Fatal(err)
		}
		var v map[string]any
		if err := json.Unmarshal(out, &v); err != nil {
			t.Fatal(err)
		}
		return v
	}
	if v := verdict(); v["enforcedState"] != "READY" {
		t.Fatalf("%v", v)
	}
	ev["endpoints"].([]map[string]any)[0]["challenge"] = obs{Finding: finding{Reason: &failed, Detail: "x"}}
	if v := verdict(); v["enforcedState"] != "TOKEN_PARITY_VERIFIED" || v["reasonCodes"].([]any)[0] != "challenge_failed" {
		t.Fatalf("%v", v)
	}
	if _, err := EvaluateReadiness([]byte(`{"bogus":1}`)); err == nil {
		t.Fatal("unknown key accepted")
	}
}
