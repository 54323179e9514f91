// Command encode-and-hash is the smallest gateway-side use of the kvexact Go module: load a
// registry, encode one chat request for a model on the vLLM contract and print its block
// hashes (vLLM sha256_cbor, block size 16, PYTHONHASHSEED=0) — the Go twin of
// examples/c/encode_and_hash.c.
//
//	go run . REGISTRY_ROOT MODEL
//	go run . ../../testdata/registry Qwen/Qwen3-0.6B
//
// It builds against the module in ../../go (go.mod's replace directive); cgo finds libkvexact
// through pkg-config (see the module's package documentation, or scripts/ffi-go-test.sh).
package main

import (
	"fmt"
	"os"
	"time"

	kvexact "github.com/kvexact/kvexact/go"
)

const body = `{"messages":[{"role":"system","content":"You are a terse assistant."},` +
	`{"role":"user","content":"Which replica already holds the KV cache for this conversation prefix?"}]}`

func main() {
	if len(os.Args) != 3 {
		fmt.Fprintf(os.Stderr, "usage: %s REGISTRY_ROOT MODEL\n", os.Args[0])
		os.Exit(2)
	}
	if err := run(os.Args[1], os.Args[2]); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

func run(root, model string) error {
	reg, err := kvexact.LoadRegistry(root, uint32(os.Geteuid()), 1)
	if err != nil {
		return fmt.Errorf("load: %w", err)
	}
	defer reg.Close()
	prof, err := reg.ProfileByModel(model)
	if err != nil {
		return fmt.Errorf("no profile for %s: %w", model, err)
	}
	defer prof.Close()
	enc, err := kvexact.NewEncoder(prof, "vllm-kv-map-v2")
	if err != nil {
		return fmt.Errorf("encoder: %w", err)
	}
	defer enc.Close()
	ids := make([]uint32, 4096)
	n, err := enc.EncodeChat([]byte(body), time.Now().UnixMilli(), ids)
	if err != nil {
		return fmt.Errorf("encode: %w", err)
	}
	seed := "0"
	h, err := kvexact.NewHasher(kvexact.SHA256CBOR, 16, &seed)
	if err != nil {
		return fmt.Errorf("hasher: %w", err)
	}
	defer h.Close()
	hashes, err := h.BlockHashes(ids[:n], true, 256)
	if err != nil {
		return fmt.Errorf("hash: %w", err)
	}
	fmt.Printf("%d ids, %d full blocks\n", n, len(hashes))
	for i, x := range hashes {
		fmt.Printf("block %d: %d\n", i, x)
	}
	return nil
}
