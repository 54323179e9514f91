package kvexact

import (
	"encoding/hex"
	"encoding/json"
	"errors"
	"testing"
)

// Engine versions resolve to exactly one release; unknown ones are refused with the code.
func TestResolveContract(t *testing.T) {
	for _, c := range []struct {
		e                Engine
		version, release string
		contract         string
	}{
		{VLLM, "0.17.0", "vllm-kv-array-v1-r0.17", "vllm-kv-array-v1"},
		{VLLM, "0.24.0", "vllm-kv-map-v2-r0.24", "vllm-kv-map-v2"},
		{VLLM, "0.31.0", "vllm-kv-map-v3-r0.31", "vllm-kv-map-v3"},
		{SGLang, "0.5.23", "sglang-kv-map-v2-r0.5.23", "sglang-kv-map-v2"},
		{TRTLLM, "1.3.0rc29", "trtllm-kv-http-v2-r1.3.0rc29", "trtllm-kv-http-v2"},
	} {
		r, k, err := ResolveContract(c.e, c.version)
		if err != nil || r != c.release || k != c.contract {
			t.Fatalf("%s: %q %q %v", c.version, r, k, err)
		}
	}
	_, _, err := ResolveContract(VLLM, "0.35.0")
	var e *Error
	if !errors.As(err, &e) || e.Code != "UNKNOWN_ENGINE_VERSION" || !errors.Is(err, ErrUnknownEngineVersion) {
		t.Fatalf("0.35.0: %#v", err)
	}
	if _, _, err := ResolveContract(Engine(9), "0.24.0"); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("bad engine: %v", err)
	}
}

func TestContractsJSON(t *testing.T) {
	b, err := ContractsJSON()
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Schema   string `json:"schema"`
		Releases []struct {
			Release  string   `json:"release"`
			Contract string   `json:"contract"`
			Versions []string `json:"versions"`
		} `json:"releases"`
	}
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	if doc.Schema != "kvexact-contracts/v1" || len(doc.Releases) < 19 {
		t.Fatalf("%s, %d releases", doc.Schema, len(doc.Releases))
	}
	// Every listed version resolves back to its release.
	engines := map[string]Engine{"vllm-": VLLM, "sglang-": SGLang, "trtllm-": TRTLLM}
	n := 0
	for _, r := range doc.Releases {
		for prefix, e := range engines {
			if len(r.Contract) < len(prefix) || r.Contract[:len(prefix)] != prefix {
				continue
			}
			for _, v := range r.Versions {
				got, k, err := ResolveContract(e, v)
				if err != nil || got != r.Release || k != r.Contract {
					t.Fatalf("%s: %q %q %v, want %s", v, got, k, err, r.Release)
				}
				n++
			}
		}
	}
	if n < 20 {
		t.Fatalf("only %d versions", n)
	}
}

