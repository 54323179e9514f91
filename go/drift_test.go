package kvexact

import (
	"bufio"
	"bytes"
	"encoding/hex"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// driftStream is every ZMQ message of vLLM 0.24.0's KV-event vectors, in document order, as
// [topic, seq, payload] (a case captured as a payload only gets the next sequence number).
func driftStream(t *testing.T) (map[string][][]byte, []string) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root(), "testdata", "vectors", "versions", "vllm-0.24.0", "kv_events.json"))
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Cases []struct {
			Name       string   `json:"name"`
			FramesHex  []string `json:"frames_hex"`
			PayloadHex string   `json:"payload_hex"`
		} `json:"cases"`
	}
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	out := map[string][][]byte{}
	var order []string
	seq := uint64(0)
	for _, c := range doc.Cases {
		var frames [][]byte
		switch {
		case len(c.FramesHex) == 3:
			for _, h := range c.FramesHex {
				f, err := hex.DecodeString(h)
				if err != nil {
					t.Fatal(err)
				}
				frames = append(frames, f)
			}
		case c.PayloadHex != "":
			p, err := hex.DecodeString(c.PayloadHex)
			if err != nil {
				t.Fatal(err)
			}
			s := make([]byte, 8)
			for i := 0; i < 8; i++ {
				s[i] = byte(seq >> (56 - 8*i))
			}
			frames = [][]byte{{}, s, p}
		default:
			continue
		}
		seq = 0
		for _, x := range frames[1] {
			seq = seq<<8 | uint64(x)
		}
		seq++
		out[c.Name] = frames
		order = append(order, c.Name)
	}
	return out, order
}

func vllmDriftOptions() DriftOptions {
	seed := "0"
	// The vectors' engine serves the adapter sql-lora, which the rule declares (an undeclared
	// one is drift: keys).
	return DriftOptions{Algo: HashAlgoContractDefault, BlockSize: 16, Seed: &seed, MapCapacity: 1024,
		LoRA: map[string]string{"sql-lora": "/adapters/sql-lora"}}
}

func TestDriftCleanStream(t *testing.T) {
	s, driftOrder := driftStream(t)
	v, err := NewDriftVerifier("vllm-kv-map-v2", "0.24.0", vllmDriftOptions())
	if err != nil {
		t.Fatal(err)
	}
	defer v.Close()
	// Nothing seen yet: nothing verified, never clean.
	if vd, err := v.Verdict(); err != nil || vd != DriftUnverifiable || vd.String() != "unverifiable" {
		t.Fatal(vd, err)
	}
	for _, name := range driftOrder {
		f := s[name]
		drift, err := v.FeedFrames(f[0], f[1], f[2])
		if err != nil || drift {
			t.Fatalf("%s: %v %v", name, drift, err)
		}
	}
	c, err := v.Counters()
	if err != nil {
		t.Fatal(err)
	}
	if c.Mismatched != 0 || c.Drift || c.BlocksSeen < 10 || c.Matched != c.BlocksSeen || c.Batches != uint64(len(driftOrder)) {
		t.Fatalf("%+v", c)
	}
	if c.MapCapacity != 1024 || c.Predictions || len(c.UnverifiableByReason) != 0 {
		t.Fatalf("%+v", c)
	}
	if vd, err := v.Verdict(); err != nil || vd != DriftClean || c.Verdict != DriftClean || c.Consequences != 0 {
		t.Fatalf("%v %v %+v", vd, err, c)
	}
	f, err := v.Finding()
	if err != nil || !f.OK || f.Reason != "" {
		t.Fatalf("%+v %v", f, err)
	}
	var r struct {
		Verdict  string          `json:"verdict"`
		Release  string          `json:"release_id"`
		Evidence json.RawMessage `json:"evidence"`
	}
	b, err := v.ReportJSON()
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &r); err != nil || r.Verdict != "clean" || r.Release != "vllm-kv-map-v2-r0.24" || string(r.Evidence) != "null" {
		t.Fatalf("%s %v", b, err)
	}
}

