// Command encode-and-hash is the smallest gateway-side use of the kvexact Go module, the
// gateway's path for one request: resolve the engine release from the version the engine
// reports (vLLM's GET /version), load the registry, build the encoder and the hasher of that
// release, then compute the request's routing keys (token ids and full-block hashes) in one
// call, Encoder.RouteKeys. The Go twin of examples/c/encode_and_hash.c: for the default
// arguments both print examples/encode_and_hash.out (scripts/ffi-go-test.sh checks this
// one's output).
//
// The release fixes the rendering, tokenization and hashing rules and the hash algorithm
// (HashAlgoContractDefault: sha256_cbor for vLLM unless the engine runs another
// --prefix-caching-hash-algo). The block size and the NONE_HASH seed are the engine's launch
// settings: vLLM's --block-size (16 by default) and its PYTHONHASHSEED ("0" here).
//
//	go run . REGISTRY_ROOT MODEL [VLLM_VERSION]
//	go run . ../../testdata/registry Qwen/Qwen3-0.6B 0.31.0
//
// It builds against the module in ../../go (go.mod's replace directive); cgo finds libkvexact
// through pkg-config (see the module's package documentation, or scripts/ffi-go-test.sh).
package main

import (
	"errors"
	"fmt"
	"os"
	"time"

	kvexact "github.com/kvexact/kvexact/go"
)

const body = `{"messages":[{"role":"system","content":"You are a terse assistant."},` +
	`{"role":"user","content":"Which replica already holds the KV cache for this conversation prefix?"}]}`

// The engine's launch settings (see above).
const (
	blockSize    = 16
	noneHashSeed = "0"
)

func main() {
	if len(os.Args) != 3 && len(os.Args) != 4 {
		fmt.Fprintf(os.Stderr, "usage: %s REGISTRY_ROOT MODEL [VLLM_VERSION]\n", os.Args[0])
		os.Exit(2)
	}
	version := "0.31.0"
	if len(os.Args) == 4 {
		version = os.Args[3]
	}
	if err := run(os.Args[1], os.Args[2], version); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

func run(root, model, version string) error {
	// 1. The engine release: one catalog entry per version, or ErrUnknownEngineVersion.
	release, contract, err := kvexact.ResolveContract(kvexact.VLLM, version)
	if err != nil {
		return fmt.Errorf("resolve: %w", err)
	}
	fmt.Printf("vLLM %s: release %s (contract %s)\n", version, release, contract)

	// 2. The trusted registry, and the profile serving the model.
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

	// 3. The encoder and the hasher of that release (built once, shared by every request).
	enc, err := kvexact.NewEncoderWithOptions(prof, contract, kvexact.EncoderOptions{EngineVersion: version})
	if err != nil {
		return fmt.Errorf("encoder: %w", err)
	}
	defer enc.Close()
	seed := noneHashSeed
	h, err := kvexact.NewHasherForContract(contract, version, kvexact.HashAlgoContractDefault, blockSize, &seed)
	if err != nil {
		return fmt.Errorf("hasher: %w", err)
	}
	defer h.Close()

	// 4. Per request: the routing keys. A refusal is an ordinary outcome: route without keys.
	ids := make([]uint32, 4096)
	hashes := make([]uint64, 256)
	nIDs, nBlocks, err := enc.RouteKeys(h, []byte(body), time.Now().UnixMilli(), ids, hashes)
	var refused *kvexact.RefusedError
	if errors.As(err, &refused) {
		fmt.Printf("refused: %s\n", refused.Reason.Name())
		return nil
	}
	if err != nil {
		return fmt.Errorf("route keys: %w", err)
	}
	fmt.Printf("%d ids, %d full block(s) of %d tokens\n", nIDs, nBlocks, blockSize)
	for i, x := range hashes[:nBlocks] {
		fmt.Printf("block %d: %d\n", i, x)
	}
	return nil
}
