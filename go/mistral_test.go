package kvexact

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
)

// A Mistral checkpoint of testdata/models and its engine-truth vectors
// (testdata/vectors/templates-nonjinja): engines render its chat with mistral_common, not a
// Jinja template, and the profile pins its tokenizer file instead of tokenizer.json.
type mistralCheckpoint struct {
	profileID, model, modelDir, tokenizerFile, vectors string
}

var (
	nemoTekken = mistralCheckpoint{"mistral-nemo-2407-v1", "mistralai/Mistral-Nemo-Instruct-2407",
		"mistralai__Mistral-Nemo-Instruct-2407", "tekken.json", "mistral-tekken-v1.json"}
	largeSpmV7 = mistralCheckpoint{"mistral-large-2411-v1", "mistralai/Mistral-Large-Instruct-2411",
		"mistralai__Mistral-Large-Instruct-2411", "tokenizer.model.v7", "mistral-spm-v7-v1.json"}
)

// copyTree copies the sample registry to dst (directories 0755, files 0644, as the trust
// policy wants them).
func copyTree(src, dst string) error {
	return filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		to := filepath.Join(dst, rel)
		if d.IsDir() {
			return os.MkdirAll(to, 0o755)
		}
		if !d.Type().IsRegular() {
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(to, b, 0o644)
	})
}

// stageMistral writes a registry: the sample one plus the checkpoint's profile (pinning its
// tokenizer file by sha256) and a manifest staging it for vLLM 0.31.0.
func stageMistral(t *testing.T, c mistralCheckpoint) string {
	t.Helper()
	reg := filepath.Join(t.TempDir(), "registry")
	if err := copyTree(filepath.Join(root(), "testdata", "registry"), reg); err != nil {
		t.Fatal(err)
	}
	tok, err := os.ReadFile(filepath.Join(root(), "testdata", "models", c.modelDir, c.tokenizerFile))
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(tok)
	h := hex.EncodeToString(sum[:])
	profile := fmt.Sprintf("profileId: %s\nbaseModel: %s\nmodelType: mistral\n"+
		"tokenizerFile: %s\ntokenizerArtifact: sha256/%s\ntokenizerSha256: %s\n"+
		"renderPolicy:\n  addGenerationPrompt: true\n"+
		"supportedApis:\n  - completions\n  - chat\naliasPolicy: base_model_only\n",
		c.profileID, c.model, c.tokenizerFile, h, h)
	manifest := fmt.Sprintf("profileId: %s\nimageDigest: \"sha256:61fc8a896b0a4fbbbdc063bc4b0dbc25ce98e02b5050c24aeb7830ac02039b14\"\nengineVersion: \"0.31.0\"\n", c.profileID)
	for rel, b := range map[string][]byte{
		filepath.Join("artifacts", "sha256", h):         tok,
		c.profileID + ".yaml":                           []byte(profile),
		filepath.Join("manifests", c.profileID+".yaml"): []byte(manifest),
	} {
		if err := os.WriteFile(filepath.Join(reg, rel), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return reg
}

type mistralCase struct {
	ID             string                     `json:"id"`
	Kind           string                     `json:"kind"`
	Messages       json.RawMessage            `json:"messages"`
	Tools          json.RawMessage            `json:"tools"`
	AddGeneration  *bool                      `json:"add_generation_prompt"`
	ContinueFinal  *bool                      `json:"continue_final_message"`
	TemplateKwargs json.RawMessage            `json:"template_kwargs"`
	RequestExtra   map[string]json.RawMessage `json:"request_extra"`
	Prompt         string                     `json:"prompt"`
	Truth          map[string]json.RawMessage `json:"engine_token_ids"`
}

// body is the OpenAI chat body the vectors' generator sent to the engines for the case.
func (c *mistralCase) body(model string) []byte {
	b := map[string]json.RawMessage{"messages": c.Messages}
	b["model"], _ = json.Marshal(model)
	if c.Tools != nil {
		b["tools"] = c.Tools
	}
	if c.AddGeneration != nil && !*c.AddGeneration {
		b["add_generation_prompt"] = json.RawMessage("false")
	}
	if c.ContinueFinal != nil && *c.ContinueFinal {
		b["continue_final_message"] = json.RawMessage("true")
	}
	if c.TemplateKwargs != nil {
		b["chat_template_kwargs"] = c.TemplateKwargs
	}
	for k, v := range c.RequestExtra {
		b[k] = v
	}
	out, _ := json.Marshal(b)
	return out
}

func mistralCases(t *testing.T, c mistralCheckpoint) []mistralCase {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root(), "testdata", "vectors", "templates-nonjinja", c.vectors))
	if err != nil {
		t.Fatal(err)
	}
	var v struct {
		Cases []mistralCase `json:"cases"`
	}
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatal(err)
	}
	return v.Cases
}

// Every liftable strict rule lifted (what an agentic gateway runs with).
var allLifts = RefusalBit(RefusalTools) | RefusalBit(RefusalTemplateKwargs) |
	RefusalBit(RefusalAddGenerationPrompt) | RefusalBit(RefusalContinueFinalMessage) |
	RefusalBit(RefusalMessageField) | RefusalBit(RefusalNullContent)