// One changed token id: drift at once (policy 1), with evidence naming the block; the
// verifier's finding demotes a READY rule in the readiness ladder.
func TestDriftChangedTokenDemotes(t *testing.T) {
	s, _ := driftStream(t)
	o := vllmDriftOptions()
	o.Mismatches = 1
	v, err := NewDriftVerifier("vllm-kv-map-v2-r0.24", "", o)
	if err != nil {
		t.Fatal(err)
	}
	defer v.Close()
	pre := s["int_stored_prefill_no_parent"]
	if drift, err := v.FeedFrames(pre[0], pre[1], pre[2]); drift || err != nil {
		t.Fatal(drift, err)
	}
	dec := s["int_stored_decode_with_parent"]
	bad := append([]byte(nil), dec[2]...)
	at := bytes.Index(bad, []byte{0xdc, 0x00, 0x10, 0xcd, 0xdb, 0xda})
	if at < 0 {
		t.Fatal("token ids not found")
	}
	bad[at+5] ^= 1
	drift, err := v.FeedFrames(dec[0], dec[1], bad)
	if err != nil || !drift {
		t.Fatal(drift, err)
	}
	b, err := v.ReportJSON()
	if err != nil {
		t.Fatal(err)
	}
	var r struct {
		Verdict  string `json:"verdict"`
		Evidence struct {
			Kind      string   `json:"kind"`
			BatchSeq  uint64   `json:"batch_seq"`
			Offset    int      `json:"token_ids_offset"`
			Published uint64   `json:"published"`
			Tokens    []uint64 `json:"tokens"`
		} `json:"evidence"`
		Finding json.RawMessage `json:"finding"`
	}
	if err := json.Unmarshal(b, &r); err != nil {
		t.Fatal(err)
	}
	e := r.Evidence
	if r.Verdict != "drift" || e.Kind != "chained" || e.BatchSeq != 1 || e.Offset != at+3 || e.Published != 580158946789763506 || e.Tokens[0] != 56283 {
		t.Fatalf("%s", b)
	}
	if vd, err := v.Verdict(); err != nil || vd != DriftDetected || vd.String() != "drift" {
		t.Fatal(vd, err)
	}
	f, err := v.Finding()
	if err != nil || f.OK || f.Reason != "hash_drift" {
		t.Fatalf("%+v %v", f, err)
	}

	// The ladder: READY with a clean drift observation, demoted with this one.
	ok := map[string]any{"finding": map[string]any{"ok": true, "reason": nil, "detail": "ok"}, "timeUnixMs": 1}
	endpoint := map[string]any{"endpoint": "10.0.0.1:8000", "identity": ok, "tokenParity": ok, "challenge": ok, "drift": ok}
	ev := map[string]any{
		"manifest":  map[string]any{"kind": "present", "digest": "ab"},
		"fixtures":  map[string]any{"ok": true, "reason": nil, "detail": ""},
		"endpoints": []map[string]any{endpoint},
	}
	verdict := func() map[string]any {
		b, _ := json.Marshal(ev)
		out, err := EvaluateReadiness(b)
		if err != nil {
			t.Fatal(err)
		}
		var m map[string]any
		if err := json.Unmarshal(out, &m); err != nil {
			t.Fatal(err)
		}
		return m
	}
	if m := verdict(); m["enforcedState"] != "READY" {
		t.Fatalf("%v", m)
	}
	endpoint["drift"] = map[string]any{"finding": r.Finding, "timeUnixMs": 2}
	if m := verdict(); m["enforcedState"] == "READY" || m["reasonCodes"].([]any)[0] != "hash_drift" {
		t.Fatalf("%v", m)
	}

	if err := v.ResetVerdict(); err != nil {
		t.Fatal(err)
	}
	if c, _ := v.Counters(); c.Drift || c.MismatchedChained != 1 {
		t.Fatalf("%+v", c)
	}
}