// vLLM 0.17.0's own vector (sha256_cbor, PYTHONHASHSEED=0) through a hasher by contract; an
// unset seed is refused under 0.17.0's NONE_HASH rule A, accepted under 0.31.0's rule B.
func TestHasherForContract(t *testing.T) {
	var want []uint64
	var ids []uint32
	for _, c := range loadCases(t, "versions/vllm-0.17.0/block_hashes.json") {
		var name string
		_ = json.Unmarshal(c["name"], &name)
		if name != "plain_len48_bs16_seed0" {
			continue
		}
		var in struct {
			TokenIDs []uint32 `json:"token_ids"`
		}
		var ex struct {
			Hashes []uint64 `json:"block_hashes_int"`
		}
		if err := json.Unmarshal(c["inputs"], &in); err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(c["expected"], &ex); err != nil {
			t.Fatal(err)
		}
		ids, want = in.TokenIDs, ex.Hashes
	}
	if len(want) != 3 {
		t.Fatalf("vector case not found (%d hashes)", len(want))
	}
	seed := "0"
	for _, c := range [][2]string{{"vllm-kv-array-v1", "0.17.0"}, {"vllm-kv-array-v1-r0.17", ""}} {
		h, err := NewHasherForContract(c[0], c[1], HashAlgoContractDefault, 16, &seed)
		if err != nil {
			t.Fatalf("%v: %v", c, err)
		}
		got, err := h.BlockHashes(ids, true, 8)
		h.Close()
		if err != nil || len(got) != 3 || got[0] != want[0] || got[1] != want[1] || got[2] != want[2] {
			t.Fatalf("%v: %v %v, want %v", c, got, err, want)
		}
	}
	var e *Error
	if _, err := NewHasherForContract("vllm-kv-array-v1", "0.17.0", SHA256CBOR, 16, nil); !errors.As(err, &e) || e.Code != "none_hash_unreproducible" || !errors.Is(err, ErrNoneHashUnreproducible) {
		t.Fatalf("unset seed under rule A: %#v", err)
	}
	h, err := NewHasherForContract("vllm-kv-map-v3", "0.31.0", SHA256CBOR, 16, nil)
	if err != nil {
		t.Fatal(err)
	}
	ref, err := NewHasher(SHA256CBOR, 16, nil)
	if err != nil {
		t.Fatal(err)
	}
	a, _ := h.BlockHashes(ids, true, 8)
	b, _ := ref.BlockHashes(ids, true, 8)
	if len(a) != 3 || a[0] != b[0] || a[2] != b[2] {
		t.Fatalf("rule B unset seed %v, reference %v", a, b)
	}
	h.Close()
	ref.Close()
	if _, err := NewHasherForContract("vllm-kv-map-v3", "0.35.0", SHA256CBOR, 16, &seed); !errors.Is(err, ErrUnknownEngineVersion) {
		t.Fatalf("unknown version: %v", err)
	}
	if _, err := NewHasherForContract("vllm-kv-map-v2", "0.31.0", SHA256CBOR, 16, &seed); !errors.Is(err, ErrContractMismatch) {
		t.Fatalf("mismatch: %v", err)
	}
	if _, err := NewHasherForContract("no-such", "", SHA256CBOR, 16, &seed); !errors.Is(err, ErrNotFound) {
		t.Fatalf("unknown id: %v", err)
	}
	if _, err := NewHasher(HashAlgoContractDefault, 16, nil); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("NewHasher took the contract default: %v", err)
	}
}

// A vLLM 0.20.0 BlockStored decodes under 0.20's release schema and the family schema, and is
// refused by 0.17's (it has a field 0.17 never writes).
func TestEventDecoderForContract(t *testing.T) {
	doc := readVector(t, "versions/vllm-0.20.0/kv_events.json")
	r020, err := NewEventDecoderForContract("vllm-kv-array-v1", "0.20.0", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer r020.Close()
	r017, err := NewEventDecoderForContract("vllm-kv-array-v1-r0.17", "", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer r017.Close()
	family, err := NewEventDecoder("vllm-kv-array-v1", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer family.Close()
	refused := 0
	for _, c := range doc["cases"].([]any) {
		c := c.(map[string]any)
		ph, ok := c["payload_hex"].(string)
		if !ok {
			continue
		}
		payload, _ := hex.DecodeString(ph)
		want, _, err := family.Decode(payload)
		if err != nil {
			t.Fatalf("%v: family: %v", c["name"], err)
		}
		got, _, err := r020.Decode(payload)
		if err != nil || len(got) != len(want) {
			t.Fatalf("%v: 0.20: %d events, %v", c["name"], len(got), err)
		}
		stored := false
		for _, ev := range want {
			stored = stored || ev.Kind == EventStored
		}
		_, _, err = r017.Decode(payload)
		var e *Error
		switch {
		case err == nil && stored:
			t.Fatalf("%v: 0.17 decoded a 0.20 BlockStored", c["name"])
		case err == nil:
			// Events without a field 0.20 added (e.g. AllBlocksCleared only).
		case !errors.As(err, &e) || e.Code != "schema_mismatch" || !errors.Is(err, ErrEventSchema):
			t.Fatalf("%v: 0.17: %v", c["name"], err)
		default:
			refused++
		}
	}
	if refused < 5 {
		t.Fatalf("only %d refused", refused)
	}
	if _, err := NewEventDecoderForContract("vllm-kv-map-v3", "0.35.0", nil); !errors.Is(err, ErrUnknownEngineVersion) {
		t.Fatalf("unknown version: %v", err)
	}
	trt, err := NewHasher(BlockHashTRT, 32, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer trt.Close()
	d, err := NewEventDecoderForContract("trtllm-kv-http-v2", "1.3.0rc29", trt)
	if err != nil {
		t.Fatal(err)
	}
	d.Close()
	if _, err := NewEventDecoderForContract("vllm-kv-map-v3-r0.31", "", trt); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("vLLM with a re-hasher: %v", err)
	}
}
