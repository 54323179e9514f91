package kvexact_test

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	kvexact "github.com/kvexact/kvexact/go"
)

// repo is the repository root: KVEXACT_ROOT, else the parent of go/ (where go test runs).
func repo() string {
	if r := os.Getenv("KVEXACT_ROOT"); r != "" {
		return r
	}
	return ".."
}

// Block hashes of 32 token ids under vLLM's sha256_cbor with PYTHONHASHSEED=0 and block size
// 16, in the u64 form vLLM publishes in its KV events. The expected values are vLLM's own
// (testdata/vectors/vllm/block_hashes.json, case zeros_32_bs16).
func ExampleNewHasher() {
	seed := "0"
	h, err := kvexact.NewHasher(kvexact.SHA256CBOR, 16, &seed)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer h.Close()
	ids := make([]uint32, 32) // all zero
	hashes, err := h.BlockHashes(ids, true, 256)
	if err != nil {
		fmt.Println(err)
		return
	}
	for i, x := range hashes {
		fmt.Printf("block %d: %d\n", i, x)
	}
	// Output:
	// block 0: 10933409387543126937
	// block 1: 4020444920446410877
}

// The gateway's path for a chat request: registry → profile by model name → encoder for the
// engine contract → token ids. The expected ids are vLLM's answer to this request
// (testdata/registry/probefixtures/qwen25-7b-instruct-v1/chat-system-user.expect.json).
func ExampleEncoder_EncodeChat() {
	reg, err := kvexact.LoadRegistry(filepath.Join(repo(), "testdata", "registry"), uint32(os.Geteuid()), 1)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer reg.Close()
	prof, err := reg.ProfileByModel("Qwen/Qwen2.5-7B-Instruct")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer prof.Close()
	enc, err := kvexact.NewEncoder(prof, "vllm-kv-map-v2")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer enc.Close()
	body := []byte(`{"model": "Qwen/Qwen2.5-7B-Instruct", "messages": [` +
		`{"role": "system", "content": "You are a terse assistant. Answer in one sentence."}, ` +
		`{"role": "user", "content": "What is 2+2?"}]}`)
	ids := make([]uint32, 4096)
	n, err := enc.EncodeChat(body, 0, ids)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(prof.ID(), n)
	fmt.Println(ids[:n])
	// Output:
	// qwen25-7b-instruct-v1 31
	// [151644 8948 198 2610 525 264 50537 17847 13 21806 304 825 11652 13 151645 198 151644 872 198 3838 374 220 17 10 17 30 151645 198 151644 77091 198]
}

// Resolving the version an engine reports to one release of the contract catalog (never a
// family default), then hashing with that release's rules.
func ExampleResolveContract() {
	release, contract, err := kvexact.ResolveContract(kvexact.VLLM, "0.24.0")
	fmt.Println(release, contract, err)
	_, _, err = kvexact.ResolveContract(kvexact.VLLM, "0.99.0")
	fmt.Println(errors.Is(err, kvexact.ErrUnknownEngineVersion))
	// Output:
	// vllm-kv-map-v2-r0.24 vllm-kv-map-v2 <nil>
	// true
}

// Errors carry the status, a stable machine code and a message: vLLM draws a random
// NONE_HASH when PYTHONHASHSEED is unset with an xxhash algorithm, so no hasher can match.
func ExampleError() {
	_, err := kvexact.NewHasher(kvexact.XXHashCBOR, 16, nil)
	var e *kvexact.Error
	if errors.As(err, &e) {
		fmt.Println(e.Status.Name(), e.Code)
	}
	fmt.Println(errors.Is(err, kvexact.ErrNoneHashUnreproducible))
	// Output:
	// none_hash_unreproducible none_hash_unreproducible
	// true
}