func TestDriftPredictionsAndPrometheus(t *testing.T) {
	s, _ := driftStream(t)
	o := vllmDriftOptions()
	o.PredictWithin = time.Minute
	tracked, err := NewDriftVerifier("vllm-kv-map-v2-r0.24", "", o)
	if err != nil {
		t.Fatal(err)
	}
	defer tracked.Close()
	plain, err := NewDriftVerifier("vllm-kv-map-v2-r0.24", "", vllmDriftOptions())
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Close()
	if err := tracked.Predict([]uint64{8054659170381590746, 7403838778858983848}); err != nil {
		t.Fatal(err)
	}
	if err := plain.Predict([]uint64{1}); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("predict without tracking: %v", err)
	}
	pre := s["int_stored_prefill_no_parent"]
	for _, v := range []*DriftVerifier{tracked, plain} {
		if _, err := v.FeedFrames(pre[0], pre[1], pre[2]); err != nil {
			t.Fatal(err)
		}
	}
	c, _ := tracked.Counters()
	if !c.Predictions || c.Predicted != 2 || c.PredictedStoredWithin != 2 || c.PredictedPending != 0 {
		t.Fatalf("%+v", c)
	}

	text, err := DriftPrometheus([]DriftSeries{
		{Verifier: tracked, Labels: []DriftLabel{{"endpoint", "10.0.0.1:8000"}, {"rule", `a"b\c`}}},
		{Verifier: plain, Labels: []DriftLabel{{"endpoint", "10.0.0.2:8000"}, {"rule", `a"b\c`}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	// Text format: HELP and TYPE once per family, then its samples; counters end in _total.
	types := map[string]string{}
	samples := map[string]string{}
	var family string
	sc := bufio.NewScanner(bytes.NewReader(text))
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "# HELP "):
			family = strings.Fields(line)[2]
			if _, dup := types[family]; dup {
				t.Fatalf("%s twice", family)
			}
		case strings.HasPrefix(line, "# TYPE "):
			f := strings.Fields(line)
			if f[2] != family || (f[3] == "counter") != strings.HasSuffix(family, "_total") {
				t.Fatalf("%q", line)
			}
			types[family] = f[3]
		default:
			name := line[:strings.IndexByte(line, '{')]
			if name != family {
				t.Fatalf("%q outside its family %s", line, family)
			}
			sp := strings.LastIndexByte(line, ' ')
			if _, dup := samples[line[:sp]]; dup {
				t.Fatalf("series twice: %q", line)
			}
			samples[line[:sp]] = line[sp+1:]
		}
	}
	want := `kvexact_drift_blocks_matched_total{endpoint="10.0.0.1:8000",rule="a\"b\\c",release="vllm-kv-map-v2-r0.24"}`
	if samples[want] != "2" {
		t.Fatalf("%s\n%s", want, text)
	}
	if samples[`kvexact_drift_predictions_pending{endpoint="10.0.0.1:8000",rule="a\"b\\c",release="vllm-kv-map-v2-r0.24"}`] != "0" {
		t.Fatalf("%s", text)
	}
	for k := range samples {
		if strings.Contains(k, "predict") && strings.Contains(k, "10.0.0.2") {
			t.Fatalf("predictions for an untracked verifier: %s", k)
		}
	}
	if types["kvexact_drift_detected"] != "gauge" || types["kvexact_drift_blocks_total"] != "counter" {
		t.Fatalf("%v", types)
	}
	_, err = DriftPrometheus([]DriftSeries{{Verifier: plain, Labels: []DriftLabel{{"release", "x"}}}})
	var e *Error
	if !errors.As(err, &e) || e.Status != ErrInvalidArgument {
		t.Fatalf("reserved label: %v", err)
	}
}

