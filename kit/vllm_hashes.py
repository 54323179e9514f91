"""vLLM block hashes, computed by the release's own `kv_cache_utils` on a case's inputs.

Runs `init_none_hash`, `get_request_block_hasher` (with `num_hash_lookahead_tokens` where the
case has it) and `maybe_convert_block_hash` on a duck-typed request, exactly the functions the
project's vector files name; records, per block, the tuple the engine hashed (by observing its
`hash_block_tokens` call) and the bytes it fed to the digest (by observing `hashlib.sha256` /
`xxh3_128_digest` inside `vllm.utils.hashing`). Nothing here computes a hash itself.
"""

import hashlib
import os
import types

import numpy as np


class _DigestTap:
    """Stands between `vllm.utils.hashing` and a digest module: records each input."""

    def __init__(self, real, names):
        self._real = real
        self._names = names
        self.last = None

    def __getattr__(self, name):
        f = getattr(self._real, name)
        if name in self._names:
            def tapped(data, *a, **k):
                self.last = bytes(data)
                return f(data, *a, **k)
            return tapped
        return f


class _Tensor:
    """The slice of torch.Tensor `tensor_data` reads (prompt embeddings): a numpy array."""

    is_cpu = False  # the generic path of `tensor_data`: flatten/cpu/contiguous/view/numpy

    def __init__(self, a):
        self.a = a

    def __getitem__(self, k):
        return _Tensor(self.a[k])

    def flatten(self):
        return _Tensor(self.a.reshape(-1))

    def contiguous(self):
        return _Tensor(np.ascontiguousarray(self.a))

    def view(self, dtype):
        return _Tensor(self.a.view(np.uint8))

    def numpy(self):
        return self.a

    def cpu(self):
        return self

    def detach(self):
        return self

    @property
    def shape(self):
        return self.a.shape

    def __len__(self):
        return len(self.a)


def _jsonify(x):
    if isinstance(x, tuple) or isinstance(x, list):
        return [_jsonify(v) for v in x]
    if isinstance(x, (bytes, bytearray)):
        return {"$bytes": bytes(x).hex()}
    return x