// The gateway's hot path on Mistral checkpoints, strict and with every liftable rule lifted:
// RouteKeys gives the engine release's own ids (vLLM's mistral_common ids, SGLang 0.5.19's
// text-form ids) for every chat case the vectors give that engine's ids for, or refuses it
// (strict rules, never other ids; with the rules lifted, only the cases listed), and block
// keys equal to the hasher's over exactly those ids; completions are BOS + the text; a
// release no vectors prove refuses with ErrUnsupported.
func TestMistralRouteKeysGiveTheEnginesIDs(t *testing.T) {
	for _, run := range []struct {
		c                         mistralCheckpoint
		contract, version, engine string
		lifted                    uint32
		minExact                  int // the chat cases of testdata's vectors kvexact answers
		// With every liftable rule lifted, the cases still refused and why: reasoning_effort
		// is never liftable, and a tool_choice of "none" stays refused with the tools code.
		stillRefused string
	}{
		{nemoTekken, "vllm-kv-map-v3", "0.31.0", "vllm", 0, 14, ""},
		{nemoTekken, "vllm-kv-map-v3", "0.31.0", "vllm", allLifts, 24,
			"reasoning_effort_high:reasoning_effort reasoning_effort_max:reasoning_effort tools_tool_choice_none:tools "},
		{nemoTekken, "sglang-kv-rank-v2", "0.5.19", "sglang", 0, 15, ""},
		{nemoTekken, "sglang-kv-rank-v2", "0.5.19", "sglang", allLifts, 24, "tools_tool_choice_none:tools "},
		{largeSpmV7, "vllm-kv-map-v3", "0.33.0", "vllm", 0, 14, ""},
		{largeSpmV7, "vllm-kv-map-v3", "0.33.0", "vllm", allLifts, 25,
			"reasoning_effort_high:reasoning_effort reasoning_effort_max:reasoning_effort tools_tool_choice_none:tools "},
	} {
		name := fmt.Sprintf("%s/%s-%s/lifted=%#x", run.c.profileID, run.engine, run.version, run.lifted)
		reg, err := LoadRegistry(stageMistral(t, run.c), uint32(os.Geteuid()), 1)
		if err != nil {
			t.Fatal(err)
		}
		prof, err := reg.ProfileByModel(run.c.model)
		if err != nil {
			t.Fatal(err)
		}
		enc, err := NewEncoderWithOptions(prof, run.contract, EncoderOptions{EngineVersion: run.version, Lifted: run.lifted})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		var seed *string
		if run.engine == "vllm" {
			s := "0"
			seed = &s
		}
		h, err := NewHasherForContract(run.contract, run.version, HashAlgoContractDefault, 16, seed)
		if err != nil {
			t.Fatal(err)
		}
		exact, refused, completions := 0, 0, 0
		refusedWhy := ""
		for _, c := range mistralCases(t, run.c) {
			var want []uint32
			if raw, ok := c.Truth[run.engine]; !ok || json.Unmarshal(raw, &want) != nil || want == nil {
				continue // the engine refused the case: no ids to compare
			}
			if c.Kind == "completion" {
				out := make([]uint32, len(want)+16)
				n, err := enc.EncodeCompletions(c.Prompt, out)
				if err != nil {
					t.Fatalf("%s %s: %v", name, c.ID, err)
				}
				if !equalIDs(out[:n], want) {
					t.Fatalf("%s %s: completion ids differ", name, c.ID)
				}
				completions++
				continue
			}
			body := c.body(run.c.model)
			ids := make([]uint32, len(want)+64)
			keys := make([]uint64, len(want)/16+4)
			ni, nb, err := enc.RouteKeys(h, body, 0, ids, keys)
			var ref *RefusedError
			if errors.As(err, &ref) {
				refusedWhy += c.ID + ":" + ref.Reason.Name() + " "
				refused++
				continue
			}
			if err != nil {
				t.Fatalf("%s %s: %v", name, c.ID, err)
			}
			if !equalIDs(ids[:ni], want) {
				t.Fatalf("%s %s: ids differ from the engine's", name, c.ID)
			}
			ref2, err := h.BlockHashes(want, true, len(want)/16+1)
			if err != nil {
				t.Fatal(err)
			}
			if nb != len(ref2) {
				t.Fatalf("%s %s: %d keys, want %d", name, c.ID, nb, len(ref2))
			}
			for i := range ref2 {
				if keys[i] != ref2[i] {
					t.Fatalf("%s %s: key %d differs", name, c.ID, i)
				}
			}
			exact++
		}
		t.Logf("%s: %d chat cases exact, %d refused, %d completions exact", name, exact, refused, completions)
		if run.lifted != 0 && refusedWhy != run.stillRefused {
			t.Fatalf("%s: refused %q, want %q", name, refusedWhy, run.stillRefused)
		}
		if exact < run.minExact || completions == 0 {
			t.Fatalf("%s: only %d chat cases and %d completions checked", name, exact, completions)
		}
		enc.Close()
		h.Close()
		prof.Close()
		reg.Close()
	}

	// vLLM 0.28.0 renders no Mistral checkpoint the vectors prove: refused, never guessed.
	reg, err := LoadRegistry(stageMistral(t, nemoTekken), uint32(os.Geteuid()), 1)
	if err != nil {
		t.Fatal(err)
	}
	defer reg.Close()
	prof, err := reg.ProfileByModel(nemoTekken.model)
	if err != nil {
		t.Fatal(err)
	}
	defer prof.Close()
	enc, err := NewEncoderWithOptions(prof, "vllm-kv-map-v2", EncoderOptions{EngineVersion: "0.28.0"})
	if err != nil {
		t.Fatal(err)
	}
	defer enc.Close()
	out := make([]uint32, 16)
	if _, err := enc.EncodeChat([]byte(`{"model":"m","messages":[{"role":"user","content":"hi"}]}`), 0, out); !errors.Is(err, ErrUnsupported) {
		t.Fatalf("unproven release: %v", err)
	}
	var ref *RefusedError
	if _, err := enc.EncodeCompletions("hi", out); !errors.Is(err, ErrUnsupported) || !errors.As(err, &ref) || ref.Reason != RefusalTemplateRaised {
		t.Fatalf("unproven release, completions: %v", err)
	}
}