func TestDriftRefusals(t *testing.T) {
	o := vllmDriftOptions()
	_, err := NewDriftVerifier("vllm-kv-map-v2", "0.35.0", o)
	if !errors.Is(err, ErrUnknownEngineVersion) {
		t.Fatalf("unknown version: %v", err)
	}
	_, err = NewDriftVerifier("vllm-kv-map-v3", "0.24.0", o)
	if !errors.Is(err, ErrContractMismatch) {
		t.Fatalf("mismatch: %v", err)
	}
	bad := o
	bad.BlockSize = 0
	if _, err := NewDriftVerifier("vllm-kv-map-v2-r0.24", "", bad); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("block size 0: %v", err)
	}
	if _, err := NewDriftVerifier("sglang-kv-map-v2-r0.5.23", "", o); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("seed for SGLang: %v", err)
	}
	lora := o
	lora.LoRA = map[string]string{"sql-lora": "/adapters/sql-lora"}
	v, err := NewDriftVerifier("vllm-kv-map-v3", "0.31.0", lora)
	if err != nil {
		t.Fatal(err)
	}
	defer v.Close()
	// A truncated batch does not decode; well-formed msgpack that is no batch is not the
	// release's schema. Both are counted, neither is fed.
	_, err = v.Feed([]byte{0x93})
	var e *Error
	if !errors.As(err, &e) || e.Code != "decode_error" || !errors.Is(err, ErrEventDecode) {
		t.Fatalf("truncated: %v", err)
	}
	_, err = v.Feed([]byte{0xc1})
	if !errors.As(err, &e) || e.Code != "schema_mismatch" || !errors.Is(err, ErrEventSchema) {
		t.Fatalf("junk: %v", err)
	}
	if c, _ := v.Counters(); c.Undecodable != 2 || c.Batches != 0 {
		t.Fatalf("%+v", c)
	}
	// TensorRT-LLM: JSON bodies through Feed; frames refused.
	trt, err := NewDriftVerifier("trtllm-kv-http-v2", "1.3.0rc29", DriftOptions{Algo: HashAlgoContractDefault, BlockSize: 32})
	if err != nil {
		t.Fatal(err)
	}
	defer trt.Close()
	if drift, err := trt.Feed([]byte(`[]`)); drift || err != nil {
		t.Fatal(drift, err)
	}
	if _, err := trt.FeedFrames(nil, make([]byte, 8), []byte(`[]`)); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("frames to TensorRT-LLM: %v", err)
	}
}

// A feeder, a scraper and a predictor goroutine share one verifier.
func TestDriftConcurrentUse(t *testing.T) {
	s, driftOrder := driftStream(t)
	o := vllmDriftOptions()
	o.PredictWithin = time.Minute
	v, err := NewDriftVerifier("vllm-kv-map-v2-r0.24", "", o)
	if err != nil {
		t.Fatal(err)
	}
	defer v.Close()
	var wg sync.WaitGroup
	wg.Add(3)
	go func() {
		defer wg.Done()
		for i := 0; i < 20; i++ {
			for _, name := range driftOrder {
				f := s[name]
				if _, err := v.FeedFrames(f[0], f[1], f[2]); err != nil {
					t.Error(err)
					return
				}
			}
		}
	}()
	go func() {
		defer wg.Done()
		for i := 0; i < 50; i++ {
			if _, err := DriftPrometheus([]DriftSeries{{Verifier: v}}); err != nil {
				t.Error(err)
				return
			}
			c, err := v.Counters()
			if err != nil || c.Matched+c.Mismatched+c.Unverifiable != c.BlocksSeen {
				t.Errorf("%+v %v", c, err)
				return
			}
		}
	}()
	go func() {
		defer wg.Done()
		for i := uint64(0); i < 500; i++ {
			if err := v.Predict([]uint64{i, 7403838778858983848}); err != nil {
				t.Error(err)
				return
			}
		}
	}()
	wg.Wait()
	c, _ := v.Counters()
	if c.Batches != uint64(20*len(driftOrder)) || c.Mismatched != 0 {
		t.Fatalf("%+v", c)
	}
}