class VllmHasher:
    RELIED = [
        ("vllm.v1.core.kv_cache_utils", "init_none_hash", ["hash_fn"]),
        ("vllm.v1.core.kv_cache_utils", "get_request_block_hasher", None),
        ("vllm.v1.core.kv_cache_utils", "hash_block_tokens", ["hash_function", "parent_block_hash", "curr_block_token_ids", "extra_keys"]),
        ("vllm.v1.core.kv_cache_utils", "generate_block_hash_extra_keys", ["request", "start_token_idx", "end_token_idx", "start_mm_idx"]),
        ("vllm.v1.core.kv_cache_utils", "maybe_convert_block_hash", ["hash_bytes"]),
        ("vllm.utils.hashing", "get_hash_fn_by_name", ["hash_fn_name"]),
        ("vllm.utils.hashing", "sha256", None),
        ("vllm.utils.hashing", "sha256_cbor", None),
        ("vllm.utils.hashing", "xxhash", None),
        ("vllm.utils.hashing", "xxhash_cbor", None),
    ]

    def __init__(self, eng):
        self.eng = eng
        for m, q, p in self.RELIED:
            eng.fn(m, q, p)
        self.kcu = eng.module("vllm.v1.core.kv_cache_utils")
        self.hashing = eng.module("vllm.utils.hashing")
        self.envs = eng.module("vllm.envs")
        self.lookahead = hasattr(self.kcu, "generate_lookahead_block_hash_extra_keys")
        if self.lookahead:
            eng.fn("vllm.v1.core.kv_cache_utils", "generate_lookahead_block_hash_extra_keys")
        self.sha_tap = _DigestTap(self.hashing.hashlib, {"sha256"})
        self.hashing.hashlib = self.sha_tap
        self.xx_tap = None
        if getattr(self.hashing, "_xxhash", None) is not None:
            self.xx_tap = _DigestTap(self.hashing._xxhash, {"xxh3_128_digest"})
            self.hashing._xxhash = self.xx_tap
        self._orig_hbt = self.kcu.hash_block_tokens
        self.calls = []

        def observed(hash_function, parent_block_hash, curr_block_token_ids, extra_keys=None):
            h = self._orig_hbt(hash_function, parent_block_hash, curr_block_token_ids, extra_keys)
            tap = self.xx_tap if hash_function.__name__.startswith("xxhash") else self.sha_tap
            self.calls.append((parent_block_hash, extra_keys, tap.last, h))
            return h

        self.kcu.hash_block_tokens = observed

    def default_block_size(self):
        cache = self.eng.module("vllm.config.cache")
        self.eng.fn("vllm.config.cache", "CacheConfig")
        return cache.CacheConfig.DEFAULT_BLOCK_SIZE

    def _request(self, ids, inputs):
        r = types.SimpleNamespace()
        r.block_hashes = []
        r._all_token_ids = list(ids)
        r.all_token_ids = list(ids)
        r.num_tokens = len(ids)
        lora = inputs.get("lora")
        r.lora_request = None
        if lora:
            r.lora_request = types.SimpleNamespace(
                lora_name=lora["name"], lora_int_id=lora["int_id"], lora_path=lora.get("path"),
                name=lora["name"], path=lora.get("path"), adapter_id=lora["int_id"],
            )
        r.cache_salt = inputs.get("cache_salt")
        feats = []
        for f in inputs.get("mm_features") or []:
            pos = types.SimpleNamespace(offset=f["offset"], length=f["length"])
            pos.get_num_embeds = lambda p=pos: p.length
            feats.append(types.SimpleNamespace(identifier=f["identifier"], mm_hash=f["identifier"], mm_position=pos))
        r.mm_features = feats
        r.prompt_embeds = None
        r._prompt_embeds_per_block_hashes = {}
        pe = inputs.get("prompt_embeds")
        if pe:
            a = np.frombuffer(bytes.fromhex(pe["data_hex"]), dtype=np.dtype(pe.get("dtype", "float32")))
            r.prompt_embeds = _Tensor(a.reshape(pe["num_tokens"], -1))
        return r

    def case(self, inputs):
        """The `expected` object of one block-hash case."""
        algo = inputs["hash_algo"]
        seed = inputs.get("python_hash_seed")
        if seed is None:
            os.environ.pop("PYTHONHASHSEED", None)
        else:
            os.environ["PYTHONHASHSEED"] = seed
        os.environ["VLLM_KV_EVENTS_USE_INT_BLOCK_HASHES"] = "1"
        hash_fn = self.hashing.get_hash_fn_by_name(algo)
        self.kcu.init_none_hash(hash_fn)
        none_hash = bytes(self.kcu.NONE_HASH)
        ids = inputs.get("token_ids")
        if ids is None:
            ids = [0] * inputs["num_tokens"]
        bs = inputs["block_size"]
        la = inputs.get("num_hash_lookahead_tokens") or 0
        if la:
            hasher = self.kcu.get_request_block_hasher(bs, hash_fn, la)
        else:
            hasher = self.kcu.get_request_block_hasher(bs, hash_fn)
        self.calls = []
        prompt_len = inputs.get("prompt_len")
        if prompt_len is not None:
            # Decode growth: the prompt is hashed, then tokens arrive one at a time.
            req = self._request(ids[:prompt_len], inputs)
            req.block_hashes.extend(hasher(req))
            for t in ids[prompt_len:]:
                req._all_token_ids.append(t)
                req.all_token_ids.append(t)
                req.num_tokens += 1
                req.block_hashes.extend(hasher(req))
        else:
            req = self._request(ids, inputs)
            req.block_hashes.extend(hasher(req))
        conv = self.kcu.maybe_convert_block_hash
        none_int = int.from_bytes(none_hash[-8:], "big")
        blocks = []
        for i, (parent, extra, ser, h) in enumerate(self.calls):
            h = bytes(h)
            hi = conv(h)
            blocks.append({
                "index": i,
                "token_start": i * bs,
                "token_end": (i + 1) * bs,
                "parent_hash_hex": bytes(parent).hex() if parent is not None else none_hash.hex(),
                "extra_keys": _jsonify(extra),
                "serialized_hex": ser.hex() if ser is not None else None,
                "hash_hex": h.hex(),
                "hash_int": hi,
                "hash_int_str": str(hi),
            })
        return {
            "none_hash_seed_used": self.kcu.get_none_hash_seed() if hasattr(self.kcu, "get_none_hash_seed") else seed,
            "none_hash_hex": none_hash.hex(),
            "none_hash_int": none_int,
            "none_hash_int_str": str(none_int),
            "num_full_blocks": len(blocks),
            "block_hashes_hex": [b["hash_hex"] for b in blocks],
            "block_hashes_int": [b["hash_int"] for b in blocks],
            "block_hashes_int_str": [b["hash_int_str"] for b in blocks],
            "blocks": blocks,
        }
